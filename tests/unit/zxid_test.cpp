// Unit tests of zab::zxid (docs/protocol.md §1).
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/zxid.hpp"

namespace {
constexpr std::uint32_t max_counter = 0xffffffffu;
}

TEST_CASE("zxid packs epoch high and counter low, and prints as <epoch, counter>") {
    const zab::zxid x{1, 1};
    const zab::zxid y{1, 2};
    CHECK(x.value() == 0x0000000100000001ull);
    CHECK(x < y);
    CHECK(zab::zxid{2, 0} > zab::zxid{1, 0xfffffffe});
    CHECK(fmt::format("{}", y) == "<1, 2>");
    CHECK(zab::zxid::from_value(y.value()) == y);
}

TEST_CASE("seed 001: X at <1, 1> orders before Y at <1, 2>; the new epoch starts at <2, 0>") {
    const zab::zxid x{1, 1};
    const zab::zxid y{1, 2};
    CHECK(x < y);
    CHECK_FALSE(y < x);
    CHECK(x != y);
    CHECK(fmt::format("{}", x) == "<1, 1>");
    // Seed 001, discovery: the leader of the new epoch creates the zxid <2, 0>.
    const zab::zxid marker{2, 0};
    CHECK(fmt::format("{}", marker) == "<2, 0>");
    CHECK(marker.is_epoch_marker());
    CHECK(marker > y);
    // Seed 001, synchronization: C at <1, 11> is ahead of B at <1, 10>.
    CHECK(zab::zxid{1, 10} < zab::zxid{1, 11});
}

TEST_CASE("zxid accessors split the 64-bit value") {
    const zab::zxid z{0x12345678u, 0x9abcdef0u};
    CHECK(z.epoch() == 0x12345678u);
    CHECK(z.counter() == 0x9abcdef0u);
    CHECK(z.value() == 0x123456789abcdef0ull);

    const zab::zxid all_ones{max_counter, max_counter};
    CHECK(all_ones.value() == 0xffffffffffffffffull);
    CHECK(all_ones.epoch() == max_counter);
    CHECK(all_ones.counter() == max_counter);

    CHECK(zab::zxid{}.value() == 0);
    CHECK(zab::zxid{} == zab::zxid{0, 0});
    CHECK(zab::zxid::counter_max == max_counter);
}

TEST_CASE("zxids order as the pair (epoch, counter)") {
    // Ascending; every earlier entry must compare below every later one.
    const std::vector<zab::zxid> ascending{
        {0, 0},
        {0, 1},
        {0, max_counter - 1},
        {0, max_counter},
        {1, 0},
        {1, 1},
        {1, 2},
        {1, 0x7fffffffu},
        {1, 0x80000000u},
        {1, max_counter},
        {2, 0},
        {0x80000000u, 0},
        {max_counter, 0},
        {max_counter, max_counter},
    };
    for (std::size_t i = 0; i < ascending.size(); ++i) {
        for (std::size_t j = 0; j < ascending.size(); ++j) {
            INFO(fmt::format("{} vs {}", ascending[i], ascending[j]));
            CHECK((ascending[i] < ascending[j]) == (i < j));
            CHECK((ascending[i] == ascending[j]) == (i == j));
            CHECK((ascending[i] <=> ascending[j]) == (i <=> j));
        }
    }
}

TEST_CASE("a higher epoch wins over any counter, counter 0 and all-ones included") {
    CHECK(zab::zxid{1, max_counter} < zab::zxid{2, 0});
    CHECK(zab::zxid{0, max_counter} < zab::zxid{1, 0});
    CHECK(zab::zxid{5, 0} > zab::zxid{4, max_counter});
    // Within an epoch, the counter decides, unsigned: 0x80000000 is not negative.
    CHECK(zab::zxid{3, 0x80000000u} > zab::zxid{3, 0x7fffffffu});
    CHECK(zab::zxid{3, 0} < zab::zxid{3, 1});
}

TEST_CASE("counter_exhausted holds at 0xfffffffe and 0xffffffff, not below (ZOOKEEPER-1277)") {
    CHECK_FALSE(zab::zxid{1, 0}.counter_exhausted());
    CHECK_FALSE(zab::zxid{1, 1}.counter_exhausted());
    CHECK_FALSE(zab::zxid{1, 0xfffffff0u}.counter_exhausted());
    CHECK_FALSE(zab::zxid{1, 0xfffffffdu}.counter_exhausted());
    CHECK(zab::zxid{1, 0xfffffffeu}.counter_exhausted());
    CHECK(zab::zxid{1, 0xffffffffu}.counter_exhausted());
    // The epoch plays no part.
    CHECK_FALSE(zab::zxid{max_counter, 0xfffffffdu}.counter_exhausted());
    CHECK(zab::zxid{0, 0xfffffffeu}.counter_exhausted());
}

TEST_CASE("next() increments the counter and keeps the epoch") {
    CHECK(zab::zxid{3, 7}.next() == zab::zxid{3, 8});
    CHECK(zab::zxid{2, 0}.next() == zab::zxid{2, 1});
    CHECK(zab::zxid{max_counter, 0}.next() == zab::zxid{max_counter, 1});
    // The last zxid a leader may propose is counter 0xfffffffe; after it, it must step down.
    const zab::zxid last = zab::zxid{1, 0xfffffffdu}.next();
    CHECK(last == zab::zxid{1, 0xfffffffeu});
    CHECK(last.epoch() == 1);
    CHECK(last.counter_exhausted());
}

TEST_CASE("is_epoch_marker is counter 0, whatever the epoch") {
    CHECK(zab::zxid{}.is_epoch_marker());
    CHECK(zab::zxid{2, 0}.is_epoch_marker());
    CHECK(zab::zxid{max_counter, 0}.is_epoch_marker());
    CHECK_FALSE(zab::zxid{2, 1}.is_epoch_marker());
    CHECK_FALSE(zab::zxid{0, max_counter}.is_epoch_marker());
    CHECK_FALSE(zab::zxid{2, 0}.next().is_epoch_marker());
}

TEST_CASE("from_value(value()) round-trips") {
    const std::vector<std::uint64_t> values{0,
                                            1,
                                            0x00000000ffffffffull,
                                            0x0000000100000000ull,
                                            0x0000000200000000ull,
                                            0x00000001fffffffeull,
                                            0x8000000000000000ull,
                                            0xffffffffffffffffull};
    for (const auto value : values) {
        INFO(value);
        const auto z = zab::zxid::from_value(value);
        CHECK(z.value() == value);
        CHECK(z.epoch() == static_cast<zab::epoch_t>(value >> 32));
        CHECK(z.counter() == static_cast<std::uint32_t>(value));
        CHECK(zab::zxid{z.epoch(), z.counter()} == z);
    }
}

TEST_CASE("zxid formatting uses decimal <epoch, counter>") {
    CHECK(fmt::format("{}", zab::zxid{}) == "<0, 0>");
    CHECK(fmt::format("{}", zab::zxid{2, 0}) == "<2, 0>");
    CHECK(fmt::format("{}", zab::zxid{1, max_counter}) == "<1, 4294967295>");
    CHECK(fmt::format("x={} y={}", zab::zxid{1, 10}, zab::zxid{1, 11}) == "x=<1, 10> y=<1, 11>");
}

TEST_CASE("zxid is usable in constant expressions") {
    constexpr zab::zxid z = zab::zxid{4, 9}.next();
    STATIC_REQUIRE(z.counter() == 10);
    STATIC_REQUIRE(z.epoch() == 4);
    STATIC_REQUIRE(zab::zxid{1, 1} < zab::zxid{1, 2});
}

TEST_CASE("a zxid is continued by the next counter of its epoch, or by a later epoch's first") {
    CHECK(zab::zxid{1, 10}.continued_by(zab::zxid{1, 11}));
    CHECK_FALSE(zab::zxid{1, 10}.continued_by(zab::zxid{1, 12}));  // a hole (ZOOKEEPER-4925)
    CHECK_FALSE(zab::zxid{1, 10}.continued_by(zab::zxid{1, 10}));
    CHECK(zab::zxid{1, 10}.continued_by(zab::zxid{2, 1}));
    CHECK(zab::zxid{1, 10}.continued_by(zab::zxid{4, 1}));  // epochs without a transaction between
    // A hole at the start of an epoch is a hole too (issue 34 defect 7).
    CHECK_FALSE(zab::zxid{1, 10}.continued_by(zab::zxid{2, 2}));
    CHECK_FALSE(zab::zxid{}.continued_by(zab::zxid{1, 5}));
    CHECK(zab::zxid{}.continued_by(zab::zxid{1, 1}));
    CHECK(zab::zxid{2, 0}.continued_by(zab::zxid{2, 1}));  // after an epoch marker
    CHECK_FALSE(zab::zxid{2, 3}.continued_by(zab::zxid{1, 4}));  // never back to an older epoch
    // A test that starts counters elsewhere (options::test_only.initial_counter).
    CHECK(zab::zxid{1, 10}.continued_by(zab::zxid{2, 4001}, 4001));
    CHECK_FALSE(zab::zxid{1, 10}.continued_by(zab::zxid{2, 1}, 4001));
}
