#include <catch2/catch.hpp>

#include "zab/core/zxid.hpp"

TEST_CASE("zxid packs epoch high and counter low, and prints as <epoch, counter>") {
    const zab::zxid x{1, 1};
    const zab::zxid y{1, 2};
    CHECK(x.value() == 0x0000000100000001ull);
    CHECK(x < y);
    CHECK(zab::zxid{2, 0} > zab::zxid{1, 0xfffffffe});
    CHECK(fmt::format("{}", y) == "<1, 2>");
    CHECK(zab::zxid::from_value(y.value()) == y);
}
