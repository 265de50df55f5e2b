// zab/core/messages.hpp — every message of the protocol, as plain types.
//
// Byte fields are `byte_view`s: a decoded message points into its frame buffer (no copy of
// transaction bytes); the code that keeps a message beyond the frame's lifetime keeps the
// frame's `shared_bytes` with it. Sentinels (-1 in ZooKeeper) are std::optional here
// (docs/protocol.md §1). The wire encoding is in codec.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <variant>

#include "zab/core/bytes.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// The protocol version this build speaks, carried in FOLLOWERINFO, OBSERVERINFO and
/// LEADERINFO (ZooKeeper's field; 0x10000 in ZooKeeper and in zab before 0.2). A leader and
/// a learner use the lower of their two versions on their connection (docs/protocol.md
/// §0.2): 0x10001 adds REQUESTS and REPLIES, the forwarded writes of one turn in one frame.
inline constexpr std::uint32_t protocol_version = 0x10001;

/// The oldest protocol version this build still speaks: a peer announcing an older one is
/// refused, with both versions named (§0.2).
inline constexpr std::uint32_t oldest_protocol_version = 0x10000;

/// The protocol version that added REQUESTS and REPLIES (forwarded_batch, reply_batch).
inline constexpr std::uint32_t protocol_forwarded_batches = 0x10001;

}  // namespace zab

/// The messages peers exchange, one struct per wire type (encoded by codec.hpp). Their own
/// namespace keeps protocol names (`commit`, `ack`, `diff`, `trunc`, `ping`) from colliding
/// with everything else a program calls by those names.
namespace zab::wire {

// --- Election (§3) -------------------------------------------------------------------------

/// A Fast Leader Election vote as sent on the wire (§3.1). The sender is the connection's peer.
struct notification {
    peer_state state = peer_state::looking;  ///< sender's state
    peer_id leader = 0;                      ///< proposed leader's sid
    zxid leader_zxid;                        ///< proposed leader's last logged zxid
    std::uint64_t round = 0;                 ///< sender's election round (logicalclock)
    epoch_t leader_epoch = 0;                ///< proposed leader's current epoch (peerEpoch)
    friend bool operator==(const notification&, const notification&) = default;
};

// --- Discovery (§4) ------------------------------------------------------------------------

/// The options every replica of a group must run with, compared in discovery (§4.2): the
/// read lease's (options::read_lease_ticks and max_clock_drift_ppm, §7.1) and the
/// application's replicated behaviour as one opaque number (options::agreed_fingerprint, e.g.
/// zab::session_fingerprint of the session options, §6.7). Sent by the learner in
/// FOLLOWERINFO / OBSERVERINFO and by the leader in LEADERINFO.
struct agreed_options {
    std::uint32_t read_lease_ticks = 0;
    std::uint32_t max_clock_drift_ppm = 0;
    std::uint64_t fingerprint = 0;
    friend bool operator==(const agreed_options&, const agreed_options&) = default;
};

/// Learner → leader, first message of discovery: the learner's accepted epoch and the
/// options it must share with the leader (§4.2).
struct follower_info {
    epoch_t accepted_epoch = 0;
    std::uint32_t protocol = protocol_version;
    agreed_options agreed{};
    friend bool operator==(const follower_info&, const follower_info&) = default;
};

/// Like FOLLOWERINFO, from an observer: never counted toward any quorum (§4.3, §8).
struct observer_info {
    epoch_t accepted_epoch = 0;
    std::uint32_t protocol = protocol_version;
    agreed_options agreed{};
    friend bool operator==(const observer_info&, const observer_info&) = default;
};

/// Leader → learner: the new epoch the leader proposes (the paper's NEWEPOCH, §4.4), and
/// the leader's options that the learner must share (§4.5).
struct leader_info {
    epoch_t new_epoch = 0;
    std::uint32_t protocol = protocol_version;
    agreed_options agreed{};
    friend bool operator==(const leader_info&, const leader_info&) = default;
};

/// Learner → leader: promise for the new epoch, with the learner's history summary (§4.5).
/// `current_epoch` is empty when the learner had already accepted this epoch (ZooKeeper's -1):
/// such an ACKEPOCH is not counted as a promise.
struct ack_epoch {
    zxid last_logged;
    std::optional<epoch_t> current_epoch;
    friend bool operator==(const ack_epoch&, const ack_epoch&) = default;
};

// --- Synchronization (§5) ------------------------------------------------------------------

/// Leader → learner: keep your log; the proposals that follow bring you to `last`.
struct diff {
    zxid last;
    friend bool operator==(const diff&, const diff&) = default;
};

/// Leader → learner: discard every record after `truncate_to` (§5.2, §5.6).
struct trunc {
    zxid truncate_to;
    friend bool operator==(const trunc&, const trunc&) = default;
};

/// Leader → learner: one chunk of the snapshot, taken at `last_included`, that replaces
/// the learner's state (§5.2 step 5). A snapshot of `total_size` bytes travels as chunks at
/// ascending `offset`s, each at most `options::snapshot_chunk_bytes`, so no frame and no
/// send queue grows with the state; the learner answers each with SNAPACK. An empty
/// snapshot is one chunk of zero bytes.
struct snap {
    zxid last_included;
    std::uint64_t total_size = 0;
    std::uint64_t offset = 0;
    byte_view chunk;
    friend bool operator==(const snap& a, const snap& b) {
        return a.last_included == b.last_included && a.total_size == b.total_size &&
               a.offset == b.offset && as_string_view(a.chunk) == as_string_view(b.chunk);
    }
};

/// Learner → leader: the snapshot's first `received` bytes arrived. The leader keeps at
/// most `options::snapshot_chunks_in_flight` chunks unanswered (flow control).
struct snap_ack {
    std::uint64_t received = 0;
    friend bool operator==(const snap_ack&, const snap_ack&) = default;
};

/// Learner → leader: the synced history up to `received` arrived (SYNCACK). The learner
/// sends one every `sync_ack_every_records` records or `sync_ack_every_bytes` bytes of
/// history; the leader keeps at most `options::sync_window_records` records and
/// `options::sync_window_bytes` bytes of history unanswered (flow control, §5.2).
struct sync_ack {
    zxid received;
    friend bool operator==(const sync_ack&, const sync_ack&) = default;
};
/// When a syncing learner answers with SYNCACK: protocol constants, not options, so that a
/// leader's window (validated to be at least these) always gets an answer.
inline constexpr std::uint64_t sync_ack_every_records = 64;
inline constexpr std::uint64_t sync_ack_every_bytes = 256 * 1024;

/// Leader → learner: all sync traffic is queued; acknowledge once it is durable (§5.3).
/// `epoch_zxid` is `(e, 0)`.
struct new_leader {
    zxid epoch_zxid;
    friend bool operator==(const new_leader&, const new_leader&) = default;
};

/// Learner → leader: acknowledges a PROPOSAL (counter > 0) or NEWLEADER / UPTODATE (`(e, 0)`).
/// Channels are FIFO, so an ACK of `z` covers every earlier proposal on the connection.
struct ack {
    zxid acked;
    friend bool operator==(const ack&, const ack&) = default;
};

/// Leader → learner: a quorum acknowledged NEWLEADER; start serving (§5.3).
struct up_to_date {
    friend bool operator==(const up_to_date&, const up_to_date&) = default;
};

// --- Broadcast (§6) ------------------------------------------------------------------------

/// Leader → follower: a transaction to log and acknowledge.
struct proposal {
    zxid id;
    byte_view txn;
    friend bool operator==(const proposal& a, const proposal& b) {
        return a.id == b.id && as_string_view(a.txn) == as_string_view(b.txn);
    }
};

/// Leader → follower: a run of `count` consecutive transactions of one epoch, zxids `first`,
/// `first.next()`, …, to log and acknowledge as if each came in its own PROPOSAL (§6.1). The
/// leader batches what it proposes in one step (peer::submit_batch). `txns` holds `count`
/// entries, each a u32 length and the transaction's bytes; the decoder checks that they fill
/// it exactly, that `count` is at least 1, that `first.counter()` is not 0 and that the run
/// stays inside `first`'s epoch (for_each_batch_txn in codec.hpp walks it).
struct proposal_batch {
    zxid first;
    std::uint32_t count = 0;
    byte_view txns;
    friend bool operator==(const proposal_batch& a, const proposal_batch& b) {
        return a.first == b.first && a.count == b.count &&
               as_string_view(a.txns) == as_string_view(b.txns);
    }
};

/// Leader → follower: `id` is committed, and with it every proposal before it (commits come
/// in zxid order, §6.1): a leader that commits a run in one step sends one COMMIT, its last.
struct commit {
    zxid id;
    friend bool operator==(const commit&, const commit&) = default;
};

/// Leader → observer: a committed transaction (§8).
struct inform {
    zxid id;
    byte_view txn;
    friend bool operator==(const inform& a, const inform& b) {
        return a.id == b.id && as_string_view(a.txn) == as_string_view(b.txn);
    }
};

/// What a forwarded REQUEST asks the leader to do. `lease_sync`: a sync that a leader
/// holding a read lease answers at once, without a quorum round (§7.1).
enum class request_kind : std::uint8_t { write = 0, sync = 1, lease_sync = 2 };

/// Learner → leader: a client's write (or sync) forwarded to the leader (§6.1, §7).
/// `request_id` is chosen by the learner and echoed in the answer.
struct forwarded_request {
    std::uint64_t request_id = 0;
    request_kind kind = request_kind::write;
    byte_view txn;
    friend bool operator==(const forwarded_request& a, const forwarded_request& b) {
        return a.request_id == b.request_id && a.kind == b.kind &&
               as_string_view(a.txn) == as_string_view(b.txn);
    }
};

/// Learner → leader, protocol 0x10001 on (§0.2): the client writes a learner forwards in one
/// turn (peer::submit_batch), as REQUEST writes with the consecutive ids `first_request_id`,
/// `first_request_id + 1`, …. `txns` holds `count` entries (at least 1), each a u32 length
/// and the transaction's bytes, filling it exactly (checked by the decoder, as PROPOSALS).
struct forwarded_batch {
    std::uint64_t first_request_id = 0;
    std::uint32_t count = 0;
    byte_view txns;
    friend bool operator==(const forwarded_batch& a, const forwarded_batch& b) {
        return a.first_request_id == b.first_request_id && a.count == b.count &&
               as_string_view(a.txns) == as_string_view(b.txns);
    }
};

/// Heartbeat, both directions (§6.2). The leader sends its last proposed zxid and a round
/// number; the learner echoes the round, which is what a quorum-confirmed sync counts (§7).
struct ping {
    zxid last_proposed;
    std::uint64_t round = 0;
    friend bool operator==(const ping&, const ping&) = default;
};

/// Leader → learner: the sync `request_id` is answered; everything committed before it has
/// already been sent on this connection (§7).
struct sync_answer {
    std::uint64_t request_id = 0;
    friend bool operator==(const sync_answer&, const sync_answer&) = default;
};

/// What the leader did with a forwarded write.
enum class reply_outcome : std::uint8_t {
    accepted = 0,        ///< proposed as `forwarded_reply::id` (a follower has its PROPOSAL first)
    not_leader = 1,      ///< the leader is not established (or steps down): never proposed
    backpressure = 2,    ///< a bound of the leader's was reached: never proposed
    zxid_exhausted = 3,  ///< the epoch's counter is used up (§1): never proposed
    too_large = 4,       ///< above the leader's options::max_txn_bytes: never proposed
    transferring = 5,    ///< the leader is handing over its leadership: never proposed
    invalid_argument = 6,     ///< a reconfiguration that is no valid configuration (§9)
    reconfig_in_progress = 7, ///< another reconfiguration is not committed yet (§9)
    version_mismatch = 8,     ///< a reconfiguration's compare-and-set failed (§9)
    new_config_no_quorum = 9, ///< the new configuration's synced voters are no quorum (§9)
};

/// Leader → learner: the answer to the write REQUEST `request_id` (§6.1). A refusal is
/// definite: the transaction was not proposed and never will be.
struct forwarded_reply {
    std::uint64_t request_id = 0;
    reply_outcome outcome = reply_outcome::accepted;
    zxid id;  ///< the zxid it was proposed as (accepted only)
    friend bool operator==(const forwarded_reply&, const forwarded_reply&) = default;
};

/// Leader → learner, protocol 0x10001 on (§0.2): the answer to the `count` (at least 1)
/// forwarded writes `first_request_id`, … of one REQUESTS frame, all alike: `accepted`, as
/// the consecutive zxids `first`, `first.next()`, … (a PROPOSALS batch, which a follower has
/// first), or one definite refusal for all of them (`first` is then zero). The decoder
/// checks that an accepted run stays in one epoch and never names counter 0.
struct reply_batch {
    std::uint64_t first_request_id = 0;
    std::uint32_t count = 0;
    reply_outcome outcome = reply_outcome::accepted;
    zxid first;
    friend bool operator==(const reply_batch&, const reply_batch&) = default;
};

/// Leader → learner, on every synced link, after the last COMMIT (or INFORM) of the leader's
/// epoch: the leader hands its leadership to `leader` (§6.4). The learner adopts the vote it
/// carries as if an election had decided it: `leader` leads, everyone else follows it. The
/// leader itself follows it too.
struct handover {
    peer_id leader = 0;       ///< the successor: a voter holding every committed transaction
    zxid leader_zxid;         ///< the last zxid committed before the hand-off (the vote's zxid)
    epoch_t leader_epoch = 0; ///< the epoch of the handing leader (the vote's epoch)
    std::uint64_t round = 0;  ///< the handing leader's election round (the vote's round)
    friend bool operator==(const handover&, const handover&) = default;
};

/// Any message. The variant index is not the wire type: see `message_type`.
using message = std::variant<notification, follower_info, observer_info, leader_info, ack_epoch,
                             diff, trunc, snap, snap_ack, sync_ack, new_leader, ack, up_to_date,
                             proposal, commit, inform, forwarded_request, ping, sync_answer,
                             forwarded_reply, handover, proposal_batch, forwarded_batch,
                             reply_batch>;

/// Wire type byte of each message. Stable: never renumber, only add.
enum class message_type : std::uint8_t {
    notification = 1,
    follower_info = 10,
    observer_info = 11,
    leader_info = 12,
    ack_epoch = 13,
    diff = 20,
    trunc = 21,
    snap = 22,
    new_leader = 23,
    ack = 24,
    up_to_date = 25,
    snap_ack = 26,
    sync_ack = 27,
    proposal = 30,
    commit = 31,
    inform = 32,
    forwarded_request = 33,
    ping = 34,
    sync_answer = 35,
    forwarded_reply = 36,
    handover = 37,
    proposal_batch = 38,
    forwarded_batch = 39,  ///< REQUESTS, protocol 0x10001 and frame version 6 on
    reply_batch = 40,      ///< REPLIES, protocol 0x10001 and frame version 6 on
};

namespace detail {
template <typename T> struct message_type_of;
#define ZAB_MESSAGE_TYPE(name) \
    template <> struct message_type_of<name> { static constexpr message_type value = message_type::name; };
ZAB_MESSAGE_TYPE(notification)
ZAB_MESSAGE_TYPE(follower_info)
ZAB_MESSAGE_TYPE(observer_info)
ZAB_MESSAGE_TYPE(leader_info)
ZAB_MESSAGE_TYPE(ack_epoch)
ZAB_MESSAGE_TYPE(diff)
ZAB_MESSAGE_TYPE(trunc)
ZAB_MESSAGE_TYPE(snap)
ZAB_MESSAGE_TYPE(snap_ack)
ZAB_MESSAGE_TYPE(sync_ack)
ZAB_MESSAGE_TYPE(new_leader)
ZAB_MESSAGE_TYPE(ack)
ZAB_MESSAGE_TYPE(up_to_date)
ZAB_MESSAGE_TYPE(proposal)
ZAB_MESSAGE_TYPE(commit)
ZAB_MESSAGE_TYPE(inform)
ZAB_MESSAGE_TYPE(forwarded_request)
ZAB_MESSAGE_TYPE(ping)
ZAB_MESSAGE_TYPE(sync_answer)
ZAB_MESSAGE_TYPE(forwarded_reply)
ZAB_MESSAGE_TYPE(handover)
ZAB_MESSAGE_TYPE(proposal_batch)
ZAB_MESSAGE_TYPE(forwarded_batch)
ZAB_MESSAGE_TYPE(reply_batch)
#undef ZAB_MESSAGE_TYPE
}  // namespace detail

/// The wire type of message type `T`.
template <typename T>
inline constexpr message_type message_type_v = detail::message_type_of<T>::value;

/// The wire type of `m`.
inline message_type type_of(const message& m) noexcept {
    return std::visit([](const auto& v) { return message_type_v<std::decay_t<decltype(v)>>; }, m);
}

/// Upper-case protocol name (FOLLOWERINFO, ACKEPOCH, …) for logs and traces.
constexpr std::string_view to_string(message_type t) noexcept {
    switch (t) {
        case message_type::notification: return "NOTIFICATION";
        case message_type::follower_info: return "FOLLOWERINFO";
        case message_type::observer_info: return "OBSERVERINFO";
        case message_type::leader_info: return "LEADERINFO";
        case message_type::ack_epoch: return "ACKEPOCH";
        case message_type::diff: return "DIFF";
        case message_type::trunc: return "TRUNC";
        case message_type::snap: return "SNAP";
        case message_type::snap_ack: return "SNAPACK";
        case message_type::sync_ack: return "SYNCACK";
        case message_type::new_leader: return "NEWLEADER";
        case message_type::ack: return "ACK";
        case message_type::up_to_date: return "UPTODATE";
        case message_type::proposal: return "PROPOSAL";
        case message_type::commit: return "COMMIT";
        case message_type::inform: return "INFORM";
        case message_type::forwarded_request: return "REQUEST";
        case message_type::ping: return "PING";
        case message_type::sync_answer: return "SYNC";
        case message_type::forwarded_reply: return "REPLY";
        case message_type::handover: return "HANDOVER";
        case message_type::proposal_batch: return "PROPOSALS";
        case message_type::forwarded_batch: return "REQUESTS";
        case message_type::reply_batch: return "REPLIES";
    }
    return "?";
}

}  // namespace zab::wire
