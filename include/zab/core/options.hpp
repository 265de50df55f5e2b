// zab/core/options.hpp — every timing knob of the core, in ticks, validated in one place.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/types.hpp"

namespace zab {

/// A peer refused for the protocol version it announced (§0.2): older than any this replica
/// speaks (oldest_protocol_version).
struct protocol_refusal {
    peer_id peer = 0;
    std::uint32_t theirs = 0;  ///< the version it announced
    friend bool operator==(const protocol_refusal&, const protocol_refusal&) = default;
};

/// One option that must be equal on two replicas of a group and is not (§4.2): what
/// `peer_status::refused_leader` and `learner_status::conflict` show.
struct options_conflict {
    peer_id peer = 0;         ///< the other replica
    const char* option = "";  ///< read_lease_ticks, max_clock_drift_ppm or agreed_fingerprint
    std::uint64_t mine = 0;
    std::uint64_t theirs = 0;
    friend bool operator==(const options_conflict&, const options_conflict&) = default;
};

/// The first of the lease's options (§7.1) on which `mine` and `theirs` (replica `peer`'s)
/// differ, if any. The drift bound matters only with lease reads on: two replicas with
/// leases off agree whatever their drift bounds.
inline std::optional<options_conflict> lease_conflict(peer_id peer, const wire::agreed_options& mine,
                                                      const wire::agreed_options& theirs) noexcept {
    if (mine.read_lease_ticks != theirs.read_lease_ticks)
        return options_conflict{peer, "read_lease_ticks", mine.read_lease_ticks, theirs.read_lease_ticks};
    if (mine.read_lease_ticks != 0 && mine.max_clock_drift_ppm != theirs.max_clock_drift_ppm)
        return options_conflict{peer, "max_clock_drift_ppm", mine.max_clock_drift_ppm,
                                theirs.max_clock_drift_ppm};
    return std::nullopt;
}

/// The application's fingerprints (options::agreed_fingerprint) of `mine` and `theirs`, if
/// they differ.
inline std::optional<options_conflict> fingerprint_conflict(peer_id peer, const wire::agreed_options& mine,
                                                            const wire::agreed_options& theirs) noexcept {
    if (mine.fingerprint == theirs.fingerprint) return std::nullopt;
    return options_conflict{peer, "agreed_fingerprint", mine.fingerprint, theirs.fingerprint};
}

/// A fingerprint of `values` for options::agreed_fingerprint: FNV-1a (64 bits) over each
/// value's eight little-endian bytes, in order. The same on every platform and build.
inline std::uint64_t fingerprint_of(std::initializer_list<std::uint64_t> values) noexcept {
    std::uint64_t hash = 0xcbf29ce484222325ull;
    for (std::uint64_t value : values)
        for (int i = 0; i < 8; ++i) {
            hash ^= (value >> (8 * i)) & 0xffu;
            hash *= 0x100000001b3ull;
        }
    return hash;
}

/// The core's options: protocol timing, identity, compaction, bounds. Time enters the core
/// only as `tick()` (docs/design.md rule 1): every duration here is a number of ticks; how
/// long a tick is belongs to the driver (zab::asio::node_options::tick). The defaults
/// reproduce ZooKeeper's timings with 100 ms ticks.
struct options {
    /// FLE: how long a peer that sees a quorum for its proposal keeps listening for a better
    /// vote before deciding (ZooKeeper's finalizeWait, 200 ms; docs/protocol.md §3.4 step 4).
    std::uint32_t finalize_wait_ticks = 2;

    /// FLE: silence after which notifications are sent again; doubles on each silence up to
    /// the maximum (ZooKeeper: 200 ms doubling to 60 s; §3.4 step 2).
    std::uint32_t notification_timeout_min_ticks = 2;
    std::uint32_t notification_timeout_max_ticks = 600;

    /// Bound on discovery and synchronization (ZooKeeper's initLimit, in ticks; §4).
    std::uint32_t init_limit_ticks = 100;

    /// Bound on silence during broadcast (ZooKeeper's syncLimit, in ticks; §6.2).
    std::uint32_t sync_limit_ticks = 50;

    /// Disk-stall fencing (docs/protocol.md §6.5): a replica whose log or epoch writes have
    /// made no progress for this many ticks while some are pending reports its disk stalled
    /// (`peer_status::disk_stalled`, counter `disk_stalls`); a stalled leader steps down, and
    /// until its writes complete it takes no part in elections, so the group elects a healthy
    /// leader; a stalled follower acknowledges nothing (it cannot) and says so. Both rejoin
    /// once the writes complete. 0: never. Keep it well above the slowest legitimate write
    /// (a large snapshot install counts).
    std::uint32_t disk_stall_ticks = 100;

    /// Lease reads (docs/protocol.md §7.1), off by default (0). When set, this is the
    /// followers' promise: a replica that heard from its leader at tick h takes no part in
    /// electing any leader (its election does not start) before tick h + read_lease_ticks,
    /// whatever ended its role — a lost connection, the leader's silence, a restart (a
    /// replica that ever accepted an epoch waits this long after it starts). An established
    /// leader then holds a read lease for `lease_duration_ticks()` ticks from the sending of
    /// every heartbeat round that a quorum of its voters answered, and answers
    /// `peer::lease_sync` without a quorum round while it holds one. Every replica of the
    /// group must run with the same value (and, with leases on, the same
    /// max_clock_drift_ppm): both are compared in discovery (§4.2), and a leader counts no
    /// heartbeat answer of a follower that differs toward its lease (counter
    /// `lease_options_mismatches`, `learner_status::conflict`, logged). A sensible value is
    /// sync_limit_ticks: failover after a lost connection then waits up to this long.
    std::uint32_t read_lease_ticks = 0;

    /// Lease reads: the bound on clock drift the lease assumes, in parts per million —
    /// between any two instants, no replica's clock counts more than (1 + drift) times the
    /// ticks any other's counts, give or take a tick at each end. 100'000 (10 %) by default;
    /// at most 1'000'000. A broken bound can make a lease read stale (§7.1).
    std::uint32_t max_clock_drift_ppm = 100'000;

    /// The application's replicated behaviour that every replica must share, as one opaque
    /// number: two replicas that apply the same transactions under different such options
    /// answer a client differently (zab::session_machine's session_options, §6.7: set it to
    /// `zab::session_fingerprint(session_options)`, or `fingerprint_of` over the
    /// application's own values). Carried in discovery beside the lease's options (§4.2): a
    /// learner refuses to follow a leader whose fingerprint differs (`peer_status::
    /// refused_leader`, counter `leaders_refused_options`), and the leader counts it for
    /// nothing. 0 (the default) is a value like any other: it matches only 0.
    std::uint64_t agreed_fingerprint = 0;

    /// What this replica sends in FOLLOWERINFO / OBSERVERINFO / LEADERINFO (§4.2).
    wire::agreed_options agreed() const noexcept {
        return {read_lease_ticks, max_clock_drift_ppm, agreed_fingerprint};
    }

    /// The leader's read lease in ticks, counted from the sending of a heartbeat round that a
    /// quorum answered: ⌊(read_lease_ticks − 2) / (1 + drift)⌋, so that it ends before any
    /// follower's promise can (§7.1). 0 when lease reads are off.
    std::uint64_t lease_duration_ticks() const noexcept {
        if (read_lease_ticks < 3) return 0;
        return (std::uint64_t{read_lease_ticks} - 2) * 1'000'000 /
               (1'000'000 + std::uint64_t{max_clock_drift_ppm});
    }

    /// Bound on a leadership transfer's catch-up (§6.4): a target that does not hold every
    /// proposal this long after `peer::transfer_leadership` is given up, and writes resume.
    std::uint32_t transfer_timeout_ticks = 50;

    /// The leader `fixed_leader_election` elects; 0 means the voter with the highest id.
    /// Ignored by Fast Leader Election.
    std::uint64_t fixed_leader = 0;

    /// Group this peer belongs to: frames of another group are refused. zab::asio::node
    /// sets it from node_options::cluster_id.
    std::uint64_t group_id = 0;

    /// Log compaction: after this many transactions applied since the last snapshot, the
    /// state machine's snapshot replaces the log's records up to the last applied one, so a
    /// long-lived replica's log and restart time stay bounded (the log must model
    /// zab::compactable_log; others are never asked). A learner further behind is then
    /// brought up by SNAP. 0: never. A state machine that models
    /// zab::deferred_snapshot_machine hands over a view that the driver serializes off the
    /// peer's thread (`peer.ready().snapshot`, zab/core/driver.hpp); any other is serialized
    /// in the step, in time proportional to the state.
    /// Default 100'000 (ZooKeeper's snapCount): on, because a log never compacted grows
    /// without bound and a restart replays all of it. Lower it when the state is small and
    /// restarts must be fast; raise it (or rely on `snapshot_every_bytes`) when the state is
    /// large and its transactions small.
    std::uint64_t snapshot_every = 100'000;
    /// The same trigger counted in bytes of applied transactions: a cap on the log a replica
    /// keeps beyond its snapshot (and replays at a restart), whatever the transactions'
    /// sizes. 0: never. With both set, whichever is reached first.
    /// Default 64 MiB: large transactions would make 100'000 of them gigabytes of log; and
    /// the history a leader keeps after its snapshot stays well under
    /// `max_sync_buffer_bytes`, so a learner that holds the snapshot is brought up by DIFF,
    /// never sent a SNAP for the size of that history.
    std::uint64_t snapshot_every_bytes = 64ull << 20;

    // --- bounds (each hit is a clear error, never unbounded memory) ---------------------

    /// Client requests (writes and syncs) in flight on this peer; beyond it `submit` and
    /// `sync` complete at once with `errc::backpressure`.
    std::uint32_t max_pending_requests = 10'000;
    /// Proposals the leader has not committed yet; beyond it writes (local or forwarded) are
    /// refused with `errc::backpressure`.
    std::uint32_t max_outstanding_proposals = 10'000;
    /// Uncommitted proposals forwarded by one learner; beyond it that learner's writes are
    /// refused with `errc::backpressure` (one busy replica cannot starve the others).
    std::uint32_t max_forwarded_per_learner = 1'000;
    /// Frames the leader holds for one learner (waiting for its own durability); beyond it
    /// the learner is disconnected and resyncs — its clients are not failed for it.
    std::uint32_t max_learner_backlog = 100'000;

    /// SNAP sync streams the snapshot in chunks of at most this many bytes, and keeps at
    /// most `snapshot_chunks_in_flight` of them unanswered by the learner's SNAPACK: a
    /// learner's sync adds at most their product to the leader's send queue, whatever the
    /// state's size. The chunk (plus 64 bytes of framing) must fit the receiver's frame
    /// limit (`codec_limits::max_payload_bytes`, 64 MiB by default).
    std::uint32_t snapshot_chunk_bytes = 1u << 20;
    std::uint32_t snapshot_chunks_in_flight = 4;

    /// The committed history a sync sends (after DIFF, TRUNC or the last SNAP chunk) is
    /// streamed: at most this many records and bytes of it unanswered by the learner's
    /// SYNCACK, so a learner far behind adds a bounded amount to the leader's queues (and
    /// is never dropped for the size of its sync). At least `wire::sync_ack_every_records` /
    /// `wire::sync_ack_every_bytes` (messages.hpp), which is when a learner answers.
    std::uint32_t sync_window_records = 1024;
    std::uint32_t sync_window_bytes = 4u << 20;
    /// A syncing learner holds the history in memory until NEWLEADER makes it durable
    /// (§5.3); beyond this many bytes it gives up the sync with a logged reason. A leader
    /// whose log's snapshot is followed by more history than this syncs a learner from the
    /// state machine's snapshot instead (see `snapshot_every_bytes`).
    std::uint64_t max_sync_buffer_bytes = 256ull << 20;
    /// The largest snapshot a learner accepts by SNAP (it is held in memory until NEWLEADER
    /// installs it); a larger announced size ends the sync with a logged reason before any
    /// of it is buffered. zab::file_log refuses to write a snapshot above its own
    /// `file_log_options::max_snapshot_bytes` (1 GiB by default): keep the two equal.
    std::uint64_t max_snapshot_bytes = 1ull << 30;

    /// The largest transaction `submit` and `propose` accept (and the leader accepts from a
    /// learner); larger ones are refused with `errc::too_large`, definitely. It must fit a
    /// frame (`codec_limits::max_payload_bytes` less framing) and the log's record limit
    /// (zab::file_log: `file_log_options::max_record_bytes`, checked by zab::asio::node).
    std::uint32_t max_txn_bytes = 1u << 20;
    /// A PROPOSALS batch (peer::submit_batch) carries at most this many bytes of
    /// transactions, counting 4 bytes of framing for each; a transaction larger than that
    /// goes in a PROPOSAL of its own. It must fit a frame, like max_txn_bytes.
    std::uint32_t max_batch_bytes = 1u << 20;

    /// ZOOKEEPER-261: this replica's data directory was wiped or replaced (its disk lost
    /// what it may have acknowledged). Until a leader has synced it — until its durable
    /// current epoch is above 0 — it votes for nobody, joins the leader as an observer and
    /// none of its acknowledgements count, so it can never help elect a leader that lacks
    /// committed transactions. Once synced it rejoins as a voter. Never set it when the
    /// cluster is created: every replica is unsynced then, and none would vote.
    bool non_voter_until_synced = false;

    /// Learner promotion (member::promote, docs/protocol.md §9): the leader makes such a
    /// member a voter, by a reconfiguration of its own, once it is synced and has
    /// acknowledged all but at most this many of the transactions committed in the epoch.
    std::uint32_t promotion_max_lag = 16;

    /// Hooks for tests only; production leaves them at their defaults.
    struct test_hooks {
        /// §1, ZOOKEEPER-1277: the counter an established leader's epoch starts after, so a
        /// test reaches counter exhaustion without 2^32 proposals.
        std::uint32_t initial_counter = 0;
        /// Reconfiguration with one rule of docs/protocol.md §9 removed, for the broken
        /// variants that show each rule necessary (tests/protocol/broken_variants_test.cpp).
        enum class reconfig_rule : std::uint8_t {
            none,                   ///< every rule kept (production)
            old_quorum_only,        ///< a pending configuration adds no verifier
            effective_at_proposal,  ///< a pending configuration replaces the committed one
            voteless_acks_count,    ///< acknowledgements of followers without a vote count
        };
        reconfig_rule broken_reconfig = reconfig_rule::none;
        /// §0.2: the protocol version this replica announces and speaks, 0 for
        /// protocol_version. oldest_protocol_version (0x10000) makes it a replica of the
        /// previous release as its peers see it: it never sends REQUESTS, and refuses frames
        /// of version 6 as that release did — for tests of mixed-version groups.
        std::uint32_t protocol = 0;
        /// §0.2 broken: this replica speaks its own protocol version whatever its peer
        /// announced — the negative control of the mixed-version tests.
        bool no_version_negotiation = false;
    };
    test_hooks test_only;

    /// What is wrong with these options, or an empty string when they are consistent.
    std::string problem() const {
        if (finalize_wait_ticks == 0) return "finalize_wait_ticks must be at least 1";
        if (notification_timeout_min_ticks == 0)
            return "notification_timeout_min_ticks must be at least 1";
        if (notification_timeout_max_ticks < notification_timeout_min_ticks)
            return "notification_timeout_max_ticks must be >= notification_timeout_min_ticks";
        if (finalize_wait_ticks > notification_timeout_max_ticks)
            return "finalize_wait_ticks must be <= notification_timeout_max_ticks";
        if (sync_limit_ticks < 2)
            return "sync_limit_ticks must be at least 2 (a heartbeat goes out every tick)";
        if (transfer_timeout_ticks == 0) return "transfer_timeout_ticks must be at least 1";
        if (max_clock_drift_ppm > 1'000'000)
            return "max_clock_drift_ppm must be at most 1'000'000 (clocks within a factor 2)";
        if (read_lease_ticks != 0 && lease_duration_ticks() == 0)
            return "read_lease_ticks leaves no lease: with the drift bound and two ticks of "
                   "granularity the leader's lease would be empty (raise read_lease_ticks)";
        if (init_limit_ticks < sync_limit_ticks)
            return "init_limit_ticks must be >= sync_limit_ticks (sync takes longer than a "
                   "heartbeat round)";
        if (max_pending_requests == 0) return "max_pending_requests must be at least 1";
        if (max_outstanding_proposals == 0) return "max_outstanding_proposals must be at least 1";
        if (max_forwarded_per_learner == 0) return "max_forwarded_per_learner must be at least 1";
        if (max_learner_backlog == 0) return "max_learner_backlog must be at least 1";
        if (snapshot_chunk_bytes == 0) return "snapshot_chunk_bytes must be at least 1";
        if (snapshot_chunk_bytes > (64u << 20) - 64)
            return "snapshot_chunk_bytes must leave room for framing in a 64 MiB frame";
        if (snapshot_chunks_in_flight == 0)
            return "snapshot_chunks_in_flight must be at least 1";
        if (sync_window_records < wire::sync_ack_every_records)
            return "sync_window_records must be at least sync_ack_every_records (64)";
        if (sync_window_bytes < wire::sync_ack_every_bytes)
            return "sync_window_bytes must be at least sync_ack_every_bytes (256 KiB)";
        if (max_txn_bytes == 0) return "max_txn_bytes must be at least 1";
        if (max_txn_bytes > (64u << 20) - 64)
            return "max_txn_bytes must leave room for framing in a 64 MiB frame";
        if (max_batch_bytes == 0) return "max_batch_bytes must be at least 1";
        if (max_batch_bytes > (64u << 20) - 64)
            return "max_batch_bytes must leave room for framing in a 64 MiB frame";
        if (max_sync_buffer_bytes < max_txn_bytes)
            return "max_sync_buffer_bytes must hold at least one transaction (max_txn_bytes)";
        // What one step of a sync may queue for a learner beyond its window: the proposals
        // in flight, each with its COMMIT, and the handful of sync messages around them.
        if (std::uint64_t{max_learner_backlog} <
            2ull * sync_window_records + 2ull * max_outstanding_proposals + 16)
            return "max_learner_backlog must exceed 2 * (sync_window_records + "
                   "max_outstanding_proposals) + 16: a learner's sync would be dropped for its "
                   "size";
        if (test_only.protocol != 0 &&
            (test_only.protocol < oldest_protocol_version || test_only.protocol > protocol_version))
            return "test_only.protocol must be 0 or a protocol version this build speaks "
                   "(0x10000 to 0x10001)";
        if (test_only.initial_counter >= 0xfffffffeu)
            return "test_only.initial_counter must leave room for a proposal (below 2^32 - 2)";
        return {};
    }

    /// `errc::invalid_options` (and the reason, logged at error level) when inconsistent.
    result<void> validate() const {
        if (auto reason = problem(); !reason.empty()) {
            log(log_level::error, "invalid options: {}", reason);
            return make_error_code(errc::invalid_options);
        }
        return success();
    }
};

}  // namespace zab
