// zab/core/logging.hpp — the fmt-based logging hook an application can redirect.
#pragma once

#include <atomic>
#include <cstdio>
#include <iterator>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace zab {

enum class log_level : int { trace = 0, debug = 1, info = 2, warn = 3, error = 4, off = 5 };

/// A log sink: receives an already formatted line (no trailing newline).
/// Called on whatever thread logs; it must be safe to call concurrently if the application
/// drives peers from several threads.
using log_sink = void (*)(void* context, log_level level, std::string_view line);

namespace detail {
inline void stderr_sink(void*, log_level level, std::string_view line) {
    static constexpr const char* names[] = {"trace", "debug", "info", "warn", "error"};
    std::fprintf(stderr, "zab %s: %.*s\n", names[static_cast<int>(level)],
                 static_cast<int>(line.size()), line.data());
}

struct logger_state {
    std::atomic<int> level{static_cast<int>(log_level::warn)};
    std::atomic<log_sink> sink{&stderr_sink};
    std::atomic<void*> context{nullptr};
};

inline logger_state& logger() noexcept {
    static logger_state state;
    return state;
}
}  // namespace detail

/// Redirects zab's log lines to `sink(context, level, line)`. Pass nullptr to restore stderr.
/// Set it before any peer runs: a line logged concurrently with the change may reach the old
/// sink with the new context.
inline void set_log_sink(log_sink sink, void* context = nullptr) noexcept {
    detail::logger().context.store(context);
    detail::logger().sink.store(sink != nullptr ? sink : &detail::stderr_sink);
}

/// Lines below `level` are not formatted at all. The default is `warn`.
inline void set_log_level(log_level level) noexcept {
    detail::logger().level.store(static_cast<int>(level));
}

inline bool log_enabled(log_level level) noexcept {
    return static_cast<int>(level) >= detail::logger().level.load(std::memory_order_relaxed);
}

/// Formats with fmt and hands the line to the sink, if `level` is enabled.
template <typename... Args>
void log(log_level level, fmt::format_string<Args...> format, Args&&... args) {
    if (!log_enabled(level)) return;
    fmt::memory_buffer buffer;
    fmt::format_to(std::back_inserter(buffer), format, std::forward<Args>(args)...);
    auto& state = detail::logger();
    state.sink.load()(state.context.load(), level, std::string_view{buffer.data(), buffer.size()});
}

}  // namespace zab
