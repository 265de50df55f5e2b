// zab/core/status.hpp — what a peer shows of itself: `peer::status()` and `peer::learners()`.
//
// The stable view for drivers, status pages, metrics and tests. Everything else a peer keeps
// (peer_context, leader_state, learner_state) is the core's own: nothing outside the core
// reads it (tests that must reach inside use zab/testing/peer_internals.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <system_error>
#include <vector>

#include "zab/core/concepts.hpp"
#include "zab/core/options.hpp"
#include "zab/core/roles.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// One learner as its leader sees it.
struct learner_status {
    peer_id id = 0;
    learner_type type = learner_type::participant;
    learner_link::stage stage = learner_link::stage::awaiting_epoch;
    zxid last_acked;                   ///< highest proposal it acknowledged on this link
    /// Voters: transactions committed in the leader's epoch that it has not acknowledged;
    /// 0 for observers and before the leader committed anything in its epoch.
    std::uint64_t lag = 0;
    std::uint64_t sync_failures = 0;   ///< its syncs in a row that ended before UPTODATE
    const char* last_sync_failure = "";
    /// A SNAP streaming to it: the snapshot's size, the bytes queued to it and the bytes it
    /// confirmed (SNAPACK); all 0 when none is (the leader lets the snapshot go once its last
    /// chunk is queued).
    std::uint64_t snapshot_bytes = 0;
    std::uint64_t snapshot_sent = 0;
    std::uint64_t snapshot_acknowledged = 0;
    /// Its options against the leader's (§4.2): the first that differs, if any. A different
    /// agreed_fingerprint: it counts toward nothing and is refused a sync; different lease
    /// options: its heartbeat answers do not count toward the read lease (§7.1).
    std::optional<options_conflict> conflict{};
    bool lease_counted = true;  ///< its heartbeat answers may count toward the read lease
    /// The protocol version spoken with it: the lower of its own and the leader's (§0.2).
    std::uint32_t protocol = 0;
};


/// A peer's role and progress at one instant.
struct peer_status {
    peer_id id = 0;
    peer_state role = peer_state::looking;
    /// Leading with a quorum (after NEWLEADER's quorum), or following a leader (UPTODATE).
    bool established = false;
    epochs durable_epochs;   ///< accepted and current epoch, as durable
    peer_id leader = 0;      ///< the leader it follows or is, once established; else 0
    zxid last_logged, last_committed, last_applied;
    /// A learner's own stage with its leader; nothing unless FOLLOWING or OBSERVING.
    std::optional<learner_state::stage> learner_stage;
    /// A leader's own stage towards leading its epoch; nothing unless LEADING.
    std::optional<leader_state::stage> leader_stage;
    std::vector<learner_status> learners;  ///< a leader's learners, connected now
    std::error_code failure;               ///< set once storage failed (terminal)
    std::uint64_t now_tick = 0;
    std::uint64_t config_version = 0;      ///< the committed configuration's version (§9)
    bool reconfig_in_progress = false;     ///< a reconfiguration logged here is not committed yet
    bool disk_stalled = false;             ///< storage writes stalled for disk_stall_ticks (§6.5)
    bool removed = false;                  ///< a reconfiguration removed this replica: it stopped
    std::uint64_t outstanding_proposals = 0;  ///< leader: proposed, not yet committed
    /// Transaction bytes applied since the last compaction (or restore): about how much
    /// history the log keeps beyond its snapshot.
    std::uint64_t log_bytes_since_snapshot = 0;
    /// The leader this replica last refused to follow, because that leader's
    /// options::agreed_fingerprint differs from its own (§4.5); cleared once it accepts a
    /// leader or leads.
    std::optional<options_conflict> refused_leader{};
    /// §0.2: the protocol version this replica speaks (protocol_version, unless a test
    /// hook), the one spoken with its leader (a learner's; 0 otherwise: a leader's learners
    /// say theirs), and the last peer refused for its version, if any (counter
    /// `protocol_refusals`).
    std::uint32_t protocol = 0;
    std::uint32_t leader_protocol = 0;
    std::optional<protocol_refusal> last_protocol_refusal{};
    /// How this replica last synced with a leader (DIFF, TRUNC or SNAP; records, bytes,
    /// ticks), from the UPTODATE that ended it; nothing until it has followed one.
    std::optional<sync_summary> last_sync{};
};

}  // namespace zab
