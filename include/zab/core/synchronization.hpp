// zab/core/synchronization.hpp — the Synchronization phase (docs/protocol.md §5).
//
// Leader: for each learner whose ACKEPOCH is in (once a quorum promised the epoch), plan
// DIFF / TRUNC / SNAP from its last zxid against the leader's contiguous committed history,
// queue the history as PROPOSAL+COMMIT pairs, hand over the proposals in flight, then
// NEWLEADER — held until the leader's own currentEpoch is durable. A quorum of NEWLEADER ACKs
// establishes the leader: its whole history is committed (§5.5); UPTODATE follows.
// Learner: buffer the sync traffic; on NEWLEADER make the history durable, then currentEpoch,
// then ACK (§5.3, §11.1, ZOOKEEPER-3911/4643/4685); on UPTODATE apply what is committed.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "zab/core/logging.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/peer_context.hpp"

namespace zab {

class zab_synchronization {
public:
    explicit zab_synchronization(peer_context& ctx) : ctx_{ctx} {}

    // --- leader side ----------------------------------------------------------------------

    /// The peer just became LEADING: its history (all of its log) is what it will sync from,
    /// and its last `committed_window_max` records are the window kept in memory (§5.1); the
    /// record before them, if the log holds more, is the window's base. Only that tail is
    /// read (from a zab::tail_readable_log; another log is read whole). Returns false if the
    /// log cannot be read (a storage failure: the peer stops).
    bool leader_start() {
        auto& leader = *ctx_.leading;
        auto tail = ctx_.read_log_last(leader_state::committed_window_max + 1);
        if (!tail) {
            ctx_.storage_error(tail.error(), "reading its own log to lead");
            return false;
        }
        auto& records = tail.value();
        std::size_t first = 0;
        leader.committed_base = zxid{};
        if (records.size() > leader_state::committed_window_max) {
            leader.committed_base = records.front().id;
            first = 1;
        } else if (auto snapshot = ctx_.log_snapshot_in_effect()) {
            leader.committed_base = snapshot->last_included;
        }
        for (std::size_t i = first; i < records.size(); ++i)
            leader.remember_committed(std::move(records[i]));
        return true;
    }

    /// Runs after every event while LEADING.
    void leader_advance() {
        auto& leader = *ctx_.leading;
        if (leader.reached(leader_state::stage::writing_current_epoch)) {
            // The epoch quorum is in (§4.6): every learner waiting for its sync gets it now.
            // (By id: a sync that fails drops its learner from `links`.)
            std::vector<peer_id> waiting;
            for (const auto& link : leader.links)
                if (link.at == learner_link::stage::awaiting_sync) waiting.push_back(link.id);
            for (const peer_id id : waiting)
                if (learner_link* link = leader.find_link(id)) sync_learner(*link);
        }
        if (leader.at == leader_state::stage::collecting_newleader_acks) {
            peer_set acks = leader.newleader_acks;
            acks.insert(ctx_.self());
            if (ctx_.quorums().contains_quorum(acks)) establish();
        }
        if (leader.established()) {
            for (auto& link : leader.links) {
                if (link.at != learner_link::stage::awaiting_uptodate) continue;
                ctx_.send(link.id, wire::up_to_date{});
                link.move_to(learner_link::stage::broadcasting);
                link.lease_rounds_from = leader.ping_round + 1;  // §7.1: answered after UPTODATE
                std::erase_if(leader.sync_trouble, [&](const auto& t) { return t.first == link.id; });
            }
        }
    }

    /// ACK of NEWLEADER: the first message after NEWLEADER must be it (§5.2 step 8).
    void leader_on_newleader_ack(learner_link& link, const wire::ack& m) {
        auto& leader = *ctx_.leading;
        if (m.acked != zxid{leader.epoch, 0}) {
            ctx_.ignore(link.id, ignore_reason::out_of_stage);
            ctx_.drop_learner(link.id, "its first message after NEWLEADER is not its ACK");
            return;
        }
        link.move_to(learner_link::stage::awaiting_uptodate);
        if (link.type == learner_type::participant) leader.newleader_acks.insert(link.id);
    }

    /// SNAPACK: the learner has the snapshot's first `received` bytes; more chunks may go.
    /// Answers to chunks queued before the last one may still arrive after it (the sync has
    /// moved on): they are checked and ignored. A learner that confirms bytes it was never
    /// sent, or goes back, is dropped.
    void leader_on_snap_ack(learner_link& link, const wire::snap_ack& m) {
        if (m.received <= link.snapshot_acknowledged || m.received > link.snapshot_queued) {
            ctx_.ignore(link.id, ignore_reason::bad_acknowledgement);
            ctx_.drop_learner(link.id, "a SNAPACK of bytes never sent");
            return;
        }
        link.snapshot_acknowledged = m.received;
        if (link.at == learner_link::stage::streaming_snapshot) stream_snapshot(link);
    }

    /// SYNCACK: the learner has the history up to `received`; more may go. While the
    /// history streams it must name a record queued and not yet confirmed; once the sync has
    /// moved on (NEWLEADER queued) late answers are ignored — they may then also name
    /// proposals of the broadcast that followed, up to the leader's last one.
    void leader_on_sync_ack(learner_link& link, const wire::sync_ack& m) {
        const auto& leader = *ctx_.leading;
        const bool streaming = link.at == learner_link::stage::streaming_history;
        const zxid bound =
            streaming ? link.history_queued : std::max(leader.last_proposed, leader.max_committed());
        const bool known = m.received <= bound;
        if (!known || (streaming && (link.history_unacked.empty() ||
                                     m.received < link.history_unacked.front().first))) {
            ctx_.ignore(link.id, ignore_reason::bad_acknowledgement);
            ctx_.drop_learner(link.id, "a SYNCACK of history never sent");
            return;
        }
        while (!link.history_unacked.empty() && link.history_unacked.front().first <= m.received) {
            link.history_unacked_bytes -= link.history_unacked.front().second;
            link.history_unacked.pop_front();
        }
        if (streaming) stream_history(link);
    }

    // --- learner side ---------------------------------------------------------------------

    void learner_on_diff(const wire::diff& m) {
        if (!begin_sync(sync_summary::method::diff)) return;
        ctx_.learning->known_committed = std::max(ctx_.learning->known_committed, m.last);
    }

    void learner_on_trunc(const wire::trunc& m) {
        if (!begin_sync(sync_summary::method::trunc)) return;
        if (m.truncate_to < ctx_.last_applied) {
            // It would take back transactions this replica applied as committed: not a
            // leader of this history. Refuse it (docs/design.md rule 6).
            ctx_.leader_misbehaved("TRUNC below the applied state");
            return;
        }
        ctx_.truncate_after(m.truncate_to);
        auto& learner = *ctx_.learning;
        learner.sync.truncated_to = m.truncate_to;
        while (!learner.unapplied.empty() && learner.unapplied.back().id > m.truncate_to)
            learner.unapplied.pop_back();  // oldest first: what TRUNC removes is at the back
        learner.known_committed = std::max(learner.known_committed, m.truncate_to);
    }

    /// One SNAP chunk (§5.2 step 5). The first begins the sync; each must continue the one
    /// before (same snapshot, next offset, within its size) or the leader misbehaved.
    void learner_on_snap(const wire::snap& m, const shared_bytes& frame) {
        auto& learner = *ctx_.learning;
        if (m.offset == 0 && !learner.receiving) {
            if (!begin_sync(sync_summary::method::snap)) return;
            if (m.total_size > ctx_.opts().max_snapshot_bytes) {
                // Held in memory until NEWLEADER: an announced size is refused up front,
                // before any of it is buffered (issue 15 defect 6).
                zab::log(log_level::warn,
                         "peer {}: leader {} announces a {}-byte snapshot, above "
                         "max_snapshot_bytes ({}); giving up this sync",
                         ctx_.self(), learner.leader, m.total_size, ctx_.opts().max_snapshot_bytes);
                ++ctx_.counters.sync_buffer_overflows;
                ctx_.request_election("a snapshot above max_snapshot_bytes");
                return;
            }
            if (m.chunk.size() > m.total_size) {
                ctx_.leader_misbehaved("a SNAP chunk beyond the snapshot's size");
                return;
            }
            if (m.chunk.size() == m.total_size) {  // the whole snapshot in one frame: no copy
                complete_snapshot(m.last_included, frame.slice(m.chunk));
                return;
            }
            learner.receiving = learner_state::incoming_snapshot{m.last_included, m.total_size, {}};
            // Grown as bytes arrive, never reserved from the announced size: a bad size
            // costs nothing until the bytes are really sent.
        } else if (!learner.receiving || learner.at != learner_state::stage::syncing ||
                   m.last_included != learner.receiving->last_included ||
                   m.total_size != learner.receiving->total_size ||
                   m.offset != learner.receiving->bytes.size()) {
            ctx_.leader_misbehaved("a SNAP chunk out of sequence");
            return;
        } else if (m.chunk.size() > m.total_size - m.offset) {
            ctx_.leader_misbehaved("a SNAP chunk beyond the snapshot's size");
            return;
        }
        auto& bytes = learner.receiving->bytes;
        bytes.insert(bytes.end(), m.chunk.begin(), m.chunk.end());
        if (bytes.size() < learner.receiving->total_size) {
            ctx_.send(learner.leader, wire::snap_ack{bytes.size()});
            return;
        }
        const zxid last_included = learner.receiving->last_included;
        shared_bytes state{std::move(bytes)};
        learner.receiving.reset();
        complete_snapshot(last_included, std::move(state));
    }

    /// A PROPOSAL during synchronization: buffered until NEWLEADER (§5.3).
    void learner_on_sync_proposal(const log_record& record) {
        auto& learner = *ctx_.learning;
        if (learner.receiving) {
            ctx_.leader_misbehaved("a PROPOSAL inside a SNAP");
            return;
        }
        const zxid last = synced_last();
        if (record.id <= last) return;  // a duplicate (protocol-spec issue 2)
        // The history a leader of epoch e syncs holds transactions of epochs up to e, never
        // counter 0 (§1).
        if (record.id.epoch() > learner.epoch || record.id.counter() == 0) {
            ctx_.leader_misbehaved("a synced transaction of a later epoch than the leader's, or "
                                   "counter 0 (§1)");
            return;
        }
        if (!last.continued_by(record.id, ctx_.first_counter())) {
            ctx_.leader_misbehaved("a hole in the synced history");
            return;
        }
        learner.buffered_bytes += record.txn.size();
        if (learner.buffered_bytes > ctx_.opts().max_sync_buffer_bytes) {
            zab::log(log_level::warn,
                     "peer {}: the history leader {} syncs passes max_sync_buffer_bytes ({}) at "
                     "{}; giving up this sync",
                     ctx_.self(), learner.leader, ctx_.opts().max_sync_buffer_bytes, record.id);
            ++ctx_.counters.sync_buffer_overflows;
            ctx_.request_election("synced history above max_sync_buffer_bytes");
            return;
        }
        learner.buffered.push_back(record);
        learner.unacked_bytes += record.txn.size();
        ++learner.sync.records;
        learner.sync.bytes += record.txn.size();
    }

    /// A COMMIT during synchronization or before UPTODATE: remembered (§5.3, ZOOKEEPER-4394).
    bool learner_on_sync_commit(const wire::commit& m) {
        auto& learner = *ctx_.learning;
        if (learner.receiving) {
            ctx_.leader_misbehaved("a COMMIT inside a SNAP");
            return false;
        }
        const zxid last = synced_last();
        if (m.id > last) {
            ctx_.leader_misbehaved("COMMIT of a transaction never proposed");
            return false;
        }
        learner.known_committed = std::max(learner.known_committed, m.id);
        // Flow control: the leader streams at most its window unanswered (messages.hpp).
        if (learner.at == learner_state::stage::syncing &&
            (++learner.unacked_records >= wire::sync_ack_every_records ||
             learner.unacked_bytes >= wire::sync_ack_every_bytes)) {
            ctx_.send(learner.leader, wire::sync_ack{m.id});
            learner.unacked_records = 0;
            learner.unacked_bytes = 0;
        }
        return true;
    }

    /// NEWLEADER (§5.3): history durable → currentEpoch durable → ACK, in that order.
    void learner_on_new_leader(const wire::new_leader& m) {
        auto& learner = *ctx_.learning;
        if (learner.at != learner_state::stage::syncing || m.epoch_zxid != zxid{learner.epoch, 0} ||
            learner.receiving) {
            ctx_.leader_misbehaved("NEWLEADER out of place");
            return;
        }
        learner.sync.synced_to = synced_last();
        storage_op op = 0;
        if (learner.snapshot) {
            op = ctx_.install_snapshot(learner.snapshot->last_included, learner.snapshot->state, learner.buffered);
            learner.unapplied.assign(learner.buffered.begin(), learner.buffered.end());
        } else {
            for (auto& record : learner.buffered) {
                op = ctx_.append(record);
                learner.unapplied.push_back(std::move(record));
            }
        }
        learner.buffered.clear();
        learner.buffered_bytes = 0;
        // The history's last log operation (append, TRUNC or SNAP): everything before it too.
        learner.newleader_log_op = std::max(op, ctx_.last_log_op());
        learner.newleader_pending = true;
        learner.move_to(learner_state::stage::awaiting_uptodate);
    }

    /// Runs after every event while learning: NEWLEADER's durable steps, in order.
    void learner_advance() {
        auto& learner = *ctx_.learning;
        if (!learner.newleader_pending || !ctx_.log_durable(learner.newleader_log_op)) return;
        // The history is durable: now currentEpoch (ZOOKEEPER-4643), and the ACK only once
        // that is durable too (ZOOKEEPER-3911). Proposal ACKs queue behind it (ZOOKEEPER-4685).
        learner.newleader_pending = false;
        learner.newleader_epoch_op = ctx_.write_epochs({learner.epoch, learner.epoch});
        ctx_.send_after(learner.leader, wire::ack{zxid{learner.epoch, 0}}, 0, learner.newleader_epoch_op);
        // The synced history's last proposal of the leader's epoch is acknowledged with it,
        // also when it was in this log before the sync (a reconnection to the same leader):
        // the leader then knows at once that this follower is caught up (its lag), instead
        // of at the next write.
        const zxid synced_to = learner.sync.synced_to;
        if (ctx_.self_type() == learner_type::participant && synced_to.epoch() == learner.epoch &&
            !synced_to.is_epoch_marker())
            ctx_.send_after(learner.leader, wire::ack{synced_to}, ctx_.last_log_op(),
                            learner.newleader_epoch_op);
    }

    /// UPTODATE: the leader is established; everything synced is committed (§5.5).
    void learner_on_up_to_date() {
        auto& learner = *ctx_.learning;
        if (learner.at != learner_state::stage::awaiting_uptodate || learner.newleader_pending) {
            ctx_.leader_misbehaved("UPTODATE before NEWLEADER was handled");
            return;
        }
        learner.move_to(learner_state::stage::broadcasting);
        ctx_.current_vote.leader_epoch = learner.epoch;  // ZOOKEEPER-1732
        if (learner.snapshot) {
            auto restored = ctx_.restore_machine(learner.snapshot->last_included,
                                                 learner.snapshot->state.view());
            if (!restored) {
                ctx_.leader_misbehaved("snapshot does not restore");
                return;
            }
            learner.snapshot.reset();
        }
        // Every record of an older epoch in my log is in the leader's history: committed.
        for (const auto& record : learner.unapplied)
            if (record.id.epoch() < learner.epoch) learner.known_committed = std::max(learner.known_committed, record.id);
        const auto last_old = last_record_before_epoch(learner.epoch);
        if (last_old) learner.known_committed = std::max(learner.known_committed, *last_old);
        ctx_.apply_known_committed();
        report_sync(learner);
    }

protected:  // the building blocks of the phase, for policies derived from this one
    /// At UPTODATE: the sync's summary goes into `peer_status::last_sync` and the log.
    void report_sync(learner_state& learner) {
        learner.sync.ticks = ctx_.now_tick - learner.sync_began_tick;
        const sync_summary& s = learner.sync;
        ctx_.last_sync = s;
        if (!log_enabled(log_level::info)) return;
        std::string what;
        if (s.how == sync_summary::method::trunc) what = fmt::format(" to {}", s.truncated_to);
        if (s.how == sync_summary::method::snap)
            what = fmt::format(" of {} bytes at {}", s.snapshot_bytes, s.snapshot_at);
        zab::log(log_level::info,
                 "peer {}: synced with leader {} in epoch {} by {}{}, then {} records ({} bytes) "
                 "up to {}, in {} ticks",
                 ctx_.self(), s.leader, s.epoch, to_string(s.how), what, s.records, s.bytes,
                 s.synced_to, s.ticks);
    }

    std::optional<zxid> last_record_before_epoch(epoch_t e) {
        // The log's records are ascending: the last one below epoch e. A snapshot in the
        // log (an earlier sync's SNAP, interrupted before UPTODATE) stands for the records up
        // to it, and reading starts there: below it the log has nothing to read.
        std::optional<zxid> found;
        zxid after = ctx_.last_applied;
        if (const auto snapshot = ctx_.log_snapshot_in_effect();
            snapshot && snapshot->last_included > after) {
            after = snapshot->last_included;
            if (after.epoch() < e) found = after;
        }
        for (;;) {
            auto chunk = ctx_.read_log(after, 1024);
            if (!chunk) {
                ctx_.storage_error(chunk.error(), "reading the log for its older epochs");
                return found;
            }
            if (chunk.value().empty()) return found;
            for (const auto& record : chunk.value()) {
                if (record.id.epoch() >= e) return found;
                found = record.id;
            }
            after = chunk.value().back().id;
        }
    }

    /// The whole snapshot is in. Nothing is written yet: at NEWLEADER the snapshot and the
    /// history after it go into the log as one atomic operation (§11.1), so a crash never
    /// leaves the snapshot without that history under an older current epoch. The state is
    /// restored only at UPTODATE: a sync interrupted before then leaves the state machine as
    /// it was (§11.4).
    void complete_snapshot(zxid last_included, shared_bytes state) {
        auto& learner = *ctx_.learning;
        learner.sync.snapshot_at = last_included;
        learner.sync.snapshot_bytes = state.size();
        learner.snapshot = log_snapshot{last_included, std::move(state)};
        learner.unapplied.clear();
        learner.known_committed = std::max(learner.known_committed, last_included);
    }

    /// The last zxid of the history being synced: the buffered proposals, after the SNAP's
    /// snapshot or the (possibly truncated) log.
    zxid synced_last() const {
        const auto& learner = *ctx_.learning;
        if (!learner.buffered.empty()) return learner.buffered.back().id;
        return learner.snapshot ? learner.snapshot->last_included : ctx_.last_zxid_visible;
    }

    bool begin_sync(sync_summary::method how) {
        auto& learner = *ctx_.learning;
        if (learner.at != learner_state::stage::awaiting_sync) {
            ctx_.leader_misbehaved("a second DIFF/TRUNC/SNAP");
            return false;
        }
        learner.move_to(learner_state::stage::syncing);
        learner.sync = sync_summary{};
        learner.sync.how = how;
        learner.sync.leader = learner.leader;
        learner.sync.epoch = learner.epoch;
        learner.sync_began_tick = ctx_.now_tick;
        return true;
    }





    /// §5.2: DIFF, TRUNC or SNAP for `link`, then the proposals in flight, then NEWLEADER.
    void sync_learner(learner_link& link) {
        auto& leader = *ctx_.leading;
        const zxid peer_last = link.last_logged;
        const zxid max = leader.max_committed();
        zxid queued;  // the last zxid the learner will have after this history
        if (peer_last == max) {
            ++ctx_.counters.syncs_diff;
            ctx_.send(link.id, wire::diff{max});
            queued = max;
        } else if (peer_last > max && !peer_last.is_epoch_marker()) {
            ++ctx_.counters.syncs_trunc;
            ctx_.send(link.id, wire::trunc{max});
            queued = max;
        } else if (auto plan = walk(peer_last)) {
            if (plan->truncate_to) {
                ++ctx_.counters.syncs_trunc;
                ctx_.send(link.id, wire::trunc{*plan->truncate_to});
            } else {
                ++ctx_.counters.syncs_diff;
                ctx_.send(link.id, wire::diff{max});
            }
            start_history(link, plan->send_after);
            return;
        } else {
            // Anything else: SNAP (§5.2 step 5): committed state, streamed in chunks; the
            // rest of the sync follows its last chunk (finish_snapshot_sync).
            start_snapshot_sync(link);
            return;
        }
        finish_sync(link, queued);
    }

    /// §5.2 steps 6–7, once the learner's history (DIFF, TRUNC or SNAP, up to `queued`) is
    /// queued: the proposals still in flight, then NEWLEADER.
    void finish_sync(learner_link& link, zxid queued) {
        auto& leader = *ctx_.leading;
        // §5.2 step 6, startForwarding: proposals still in flight, PROPOSAL only; observers
        // get none (they hear of them as INFORM once committed).
        link.synced_through = queued;
        if (link.type == learner_type::participant)
            for (const auto& p : leader.outstanding) {
                if (p.record.id <= queued) continue;
                link.synced_through = p.record.id;
                if (p.frame_is_batch)  // a PROPOSAL of its own: the batch may start earlier
                    ctx_.send(link.id, wire::proposal{p.record.id, p.record.txn.view()});
                else
                    ctx_.send_frame_after(link.id, p.frame);
            }
        link.forwarding = true;
        // §5.2 step 7: NEWLEADER last, once the leader's currentEpoch is durable.
        ctx_.send_after(link.id, wire::new_leader{zxid{leader.epoch, 0}}, 0, leader.current_write);
        link.move_to(learner_link::stage::awaiting_newleader_ack);
    }

    /// SNAP: committed state, and the history after it. The log's snapshot when it has one
    /// (committed state already serialized, §2: the leader's thread does no O(state) work;
    /// its log holds every record after it), else the state machine's.
    void start_snapshot_sync(learner_link& link) {
        zxid base = ctx_.last_applied;
        shared_bytes state;
        // The log's snapshot, unless so much history follows it that a learner could not
        // buffer it until NEWLEADER (max_sync_buffer_bytes): then the state machine's, taken
        // now, which the recent window follows.
        auto logged = ctx_.log_snapshot_in_effect();
        if (logged && ctx_.history_bytes_after_snapshot() > ctx_.opts().max_sync_buffer_bytes / 2)
            logged.reset();
        if (logged) {
            base = logged->last_included;
            state = logged->state;
        } else {
            state = ctx_.machine_snapshot();
        }
        ++ctx_.counters.syncs_snap;
        link.snapshot_base = base;
        link.snapshot = std::move(state);
        link.snapshot_queued = 0;
        link.snapshot_acknowledged = 0;
        link.move_to(learner_link::stage::streaming_snapshot);
        stream_snapshot(link);
    }

    /// Queues SNAP chunks while fewer than `snapshot_chunks_in_flight` are unanswered; after
    /// the last one, the rest of the sync. Memory bound: a learner's SNAP adds at most
    /// chunk × in-flight bytes to the leader's queues, whatever the snapshot's size.
    void stream_snapshot(learner_link& link) {
        const std::uint64_t chunk_max = ctx_.opts().snapshot_chunk_bytes;
        const std::uint64_t window = chunk_max * ctx_.opts().snapshot_chunks_in_flight;
        const auto state = link.snapshot.view();
        const std::uint64_t total = state.size();
        // Nothing queued yet: the first chunk goes whatever its size (an empty snapshot is
        // one empty chunk). Once any is queued, SNAPACKs arrive with more than 0 bytes.
        bool first = link.snapshot_queued == 0;
        while (first || (link.snapshot_queued < total &&
                         link.snapshot_queued - link.snapshot_acknowledged < window)) {
            first = false;
            const std::uint64_t n = std::min(chunk_max, total - link.snapshot_queued);
            ctx_.send(link.id, wire::snap{link.snapshot_base, total, link.snapshot_queued,
                                    state.subspan(link.snapshot_queued, n)});
            link.snapshot_queued += n;
            ++ctx_.counters.snapshot_chunks_sent;
            ctx_.counters.snapshot_bytes_sent += n;
        }
        if (link.snapshot_queued == total) finish_snapshot_sync(link);
    }

    /// The last chunk is queued: the committed history after the snapshot streams next.
    void finish_snapshot_sync(learner_link& link) {
        link.snapshot = {};
        start_history(link, link.snapshot_base);
    }

    /// §5.2 steps 3–5: the committed records after `after` go to the learner as
    /// PROPOSAL+COMMIT pairs, streamed under flow control (stream_history).
    void start_history(learner_link& link, zxid after) {
        link.history_queued = after;
        link.history_unacked.clear();
        link.history_unacked_bytes = 0;
        link.move_to(learner_link::stage::streaming_history);
        stream_history(link);
    }

    /// Queues committed records while fewer than `sync_window_records` records and
    /// `sync_window_bytes` bytes are unanswered; once the learner has everything committed
    /// so far — the commit point at that moment, which moves while the history streams —
    /// the rest of the sync (finish_sync). Memory bound: a learner's sync adds at most a
    /// window to the leader's queues, whatever its length (issue 15 defect 2). Gapless or
    /// nothing: if the history cannot be read (compacted away meanwhile) the learner is
    /// dropped and syncs again, by SNAP.
    void stream_history(learner_link& link) {
        auto& leader = *ctx_.leading;
        const auto& o = ctx_.opts();
        while (link.history_unacked.size() < o.sync_window_records &&
               link.history_unacked_bytes < o.sync_window_bytes) {
            const zxid max = leader.max_committed();
            if (link.history_queued >= max) {
                finish_sync(link, link.history_queued);
                return;
            }
            const std::size_t room = o.sync_window_records - link.history_unacked.size();
            auto history = committed_after(link.history_queued, max, room);
            if (!history || history->empty()) {
                if (ctx_.storage_error_pending()) return;  // a read failed: the replica stops
                // Compacted away while the stream ran (or the window moved past it): the
                // log cannot serve this learner any more. It syncs again, and a learner the
                // log cannot serve from its position gets a SNAP (etcd's raft falls back to
                // a snapshot the same way).
                zab::log(log_level::info,
                         "peer {}: its committed history after {} is no longer in its log (a "
                         "compaction); {} syncs again, by SNAP",
                         ctx_.self(), link.history_queued, link.id);
                ++ctx_.counters.syncs_restarted;
                ctx_.drop_learner(link.id, "its history was compacted during the sync");
                return;
            }
            for (const auto& record : *history) {
                ctx_.send(link.id, wire::proposal{record.id, record.txn.view()});
                ctx_.send(link.id, wire::commit{record.id});
                link.history_queued = record.id;
                link.history_unacked.emplace_back(record.id, record.txn.size());
                link.history_unacked_bytes += record.txn.size();
                if (link.history_unacked_bytes >= o.sync_window_bytes) break;
            }
        }
    }

    /// At most `max_records` committed records after `after` up to `upto`, gapless: from
    /// the in-memory window when it reaches back that far, else from the log; nothing when
    /// neither can (the log was compacted past `after`: the learner syncs again; or a read
    /// failed: a storage failure, and the replica has stopped).
    std::optional<std::vector<log_record>> committed_after(zxid after, zxid upto,
                                                           std::size_t max_records) {
        const auto& leader = *ctx_.leading;
        std::vector<log_record> history;
        if (leader.committed_base <= after) {
            for (const auto& record : leader.committed) {
                if (history.size() >= max_records || record.id > upto) break;
                if (record.id > after) history.push_back(record);
            }
            return history;
        }
        while (after < upto && history.size() < max_records) {
            auto chunk = ctx_.read_log(after, std::min<std::size_t>(1024, max_records - history.size()));
            if (!chunk) {
                // Compacted: a resync, not a storage failure (the log is fine; this learner
                // needs a snapshot). Any other read error is terminal (docs/design.md rule 6).
                if (chunk.error() != make_error_code(errc::compacted))
                    ctx_.storage_error(chunk.error(), "reading the committed history for a sync");
                return std::nullopt;
            }
            if (chunk.value().empty() || !after.continued_by(chunk.value().front().id, ctx_.first_counter()))
                return std::nullopt;
            for (auto& record : chunk.value()) {
                if (record.id > upto) return history;
                after = record.id;
                history.push_back(std::move(record));
            }
        }
        return history;
    }

    struct diff_plan {
        zxid send_after;                  ///< send every committed record after this
        std::optional<zxid> truncate_to;  ///< TRUNC first (same epoch only), or a DIFF
    };

    /// §5.2 step 3: where the learner's last zxid sits in the committed window.
    std::optional<diff_plan> walk(zxid peer_last) const {
        const auto& leader = *ctx_.leading;
        if (peer_last < leader.committed_base) return std::nullopt;
        if (peer_last == leader.committed_base) return diff_plan{peer_last, std::nullopt};
        if (peer_last.is_epoch_marker()) return diff_plan{peer_last, std::nullopt};
        zxid previous = leader.committed_base;
        for (const auto& record : leader.committed) {
            if (record.id == peer_last) return diff_plan{peer_last, std::nullopt};
            if (record.id > peer_last) {
                // Not in my history. Only within one epoch can the divergence point be
                // known from zxids: never TRUNC across an epoch boundary (§11.7).
                if (record.id.epoch() != peer_last.epoch()) return std::nullopt;
                return diff_plan{previous, previous};
            }
            previous = record.id;
        }
        return std::nullopt;
    }

    /// §5.5: a quorum acknowledged NEWLEADER. Everything in the leader's history is now
    /// committed; it applies it, and its epoch's proposals start at counter 1.
    void establish() {
        auto& leader = *ctx_.leading;
        leader.move_to(leader_state::stage::established);
        // The epoch is final only now: FOLLOWERINFOs may have raised it after this peer began
        // to lead, and every zxid it proposes must carry it (§1, §10.9).
        leader.last_proposed = zxid{leader.epoch, ctx_.opts().test_only.initial_counter};
        ctx_.current_vote.leader_epoch = leader.epoch;  // ZOOKEEPER-1732
        zab::log(log_level::info, "peer {}: established as leader of epoch {}", ctx_.self(),
                 leader.epoch);
        ctx_.apply_from_log(leader.max_committed());
        ctx_.last_committed = std::max(ctx_.last_committed, zxid{leader.epoch, 0});
    }

    peer_context& ctx_;
};

}  // namespace zab
