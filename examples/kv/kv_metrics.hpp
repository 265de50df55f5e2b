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

/// A writer of zab's figures (metrics_exposition.hpp) as INFO lines in Redis's format: each
/// section a "# Title" line; an unlabelled sample `name:value`; a labelled family one line,
/// `name:label=value,...`, each sub-field named by its label's value (a value that starts
/// with a digit gets the label's name in front: `zab_learner_lag:learner_2=0,learner_3=4`);
/// each histogram its `_count` and `_sum`. Call `finish()` after the last figure.
class info_writer {
public:
    explicit info_writer(std::string& out) : out_{out} {}
    void section(std::string_view title) {
        finish();
        fmt::format_to(std::back_inserter(out_), "# {}\r\n", title);
    }
    void family(std::string_view, std::string_view, std::string_view) { finish(); }
    template <typename Value>
    void sample(std::string_view name, std::string_view labels, Value value) {
        if (labels.empty()) {
            finish();
            fmt::format_to(std::back_inserter(out_), "{}:{}\r\n", name, value);
            return;
        }
        if (family_ != name) {
            finish();
            family_ = name;
        }
        fmt::format_to(std::back_inserter(fields_), "{}{}={}", fields_.empty() ? "" : ",",
                       field_of(labels), value);
    }
    void histogram(std::string_view name, const zab::histogram& h) {
        finish();
        fmt::format_to(std::back_inserter(out_), "{}_count:{}\r\n{}_sum:{}\r\n", name, h.count(),
                       name, h.sum());
    }
    /// Writes the labelled family in progress, if any.
    void finish() {
        if (!fields_.empty()) fmt::format_to(std::back_inserter(out_), "{}:{}\r\n", family_, fields_);
        fields_.clear();
        family_.clear();
    }

    /// A sub-field's name for `labels` (`label="value"`): the value, letters, digits and `_`
    /// only, after the label's name if it starts with a digit.
    static std::string field_of(std::string_view labels) {
        const std::size_t equals = labels.find('=');
        std::string_view value = equals == std::string_view::npos ? labels : labels.substr(equals + 1);
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2);
        std::string out;
        if (!value.empty() && value.front() >= '0' && value.front() <= '9' &&
            equals != std::string_view::npos)
            out = std::string{labels.substr(0, equals)} + "_";
        for (const char c : value)
            out += (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_';
        return out.empty() ? std::string{"_"} : out;
    }

private:
    std::string& out_;
    std::string family_;  ///< the labelled family in progress
    std::string fields_;  ///< its sub-fields so far
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
