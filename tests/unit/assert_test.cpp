// ZAB_ASSERT when the condition holds. The failing case aborts the process, so it runs as
// its own ctest (assert_abort_helper.cpp, expect_abort.cmake).
#include <catch2/catch.hpp>

#include "zab/core/assert.hpp"

TEST_CASE("ZAB_ASSERT on a true condition does nothing and evaluates it exactly once") {
    int evaluations = 0;
    ZAB_ASSERT(++evaluations == 1, "evaluated once");
    CHECK(evaluations == 1);
    ZAB_ASSERT(++evaluations > 0, "evaluated once more");
    CHECK(evaluations == 2);
}

TEST_CASE("ZAB_ASSERT is one statement (safe in an unbraced if/else)") {
    int branch = 0;
    const bool take_first = false;
    if (take_first)
        ZAB_ASSERT(branch == 0, "first branch");
    else
        branch = 2;
    CHECK(branch == 2);
}
