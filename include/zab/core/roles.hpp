// zab/core/roles.hpp — what a leader and a learner remember while they hold their role.
//
// The leader has no single phase (docs/protocol.md §0, §6.3, docs/design.md rule 4): it keeps one
// `learner_link` per connected learner, each going through discovery → synchronization →
// broadcast on its own, while the leader's own epoch moves through choosing the epoch,
// collecting ACKEPOCHs and collecting NEWLEADER ACKs. The learner has one leader and one
// stage. These are plain data; the phase policies (discovery.hpp, synchronization.hpp,
// broadcast.hpp) hold the code.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/client.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/options.hpp"
#include "zab/core/quorum.hpp"
#include "zab/core/ring.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// The leader's view of one learner connection.
struct learner_link {
    enum class stage : std::uint8_t {
        awaiting_epoch,     ///< FOLLOWERINFO in; LEADERINFO not yet sent (epoch not durable)
        awaiting_ack_epoch, ///< LEADERINFO sent
        awaiting_sync,      ///< ACKEPOCH in; waits for the epoch quorum before its sync
        streaming_snapshot, ///< SNAP chunks going out as SNAPACKs come back (§5.2 step 5)
        streaming_history,  ///< committed history going out as SYNCACKs come back
        awaiting_newleader_ack,  ///< sync traffic and NEWLEADER queued
        awaiting_uptodate,  ///< NEWLEADER acknowledged; UPTODATE once the leader is established
        broadcasting,       ///< UPTODATE sent
    };

    /// The stage changes the protocol has (§4, §5.2): each forward, none back (a learner that
    /// starts over gets a new link).
    static constexpr bool may_move(stage from, stage to) noexcept {
        switch (to) {
            case stage::awaiting_epoch: return false;
            case stage::awaiting_ack_epoch: return from == stage::awaiting_epoch;
            case stage::awaiting_sync: return from == stage::awaiting_ack_epoch;
            case stage::streaming_snapshot: return from == stage::awaiting_sync;
            case stage::streaming_history:
                return from == stage::awaiting_sync || from == stage::streaming_snapshot;
            case stage::awaiting_newleader_ack:
                return from == stage::awaiting_sync || from == stage::streaming_snapshot ||
                       from == stage::streaming_history;
            case stage::awaiting_uptodate: return from == stage::awaiting_newleader_ack;
            case stage::broadcasting: return from == stage::awaiting_uptodate;
        }
        return false;
    }

    /// The only way the stage changes: asserts that the protocol has this transition (a
    /// broken one is a bug of zab, never of the learner: its messages are checked first).
    void move_to(stage next) {
        ZAB_ASSERT(may_move(at, next), "learner link: a stage transition the protocol does not have");
        at = next;
    }

    peer_id id = 0;
    connection_id connection = 0;
    learner_type type = learner_type::participant;
    stage at = stage::awaiting_epoch;  ///< changed only by move_to
    epoch_t accepted_epoch = 0;     ///< from FOLLOWERINFO
    zxid last_logged;               ///< from ACKEPOCH
    bool forwarding = false;        ///< gets every new PROPOSAL/COMMIT (or INFORM) from now on
    /// Highest proposal this learner acknowledged on this link: it holds every proposal up to
    /// it durably (an ACK covers the prefix, FIFO). The leader's commit point is the highest
    /// zxid a quorum's `last_acked` reaches (broadcast.hpp); a new link starts from nothing.
    zxid last_acked;
    /// The last zxid of everything queued for it before NEWLEADER (its synced history and
    /// the proposals in flight then): once its ACK of NEWLEADER is in, it holds all of it
    /// durably (§5.3), so a learner synced to the last proposal is caught up without an ACK
    /// of its own on this link (a leadership transfer's target, issue 34 defect 8).
    zxid synced_through;
    /// Proposals it forwarded that are still outstanding (max_forwarded_per_learner).
    std::size_t forwarded_outstanding = 0;
    std::uint64_t last_heard_tick = 0;
    std::uint64_t acked_round = 0;  ///< highest heartbeat round it answered (§7 quorum rounds)
    /// Highest heartbeat round it answered that counts toward the read lease (§7.1): one
    /// sent after UPTODATE (`lease_rounds_from` on), so received, FIFO, by a synced learner —
    /// one that keeps a promise (and, its epochs durable, keeps one across a restart).
    std::uint64_t lease_round = 0;
    std::uint64_t lease_rounds_from = 0;  ///< set when UPTODATE is sent
    /// Its FOLLOWERINFO's options against the leader's (§4.2, discovery.hpp): `refused` when
    /// its agreed_fingerprint differs (its ACKEPOCH is refused: it is never synced);
    /// `lease_agreed` false when its lease options differ (its answers never count toward
    /// the read lease, §7.1); `conflict` the first difference found, if any.
    bool refused = false;
    bool lease_agreed = true;
    std::optional<options_conflict> conflict;
    /// The protocol version this link speaks: the lower of the learner's (FOLLOWERINFO or
    /// OBSERVERINFO) and the leader's own (§0.2).
    std::uint32_t protocol = oldest_protocol_version;
    /// SNAP flow control: bytes of the snapshot queued as chunks, and confirmed by SNAPACK.
    std::uint64_t snapshot_queued = 0;
    std::uint64_t snapshot_acknowledged = 0;
    /// While streaming: the snapshot (shared with its source; chunks are copied out of it
    /// one at a time) and the zxid it was taken at.
    shared_bytes snapshot;
    zxid snapshot_base;
    /// History flow control (§5.2 steps 3–5): the last committed record queued for the
    /// learner, and the records queued that its SYNCACKs have not confirmed yet, oldest first.
    zxid history_queued;
    std::deque<std::pair<zxid, std::uint64_t>> history_unacked;  ///< (zxid, bytes)
    std::uint64_t history_unacked_bytes = 0;
};

/// Name of a leader-side learner stage, for logs and status output.
constexpr const char* to_string(learner_link::stage s) noexcept {
    switch (s) {
        case learner_link::stage::awaiting_epoch: return "awaiting_epoch";
        case learner_link::stage::awaiting_ack_epoch: return "awaiting_ack_epoch";
        case learner_link::stage::awaiting_sync: return "awaiting_sync";
        case learner_link::stage::streaming_snapshot: return "streaming_snapshot";
        case learner_link::stage::streaming_history: return "streaming_history";
        case learner_link::stage::awaiting_newleader_ack: return "awaiting_newleader_ack";
        case learner_link::stage::awaiting_uptodate: return "awaiting_uptodate";
        case learner_link::stage::broadcasting: return "broadcasting";
    }
    return "?";
}

/// Why a learner's last syncs ended before it was synced, kept by the leader across the
/// learner's connections (issue 15 defect 2: a learner that cannot sync is reported).
struct learner_sync_trouble {
    std::uint64_t failures = 0;   ///< syncs in a row that ended before UPTODATE
    const char* last_reason = "";
};

/// A sync waiting at the leader for a heartbeat round that a quorum answers (§7): answered
/// once every voter of some quorum has answered round `round` or later.
struct pending_sync {
    peer_id origin = 0;          ///< the learner that forwarded it, or the leader itself
    connection_id connection = 0;
    request_id id = 0;           ///< the origin's request id
    std::uint64_t round = 0;
};

/// A proposal of the leader's epoch that is not committed yet.
struct outstanding_proposal {
    log_record record;      ///< zxid and the txn bytes (a slice of `frame`)
    shared_bytes frame;     ///< the encoded PROPOSAL, sent as is to every follower
    bool frame_is_batch = false;  ///< `frame` is a PROPOSALS batch this proposal is one of
    storage_op log_op = 0;  ///< the leader's own append
    peer_id origin = 0;     ///< the learner that forwarded it (0: proposed at the leader)
    connection_id origin_connection = 0;  ///< on which of its connections
};

/// Everything a leader keeps while LEADING.
struct leader_state {
    /// The leader's own progress towards leading its epoch (§4.3–§4.6, §5.5). Its learners
    /// each have their own stage (learner_link::stage); this one is the leader's.
    enum class stage : std::uint8_t {
        gathering_epoch,     ///< FOLLOWERINFOs raise the epoch until a quorum of voters is in
        writing_epoch,       ///< the epoch is closed; acceptedEpoch = epoch is being written
        collecting_ack_epochs,   ///< acceptedEpoch durable: LEADERINFO out, ACKEPOCHs coming in
        writing_current_epoch,   ///< a quorum promised; currentEpoch = epoch is being written
        collecting_newleader_acks,  ///< currentEpoch durable: waiting for a NEWLEADER quorum
        established,         ///< a quorum acknowledged NEWLEADER: proposing (§5.5, §6)
    };

    /// The leader's stages follow each other in order, none skipped, none back (a leader that
    /// gives up goes back to LOOKING; leading again is a new leader_state).
    static constexpr bool may_move(stage from, stage to) noexcept {
        return static_cast<int>(to) == static_cast<int>(from) + 1;
    }

    /// The only way the stage changes: asserts that the protocol has this transition.
    void move_to(stage next) {
        ZAB_ASSERT(may_move(at, next), "leader: a stage transition the protocol does not have");
        at = next;
    }

    /// At `s` or past it.
    bool reached(stage s) const noexcept { return at >= s; }
    bool established() const noexcept { return at == stage::established; }

    stage at = stage::gathering_epoch;  ///< changed only by move_to
    epoch_t epoch = 0;              ///< the epoch it proposes (strictly above every accepted)
    peer_set epoch_voters;          ///< voters whose FOLLOWERINFO counted (§4.3), with itself
    storage_op accepted_write = 0;  ///< the write of acceptedEpoch = epoch (from writing_epoch)
    peer_set epoch_acks;            ///< voters whose ACKEPOCH counted (§4.6), with itself
    storage_op current_write = 0;   ///< the write of currentEpoch = epoch (from writing_current_epoch)
    peer_set newleader_acks;        ///< voters that acknowledged NEWLEADER (§5.5)
    /// §4 initLimit: established by this tick (pushed back while a sync makes progress), or
    /// back to LOOKING.
    std::uint64_t establish_deadline = 0;
    /// Until established: the voters whose latest known vote is for this leader (the
    /// election's, then every notification since), itself included, and the election round
    /// that made it leader (ZOOKEEPER-3109: a leader a quorum no longer votes for gives up).
    peer_set loyal_voters;
    std::uint64_t election_round = 0;
    std::vector<learner_link> links;
    /// Learners whose syncs keep failing (failures in a row, reset once one is synced).
    std::vector<std::pair<peer_id, learner_sync_trouble>> sync_trouble;
    zxid last_proposed;
    /// How many of `outstanding`, from the front, carry the leader's own (durable) ack.
    std::size_t self_acked_count = 0;
    /// A voter's acknowledged progress (or the leader's own) moved since the commit point
    /// was last computed: only then can it move (broadcast.hpp, quorum_acked).
    bool progress_moved = false;
    ring<outstanding_proposal> outstanding;
    /// Recently committed records, contiguous, oldest first (§5.1 committedLog). At
    /// establishment: the leader's whole history (it all became committed, §5.5).
    ring<log_record> committed;
    /// The zxid just before `committed`'s first record (a snapshot's, an evicted record's,
    /// or zxid{} when the window starts at the beginning).
    zxid committed_base;
    std::uint64_t ping_round = 0;
    /// When the leader next invites the members that do not follow it (§9 step 8).
    std::uint64_t next_invitation_tick = 0;
    std::vector<pending_sync> syncs;  ///< syncs waiting for a quorum round (§7)
    bool round_wanted = false;        ///< start a heartbeat round now (a sync is waiting)

    /// The read lease (§7.1; options::read_lease_ticks): lease syncs are answered without a
    /// quorum round while `now_tick < until`.
    struct read_lease {
        std::uint64_t until = 0;
        /// Only rounds from this one on count: a lease is revoked by moving it past every
        /// round sent so far (the quorum system changed, a transfer began).
        std::uint64_t rounds_from = 1;
        /// ctx.quorums_generation() when the lease was last computed.
        std::uint64_t quorums_generation = 0;
        /// The tick each heartbeat round went out in: (first round of a tick, that tick),
        /// oldest first; only the last lease_duration_ticks are kept.
        std::deque<std::pair<std::uint64_t, std::uint64_t>> round_ticks;
    };
    read_lease lease;

    /// Records a leader keeps in memory for DIFF (ZooKeeper's commitLogCount, §5.1).
    static constexpr std::size_t committed_window_max = 500;

    /// Adds a committed record to the window, evicting the oldest beyond its bound.
    void remember_committed(log_record record) {
        committed.push_back(std::move(record));
        if (committed.size() > committed_window_max) {
            committed_base = committed.front().id;
            committed.pop_front();
        }
    }

    /// A leadership transfer in progress (§6.4): new writes are refused (`transferring`) until
    /// `target` holds every proposal, then the leader hands over; at `deadline` it gives up
    /// and takes writes again.
    struct leadership_transfer {
        peer_id target = 0;
        std::uint64_t deadline = 0;
        /// A committed reconfiguration left this leader without a vote (§9): it cannot take
        /// writes again, so a hand-off that times out ends in an election instead.
        bool leaving = false;
    };
    std::optional<leadership_transfer> transfer;

    /// The link to learner `id`, while it is connected (at most one: check_invariants).
    learner_link* find_link(peer_id id) noexcept {
        for (auto& link : links)
            if (link.id == id) return &link;
        return nullptr;
    }

    /// The last committed zxid of the history (the window's end).
    zxid max_committed() const { return committed.empty() ? committed_base : committed.back().id; }
};

/// How a learner's last synchronization with its leader went (§5.2): what
/// `peer_status::last_sync` shows, and what the info line logged at UPTODATE says.
struct sync_summary {
    enum class method : std::uint8_t { diff, trunc, snap };
    method how = method::diff;
    peer_id leader = 0;
    epoch_t epoch = 0;                 ///< the leader's epoch
    zxid truncated_to;                 ///< TRUNC: where the log was cut
    std::uint64_t snapshot_bytes = 0;  ///< SNAP: the snapshot's size
    zxid snapshot_at;                  ///< SNAP: the snapshot's last transaction
    std::uint64_t records = 0;         ///< proposals streamed after the DIFF, TRUNC or SNAP
    std::uint64_t bytes = 0;           ///< their transactions' bytes
    zxid synced_to;                    ///< the synced history's last zxid, at NEWLEADER
    /// Ticks from the DIFF, TRUNC or SNAP to UPTODATE (the leader's establishment counts).
    std::uint64_t ticks = 0;
    friend bool operator==(const sync_summary&, const sync_summary&) = default;
};

/// "DIFF", "TRUNC" or "SNAP", as the frames are named in docs/protocol.md §5.2.
constexpr const char* to_string(sync_summary::method m) noexcept {
    switch (m) {
        case sync_summary::method::diff: return "DIFF";
        case sync_summary::method::trunc: return "TRUNC";
        case sync_summary::method::snap: return "SNAP";
    }
    return "?";
}

/// Everything a learner keeps while FOLLOWING or OBSERVING.
struct learner_state {
    enum class stage : std::uint8_t {
        awaiting_leader_info,  ///< FOLLOWERINFO sent (or waiting for the connection)
        awaiting_sync,         ///< ACKEPOCH sent; DIFF/TRUNC/SNAP comes next
        syncing,               ///< sync traffic arriving, buffered until NEWLEADER
        awaiting_uptodate,     ///< NEWLEADER handled (its ACK goes out once durable)
        broadcasting,          ///< UPTODATE received: serving
    };

    /// The stage changes the protocol has (§4.5, §5.3): each forward, none back (a new
    /// leader means a new learner_state).
    static constexpr bool may_move(stage from, stage to) noexcept {
        switch (to) {
            case stage::awaiting_leader_info: return false;
            case stage::awaiting_sync: return from == stage::awaiting_leader_info;
            case stage::syncing: return from == stage::awaiting_sync;
            case stage::awaiting_uptodate: return from == stage::syncing;
            case stage::broadcasting: return from == stage::awaiting_uptodate;
        }
        return false;
    }

    /// The only way the stage changes: asserts that the protocol has this transition.
    void move_to(stage next) {
        ZAB_ASSERT(may_move(at, next), "learner: a stage transition the protocol does not have");
        at = next;
    }
    peer_id leader = 0;
    stage at = stage::awaiting_leader_info;  ///< changed only by move_to
    /// This role began with a HANDOVER (§6.4), not an election: until the new leader answers,
    /// a lost connection to it is retried (it may not have taken over yet) instead of
    /// starting an election; initLimit still bounds the wait.
    bool handed_over = false;
    /// A HANDOVER received while log writes were still in flight: adopted once they are
    /// durable, so that the new role advertises exactly what a crash would recover (§2).
    std::optional<wire::handover> handover;
    bool info_sent = false;
    /// What this learner joined its leader as (FOLLOWERINFO or OBSERVERINFO): a
    /// reconfiguration that changes it sends the learner back to election, to join again as
    /// what it is now (§9).
    learner_type joined_as = learner_type::participant;
    epoch_t epoch = 0;                 ///< the leader's new epoch (LEADERINFO)
    /// The protocol version spoken with the leader: the lower of its LEADERINFO's and this
    /// replica's own (§0.2); REQUESTS go to it only from protocol_forwarded_batches on.
    std::uint32_t leader_protocol = oldest_protocol_version;
    /// Everything up to here is committed by the leader's word: the sync target (DIFF/TRUNC
    /// history, SNAP) and every COMMIT received.
    zxid known_committed;
    std::vector<log_record> buffered;  ///< proposals received during sync, not yet logged
    std::uint64_t buffered_bytes = 0;  ///< their transactions' bytes (max_sync_buffer_bytes)
    /// History received since the last SYNCACK (flow control, messages.hpp).
    std::uint64_t unacked_records = 0;
    std::uint64_t unacked_bytes = 0;
    /// Logged or buffered proposals not yet applied, oldest first: a COMMIT names one of them.
    ring<log_record> unapplied;

    /// Whether `unapplied` holds the proposal `id`: a binary search by position (it is in
    /// ascending zxid order), not a scan of up to a window of proposals per COMMIT.
    bool holds_unapplied(zxid id) const {
        std::size_t low = 0;
        std::size_t high = unapplied.size();
        while (low < high) {
            const std::size_t middle = low + (high - low) / 2;
            if (unapplied[middle].id < id)
                low = middle + 1;
            else
                high = middle;
        }
        return low < unapplied.size() && unapplied[low].id == id;
    }
    std::uint64_t last_heard_tick = 0;
    /// §4 initLimit: UPTODATE by this tick (pushed back while the sync makes progress), or
    /// back to LOOKING.
    std::uint64_t establish_deadline = 0;
    /// NEWLEADER handling (§5.3): the log op that holds the history, then the epoch write.
    storage_op newleader_log_op = 0;
    storage_op newleader_epoch_op = 0;
    bool newleader_pending = false;
    std::optional<log_snapshot> snapshot;    ///< this sync installed a snapshot (SNAP)
    /// This sync so far (from the DIFF, TRUNC or SNAP) and the tick it began at.
    sync_summary sync;
    std::uint64_t sync_began_tick = 0;
    /// A SNAP arriving in chunks; `snapshot` is set once the last one is in. (No default
    /// member initializers: clang 14 cannot default-construct a nested class that has them
    /// inside std::optional of the enclosing one.)
    struct incoming_snapshot {
        zxid last_included;
        std::uint64_t total_size;
        std::vector<std::byte> bytes;
    };
    std::optional<incoming_snapshot> receiving;
};

/// Name of a learner's own stage, for logs and status output.
constexpr const char* to_string(learner_state::stage s) noexcept {
    switch (s) {
        case learner_state::stage::awaiting_leader_info: return "awaiting_leader_info";
        case learner_state::stage::awaiting_sync: return "awaiting_sync";
        case learner_state::stage::syncing: return "syncing";
        case learner_state::stage::awaiting_uptodate: return "awaiting_uptodate";
        case learner_state::stage::broadcasting: return "broadcasting";
    }
    return "?";
}

/// Name of the leader's own stage, for logs and status output.
constexpr const char* to_string(leader_state::stage s) noexcept {
    switch (s) {
        case leader_state::stage::gathering_epoch: return "gathering_epoch";
        case leader_state::stage::writing_epoch: return "writing_epoch";
        case leader_state::stage::collecting_ack_epochs: return "collecting_ack_epochs";
        case leader_state::stage::writing_current_epoch: return "writing_current_epoch";
        case leader_state::stage::collecting_newleader_acks: return "collecting_newleader_acks";
        case leader_state::stage::established: return "established";
    }
    return "?";
}

}  // namespace zab
