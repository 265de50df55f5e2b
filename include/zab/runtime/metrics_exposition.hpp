// zab/runtime/metrics_exposition.hpp — every figure of a replica, named once, written to any
// writer: the Prometheus text exposition format (`prometheus_text`), or an application's own
// (kv_server's INFO writes the same figures as `key:value` lines).
//
// A writer has four members:
//   section(title)                 a group of families (INFO's "# Title"; nothing in Prometheus)
//   family(name, type, help)       starts a family: "counter", "gauge" or "histogram"
//   sample(name, labels, value)    one value (labels preformatted: `kind="diff"`, or empty)
//   histogram(name, h)             a histogram's buckets, sum and count (after its family)
// The figures come from what the replica already keeps — `peer::counters()`, `peer::status()`,
// the transport's `counters()` — and from a `metrics_registry`'s histograms and events; the
// docs/operating.md ("Metrics") lists every name with its meaning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "zab/core/metrics.hpp"
#include "zab/core/peer_context.hpp"
#include "zab/core/status.hpp"
#include "zab/net/tcp_transport_options.hpp"
#include "zab/runtime/metrics_registry.hpp"
#include "zab/storage/durable_io.hpp"

namespace zab {

/// The Prometheus text exposition format (version 0.0.4), built into one string.
class prometheus_text {
public:
    void section(std::string_view) {}
    void family(std::string_view name, std::string_view type, std::string_view help) {
        fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                       type);
    }
    template <typename Value>
    void sample(std::string_view name, std::string_view labels, Value value) {
        if (labels.empty())
            fmt::format_to(std::back_inserter(out_), "{} {}\n", name, value);
        else
            fmt::format_to(std::back_inserter(out_), "{}{{{}}} {}\n", name, labels, value);
    }
    void histogram(std::string_view name, const zab::histogram& h) {
        for (std::size_t i = 0; i < h.bounds(); ++i)
            fmt::format_to(std::back_inserter(out_), "{}_bucket{{le=\"{}\"}} {}\n", name,
                           h.bound(i), h.bucket_count(i));
        fmt::format_to(std::back_inserter(out_), "{}_bucket{{le=\"+Inf\"}} {}\n", name, h.count());
        fmt::format_to(std::back_inserter(out_), "{}_sum {}\n{}_count {}\n", name, h.sum(), name,
                       h.count());
    }
    const std::string& text() const noexcept { return out_; }

    /// The Content-Type of this format.
    static constexpr std::string_view content_type = "text/plain; version=0.0.4; charset=utf-8";

private:
    std::string out_;
};

/// A label-friendly name of an ignore reason (the enumerator's own).
constexpr std::string_view label_of(ignore_reason r) noexcept {
    switch (r) {
        case ignore_reason::not_from_my_leader: return "not_from_my_leader";
        case ignore_reason::not_leading: return "not_leading";
        case ignore_reason::unknown_learner: return "unknown_learner";
        case ignore_reason::not_serving: return "not_serving";
        case ignore_reason::follows_another: return "follows_another";
        case ignore_reason::ack_before_newleader: return "ack_before_newleader";
        case ignore_reason::out_of_stage: return "out_of_stage";
        case ignore_reason::bad_acknowledgement: return "bad_acknowledgement";
        case ignore_reason::wrong_learner_type: return "wrong_learner_type";
    }
    return "?";
}

namespace detail {

template <typename Writer>
void counter(Writer& w, std::string_view name, std::string_view help, std::uint64_t value) {
    w.family(name, "counter", help);
    w.sample(name, "", value);
}
template <typename Writer>
void gauge(Writer& w, std::string_view name, std::string_view help, std::uint64_t value) {
    w.family(name, "gauge", help);
    w.sample(name, "", value);
}

}  // namespace detail

/// The replica's protocol counters (`peer::counters()`).
template <typename Writer>
void write_peer_counters(Writer& w, const peer_counters& c) {
    using detail::counter;
    w.section("Zab counters");
    counter(w, "zab_elections_started_total", "Elections this replica started", c.elections_started);
    w.family("zab_elections_total", "counter", "Elections decided, by outcome: won (to lead) or lost");
    w.sample("zab_elections_total", "outcome=\"won\"", c.elections_won);
    w.sample("zab_elections_total", "outcome=\"lost\"", c.elections_decided - c.elections_won);
    counter(w, "zab_proposals_total", "Transactions proposed as leader", c.proposals);
    counter(w, "zab_commits_total", "Transactions committed as leader", c.commits);
    counter(w, "zab_transactions_applied_total", "Transactions applied to the state machine",
            c.transactions_applied);
    w.family("zab_syncs_total", "counter", "Leader: learner syncs planned, by kind");
    w.sample("zab_syncs_total", "kind=\"diff\"", c.syncs_diff);
    w.sample("zab_syncs_total", "kind=\"trunc\"", c.syncs_trunc);
    w.sample("zab_syncs_total", "kind=\"snap\"", c.syncs_snap);
    counter(w, "zab_snapshot_sent_bytes_total", "Leader: snapshot bytes queued to learners (SNAP)",
            c.snapshot_bytes_sent);
    w.family("zab_refusals_total", "counter",
             "Refusals: learners (ahead, or a stale epoch) and forwarded writes (a REPLY error)");
    w.sample("zab_refusals_total", "what=\"learner\"", c.learners_refused);
    w.sample("zab_refusals_total", "what=\"request\"", c.requests_refused);
    w.family("zab_options_conflicts_total", "counter",
             "Options every replica must share that differ (docs/protocol.md §4.2), by what");
    w.sample("zab_options_conflicts_total", "what=\"learner_fingerprint\"", c.learners_refused_options);
    w.sample("zab_options_conflicts_total", "what=\"learner_lease\"", c.lease_options_mismatches);
    w.sample("zab_options_conflicts_total", "what=\"leader_fingerprint\"", c.leaders_refused_options);
    w.family("zab_ignored_messages_total", "counter", "Valid messages not acted on, by reason");
    for (std::size_t i = 0; i < ignore_reason_count; ++i)
        w.sample("zab_ignored_messages_total",
                 fmt::format("reason=\"{}\"", label_of(static_cast<ignore_reason>(i))),
                 c.ignored[i]);
    w.family("zab_learners_dropped_total", "counter", "Leader: learner links closed, by reason");
    const std::uint64_t explained = c.learners_refused + c.learners_over_backlog + c.learners_silent;
    w.sample("zab_learners_dropped_total", "reason=\"refused\"", c.learners_refused);
    w.sample("zab_learners_dropped_total", "reason=\"over_backlog\"", c.learners_over_backlog);
    w.sample("zab_learners_dropped_total", "reason=\"silent\"", c.learners_silent);
    w.sample("zab_learners_dropped_total", "reason=\"other\"",
             c.learners_dropped > explained ? c.learners_dropped - explained : 0);
    counter(w, "zab_learner_sync_failures_total", "Leader: learner links ended before synced",
            c.learner_sync_failures);
    counter(w, "zab_leader_step_downs_total", "Leader: stepped down (no quorum, or a stalled disk)",
            c.leader_step_downs);
    counter(w, "zab_leader_silences_total", "Learner: nothing from the leader for sync_limit",
            c.leader_silences);
    counter(w, "zab_establish_timeouts_total", "Discovery and sync not done within init_limit",
            c.establish_timeouts);
    counter(w, "zab_requests_forwarded_total", "Learner: client writes and syncs sent to the leader",
            c.requests_forwarded);
    counter(w, "zab_forwarded_batches_total",
            "Learner: REQUESTS frames, each the forwarded writes of one turn", c.forwarded_batches);
    counter(w, "zab_protocol_refusals_total",
            "Leaders and learners refused for a protocol version older than any this build speaks",
            c.protocol_refusals);
    counter(w, "zab_syncs_answered_total", "Leader: linearizable syncs confirmed by a quorum round",
            c.syncs_answered);
    counter(w, "zab_compactions_total", "Log compactions", c.compactions);
    counter(w, "zab_disk_stalls_total", "Storage writes stalled for disk_stall_ticks", c.disk_stalls);
    w.family("zab_frames_total", "counter", "Protocol frames, by direction; bad: closed the connection");
    w.sample("zab_frames_total", "direction=\"received\"", c.frames_received);
    w.sample("zab_frames_total", "direction=\"sent\"", c.frames_sent);
    w.sample("zab_frames_total", "direction=\"bad\"", c.bad_frames);
    counter(w, "zab_frames_coalesced_total",
            "ACKs and COMMITs not sent: a later one, sent right after, covers them", c.frames_coalesced);
}

/// The replica's role and progress (`peer::status()`), and each learner's as its leader sees it.
template <typename Writer>
void write_peer_status(Writer& w, const peer_status& s) {
    using detail::gauge;
    w.section("Zab state");
    w.family("zab_role", "gauge", "1 for this replica's role, 0 for the others");
    for (const peer_state role : {peer_state::looking, peer_state::following, peer_state::leading,
                                  peer_state::observing})
        w.sample("zab_role", fmt::format("role=\"{}\"", role == peer_state::looking     ? "looking"
                                                        : role == peer_state::following ? "following"
                                                        : role == peer_state::leading   ? "leading"
                                                                                        : "observing"),
                 s.role == role ? 1 : 0);
    gauge(w, "zab_established", "1 while leading with a quorum or following an UPTODATE leader",
          s.established ? 1 : 0);
    gauge(w, "zab_leader", "The established leader's id (0: none)", s.leader);
    gauge(w, "zab_current_epoch", "The durable current epoch", s.durable_epochs.current);
    gauge(w, "zab_accepted_epoch", "The durable accepted epoch", s.durable_epochs.accepted);
    gauge(w, "zab_last_logged_zxid", "The last zxid in the durable log", s.last_logged.value());
    gauge(w, "zab_last_committed_zxid", "The last zxid known committed", s.last_committed.value());
    gauge(w, "zab_last_applied_zxid", "The last zxid applied", s.last_applied.value());
    gauge(w, "zab_outstanding_proposals", "Leader: proposed, not yet committed", s.outstanding_proposals);
    gauge(w, "zab_log_bytes_since_snapshot", "Transaction bytes applied since the last compaction",
          s.log_bytes_since_snapshot);
    gauge(w, "zab_disk_stalled", "1 while storage writes are stalled (disk_stall_ticks)",
          s.disk_stalled ? 1 : 0);
    gauge(w, "zab_storage_failed", "1 once storage failed (the replica stopped)",
          s.failure ? 1 : 0);
    gauge(w, "zab_config_version", "The committed configuration's version", s.config_version);
    gauge(w, "zab_learners", "Leader: learners connected now", s.learners.size());
    if (s.learners.empty()) return;
    w.section("Zab learners");
    const auto per_learner = [&](std::string_view name, std::string_view help, auto value_of) {
        w.family(name, "gauge", help);
        for (const learner_status& l : s.learners)
            w.sample(name, fmt::format("learner=\"{}\"", l.id), value_of(l));
    };
    per_learner("zab_learner_lag", "Leader: transactions committed in its epoch the voter has not acknowledged",
                [](const learner_status& l) { return l.lag; });
    per_learner("zab_learner_sync_stage",
                "Leader: the learner's stage, 0 awaiting_epoch ... 7 broadcasting (synced)",
                [](const learner_status& l) { return static_cast<std::uint64_t>(l.stage); });
    per_learner("zab_learner_sync_failures", "Leader: the learner's syncs in a row that failed",
                [](const learner_status& l) { return l.sync_failures; });
    per_learner("zab_learner_snapshot_bytes", "Leader: the size of the SNAP streaming to it (0: none)",
                [](const learner_status& l) { return l.snapshot_bytes; });
    per_learner("zab_learner_snapshot_sent_bytes", "Leader: bytes of that SNAP queued to it",
                [](const learner_status& l) { return l.snapshot_sent; });
    per_learner("zab_learner_snapshot_acknowledged_bytes", "Leader: bytes of that SNAP it confirmed",
                [](const learner_status& l) { return l.snapshot_acknowledged; });
}

/// The peer transport's counters (`tcp_transport::counters()`).
template <typename Writer>
void write_transport_counters(Writer& w, const asio::transport_counters& t) {
    using detail::counter;
    w.section("Zab transport");
    w.family("zab_transport_connections_total", "counter", "Peer connections, by event");
    w.sample("zab_transport_connections_total", "event=\"accepted\"", t.connections_accepted);
    w.sample("zab_transport_connections_total", "event=\"dialed\"", t.connections_dialed);
    w.sample("zab_transport_connections_total", "event=\"established\"", t.connections_established);
    w.sample("zab_transport_connections_total", "event=\"lost\"", t.connections_lost);
    w.sample("zab_transport_connections_total", "event=\"replaced\"", t.replaced_connections);
    counter(w, "zab_transport_dial_failures_total", "Outbound connects refused, failed or timed out",
            t.dial_failures);
    w.family("zab_transport_bytes_total", "counter", "Frame bytes, by direction");
    w.sample("zab_transport_bytes_total", "direction=\"sent\"", t.bytes_sent);
    w.sample("zab_transport_bytes_total", "direction=\"received\"", t.bytes_received);
    w.family("zab_transport_bad_frames_total", "counter", "Frames that closed their connection");
    w.sample("zab_transport_bad_frames_total", "kind=\"malformed\"", t.malformed_frames);
    w.sample("zab_transport_bad_frames_total", "kind=\"oversized\"", t.oversized_frames);
    counter(w, "zab_transport_queue_overflows_total", "Connections closed by a full send queue",
            t.queue_overflows);
    counter(w, "zab_transport_quarantines_total", "Quarantines begun (bad frames)", t.quarantines);
    const auto& r = t.rejected;
    w.family("zab_transport_handshake_rejections_total", "counter", "Handshakes refused, by reason");
    const std::pair<std::string_view, std::uint64_t> reasons[] = {
        {"bad_magic", r.bad_magic}, {"bad_version", r.bad_version}, {"malformed", r.malformed},
        {"wrong_cluster", r.wrong_cluster}, {"unknown_peer", r.unknown_peer},
        {"too_many_joiners", r.too_many_joiners}, {"unexpected_peer", r.unexpected_peer},
        {"wrong_direction", r.wrong_direction}, {"timeout", r.timeout},
        {"too_many_pending", r.too_many_pending}, {"quarantined", r.quarantined},
        {"closed_by_remote", r.closed_by_remote}, {"different_membership", r.different_membership},
        {"duplicate_id", r.duplicate_id}, {"refused_by_peer", r.refused_by_peer},
        {"tls_no_certificate", r.refused_tls_no_certificate},
        {"tls_untrusted", r.refused_tls_untrusted}, {"tls_expired", r.refused_tls_expired},
        {"tls_wrong_identity", r.refused_tls_wrong_identity},
        {"tls_handshake", r.refused_tls_handshake}};
    for (const auto& [reason, value] : reasons)
        w.sample("zab_transport_handshake_rejections_total", fmt::format("reason=\"{}\"", reason),
                 value);
}

/// A registry's histograms and event counts.
template <typename Writer>
void write_registry(Writer& w, const metrics_registry& registry) {
    w.section("Zab distributions");
    for (std::size_t i = 0; i < histogram_kind_count; ++i) {
        const histogram_info info = info_of(static_cast<histogram_kind>(i));
        w.family(info.name, "histogram", info.help);
        w.histogram(info.name, registry.of(static_cast<histogram_kind>(i)));
    }
    w.family("zab_events_total", "counter", "Events reported to the metrics hook, by kind");
    for (std::size_t i = 0; i < metric_event_kind_count; ++i) {
        const auto kind = static_cast<metric_event_kind>(i);
        w.sample("zab_events_total", fmt::format("kind=\"{}\"", to_string(kind)),
                 registry.events(kind));
    }
}

/// The file log's disk work (`file_log::stats()`): what each durability guarantee costs in
/// system calls, and what recovery and compaction did to the files.
template <typename Writer>
void write_log_stats(Writer& w, const file_log_stats& s) {
    using detail::counter;
    w.section("Zab log");
    counter(w, "zab_log_flushes_total", "Flush jobs of the file log finished (empty ones included)",
            s.flushes);
    counter(w, "zab_log_records_written_total", "Log records written", s.records_written);
    counter(w, "zab_log_written_bytes_total", "Bytes written to the log's files, every file",
            s.bytes_written);
    w.family("zab_log_syncs_total", "counter",
             "fdatasync/fsync calls, by what: segment data, the synced watermark, snapshot/epoch/"
             "identity files, the directory");
    w.sample("zab_log_syncs_total", "what=\"segment\"", s.data_syncs);
    w.sample("zab_log_syncs_total", "what=\"watermark\"", s.watermark_syncs);
    w.sample("zab_log_syncs_total", "what=\"file\"", s.file_syncs);
    w.sample("zab_log_syncs_total", "what=\"directory\"", s.directory_syncs);
    counter(w, "zab_log_truncations_total", "Segments cut by a TRUNC (the log truncated after a zxid)",
            s.truncations);
    counter(w, "zab_log_extensions_total", "Room reserved ahead of a segment's records",
            s.extensions);
    w.family("zab_log_files_total", "counter", "Files of the log, by event");
    w.sample("zab_log_files_total", "event=\"created\"", s.files_created);
    w.sample("zab_log_files_total", "event=\"removed\"", s.files_removed);
    counter(w, "zab_log_checkpoints_written_total", "Compaction checkpoints written to disk",
            s.snapshots_written);
    counter(w, "zab_log_epoch_writes_total", "Epoch files written (atomically)", s.epoch_writes);
}

/// Everything of a `zab::asio::node` (or anything with `protocol_peer()` and `transport()`):
/// the peer's counters and state (once started), the transport's counters, the log's disk
/// work when the log keeps `stats()` (zab::file_log), and `registry`'s distributions and
/// events when given. On the node's executor.
template <typename Writer, typename Node>
void write_node_metrics(Writer& w, const Node& node, const metrics_registry* registry) {
    if (const auto* peer = node.protocol_peer()) {
        write_peer_status(w, peer->status());
        write_peer_counters(w, peer->counters());
    }
    write_transport_counters(w, node.transport().counters());
    if constexpr (requires { write_log_stats(w, node.log().stats()); })
        write_log_stats(w, node.log().stats());
    if (registry != nullptr) write_registry(w, *registry);
}

}  // namespace zab
