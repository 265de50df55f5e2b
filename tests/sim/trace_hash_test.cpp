// zab::testing::trace_hash — golden values (so a change of the function is noticed: traces
// recorded by an old build must still compare), platform independence, sensitivity.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <catch2/catch.hpp>

#include "zab/testing/trace_hash.hpp"

using zab::testing::trace_hash;

namespace {
std::uint64_t hash_of(std::string_view text) {
    trace_hash h;
    h.add(text);
    return h.value();
}
}  // namespace

TEST_CASE("trace_hash golden values", "[sim][trace_hash]") {
    // Checked against an independent Python model of the same function. The empty value is
    // XXH64 of the empty input: the finalisation is xxHash64's.
    CHECK(trace_hash{}.value() == 0xef46db3751d8e999u);
    trace_hash words;
    words.add(std::uint64_t{0});
    words.add(std::uint64_t{1});
    words.add(UINT64_MAX);
    CHECK(words.value() == 0xb09da5fa52cb1d1eu);
    CHECK(hash_of("") == 0x0b9f87fb5c1f66cau);
    CHECK(hash_of("abc") == 0xad98278f8e6e8092u);
    CHECK(hash_of("the quick brown fox jumps over the lazy dog") == 0x47cd1c2d57de523eu);
    trace_hash seeded{12345};
    seeded.add(std::uint64_t{42});
    CHECK(seeded.value() == 0xf2ea38a4a7df2444u);
}

TEST_CASE("trace_hash reads bytes as little-endian words, on every platform", "[sim][trace_hash]") {
    const std::array<std::byte, 11> bytes = {
        std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},  std::byte{5}, std::byte{6},
        std::byte{7}, std::byte{8}, std::byte{9}, std::byte{10}, std::byte{11}};
    trace_hash from_bytes;
    from_bytes.add(zab::byte_view{bytes});
    trace_hash by_hand;
    by_hand.add(std::uint64_t{11});                   // the length
    by_hand.add(std::uint64_t{0x0807060504030201u});  // first word, little-endian
    by_hand.add(std::uint64_t{0x0b0a09u});            // last word, zero-padded
    CHECK(from_bytes.value() == by_hand.value());
    CHECK(from_bytes == by_hand);
}

TEST_CASE("trace_hash: strings hash as their bytes", "[sim][trace_hash]") {
    trace_hash a, b;
    a.add(std::string_view{"hello"});
    b.add(zab::as_bytes("hello"));
    CHECK(a.value() == b.value());
}

TEST_CASE("trace_hash is sensitive to order, boundaries, values and seed", "[sim][trace_hash]") {
    trace_hash ab_c, a_bc;
    ab_c.add(std::string_view{"ab"});
    ab_c.add(std::string_view{"c"});
    a_bc.add(std::string_view{"a"});
    a_bc.add(std::string_view{"bc"});
    CHECK(ab_c.value() != a_bc.value());

    trace_hash one_two, two_one;
    one_two.add(std::uint64_t{1});
    one_two.add(std::uint64_t{2});
    two_one.add(std::uint64_t{2});
    two_one.add(std::uint64_t{1});
    CHECK(one_two.value() != two_one.value());

    CHECK(hash_of("abc") != hash_of("abd"));
    CHECK(hash_of("") != trace_hash{}.value());  // adding an empty string is an event too

    trace_hash zero{0}, seven{7};
    CHECK(zero.value() != seven.value());

    // value() does not disturb the running state.
    trace_hash h;
    h.add(std::uint64_t{5});
    const auto before = h.value();
    CHECK(h.value() == before);
    h.add(std::uint64_t{6});
    CHECK(h.value() != before);
}
