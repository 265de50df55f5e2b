// zab/core/assert.hpp — ZAB_ASSERT: always on, for zab's own invariants only.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace zab::detail {

/// Called when a zab invariant is violated: a bug in zab, never bad input (docs/design.md rule 6).
[[noreturn]] inline void assertion_failed(const char* expression, const char* file, int line,
                                          const char* message) noexcept {
    std::fprintf(stderr, "zab: assertion failed: %s (%s) at %s:%d\n", expression, message, file,
                 line);
    std::fflush(stderr);
    std::abort();
}

}  // namespace zab::detail

/// Checks an invariant of zab itself. Stays on in release builds. Never use it on anything a
/// peer, a disk or a caller supplied: those are error values (`zab::result`).
#define ZAB_ASSERT(condition, message)                                                  \
    do {                                                                                \
        if (!(condition)) [[unlikely]]                                                  \
            ::zab::detail::assertion_failed(#condition, __FILE__, __LINE__, (message)); \
    } while (false)
