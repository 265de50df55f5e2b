// zab/runtime/metrics_registry.hpp — a ready-made metrics sink (zab/core/metrics.hpp) that
// keeps every distribution in a histogram of fixed buckets and counts the events.
//
// Give it to `zab::asio::node` (node_options::metrics, or node::set_metrics) and render it,
// with the peer's counters and gauges, in the Prometheus text format
// (zab/runtime/metrics_exposition.hpp). Observing adds to fixed arrays: no allocation, no
// lock. Not thread-safe: use it on the node's executor, as the node does.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "zab/core/assert.hpp"
#include "zab/core/metrics.hpp"

namespace zab {

/// A distribution in fixed buckets, Prometheus style: `bucket_count(i)` counts the values
/// <= `bound(i)` (cumulative), and every value counts in `count()` and `sum()`.
class histogram {
public:
    static constexpr std::size_t max_bounds = 20;

    histogram() = default;
    /// `bounds` ascending, at most `max_bounds` of them (an implicit +Inf bucket follows).
    histogram(std::initializer_list<double> bounds) {
        ZAB_ASSERT(bounds.size() <= max_bounds, "a histogram with too many buckets");
        ZAB_ASSERT(std::is_sorted(bounds.begin(), bounds.end()), "histogram bounds out of order");
        std::copy(bounds.begin(), bounds.end(), bounds_.begin());
        size_ = bounds.size();
    }

    void observe(double value) noexcept {
        const auto end = bounds_.begin() + static_cast<std::ptrdiff_t>(size_);
        // The first bound >= value: its bucket (or the +Inf one past the bounds).
        ++counts_[static_cast<std::size_t>(std::lower_bound(bounds_.begin(), end, value) -
                                           bounds_.begin())];
        ++count_;
        sum_ += value;
    }

    std::size_t bounds() const noexcept { return size_; }
    double bound(std::size_t i) const noexcept { return bounds_[i]; }
    /// Values <= bound(i); `bucket_count(bounds())` is every value (+Inf).
    std::uint64_t bucket_count(std::size_t i) const noexcept {
        std::uint64_t n = 0;
        for (std::size_t j = 0; j <= i && j <= size_; ++j) n += counts_[j];
        return n;
    }
    std::uint64_t count() const noexcept { return count_; }
    double sum() const noexcept { return sum_; }

private:
    std::array<double, max_bounds> bounds_{};
    std::size_t size_ = 0;
    std::array<std::uint64_t, max_bounds + 1> counts_{};  ///< per bucket, not cumulative
    std::uint64_t count_ = 0;
    double sum_ = 0;
};

/// The name, help text and bucket bounds of each `histogram_kind`: what the registry uses
/// and the exposition prints.
struct histogram_info {
    std::string_view name;
    std::string_view help;
};
constexpr histogram_info info_of(histogram_kind h) noexcept {
    switch (h) {
        case histogram_kind::fsync_seconds:
            return {"zab_fsync_duration_seconds",
                    "One flush job of the log: its writes and fdatasyncs (what a write waits on)"};
        case histogram_kind::flush_records:
            return {"zab_flush_records", "Log records written by one flush job"};
        case histogram_kind::append_records:
            return {"zab_append_batch_records", "Records in one append batch of the core (group commit)"};
        case histogram_kind::commit_seconds:
            return {"zab_commit_latency_seconds", "Leader: from proposing a transaction to committing it"};
        case histogram_kind::apply_seconds:
            return {"zab_apply_duration_seconds", "The state machine's apply of one transaction"};
        case histogram_kind::snapshot_seconds:
            return {"zab_snapshot_duration_seconds", "Taking one snapshot for compaction"};
        case histogram_kind::snapshot_bytes:
            return {"zab_snapshot_size_bytes", "The size of one snapshot the log compacted with"};
    }
    return {"?", "?"};
}

/// A `metrics_sink` with one histogram per `histogram_kind` (buckets fit for each: seconds
/// from 100 µs to 60 s, records from 1 to 4096, bytes from 1 KiB to 1 GiB), a count per
/// event kind, and an optional handler for each event. Its clock is the steady clock, or the
/// one given (a simulator's virtual time, in seconds).
class metrics_registry final : public metrics_sink {
public:
    explicit metrics_registry(std::function<double()> clock = {}) : clock_{std::move(clock)} {
        for (std::size_t i = 0; i < histogram_kind_count; ++i) {
            switch (static_cast<histogram_kind>(i)) {
                case histogram_kind::fsync_seconds:
                case histogram_kind::commit_seconds:
                case histogram_kind::apply_seconds:
                case histogram_kind::snapshot_seconds:
                    histograms_[i] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                      0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
                    break;
                case histogram_kind::flush_records:
                case histogram_kind::append_records:
                    histograms_[i] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
                    break;
                case histogram_kind::snapshot_bytes:
                    histograms_[i] = {1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                                      16777216, 67108864, 268435456, 1073741824};
                    break;
            }
        }
    }

    /// Called with every event, after it is counted (on the peer's thread, inside its step:
    /// it must not call into the peer). Empty: events are only counted.
    void set_event_handler(std::function<void(const metric_event&)> handler) {
        handler_ = std::move(handler);
    }

    double now() override {
        if (clock_) return clock_();
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
    void observe(histogram_kind h, double value) override {
        histograms_[static_cast<std::size_t>(h)].observe(value);
    }
    void on_event(const metric_event& e) override {
        ++events_[static_cast<std::size_t>(e.kind)];
        if (handler_) handler_(e);
    }

    const histogram& of(histogram_kind h) const noexcept {
        return histograms_[static_cast<std::size_t>(h)];
    }
    /// Events of `kind` so far.
    std::uint64_t events(metric_event_kind kind) const noexcept {
        return events_[static_cast<std::size_t>(kind)];
    }

private:
    std::array<histogram, histogram_kind_count> histograms_;
    std::array<std::uint64_t, metric_event_kind_count> events_{};
    std::function<void(const metric_event&)> handler_;
    std::function<double()> clock_;
};

}  // namespace zab
