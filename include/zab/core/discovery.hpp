// zab/core/discovery.hpp — the Discovery phase (docs/protocol.md §4): the leader chooses a new
// epoch strictly above every epoch a quorum accepted, and each learner promises it.
//
// Leader: FOLLOWERINFO/OBSERVERINFO in → once the leader and a quorum of voters are in,
// acceptedEpoch = epoch is written, and LEADERINFO leaves only once that is durable
// (ZOOKEEPER-1291) → ACKEPOCHs counted, a learner ahead of the leader refused → with a quorum,
// currentEpoch = epoch is written (§4.6). Learner: FOLLOWERINFO out → LEADERINFO(e) in →
// acceptedEpoch = e durable → ACKEPOCH out (§4.5).
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "zab/core/logging.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/options.hpp"
#include "zab/core/peer_context.hpp"

namespace zab {

/// What a FOLLOWERINFO or OBSERVERINFO announces: the role the learner joins as, its
/// accepted epoch (§4.2), its protocol version (§0.2) and the options it must share.
struct learner_announcement {
    learner_type type = learner_type::participant;
    epoch_t accepted_epoch = 0;
    std::uint32_t protocol = protocol_version;
    wire::agreed_options agreed{};
};

class zab_discovery {
public:
    explicit zab_discovery(peer_context& ctx) : ctx_{ctx} {}

    // --- leader side ----------------------------------------------------------------------

    /// The peer just became LEADING: propose an epoch above the one it accepted (§4.3).
    void leader_start(const election_decision& decision) {
        auto& leader = *ctx_.leading;
        refused_leader_.reset();
        leader.epoch = ctx_.written_epochs.accepted + 1;
        leader.epoch_voters.insert(ctx_.self());
        leader.epoch_acks.insert(ctx_.self());
        leader.election_round = decision.decided.round;
        leader.loyal_voters.insert(ctx_.self());
        for (const auto& [id, v] : decision.counted)
            if (v.leader == ctx_.self()) leader.loyal_voters.insert(id);
    }

    /// A notification from voter `from` while leading and not yet established
    /// (ZOOKEEPER-3109). A voter that votes for another leader in this election's round or
    /// a later one changed its mind (a better vote reached it after this peer decided); once
    /// the voters still for this leader — or already following it — are no quorum, nothing
    /// can establish it, and waiting out init_limit would leave the group leaderless that
    /// long. It gives up at once. A vote of an older round is a voter that has not caught up
    /// (it restarted): this peer's answer will bring it, so it does not count against it.
    void leader_on_vote(peer_id from, const wire::notification& n) {
        auto& leader = *ctx_.leading;
        if (leader.established() || !ctx_.quorums().is_voter(from)) return;
        if (n.leader == ctx_.self()) {
            leader.loyal_voters.insert(from);
            return;
        }
        if (n.state == peer_state::looking && n.round < leader.election_round) return;
        if (!leader.loyal_voters.erase(from)) return;
        peer_set possible = leader.loyal_voters;
        for (const auto& link : leader.links)
            if (link.type == learner_type::participant) possible.insert(link.id);
        if (ctx_.quorums().contains_quorum(possible)) return;
        zab::log(log_level::info,
                 "peer {}: voter {} now votes for {}; the votes still for me are no quorum "
                 "(ZOOKEEPER-3109): giving up the lead",
                 ctx_.self(), from, n.leader);
        ++ctx_.counters.leaderships_abandoned;
        ctx_.request_election("a quorum of the votes it knows of is no longer for it");
    }

    /// FOLLOWERINFO or OBSERVERINFO from `from` on a new connection, with its protocol
    /// version (§0.2) and the options it must share with this leader (§4.2).
    void leader_on_info(peer_id from, const learner_announcement& info) {
        auto& leader = *ctx_.leading;
        const learner_type claimed = info.type;
        const epoch_t accepted = info.accepted_epoch;
        if (refuse_protocol(from, "learner", info.protocol)) {
            ctx_.forget_learner(from, "a FOLLOWERINFO of a protocol version it does not speak");
            ctx_.close(from);
            return;
        }
        // Whatever it claims, only a voter of an active configuration counts: a voter may
        // join as an observer (it does not vote until synced, ZOOKEEPER-261,
        // options::non_voter_until_synced), and a replica whose view of the membership lags
        // — a joiner that a reconfiguration it has not heard of made an observer — may join
        // as a follower: it is synced, learns the reconfiguration, and joins again as what
        // it is (§9). Its acknowledgements count toward nothing meanwhile.
        ctx_.forget_learner(from, "a new FOLLOWERINFO");
        learner_link link;
        link.id = from;
        link.connection = *ctx_.connection_to(from);
        link.type = claimed;
        link.accepted_epoch = accepted;
        link.last_heard_tick = ctx_.now_tick;
        link.protocol = ctx_.negotiated(info.protocol);
        // §4.2: a learner whose application options differ will refuse this leader once
        // LEADERINFO tells it the leader's (so its epoch still counts here: LEADERINFO
        // leaves once the epoch closes); its promise and acknowledgements count for nothing.
        compare_agreed_options(link, info.agreed);
        // §4.3: while the epoch is open, it rises above every voter's accepted epoch (>=,
        // ZOOKEEPER-1343). Observers' accepted epochs do not count (ZOOKEEPER-2959).
        if (leader.at == leader_state::stage::gathering_epoch && claimed == learner_type::participant) {
            leader.epoch = std::max(leader.epoch, accepted + 1);
            leader.epoch_voters.insert(from);
        } else if (claimed == learner_type::participant && accepted > leader.epoch &&
                   ctx_.quorums().is_voter(from)) {
            // The epoch is closed and this voter promised a later one: it refuses mine for
            // good (§4.5) and would stay out of the ensemble for as long as I lead. Step
            // down, so that the next election proposes an epoch it can accept.
            zab::log(log_level::info,
                     "peer {}: voter {} accepted epoch {} above mine ({}); stepping down", ctx_.self(),
                     from, accepted, leader.epoch);
            ++ctx_.counters.leader_step_downs;
            ctx_.request_election("a voter promised a later epoch");
        }
        leader.links.push_back(link);
    }

    /// ACKEPOCH from `from` (§4.6).
    void leader_on_ack_epoch(peer_id from, const wire::ack_epoch& m) {
        auto& leader = *ctx_.leading;
        learner_link* link = leader.find_link(from);
        if (link == nullptr || link->at != learner_link::stage::awaiting_ack_epoch) {
            ctx_.ignore(from, link == nullptr ? ignore_reason::unknown_learner
                                              : ignore_reason::out_of_stage);
            return;
        }
        if (link->refused) {
            // It was told this leader's agreed_fingerprint and promised anyway (it should
            // have refused, §4.5): the leader refuses to sync it.
            ++ctx_.counters.learners_refused;
            ctx_.drop_learner(from, "its agreed_fingerprint differs from the leader's");
            return;
        }
        if (m.current_epoch &&
            std::tie(*m.current_epoch, m.last_logged) >
                std::tie(ctx_.durable_epochs.current, ctx_.last_logged)) {
            // The learner is more recent than the leader: it must not be synced by it (§4.6).
            zab::log(log_level::info, "peer {}: refusing learner {}: it is ahead ({}, {})",
                     ctx_.self(), from, *m.current_epoch, m.last_logged);
            ++ctx_.counters.learners_refused;
            // Read before the drop: it erases the link `link` points into.
            const bool voter = link->type == learner_type::participant && ctx_.quorums().is_voter(from);
            ctx_.drop_learner(from, "its history is ahead of the leader's");
            // Established, I would keep it out for as long as I lead: a new election lets
            // the most recent history lead instead.
            if (leader.established() && voter)
                ctx_.request_election("a voter is ahead of the established leader");
            return;
        }
        link->last_logged = m.last_logged;
        link->move_to(learner_link::stage::awaiting_sync);
        if (m.current_epoch && link->type == learner_type::participant) leader.epoch_acks.insert(from);
    }

    /// Runs after every event while LEADING: moves the epoch forward when it can.
    void leader_advance() {
        auto& leader = *ctx_.leading;
        using stage = leader_state::stage;
        if (leader.at == stage::gathering_epoch && ctx_.quorums().contains_quorum(leader.epoch_voters)) {
            leader.accepted_write = ctx_.write_epochs({leader.epoch, ctx_.written_epochs.current});
            leader.move_to(stage::writing_epoch);
            zab::log(log_level::info, "peer {}: proposing epoch {}", ctx_.self(), leader.epoch);
        }
        if (leader.reached(stage::writing_epoch)) {
            if (leader.at == stage::writing_epoch && ctx_.epochs_durable(leader.accepted_write))
                leader.move_to(stage::collecting_ack_epochs);
            for (auto& link : leader.links) {
                if (link.at != learner_link::stage::awaiting_epoch) continue;
                if (link.accepted_epoch > leader.epoch) {
                    // It already promised a later epoch; it will not follow this one.
                    ++ctx_.counters.learners_refused;
                    ctx_.drop_learner(link.id, "it promised a later epoch");
                    return leader_advance();
                }
                // Held until acceptedEpoch is durable on the leader (ZOOKEEPER-1291).
                ctx_.send_after(link.id,
                                wire::leader_info{leader.epoch, ctx_.protocol(), ctx_.opts().agreed()},
                                0, leader.accepted_write);
                link.move_to(learner_link::stage::awaiting_ack_epoch);
            }
        }
        if (leader.at == stage::collecting_ack_epochs && ctx_.quorums().contains_quorum(leader.epoch_acks)) {
            // §4.6: a quorum promised: the leader's currentEpoch becomes the new epoch.
            leader.current_write = ctx_.write_epochs({leader.epoch, leader.epoch});
            leader.move_to(stage::writing_current_epoch);
        }
        if (leader.at == stage::writing_current_epoch && ctx_.epochs_durable(leader.current_write))
            leader.move_to(stage::collecting_newleader_acks);
    }

    // --- learner side ---------------------------------------------------------------------

    /// The peer just decided to follow (or observe) `leader`.
    void learner_start() { learner_send_info(); }

    void learner_on_connected(peer_id peer) {
        if (peer == ctx_.learning->leader) learner_send_info();
    }

    /// LEADERINFO(e) (§4.5).
    void learner_on_leader_info(const wire::leader_info& m) {
        auto& learner = *ctx_.learning;
        if (learner.at != learner_state::stage::awaiting_leader_info) {
            ctx_.ignore(learner.leader, ignore_reason::out_of_stage);
            return;
        }
        if (refuse_protocol(learner.leader, "leader", m.protocol)) {
            // As a leader of other options (below): votes for it count for nobody while its
            // connection lasts, so the others elect one this replica can follow.
            ctx_.refused_leaders.insert(learner.leader);
            ctx_.request_election("the leader's protocol version is older than any I speak");
            return;
        }
        learner.leader_protocol = ctx_.negotiated(m.protocol);
        if (auto conflict = fingerprint_conflict(learner.leader, ctx_.opts().agreed(), m.agreed)) {
            // §4.5: under other application options (session limits, …) this replica would
            // answer clients differently from the leader's group: it does not follow, and
            // votes for that leader count as votes for nobody in its elections from now on
            // (until that leader's connection goes), so the others elect one it can follow,
            // or it stays out, LOOKING, if none.
            ++ctx_.counters.leaders_refused_options;
            ctx_.refused_leaders.insert(learner.leader);
            const bool repeat = refused_leader_ == conflict;
            refused_leader_ = conflict;
            zab::log(repeat ? log_level::debug : log_level::error,
                     "peer {}: refusing to follow leader {}: its agreed_fingerprint {:016x} differs "
                     "from mine {:016x} (options::agreed_fingerprint: the application's replicated "
                     "options, such as the session options, must be the same on every replica)",
                     ctx_.self(), learner.leader, conflict->theirs, conflict->mine);
            ctx_.request_election("the leader's agreed_fingerprint differs from mine");
            return;
        }
        refused_leader_.reset();
        const epoch_t accepted = ctx_.written_epochs.accepted;
        if (m.new_epoch < accepted) {
            // It proposes an epoch older than one I promised: not my leader.
            ctx_.request_election("leader proposed an epoch below my accepted epoch");
            return;
        }
        learner.epoch = m.new_epoch;
        learner.move_to(learner_state::stage::awaiting_sync);
        if (m.new_epoch > accepted) {
            // Promise durably before saying so (§2, §4.5).
            const storage_op op = ctx_.write_epochs({m.new_epoch, ctx_.written_epochs.current});
            ctx_.send_after(learner.leader, wire::ack_epoch{ctx_.last_logged, ctx_.durable_epochs.current}, 0,
                            op);
        } else {
            // Already promised this epoch (a reconnect): not counted, but synced (§4.5). The
            // promise may still be on its way to the disk: the answer waits for it.
            ctx_.send_after(learner.leader, wire::ack_epoch{ctx_.last_logged, std::nullopt}, 0,
                            ctx_.last_epoch_op());
        }
    }

    /// The leader this replica last refused to follow because its agreed_fingerprint
    /// differs (§4.5); none once it accepted a leader's LEADERINFO, or took the lead itself.
    const std::optional<options_conflict>& refused_leader() const noexcept { return refused_leader_; }

    /// The last leader or learner refused for its protocol version (§0.2), if any.
    const std::optional<protocol_refusal>& last_protocol_refusal() const noexcept {
        return last_protocol_refusal_;
    }

protected:  // the building blocks of the phase, for policies derived from this one

    /// §0.2: true (counted, logged at error with both versions) when `peer`, a `what`,
    /// announced a protocol version older than any this replica speaks. A newer one is
    /// spoken at this replica's own version (negotiated: the lower of the two).
    bool refuse_protocol(peer_id peer, std::string_view what, std::uint32_t theirs) {
        if (theirs >= oldest_protocol_version) return false;
        ++ctx_.counters.protocol_refusals;
        last_protocol_refusal_ = protocol_refusal{peer, theirs};
        zab::log(log_level::error,
                 "peer {}: refusing {} {}: it speaks protocol version {:#x}, this replica "
                 "{:#x} down to {:#x} (docs/protocol.md §0.2)",
                 ctx_.self(), what, peer, theirs, ctx_.protocol(), oldest_protocol_version);
        return true;
    }

    /// §4.2: compares a learner's options with the leader's own. A different fingerprint
    /// (the application's replicated options) makes it `refused`; different lease options
    /// (§7.1) keep its heartbeat answers out of the read lease: a follower that promises
    /// less than the leader assumes would let a lease outlive the follower's promise.
    /// Counted each time, logged at warning once per learner and conflict.
    void compare_agreed_options(learner_link& link, const wire::agreed_options& theirs) {
        const wire::agreed_options mine = ctx_.opts().agreed();
        link.conflict = fingerprint_conflict(link.id, mine, theirs);
        link.refused = link.conflict.has_value();
        const auto lease = lease_conflict(link.id, mine, theirs);
        link.lease_agreed = !lease;
        if (!link.conflict) link.conflict = lease;
        if (!link.conflict) {
            logged_conflicts_.erase(link.id);
            return;
        }
        if (link.refused) ++ctx_.counters.learners_refused_options;
        if (lease) ++ctx_.counters.lease_options_mismatches;
        auto [logged, fresh] = logged_conflicts_.try_emplace(link.id, *link.conflict);
        const bool repeat = !fresh && logged->second == *link.conflict;
        logged->second = *link.conflict;
        const options_conflict& c = *link.conflict;
        zab::log(repeat ? log_level::debug : log_level::warn,
                 "peer {}: learner {} runs with {} {} (mine: {}): {}", ctx_.self(), link.id,
                 c.option, c.theirs, c.mine,
                 link.refused ? "it counts toward nothing, and will refuse to follow me"
                              : "its heartbeat answers do not count toward the read lease (§7.1)");
    }


    void learner_send_info() {
        auto& learner = *ctx_.learning;
        if (learner.info_sent || !ctx_.connected(learner.leader)) return;
        // Only a durable promise is advertised (§2): an epoch write still in flight may be
        // lost in a crash.
        const epoch_t accepted = ctx_.durable_epochs.accepted;
        learner.joined_as = ctx_.self_type();
        if (learner.joined_as == learner_type::participant)
            ctx_.send(learner.leader, wire::follower_info{accepted, ctx_.protocol(), ctx_.opts().agreed()});
        else
            ctx_.send(learner.leader, wire::observer_info{accepted, ctx_.protocol(), ctx_.opts().agreed()});
        learner.info_sent = true;
        learner.last_heard_tick = ctx_.now_tick;
    }

    peer_context& ctx_;
    std::optional<options_conflict> refused_leader_;
    std::optional<protocol_refusal> last_protocol_refusal_;
    std::map<peer_id, options_conflict> logged_conflicts_;  ///< the last one logged per learner
};

}  // namespace zab
