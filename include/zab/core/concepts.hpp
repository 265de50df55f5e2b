// zab/core/concepts.hpp — what an application plugs into zab: Transport, Log, StateMachine.
//
// The rules that hold for all three (docs/design.md rules 1–3, 8):
// - The peer calls these members from its own steps only, on the one thread (or strand)
//   that drives the peer. No member may call back into the peer: results come back later
//   as events that the driver (the simulator, or the Asio runtime) delivers.
// - Nothing may block for long. What takes time (a network write, an fsync) is started
//   by the call and reported later through the peer's event functions.
// - Each concept has an archetype below: the smallest type that models it, checked by
//   static_assert. Copy it as the starting point for your own.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

// --- Transport -----------------------------------------------------------------------------

/// Transport: carries encoded frames between peers of one group.
///
/// The transport keeps (or keeps trying to keep) one connection to every other member, and
/// numbers each connection with a `connection_id` unique for its lifetime. It reports to the
/// driver, which turns them into peer events:
///   - `on_connected(peer, connection)` when a connection is up;
///   - `on_disconnected(peer, connection)` when it is gone (anything in flight is lost);
///   - `on_receive(peer, connection, frame)` for each whole frame, in the order sent.
/// Frames on one connection arrive in order, without loss or duplication, until it breaks:
/// Zab depends on FIFO per connection (docs/protocol.md §0).
///
/// Requirements:
///   t.send(to, connection, frame)
///       Queue `frame` (a complete encoded frame, see codec.hpp) on `connection` to `to`.
///       If that connection is no longer the current one, drop the frame silently: the peer
///       learns of the loss from `on_disconnected`. Never blocks. The transport may keep a
///       reference to `frame` (shared, immutable) until written.
///   t.close(to, connection)
///       Close `connection` (a bad message, or leaving a role). The transport reports the
///       matching `on_disconnected` later, and may reconnect afterwards with a new id.
template <typename T>
concept transport = requires(T& t, peer_id to, connection_id connection,
                             const shared_bytes& frame) {
    { t.send(to, connection, frame) } -> std::same_as<void>;
    { t.close(to, connection) } -> std::same_as<void>;
};

// --- Log store -----------------------------------------------------------------------------

/// Sequence number of a storage operation. The peer numbers its operations 1, 2, 3, … and
/// every completion names the operation it completes (docs/design.md rule 3): after a truncation,
/// "durable up to zxid Z" would be ambiguous, "operation #N is durable" is not.
using storage_op = std::uint64_t;

/// One transaction in the log. `txn` shares the bytes of the frame it arrived in.
struct log_record {
    zxid id;
    shared_bytes txn;
};

/// A state-machine snapshot that stands in for every record up to `last_included`.
struct log_snapshot {
    zxid last_included;
    shared_bytes state;
};

/// The two epochs a replica must keep durable (docs/protocol.md §2).
struct epochs {
    epoch_t accepted = 0;  ///< last epoch promised in ACKEPOCH (or chosen, on a leader)
    epoch_t current = 0;   ///< last epoch whose NEWLEADER was acknowledged (or led)
    friend bool operator==(const epochs&, const epochs&) = default;
};

/// Log store: the replica's durable history and its epoch state.
///
/// Log operations (`append`, `truncate_after`) take effect in the order they are issued and
/// are visible to `read` and `last_zxid` at once, but are durable only when the driver
/// delivers `peer.on_log_durable(op)` for a `make_durable(op)` that covers them. That completion
/// means every log operation numbered ≤ op is on stable storage. The peer issues at most one
/// append batch and one `make_durable` per step (docs/design.md rule 2): that is the group commit.
/// Epoch writes are independent of log operations: their completion
/// `peer.on_epochs_durable(op)` may arrive before or after log completions issued earlier.
/// A failed fsync or truncation is reported as `peer.on_storage_failed(error)`; it is
/// terminal for the replica (docs/design.md rule 6), the log must not retry it.
///
/// Requirements:
///   log.append(op, records)     Append records, zxids strictly increasing and above
///                               `last_zxid()`. Copies or shares the `shared_bytes`.
///   log.truncate_after(op, z)   Remove every record with zxid > z.
///   log.install_snapshot(op, z, state, following)
///                               Replace the whole log by a snapshot taken at `z` followed by
///                               the records `following` (a SNAP sync with the history after
///                               it, §5.3): every old record goes, `last_zxid()` becomes the
///                               last of `following` (z if empty), later appends continue
///                               after it. Atomic at a crash, as one operation: recovery
///                               finds the old log, or the snapshot with *all* of
///                               `following`, never a mix, and never a stale record after z
///                               (§11.1, §11.5, ZOOKEEPER-2832/2872). A snapshot that lands
///                               without the history after it would leave the replica's
///                               durable current epoch standing for a history it lost.
///   log.make_durable(op)        Request durability of every log operation ≤ op.
///   log.write_epochs(op, e)     Replace the stored epochs atomically (temp file + fsync +
///                               rename + directory fsync, or equivalent).
///   log.last_zxid()             zxid of the last record appended and not truncated
///                               (zxid{} for an empty log), durable or not.
///   log.stored_epochs()         The epochs as last written (as found at open, initially).
///   log.snapshot()              The snapshot in effect, if any: `std::optional<log_snapshot>`.
///   log.read(after, max)        Up to `max` records with zxid > `after`, ascending, as a
///                               `result<std::vector<log_record>>`: `errc::compacted` when
///                               `after` lies below the snapshot, another error when the
///                               range cannot be read (corrupt).
template <typename L>
concept log_store = requires(L& log, const L& const_log, storage_op op,
                             std::span<const log_record> records, zxid z, epochs e,
                             std::size_t max, const shared_bytes& state) {
    { log.append(op, records) } -> std::same_as<void>;
    { log.truncate_after(op, z) } -> std::same_as<void>;
    { log.install_snapshot(op, z, state, records) } -> std::same_as<void>;
    { log.make_durable(op) } -> std::same_as<void>;
    { log.write_epochs(op, e) } -> std::same_as<void>;
    { const_log.last_zxid() } -> std::same_as<zxid>;
    { const_log.stored_epochs() } -> std::same_as<epochs>;
    { const_log.snapshot() } -> std::same_as<std::optional<log_snapshot>>;
    { const_log.read(z, max) } -> std::same_as<result<std::vector<log_record>>>;
};

/// Optional: a log store that can compact itself, so that a long-lived replica's log stays
/// bounded (peer option `snapshot_every`).
///
///   log.compact(z, state)   `state` is the state machine's snapshot as of `z`, a record of
///                           this log above its snapshot. From now on it is the snapshot in
///                           effect (`read` below `z` answers `errc::compacted`) and the
///                           records up to `z` may go. Not a log operation: no completion;
///                           a crash before it is durable must leave the log as it was
///                           (records up to `z` included), never the snapshot without the
///                           records it stands for. Returns false, changing nothing, when it
///                           cannot compact at `z`.
template <typename L>
concept compactable_log =
    log_store<L> && requires(L& log, zxid z, const shared_bytes& state) {
        { log.compact(z, state) } -> std::same_as<bool>;
    };

/// Optional: a log store that reads its last records without reading the ones before them.
/// A new leader keeps the last records of its log in memory for DIFF (§5.1); without this it
/// reads the whole log after the snapshot to find them.
///
///   log.read_last(max)   The last `max` records after the snapshot (all of them if fewer),
///                        ascending: what `read(after, max)` returns for the `after` whose
///                        answer ends at `last_zxid()`. Errors as `read`'s.
template <typename L>
concept tail_readable_log = log_store<L> && requires(const L& log, std::size_t max) {
    { log.read_last(max) } -> std::same_as<result<std::vector<log_record>>>;
};

/// Optional: a log store that knows where zab's own transactions are (the reconfigurations,
/// `is_system_txn` in zab/core/reconfig.hpp), so that a start recovers the membership (§9)
/// by reading those records only; without this it reads the whole log after the snapshot.
///
///   log.system_txns()    The zxids of the records after the snapshot whose transaction is a
///                        system transaction, ascending, as a `std::vector<zxid>`. Kept
///                        exact through every log operation, compaction and reopening.
template <typename L>
concept system_txn_indexed_log = log_store<L> && requires(const L& log) {
    { log.system_txns() } -> std::same_as<std::vector<zxid>>;
};

// --- State machine -------------------------------------------------------------------------

/// State machine: the application's replicated state.
///
/// Only committed transactions reach it, exactly once each, in zxid order, on every replica
/// (docs/design.md rule 5). A restarted replica with a fresh in-memory state reports zxid{} from
/// `last_applied` and is brought forward again from the log and the leader.
///
/// Requirements:
///   sm.apply(z, txn)       Apply committed transaction `z`. Must not fail for a reason
///                          other replicas would not share: a deterministic rejection is
///                          an outcome the application encodes in its own state. Returns
///                          void, or `shared_bytes`: a result for the writer (see
///                          `result_machine`).
///   sm.last_applied()      zxid of the last applied (or restored) transaction.
///   sm.snapshot()          Serialized state as of `last_applied()`.
///   sm.restore(z, bytes)   Replace the whole state by a snapshot of this machine's; `z` is
///                          what `last_applied()` returned when it was taken (the core keeps
///                          that label beside the bytes: a machine that is no
///                          `system_txn_machine` may be behind the core's zxid by zab's own
///                          transactions, and still gets its own label back). An error for
///                          bytes that do not decode (the state is then unchanged).
template <typename S>
concept state_machine = requires(S& sm, const S& const_sm, zxid z, byte_view bytes) {
    sm.apply(z, bytes);
    requires std::same_as<decltype(sm.apply(z, bytes)), void> ||
                 std::same_as<decltype(sm.apply(z, bytes)), shared_bytes>;
    { const_sm.last_applied() } -> std::same_as<zxid>;
    { const_sm.snapshot() } -> std::same_as<shared_bytes>;
    { sm.restore(z, bytes) } -> std::same_as<result<void>>;
};

/// Optional: a state machine whose `apply` returns a result for the writer, as bytes it
/// encodes itself (hashicorp/raft's `ApplyFuture.Response()`, NuRaft's commit buffer).
/// The replica that accepted the write hands it over with the write's completion
/// (`client_completion::response`, `zab::asio::reply::response`; docs/protocol.md §6.6). It is
/// local, never replicated or logged: it must be what every replica's `apply` returns, but
/// only the accepting replica keeps it, and only while the write is in flight there. A
/// machine whose `apply` returns void costs nothing: its completions carry no bytes.
///
///   sm.apply(z, txn)   Apply committed transaction `z` and return its result.
template <typename S>
concept result_machine = state_machine<S> && requires(S& sm, zxid z, byte_view bytes) {
    { sm.apply(z, bytes) } -> std::same_as<shared_bytes>;
};

/// A state handed over to be serialized later, on any thread (`deferred_snapshot_machine`).
using deferred_snapshot = std::function<shared_bytes()>;

/// Optional: a state machine that can hand over a consistent view of its state cheaply, so
/// that compaction (options::snapshot_every) serializes it off the peer's thread and applying
/// does not stall for a large state (the driver runs that work: `peer.ready().snapshot`,
/// zab/core/driver.hpp; zab::asio::node and the simulator do).
///
///   sm.snapshot_later()   A deferred_snapshot that, called once on any one thread while
///                         `apply` goes on on the peer's, returns exactly what `snapshot()`
///                         returned at the time of this call: the state as of
///                         `last_applied()` then (an immutable or copy-on-write view, say).
template <typename S>
concept deferred_snapshot_machine = state_machine<S> && requires(const S& sm) {
    { sm.snapshot_later() } -> std::same_as<deferred_snapshot>;
};

/// Optional: a state machine that is also given zab's own committed transactions — the
/// reconfigurations (zab/core/reconfig.hpp, docs/protocol.md §9) — in zxid order among the
/// application's, e.g. to keep the membership history in its own state (ZooKeeper keeps it
/// in a znode). Decode one with `zab::decode_reconfig`; its zxid is the new version.
///
///   sm.apply_system(z, txn)   Apply committed system transaction `z`, as `apply` would.
template <typename S>
concept system_txn_machine = state_machine<S> && requires(S& sm, zxid z, byte_view bytes) {
    { sm.apply_system(z, bytes) } -> std::same_as<void>;
};

// --- Archetypes ----------------------------------------------------------------------------

namespace archetypes {

/// The smallest transport: models `zab::transport` and does nothing.
struct transport {
    void send(peer_id, connection_id, const shared_bytes&) {}
    void close(peer_id, connection_id) {}
};

/// The smallest log store: models `zab::log_store` and keeps nothing.
struct log_store {
    void append(storage_op, std::span<const log_record>) {}
    void truncate_after(storage_op, zxid) {}
    void install_snapshot(storage_op, zxid, const shared_bytes&, std::span<const log_record>) {}
    void make_durable(storage_op) {}
    void write_epochs(storage_op, epochs) {}
    zxid last_zxid() const { return {}; }
    epochs stored_epochs() const { return {}; }
    std::optional<log_snapshot> snapshot() const { return std::nullopt; }
    result<std::vector<log_record>> read(zxid, std::size_t) const {
        return std::vector<log_record>{};
    }
};

/// The smallest state machine: models `zab::state_machine` and keeps nothing.
struct state_machine {
    void apply(zxid, byte_view) {}
    zxid last_applied() const { return {}; }
    shared_bytes snapshot() const { return {}; }
    result<void> restore(zxid, byte_view) { return success(); }
};

}  // namespace archetypes

static_assert(transport<archetypes::transport>);
static_assert(log_store<archetypes::log_store>);
static_assert(state_machine<archetypes::state_machine>);

}  // namespace zab
