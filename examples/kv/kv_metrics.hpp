// kv_metrics.hpp — what kv_server shows of zab's figures (zab/runtime/metrics_exposition.hpp):
// INFO's sections of `key:value` lines, and the answers of its metrics port (GET /metrics,
// GET /health), without any I/O (the HTTP server is kv_metrics_http.hpp).
#pragma once

#include <iterator>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "zab/core/status.hpp"
#include "zab/runtime/metrics_exposition.hpp"
#include "zab/runtime/metrics_registry.hpp"

namespace zab::kv {

/// A writer of zab's figures (metrics_exposition.hpp) as INFO lines: each section a
/// "# Title" line, each sample `name{labels}:value` (the Prometheus name and labels), each
/// histogram its `_count` and `_sum`.
class info_writer {
public:
    explicit info_writer(std::string& out) : out_{out} {}
    void section(std::string_view title) { fmt::format_to(std::back_inserter(out_), "# {}\r\n", title); }
    void family(std::string_view, std::string_view, std::string_view) {}
    template <typename Value>
    void sample(std::string_view name, std::string_view labels, Value value) {
        if (labels.empty())
            fmt::format_to(std::back_inserter(out_), "{}:{}\r\n", name, value);
        else
            fmt::format_to(std::back_inserter(out_), "{}{{{}}}:{}\r\n", name, labels, value);
    }
    void histogram(std::string_view name, const zab::histogram& h) {
        fmt::format_to(std::back_inserter(out_), "{}_count:{}\r\n{}_sum:{}\r\n", name, h.count(),
                       name, h.sum());
    }

private:
    std::string& out_;
};

/// Why this replica is not healthy, or empty when it is: established (leading with a quorum,
/// or following a leader that sent UPTODATE), its disk not stalled, its storage not failed,
/// not removed from the group.
inline std::string health_problem(const peer_status& s) {
    if (s.failure) return fmt::format("storage failed: {}", s.failure.message());
    if (s.removed) return "removed from the group";
    if (s.disk_stalled) return "disk stalled";
    if (!s.established)
        return fmt::format("not established: {}{}", s.role,
                           s.role == peer_state::leading ? " without a quorum yet" : "");
    return {};
}

/// An answer of the metrics port.
struct http_answer {
    unsigned status = 200;
    std::string_view content_type = "text/plain; charset=utf-8";
    std::string body;
};

/// The metrics port's routes: GET (or HEAD) /metrics, GET (or HEAD) /health; anything else
/// 404. `metrics()` renders the exposition, `health()` says what is wrong (empty: healthy).
/// A query string is ignored.
template <typename Metrics, typename Health>
http_answer route_metrics_request(std::string_view method, std::string_view target,
                                  Metrics&& metrics, Health&& health) {
    const std::string_view path = target.substr(0, target.find('?'));
    if (method != "GET" && method != "HEAD") return {404, "text/plain; charset=utf-8", "not found\n"};
    if (path == "/metrics") return {200, prometheus_text::content_type, metrics()};
    if (path == "/health") {
        const std::string problem = health();
        if (problem.empty()) return {200, "text/plain; charset=utf-8", "ok\n"};
        return {503, "text/plain; charset=utf-8", problem + "\n"};
    }
    return {404, "text/plain; charset=utf-8", "not found\n"};
}

}  // namespace zab::kv
