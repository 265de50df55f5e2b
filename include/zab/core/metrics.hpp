// zab/core/metrics.hpp — the metrics hook: what a replica reports as it runs, to a sink the
// application provides.
//
// Three kinds of figures, each where it is cheapest:
// - counters and gauges are *read* when someone asks (a scrape, INFO): `peer::counters()`,
//   `peer::status()`, `peer::learners()` and the transport's `counters()` already hold them,
//   so nothing is pushed and a replica without a sink pays nothing for them;
// - distributions (histograms) are *pushed* to `metrics_sink::observe` as they happen;
// - events (role and leader changes, a learner stuck syncing, storage failure, disk stall) are
//   pushed to `metrics_sink::on_event`.
// A peer holds a plain pointer to its sink, null by default: without one, every place that
// would report costs one predictable branch and no virtual call (`peer::set_metrics`).
//
// The core has no clock (docs/design.md rule 1): a distribution that needs time asks the sink
// (`metrics_sink::now`), so under the simulator it is virtual time and under zab::asio::node
// the steady clock (zab/runtime/metrics_registry.hpp). What only a driver sees (an fsync, a
// snapshot serialized off the peer's thread) the driver measures and observes on the same
// sink.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "zab/core/types.hpp"

namespace zab {

/// The distributions reported to `metrics_sink::observe`. Durations are in seconds of the
/// sink's clock (`metrics_sink::now`); sizes in records or bytes.
enum class histogram_kind : std::uint8_t {
    fsync_seconds,         ///< driver: one flush job of the log (its writes and fdatasyncs)
    flush_records,         ///< driver: log records written by one flush job
    append_records,        ///< core: records in one append batch (at most one per step)
    commit_seconds,        ///< core, leader: from proposing a transaction to committing it
    apply_seconds,         ///< core: the state machine's `apply` of one transaction
    snapshot_seconds,      ///< taking a snapshot for compaction (core, or driver if deferred)
    snapshot_bytes,        ///< core: the size of a snapshot the log compacted with
};
inline constexpr std::size_t histogram_kind_count = 7;

/// What happened, in a `metric_event`.
enum class metric_event_kind : std::uint8_t {
    role_changed,           ///< LOOKING / FOLLOWING / OBSERVING / LEADING changed (`role`)
    leader_changed,         ///< the established leader changed (`leader`; 0: none now)
    learner_stuck_syncing,  ///< leader: `learner`'s syncs failed `count` times in a row
    storage_failed,         ///< the log failed (`error`): the replica stopped for good
    disk_stalled,           ///< writes pending `count` ticks without completing (§6.5)
    disk_recovered,         ///< the stalled writes completed again
};
inline constexpr std::size_t metric_event_kind_count = 6;

constexpr std::string_view to_string(metric_event_kind k) noexcept {
    switch (k) {
        case metric_event_kind::role_changed: return "role_changed";
        case metric_event_kind::leader_changed: return "leader_changed";
        case metric_event_kind::learner_stuck_syncing: return "learner_stuck_syncing";
        case metric_event_kind::storage_failed: return "storage_failed";
        case metric_event_kind::disk_stalled: return "disk_stalled";
        case metric_event_kind::disk_recovered: return "disk_recovered";
    }
    return "?";
}

/// One event, as `metrics_sink::on_event` receives it. `reason` points into storage that
/// lives only for the call: copy it to keep it.
struct metric_event {
    metric_event_kind kind = metric_event_kind::role_changed;
    peer_id self = 0;
    peer_state role = peer_state::looking;  ///< this replica's role after the event
    peer_id leader = 0;                     ///< the established leader after it (0: none)
    peer_id learner = 0;                    ///< learner_stuck_syncing: which learner
    std::uint64_t count = 0;  ///< failures in a row (stuck syncing), ticks stalled (disk)
    std::string_view reason;  ///< stuck syncing: the last failure's reason
    std::error_code error;    ///< storage_failed: the error
    std::uint64_t tick = 0;   ///< the peer's tick count when it happened
};

/// What a peer (and its driver) report to. Called on the peer's thread, from inside a step:
/// an implementation must not call back into the peer, and should be quick (the registry
/// in zab/runtime/metrics_registry.hpp adds to fixed buckets, without allocating).
class metrics_sink {
public:
    virtual ~metrics_sink() = default;
    /// The sink's clock, in seconds from any origin, never going back: what durations are
    /// measured with. A simulator's sink returns virtual time.
    virtual double now() = 0;
    /// One value of distribution `h`.
    virtual void observe(histogram_kind h, double value) = 0;
    /// One event.
    virtual void on_event(const metric_event& e) = 0;
};

}  // namespace zab
