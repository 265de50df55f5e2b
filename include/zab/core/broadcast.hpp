// zab/core/broadcast.hpp — the Broadcast phase (docs/protocol.md §6, §8).
//
// Leader: a proposal is encoded once and the same frame goes to every forwarding follower
// and, sliced, into the leader's own log (docs/design.md rule 10). The leader's own ACK counts
// only once its log says the append is durable. Commits go strictly in zxid order; COMMIT to
// followers, INFORM (with the bytes) to observers. Heartbeats every tick; a learner silent
// for sync_limit is dropped, and a leader that cannot see a quorum steps down (§6.2).
// Learner: PROPOSAL → log → ACK once durable (an ACK covers every earlier proposal on the
// FIFO connection); COMMIT → apply in order; a leader silent for sync_limit → election.
#pragma once

#include <algorithm>
#include <functional>
#include <span>
#include <utility>

#include "zab/core/codec.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/peer_context.hpp"
#include "zab/core/reconfig.hpp"

namespace zab {

class zab_broadcast {
public:
    explicit zab_broadcast(peer_context& ctx) : ctx_{ctx} {}

    // --- leader side ----------------------------------------------------------------------

    /// Proposes `txn` (leader only, once established) on behalf of `origin` (a learner that
    /// forwarded it, or 0). Returns its zxid. Errors, all definite (nothing was proposed):
    /// `too_large` (options::max_txn_bytes), `not_leader`, `transferring` (a leadership
    /// transfer is in progress, §6.4), `backpressure` (max_outstanding_proposals),
    /// `zxid_exhausted` (§1).
    result<zxid> propose(byte_view txn, peer_id origin = 0) {
        // Every replica logs what the leader proposes: one oversized write must be refused
        // here, never become a record some replica's log cannot take (issue 15 defect 5).
        if (txn.size() > ctx_.opts().max_txn_bytes) return make_error_code(errc::too_large);
        if (auto refused = may_propose(1); !refused) return refused.error();
        if (is_system_txn(txn))
            if (auto refused = check_reconfig(txn); !refused) return refused.error();
        auto& leader = *ctx_.leading;
        const zxid id = leader.last_proposed.next();
        const shared_bytes frame =
            encode(frame_context{ctx_.opts().group_id, ctx_.config().version()}, wire::proposal{id, txn});
        // The log record shares the frame's bytes: the txn is encoded once (docs/design.md
        // rule 10). A PROPOSAL's payload ends with the txn (codec.hpp: id, then txn), so it is
        // the frame's last txn.size() bytes — found without decoding the frame again.
        ZAB_ASSERT(frame.size() >= frame_header_size + txn.size(), "a PROPOSAL shorter than its txn");
        const byte_view txn_in_frame = frame.view().last(txn.size());
#if defined(ZAB_EXPENSIVE_INVARIANTS)
        ZAB_ASSERT(std::equal(txn.begin(), txn.end(), txn_in_frame.begin()),
                   "a PROPOSAL's txn is not at the end of its frame");
#endif
        record_proposal(id, frame, txn_in_frame, false, origin);
        send_to_followers(frame);
        return id;
    }

    /// Proposes the application transactions `txns` (two or more, none a system txn, each at
    /// most options::max_txn_bytes, together at most options::max_batch_bytes with 4 bytes
    /// each: the caller splits) as consecutive zxids in one PROPOSALS frame: one encoding,
    /// one frame per follower, one ACK back from each. All or nothing: the errors of
    /// `propose` (backpressure when the whole run does not fit max_outstanding_proposals,
    /// zxid_exhausted when the epoch's counters do not reach its end). Returns the first zxid.
    result<zxid> propose_batch(std::span<const byte_view> txns, peer_id origin = 0) {
        ZAB_ASSERT(txns.size() >= 2 && txns.size() <= UINT32_MAX, "propose_batch: not a batch");
        if (auto refused = may_propose(txns.size()); !refused) return refused.error();
        auto& leader = *ctx_.leading;
        const zxid first = leader.last_proposed.next();
        placed_scratch_.resize(txns.size());
        const shared_bytes frame = encode_proposal_batch(
            frame_context{ctx_.opts().group_id, ctx_.config().version()}, first, txns, placed_scratch_);
        zxid id = first;
        for (std::size_t i = 0; i < txns.size(); ++i, id = id.next())
            record_proposal(id, frame, placed_scratch_[i], true, origin);
        send_to_followers(frame);
        ++ctx_.counters.proposal_batches;
        return first;
    }

    /// How many of `txns`, from the first, may go out in one PROPOSALS batch now, at most
    /// `room` (the caller's own bound: its pending requests, or a learner's forwarded ones):
    /// an established leader taking requests, each an application write within
    /// max_txn_bytes, the run within max_batch_bytes, max_outstanding_proposals and the
    /// epoch's counters left before its last one, which is never proposed (§1: at the end of
    /// an epoch the batch shrinks, and the write that finds none left is refused alone,
    /// zxid_exhausted, which starts the next epoch). 0 when none may.
    std::size_t batchable(std::span<const byte_view> txns, std::size_t room) const {
        if (!ctx_.leading || !ctx_.leading->established() || ctx_.leading->transfer) return 0;
        const std::size_t outstanding = ctx_.leading->outstanding.size();
        const std::size_t limit = ctx_.opts().max_outstanding_proposals;
        const std::uint64_t counters_left =
            zxid::counter_max - 1 - std::uint64_t{ctx_.leading->last_proposed.counter()};
        room = static_cast<std::size_t>(std::min<std::uint64_t>(
            {room, outstanding < limit ? limit - outstanding : 0, counters_left, UINT32_MAX}));
        std::size_t run = 0;
        std::uint64_t bytes = 0;
        for (const byte_view txn : txns) {
            if (run == room || txn.size() > ctx_.opts().max_txn_bytes || is_system_txn(txn)) break;
            bytes += 4 + txn.size();
            if (bytes > ctx_.opts().max_batch_bytes) break;
            ++run;
        }
        return run;
    }

    /// Whether `count` more proposals may be made now: `not_leader`, `transferring`,
    /// `backpressure`, `zxid_exhausted` (§1, ZOOKEEPER-1277: never the last counter; asks for
    /// a new epoch, which starts again at 0).
    result<void> may_propose(std::size_t count) {
        if (!ctx_.leading || !ctx_.leading->established()) return make_error_code(errc::not_leader);
        auto& leader = *ctx_.leading;
        if (leader.transfer) return make_error_code(errc::transferring);
        if (leader.outstanding.size() + count > ctx_.opts().max_outstanding_proposals)
            return make_error_code(errc::backpressure);
        if (std::uint64_t{leader.last_proposed.counter()} + count > zxid::counter_max - 1) {
            if (leader.last_proposed.counter_exhausted())
                ctx_.request_election("zxid counter exhausted");
            return make_error_code(leader.last_proposed.counter_exhausted() ? errc::zxid_exhausted
                                                                           : errc::backpressure);
        }
        return success();
    }

    /// Whether the established leader may propose reconfiguration `txn` now (§9). Every
    /// refusal is definite: `invalid_argument` (not a valid configuration), `reconfig_in_progress`
    /// (another one is not committed yet), `version_mismatch` (its compare-and-set names another
    /// version than the committed one), `new_config_no_quorum` (the new configuration's voters
    /// synced with this leader — acknowledging its proposals — are no quorum of it:
    /// ZooKeeper's NewConfigNoQuorum; a joiner counts only once synced).
    result<void> check_reconfig(byte_view txn) const {
        const auto& leader = *ctx_.leading;
        auto request = decode_reconfig(txn);
        if (!request) return make_error_code(errc::invalid_argument);
        if (!ctx_.pending_configs().empty()) return make_error_code(errc::reconfig_in_progress);
        if (request.value().expected_version &&
            *request.value().expected_version != ctx_.config().version())
            return make_error_code(errc::version_mismatch);
        auto next = configuration::make(request.value().members, 0);
        if (!next) return make_error_code(errc::invalid_argument);
        const auto verifier = make_verifier(next.value());
        peer_set synced;
        synced.insert(ctx_.self());
        // A follower that the committed configuration made an observer is about to join
        // again as one (§9 step 6), and observers get no PROPOSALs: counted, the change could
        // need its ACK, never come, and hold every later proposal — and a leader elected
        // with the change pending — for good (protocol sweep seed 5529, file log).
        for (const auto& link : leader.links)
            if (link.type == learner_type::participant && link.at == learner_link::stage::broadcasting &&
                ctx_.joins_as(link.id) == learner_type::participant)
                synced.insert(link.id);
        if (!verifier->contains_quorum(synced)) return make_error_code(errc::new_config_no_quorum);
        return success();
    }

    /// ACK(z) from a follower that acknowledged NEWLEADER: it holds every proposal ≤ z
    /// durably (FIFO connection: an ACK covers the prefix).
    void leader_on_ack(learner_link& link, const wire::ack& m) {
        auto& leader = *ctx_.leading;
        if (m.acked.is_epoch_marker()) return;  // NEWLEADER/UPTODATE acks: nothing to count
        if (m.acked.epoch() != leader.epoch || m.acked > leader.last_proposed) {
            ctx_.ignore(link.id, ignore_reason::bad_acknowledgement);
            ctx_.drop_learner(link.id, "an ACK of a proposal never made");
            return;
        }
        // Observers' ACKs never count (§8): quorum_acked() looks at voters only.
        if (m.acked > link.last_acked) {
            link.last_acked = m.acked;
            leader.progress_moved = true;
        }
    }

    /// A heartbeat answer (any message refreshes the learner's deadline; the peer did that):
    /// the round it answers counts toward the syncs waiting for a quorum round (§7).
    void leader_on_ping(learner_link& link, const wire::ping& m) {
        if (m.round > ctx_.leading->ping_round) return;
        link.acked_round = std::max(link.acked_round, m.round);
        // §7.1: only the answer to a round sent after UPTODATE counts toward the lease: the
        // learner got that PING (FIFO) while serving, so it promised (and its epochs are
        // durable: it keeps the promise across a restart). Earlier ones count for syncs.
        // A follower whose lease options differ from the leader's promises something else
        // (§4.2): never counted.
        if (link.at == learner_link::stage::broadcasting && m.round >= link.lease_rounds_from &&
            link.lease_agreed)
            link.lease_round = std::max(link.lease_round, m.round);
    }

    /// A client request forwarded by `link` (§6.1, §7): a write is proposed and answered
    /// with a REPLY (a refusal is definite); a sync waits for a quorum heartbeat round.
    void leader_on_request(learner_link& link, const wire::forwarded_request& m) {
        auto& leader = *ctx_.leading;
        if (!forwarding_allowed(link)) return;
        if (m.kind != wire::request_kind::write) {
            // Bounded like its writes: one learner's syncs cannot grow the leader's table
            // without limit (issue 15 defect 6); a refusal is definite.
            const auto waiting = static_cast<std::size_t>(std::count_if(
                leader.syncs.begin(), leader.syncs.end(),
                [&](const pending_sync& s) { return s.origin == link.id; }));
            if (waiting >= ctx_.opts().max_forwarded_per_learner) {
                ++ctx_.counters.requests_refused;
                ctx_.send(link.id, wire::forwarded_reply{m.request_id, wire::reply_outcome::backpressure, zxid{}});
                return;
            }
            if (m.kind == wire::request_kind::lease_sync && lease_answers(m.request_id)) {
                // §7.1: the COMMITs of everything committed so far went out on this FIFO
                // connection before this SYNC.
                ctx_.send(link.id, wire::sync_answer{m.request_id});
                return;
            }
            leader.syncs.push_back({link.id, link.connection, m.request_id, leader.ping_round + 1});
            leader.round_wanted = true;
            return;
        }
        const result<zxid> proposed = propose_forwarded(link, m.txn);
        if (proposed) {
            ctx_.send(link.id, wire::forwarded_reply{m.request_id, wire::reply_outcome::accepted, proposed.value()});
            return;
        }
        ++ctx_.counters.requests_refused;
        ctx_.send(link.id, wire::forwarded_reply{m.request_id,
                                 refusal_reply(static_cast<errc>(proposed.error().value())), zxid{}});
    }

    /// REQUESTS from `link` (§6.1, protocol 0x10001 on): the writes the learner forwarded in
    /// one turn. Each run that may be proposed together (`batchable`, within the learner's
    /// max_forwarded_per_learner) is one PROPOSALS batch answered by one REPLIES; a write that
    /// must go alone (a reconfiguration, one past a bound) is proposed or refused as a REQUEST
    /// is, and answered by a REPLIES of one. Every write gets exactly one answer, in order.
    void leader_on_request_batch(learner_link& link, const wire::forwarded_batch& m) {
        if (!forwarding_allowed(link)) return;
        forwarded_scratch_.clear();
        for_each_forwarded_txn(m, [&](std::uint64_t, byte_view txn) {
            forwarded_scratch_.push_back(txn);
            return true;
        });
        ZAB_ASSERT(forwarded_scratch_.size() == m.count, "REQUESTS: entries and count disagree");
        const std::span<const byte_view> txns{forwarded_scratch_};
        const std::size_t limit = ctx_.opts().max_forwarded_per_learner;
        std::uint64_t request = m.first_request_id;
        for (std::size_t i = 0; i < txns.size();) {
            const std::size_t room = link.forwarded_outstanding < limit ? limit - link.forwarded_outstanding : 0;
            const std::size_t run = batchable(txns.subspan(i), room);
            const std::size_t answered = std::max<std::size_t>(run, 1);
            const result<zxid> proposed = run >= 2 ? propose_batch(txns.subspan(i, run), link.id)
                                                   : propose_forwarded(link, txns[i]);
            if (proposed) {
                ctx_.send(link.id, wire::reply_batch{request, static_cast<std::uint32_t>(answered),
                                                     wire::reply_outcome::accepted, proposed.value()});
            } else {
                ctx_.counters.requests_refused += answered;
                ctx_.send(link.id, wire::reply_batch{request, static_cast<std::uint32_t>(answered),
                                                     refusal_reply(static_cast<errc>(proposed.error().value())),
                                                     zxid{}});
            }
            i += answered;
            request += answered;
        }
    }

    /// A sync at the leader itself: answered once a quorum answers a heartbeat round that
    /// starts after it (§7) — a deposed leader never answers.
    void leader_sync(request_id id) {
        auto& leader = *ctx_.leading;
        leader.syncs.push_back({ctx_.self(), 0, id, leader.ping_round + 1});
        leader.round_wanted = true;
    }

    /// A lease sync at this leader (§7.1): true when its read lease answers it now — then the
    /// caller completes it with what is applied here, everything committed — else false, and
    /// it must take the quorum round of a sync. Counted either way.
    bool lease_answers(request_id) {
        // The leader applies what it commits in the same step (and its initial history when
        // established, §5.5): what is applied here is everything committed.
        if (holds_read_lease() && ctx_.last_applied >= ctx_.leading->max_committed()) {
            ++ctx_.counters.lease_syncs_served;
            return true;
        }
        ++ctx_.counters.lease_sync_fallbacks;
        return false;
    }

    /// Whether this established leader holds its read lease now (§7.1): a quorum of voters
    /// (of every active configuration) answered a heartbeat round sent less than
    /// options::lease_duration_ticks() ago, since the quorum system last changed, and no
    /// leadership transfer is under way.
    bool holds_read_lease() {
        auto& leader = *ctx_.leading;
        if (!leader.established() || ctx_.opts().read_lease_ticks == 0) return false;
        update_read_lease(leader);
        return ctx_.now_tick < leader.lease.until;
    }

    /// Runs after every event while LEADING: own durability, commits in order, syncs.
    void leader_advance() {
        auto& leader = *ctx_.leading;
        // The leader's own ack, once its log made the proposal durable. Durability comes in
        // log order, so the acked ones are a prefix of `outstanding`: O(new acks) per step.
        while (leader.self_acked_count < leader.outstanding.size() &&
               ctx_.log_durable(leader.outstanding[leader.self_acked_count].log_op)) {
            ++leader.self_acked_count;
            leader.progress_moved = true;
        }
        // §6.1 tryToCommit: strictly in order, up to the highest zxid a quorum of every
        // verifier holds durably. O(voters²) per step, whatever the window.
        const zxid point = std::exchange(leader.progress_moved, false) ? quorum_acked(leader) : zxid{};
        zxid committed;
        while (!leader.outstanding.empty() && leader.outstanding.front().record.id <= point) {
            outstanding_proposal p = std::move(leader.outstanding.front());
            leader.outstanding.pop_front();
            if (leader.self_acked_count > 0) --leader.self_acked_count;  // a quorum may lack the leader
            committed = p.record.id;
            commit_proposal(std::move(p));
        }
        // One COMMIT, of the last, covers the run for every serving follower (§6.1): the
        // frames it saves are never encoded.
        if (committed != zxid{})
            for (const auto& link : leader.links)
                if (link.forwarding && link.type == learner_type::participant &&
                    link.at == learner_link::stage::broadcasting)
                    ctx_.send_cumulative(link.id, wire::commit{committed});
        if (!leader.established()) return;
        if (leader.round_wanted) {
            leader.round_wanted = false;
            send_heartbeats();
        }
        answer_syncs();
        if (ctx_.opts().read_lease_ticks != 0) update_read_lease(leader);
    }

    /// Every tick while LEADING (§6.2): heartbeats, silent learners, the quorum check.
    void leader_tick() {
        auto& leader = *ctx_.leading;
        const std::uint64_t limit = ctx_.opts().sync_limit_ticks;
        std::vector<peer_id> silent;
        for (const auto& link : leader.links)
            if (ctx_.now_tick > link.last_heard_tick + limit) silent.push_back(link.id);
        send_heartbeats(silent);
        for (peer_id id : silent) {
            zab::log(log_level::info, "peer {}: learner {} silent for {} ticks, dropped",
                     ctx_.self(), id, limit);
            ++ctx_.counters.learners_silent;
            ctx_.drop_learner(id, "silent for sync_limit");
        }
        // From the first tick, not only once established: a member behind a reconfiguration
        // may be what establishing needs (a voter of the pending configuration that its own
        // log does not name a voter, so it votes for nobody and waits for settled votes:
        // protocol sweep seed 45009, machines mode, timed out by init_limit again and again).
        invite_absent_members(leader);
        if (!leader.established()) return;  // until then init_limit bounds the leader (§4)
        peer_set synced;
        synced.insert(ctx_.self());
        for (const auto& link : leader.links)
            if (link.type == learner_type::participant &&
                (link.at == learner_link::stage::awaiting_uptodate ||
                 link.at == learner_link::stage::broadcasting))
                synced.insert(link.id);
        if (!ctx_.quorums().contains_quorum(synced)) {
            ++ctx_.counters.leader_step_downs;
            ctx_.request_election("leader lost its quorum");
        }
    }

    /// §9 step 8: every sync_limit, my settled vote to each member of my configurations that
    /// does not follow me. A member that missed a reconfiguration asks only the voters its own
    /// configuration names, and those may all have been removed and gone: nobody it knows
    /// would ever answer. My LEADING notification carries my configuration's version in its
    /// frame, which is what makes a LOOKING replica behind it follow me (§9 step 7); to
    /// anyone else it is the answer a settled peer gives anyway (§3.4 step 7).
    void invite_absent_members(leader_state& leader) {
        if (ctx_.now_tick < leader.next_invitation_tick) return;
        leader.next_invitation_tick = ctx_.now_tick + ctx_.opts().sync_limit_ticks;
        for (peer_id id : ctx_.all_members()) {
            if (id == ctx_.self() || leader.find_link(id) != nullptr) continue;
            ++ctx_.counters.invitations_sent;
            ctx_.send(id, ctx_.current_vote.to_notification(peer_state::leading));
        }
    }

    // --- learner side ---------------------------------------------------------------------

    /// PROPOSAL after NEWLEADER: log it, ACK once durable — and never before the NEWLEADER
    /// ACK (§5.3, ZOOKEEPER-4685): until that ACK is queued, the proposal waits for it.
    void learner_on_proposal(const log_record& record) {
        auto& learner = *ctx_.learning;
        if (ctx_.self_type() != learner_type::participant) {
            ctx_.leader_misbehaved("PROPOSAL sent to an observer");
            return;
        }
        if (!append_in_order(record)) return;
        if (learner.newleader_epoch_op != 0)
            ctx_.send_cumulative(learner.leader, wire::ack{record.id}, ctx_.last_log_op(), learner.newleader_epoch_op);
    }

    /// PROPOSALS after NEWLEADER: each transaction as a PROPOSAL of its own, and one ACK, of
    /// the last logged, once durable (it covers the run: the connection is FIFO). A
    /// transaction the leader misbehaves with ends the batch there.
    void learner_on_proposal_batch(const wire::proposal_batch& m, const shared_bytes& frame) {
        auto& learner = *ctx_.learning;
        if (ctx_.self_type() != learner_type::participant) {
            ctx_.leader_misbehaved("PROPOSALS sent to an observer");
            return;
        }
        zxid logged;
        for_each_batch_txn(m, [&](zxid id, byte_view txn) {
            if (append_in_order(log_record{id, frame.slice(txn)})) logged = id;
            return !ctx_.election_requested();
        });
        if (ctx_.election_requested() || logged == zxid{}) return;
        if (learner.newleader_epoch_op != 0)
            ctx_.send_cumulative(learner.leader, wire::ack{logged}, ctx_.last_log_op(), learner.newleader_epoch_op);
    }

    /// COMMIT after NEWLEADER: names a pending proposal, and commits it and every one before
    /// it (§6.1; a leader committing a run in one step sends only the last one's COMMIT).
    void learner_on_commit(const wire::commit& m) {
        auto& learner = *ctx_.learning;
        if (!learner.holds_unapplied(m.id)) {
            ctx_.leader_misbehaved("COMMIT of a transaction not pending");
            return;
        }
        learner.known_committed = std::max(learner.known_committed, m.id);
        if (learner.at == learner_state::stage::broadcasting) ctx_.apply_known_committed();
    }

    /// INFORM (observers): a committed transaction with its bytes (§8).
    void learner_on_inform(const log_record& record) {
        auto& learner = *ctx_.learning;
        if (!append_in_order(record)) return;
        learner.known_committed = std::max(learner.known_committed, record.id);
        if (learner.at == learner_state::stage::broadcasting) ctx_.apply_known_committed();
    }

    // --- client requests on a learner -------------------------------------------------------

    /// Forwards a client write to the leader (§6.1): the REPLY names its zxid or refuses it.
    void learner_forward_write(request_id id, byte_view txn) {
        ctx_.send(ctx_.learning->leader, wire::forwarded_request{id, wire::request_kind::write, txn});
        ctx_.clients.add_write(id, std::nullopt);
        ++ctx_.counters.requests_forwarded;
    }

    /// Forwards the client writes `txns` (request ids `first`, `first + 1`, …), submitted in
    /// one turn, to the leader as REQUESTS frames of at most options::max_batch_bytes each
    /// (§6.1): only to a leader that speaks protocol 0x10001 (§0.2; the caller checks).
    void learner_forward_batch(request_id first, std::span<const byte_view> txns) {
        ZAB_ASSERT(ctx_.learning->leader_protocol >= protocol_forwarded_batches,
                   "REQUESTS to a leader of a protocol version without them");
        const frame_context context{ctx_.opts().group_id, ctx_.config().version()};
        for (std::size_t i = 0; i < txns.size();) {
            std::size_t run = 0;
            std::uint64_t bytes = 0;
            while (i + run < txns.size() && run < UINT32_MAX) {
                bytes += 4 + txns[i + run].size();
                if (run > 0 && bytes > ctx_.opts().max_batch_bytes) break;
                ++run;
            }
            ctx_.send_frame_after(ctx_.learning->leader,
                                  encode_forwarded_batch(context, first + i, txns.subspan(i, run)));
            for (std::size_t k = 0; k < run; ++k) ctx_.clients.add_write(first + i + k, std::nullopt);
            ctx_.counters.requests_forwarded += run;
            ++ctx_.counters.forwarded_batches;
            i += run;
        }
    }

    /// Forwards a client sync (or lease sync, §7.1) to the leader (§7).
    void learner_forward_sync(request_id id, wire::request_kind kind = wire::request_kind::sync) {
        ctx_.send(ctx_.learning->leader, wire::forwarded_request{id, kind, {}});
        ctx_.clients.add_sync(id);
        ++ctx_.counters.requests_forwarded;
    }

    /// REPLY: the leader proposed forwarded write `request_id`, or refused it for good.
    void learner_on_reply(const wire::forwarded_reply& m) {
        if (m.outcome != wire::reply_outcome::accepted) {
            ctx_.clients.refuse(m.request_id, refusal_error(m.outcome), ctx_.learning->leader);
            return;
        }
        ctx_.clients.assign(m.request_id, m.id);
        // Perhaps applied already (a quick COMMIT): nothing is lost, the table checks.
        if (m.id <= ctx_.last_applied) ctx_.clients.applied_through(ctx_.last_applied);
    }

    /// REPLIES: the leader's answer to `count` forwarded writes of one REQUESTS frame, all
    /// proposed as consecutive zxids or all refused for good (§6.1).
    void learner_on_reply_batch(const wire::reply_batch& m) {
        const bool accepted = m.outcome == wire::reply_outcome::accepted;
        for (std::uint32_t k = 0; k < m.count; ++k) {
            // The decoder checked that an accepted run stays inside the epoch.
            const zxid id = accepted ? zxid{m.first.epoch(), m.first.counter() + k} : zxid{};
            learner_on_reply(wire::forwarded_reply{m.first_request_id + k, m.outcome, id});
        }
    }

    /// SYNC from the leader: a quorum confirmed its leadership after my sync reached it, and
    /// every COMMIT it sent before is applied here (FIFO, and COMMITs apply on arrival).
    void learner_on_sync_answer(const wire::sync_answer& m) {
        ctx_.clients.answer_sync(m.request_id, ctx_.last_applied);
    }

    /// PING from the leader: answer with its round (§6.2, §7).
    void learner_on_ping(const wire::ping& m) { ctx_.send(ctx_.learning->leader, wire::ping{ctx_.last_logged, m.round}); }

    /// Every tick while learning: a leader silent for sync_limit is gone (§6.2).
    void learner_tick() {
        auto& learner = *ctx_.learning;
        if (!learner.info_sent) return;
        if (ctx_.now_tick > learner.last_heard_tick + ctx_.opts().sync_limit_ticks) {
            ++ctx_.counters.leader_silences;
            ctx_.request_election("leader silent for sync_limit");
        }
    }

protected:  // the building blocks of the phase, for policies derived from this one
    /// A learner forwards only once UPTODATE (§6.1): a REQUEST or REQUESTS before it drops
    /// the learner. True when `link` may forward.
    bool forwarding_allowed(learner_link& link) {
        if (link.at == learner_link::stage::broadcasting) return true;
        ctx_.ignore(link.id, ignore_reason::out_of_stage);
        ctx_.drop_learner(link.id, "a request before UPTODATE");
        return false;
    }

    /// One write forwarded by `link`, proposed alone: `backpressure` once the learner has
    /// max_forwarded_per_learner of its writes outstanding, else `propose`'s answer.
    result<zxid> propose_forwarded(learner_link& link, byte_view txn) {
        if (link.forwarded_outstanding >= ctx_.opts().max_forwarded_per_learner)
            return make_error_code(errc::backpressure);
        return propose(txn, link.id);
    }

    /// Registers proposal `id`, whose txn is `txn` inside `frame` (a PROPOSAL, or a PROPOSALS
    /// batch when `batched`): the leader's own append, and the forwarding learner's count.
    void record_proposal(zxid id, const shared_bytes& frame, byte_view txn, bool batched, peer_id origin) {
        auto& leader = *ctx_.leading;
        outstanding_proposal p;
        p.record = log_record{id, frame.slice(txn)};
        p.frame = frame;
        p.frame_is_batch = batched;
        p.log_op = ctx_.append(p.record);
        p.origin = origin;
        if (learner_link* link = origin != 0 ? leader.find_link(origin) : nullptr) {
            p.origin_connection = link->connection;
            ++link->forwarded_outstanding;
        }
        leader.last_proposed = id;
        leader.outstanding.push_back(std::move(p));
        ctx_.note_proposed(id);
    }

    /// The proposal (or batch) frame to every follower that is sent the leader's proposals.
    void send_to_followers(const shared_bytes& frame) {
        for (const auto& link : ctx_.leading->links)
            if (link.forwarding && link.type == learner_type::participant)
                ctx_.send_frame_after(link.id, frame);
    }

    /// A definite refusal on the wire and back: the two directions of one mapping.
    static wire::reply_outcome refusal_reply(errc e) noexcept {
        switch (e) {
            case errc::backpressure: return wire::reply_outcome::backpressure;
            case errc::zxid_exhausted: return wire::reply_outcome::zxid_exhausted;
            case errc::too_large: return wire::reply_outcome::too_large;
            case errc::transferring: return wire::reply_outcome::transferring;
            case errc::invalid_argument: return wire::reply_outcome::invalid_argument;
            case errc::reconfig_in_progress: return wire::reply_outcome::reconfig_in_progress;
            case errc::version_mismatch: return wire::reply_outcome::version_mismatch;
            case errc::new_config_no_quorum: return wire::reply_outcome::new_config_no_quorum;
            default: return wire::reply_outcome::not_leader;
        }
    }
    static errc refusal_error(wire::reply_outcome o) noexcept {
        switch (o) {
            case wire::reply_outcome::backpressure: return errc::backpressure;
            case wire::reply_outcome::zxid_exhausted: return errc::zxid_exhausted;
            case wire::reply_outcome::too_large: return errc::too_large;
            case wire::reply_outcome::transferring: return errc::transferring;
            case wire::reply_outcome::invalid_argument: return errc::invalid_argument;
            case wire::reply_outcome::reconfig_in_progress: return errc::reconfig_in_progress;
            case wire::reply_outcome::version_mismatch: return errc::version_mismatch;
            case wire::reply_outcome::new_config_no_quorum: return errc::new_config_no_quorum;
            default: return errc::not_leader;
        }
    }

    /// One heartbeat round to every learner (but `skip`): PING with a new round number.
    void send_heartbeats(const std::vector<peer_id>& skip = {}) {
        auto& leader = *ctx_.leading;
        ++leader.ping_round;
        if (ctx_.opts().read_lease_ticks != 0) {
            // §7.1: a lease runs from the tick its round went out in; one entry per tick.
            auto& ticks = leader.lease.round_ticks;
            if (ticks.empty() || ticks.back().second != ctx_.now_tick)
                ticks.emplace_back(leader.ping_round, ctx_.now_tick);
        }
        for (const auto& link : leader.links)
            if (std::find(skip.begin(), skip.end(), link.id) == skip.end())
                ctx_.send(link.id, wire::ping{leader.last_proposed, leader.ping_round});
    }

    /// §7: a sync is answered once the leader itself and learners answering its round (or a
    /// later one) form a quorum — the leader was still the leader after the sync arrived.
    void answer_syncs() {
        auto& leader = *ctx_.leading;
        std::erase_if(leader.syncs, [&](const pending_sync& s) {
            peer_set confirmed;
            confirmed.insert(ctx_.self());
            for (const auto& link : leader.links)
                if (link.type == learner_type::participant && link.acked_round >= s.round)
                    confirmed.insert(link.id);
            if (!ctx_.quorums().contains_quorum(confirmed)) return false;
            ++ctx_.counters.syncs_answered;
            if (s.origin == ctx_.self()) {
                ctx_.clients.answer_sync(s.id, ctx_.last_applied);
            } else if (ctx_.connection_to(s.origin) == s.connection) {
                ctx_.send(s.origin, wire::sync_answer{s.id});
            }
            return true;
        });
    }

    /// §7.1: the lease from the latest round that the leader and voters answering it (or a
    /// later one) after their UPTODATE make a quorum of: until that round's tick plus
    /// options::lease_duration_ticks(). A changed quorum system or a transfer under way
    /// revokes it: only rounds sent from then on count.
    void update_read_lease(leader_state& leader) {
        auto& lease = leader.lease;
        if (lease.quorums_generation != ctx_.quorums_generation() || leader.transfer) {
            lease.quorums_generation = ctx_.quorums_generation();
            lease.until = 0;
            lease.rounds_from = leader.ping_round + 1;
            lease.round_ticks.clear();
            return;
        }
        const std::uint64_t duration = ctx_.opts().lease_duration_ticks();
        // A round sent `duration` ticks ago or earlier can lease nothing any more.
        while (lease.round_ticks.size() > 1 && lease.round_ticks[1].second + duration <= ctx_.now_tick)
            lease.round_ticks.pop_front();
        // The highest round a quorum answered: answers sorted downwards, the first prefix
        // that (with the leader) is a quorum. The leader answers every round itself.
        std::vector<std::pair<std::uint64_t, peer_id>>& answers = lease_scratch_;
        answers.clear();
        for (const auto& link : leader.links)
            if (link.type == learner_type::participant && link.lease_round >= lease.rounds_from)
                answers.emplace_back(link.lease_round, link.id);
        std::sort(answers.begin(), answers.end(), std::greater<>{});
        peer_set& holders = holders_scratch_;
        holders.clear();
        holders.insert(ctx_.self());
        std::uint64_t round = 0;
        if (ctx_.quorums().contains_quorum(holders)) round = leader.ping_round;
        for (std::size_t i = 0; round == 0 && i < answers.size(); ++i) {
            holders.insert(answers[i].second);
            if (ctx_.quorums().contains_quorum(holders)) round = answers[i].first;
        }
        if (round < lease.rounds_from) return;
        // The tick of the last entry whose first round is at most `round`.
        const auto sent = std::upper_bound(lease.round_ticks.begin(), lease.round_ticks.end(), round,
                                           [](std::uint64_t r, const auto& e) { return r < e.first; });
        if (sent == lease.round_ticks.begin()) return;  // sent too long ago to count
        lease.until = std::max(lease.until, std::prev(sent)->second + duration);
    }

    bool append_in_order(const log_record& record) {
        auto& learner = *ctx_.learning;
        const zxid last = ctx_.last_zxid_visible;
        if (record.id <= last) return false;  // a duplicate of a synced proposal
        // After NEWLEADER, broadcast carries only the leader's own epoch's transactions
        // (§5.5), and counter 0 is never one (§1): anything else is a leader that lies — a
        // record it logged would be advertised, win elections, and clash with the real
        // history (found by the cluster fuzzer: a PROPOSAL <4, 0> from a leader of epoch 1).
        if (record.id.epoch() != learner.epoch || record.id.counter() == 0) {
            ctx_.leader_misbehaved("a proposal outside the leader's epoch (§1, §5.5)");
            return false;
        }
        if (!last.continued_by(record.id, ctx_.first_counter())) {
            ctx_.leader_misbehaved("a hole in the proposals (§10.13 contiguity)");
            return false;
        }
        ctx_.append(record);
        learner.unapplied.push_back(record);
        return true;
    }

    /// The highest zxid that a quorum of voters (of every verifier) holds durably: each
    /// voter's progress is its link's `last_acked`, the leader's its own durable prefix of
    /// `outstanding` (etcd's tracker + quorum: per-member progress, not a set per proposal).
    zxid quorum_acked(const leader_state& leader) {
        std::vector<std::pair<zxid, peer_id>>& progress = progress_scratch_;
        progress.clear();
        // The leader's own entry only once its log holds one of the outstanding proposals
        // durably (before that it holds nothing of them; what it committed is no longer in
        // `outstanding`, and the commit point never goes back).
        // Only voters of an active configuration count: a follower that joins without a vote
        // (§9), or a leader that a reconfiguration left without one, holds nothing toward a
        // quorum.
        const quorum_system& quorums = ctx_.quorums();
        const bool all_count = ctx_.opts().test_only.broken_reconfig ==
                               options::test_hooks::reconfig_rule::voteless_acks_count;
        if (leader.self_acked_count > 0 && (all_count || quorums.is_voter(ctx_.self())))
            progress.emplace_back(leader.outstanding[leader.self_acked_count - 1].record.id,
                                  ctx_.self());
        for (const auto& link : leader.links)
            if (link.type == learner_type::participant && link.last_acked.epoch() == leader.epoch &&
                (all_count || quorums.is_voter(link.id)))
                progress.emplace_back(link.last_acked, link.id);
        if (const auto k = quorums.simple_majority()) {
            // Every entry is a voter's: the k-th largest is held by k voters, a quorum.
            if (progress.size() < *k) return zxid{};
            std::nth_element(progress.begin(), progress.begin() + static_cast<std::ptrdiff_t>(*k - 1),
                             progress.end(), std::greater<>{});
            return progress[*k - 1].first;
        }
        std::sort(progress.begin(), progress.end(), std::greater<>{});
        peer_set& holders = holders_scratch_;
        holders.clear();
        for (const auto& [acked, id] : progress) {
            holders.insert(id);  // everyone so far holds `acked` (they are sorted downwards)
            if (ctx_.quorums().contains_quorum(holders)) return acked;
        }
        return zxid{};
    }

    void commit_proposal(outstanding_proposal p) {
        auto& leader = *ctx_.leading;
        const zxid id = p.record.id;
        learner_link* origin = p.origin != 0 ? leader.find_link(p.origin) : nullptr;
        if (origin && origin->connection == p.origin_connection && origin->forwarded_outstanding > 0)
            --origin->forwarded_outstanding;
        for (const auto& link : leader.links) {
            if (!link.forwarding) continue;
            if (link.type != learner_type::participant)
                ctx_.send(link.id, wire::inform{id, p.record.txn.view()});
            else if (link.at != learner_link::stage::broadcasting)  // counted by a syncing learner
                ctx_.send(link.id, wire::commit{id});
            // A serving follower gets one COMMIT for the run, from leader_advance.
        }
        leader.remember_committed(p.record);
        ctx_.apply(p.record);
        ctx_.note_committed(id);
    }



    peer_context& ctx_;
    std::vector<std::pair<zxid, peer_id>> progress_scratch_;  ///< quorum_acked's, reused
    peer_set holders_scratch_;                                ///< quorum_acked's, reused
    std::vector<std::pair<std::uint64_t, peer_id>> lease_scratch_;  ///< update_read_lease's
    std::vector<byte_view> placed_scratch_;                   ///< propose_batch's, reused
    std::vector<byte_view> forwarded_scratch_;                ///< leader_on_request_batch's
};

}  // namespace zab
