// A program that violates a ZAB_ASSERT on purpose. expect_abort.cmake runs it and checks that
// it aborts and that stderr names the expression, the message, this file and the line.
// It prints that line on stdout first, so the check does not hard-code a line number.
#include <cstdio>

#include "zab/core/assert.hpp"

int main(int argc, char**) {
    // argc makes the condition unknown at compile time.
    const int quorum_size = argc + 1;
    ZAB_ASSERT(quorum_size > 0, "a true assertion must not abort");
    std::printf("assert_line=%d\n", __LINE__ + 2);
    std::fflush(stdout);
    ZAB_ASSERT(quorum_size == 0, "quorum of zero peers");
    std::printf("ZAB_ASSERT returned\n");
    return 0;
}
