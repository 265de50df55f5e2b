// zab/testing/election_checker.hpp — checks every election decision in a simulated run.
//
// After every event it looks for decisions the peers made since the last look and checks
// them against what really happened in the run, not against the peer's own word:
//   - a decision by the LOOKING branch rests on a quorum (counted independently) of votes
//     equal to the decided vote, each really delivered to the decider by its voter, and the
//     decided leader's (current epoch, last zxid, sid) is at least that of every LOOKING
//     voter in the quorum (docs/protocol.md §3.3, §3.4 step 4);
//   - a decision through FOLLOWING/LEADING votes rests on a quorum of agreeing settled votes
//     and on checkLeader: the leader itself told the decider it was LEADING (§3.4 step 6).
// FLE alone does not make the leader unique: Discovery does (§3, safety note).
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "zab/core/codec.hpp"
#include "zab/core/peer_context.hpp"
#include "zab/core/vote.hpp"
#include "zab/testing/peer_internals.hpp"
#include "zab/testing/sim_network.hpp"

namespace zab::testing {

template <typename Simulator>
class election_checker {
public:
    explicit election_checker(Simulator& sim) : sim_{sim}, seen_(sim.nodes().size() + 1) {
        sim.set_notification_observer([this](const typename Simulator::delivered_vote& d) {
            delivered_.insert(key(d.receiver, d.sender, d.cast));
            if (d.cast.state == peer_state::leading && d.cast.leader == d.sender)
                told_leading_.insert({d.receiver, d.sender});
        });
        // A voter's own vote in each round it entered, also from the NOTIFICATIONs it sends:
        // a voter may enter a round and leave it within one simulator event (its timeout
        // ticks and a newer round's notification handled together), unseen by `check`.
        sim.network().add_observer([this](const network_event& e) {
            if (e.what != network_event::kind::send) return;
            const auto header = decode_header(e.frame.view());
            if (!header || header.value().type != wire::message_type::notification) return;
            const auto decoded = decode(e.frame.view());
            if (!decoded) return;
            const auto* n = std::get_if<wire::notification>(&decoded.value().msg);
            if (n == nullptr) return;
            const vote v = vote::from(*n);
            if (v.state != peer_state::looking) return;
            if (v.leader == e.from) {
                initial_votes_.insert({e.from, v.round, v.leader, v.leader_zxid.value(),
                                       v.leader_epoch});
                return;
            }
            // It entered this round and adopted another's vote in the same event (a paused
            // voter handling a newer round's notification on resuming): its own vote then
            // is what its state says now, since an election step writes neither its log
            // nor its epochs (election.hpp, initial_vote).
            const auto* p = sim_.peer_of(e.from);
            if (p == nullptr) return;
            const auto known = initial_votes_.lower_bound({e.from, v.round, 0, 0, 0});
            if (known != initial_votes_.end() && std::get<0>(*known) == e.from &&
                std::get<1>(*known) == v.round)
                return;
            const auto& ctx = internals(*p);
            if (ctx.self_votes())
                initial_votes_.insert({e.from, v.round, e.from, ctx.last_logged.value(),
                                       ctx.durable_epochs.current});
        });
        sim.add_checker([this](Simulator&) { check(); });
    }

    /// Everything found wrong so far, one line each.
    const std::vector<std::string>& failures() const noexcept { return failures_; }
    std::uint64_t decisions_checked() const noexcept { return decisions_; }
    std::uint64_t decided_by_looking_quorum() const noexcept { return by_looking_; }
    std::uint64_t decided_by_joining() const noexcept { return by_joining_; }
    std::uint64_t decided_by_handover() const noexcept { return by_handover_; }
    std::uint64_t decided_by_newer_configuration() const noexcept { return by_newer_configuration_; }

    /// True when every live voter has decided, all for the same leader, that leader leads,
    /// and every live observer observes it.
    bool all_decided_same_leader() const {
        std::optional<peer_id> leader;
        for (const auto& n : sim_.nodes()) {
            if (!n.peer) continue;
            const auto state = n.peer->state();
            if (state == peer_state::looking) return false;
            const peer_id l = n.peer->current_vote().leader;
            if (leader && *leader != l) return false;
            leader = l;
        }
        if (!leader) return false;
        const auto* p = sim_.peer_of(*leader);
        return p != nullptr && p->state() == peer_state::leading;
    }

private:
    using vote_key = std::tuple<peer_id, peer_id, peer_id, std::uint64_t, epoch_t, std::uint64_t,
                                peer_state>;
    static vote_key key(peer_id receiver, peer_id sender, const vote& v) {
        return {receiver, sender, v.leader, v.leader_zxid.value(), v.leader_epoch, v.round,
                v.state};
    }

    void fail(peer_id at, const std::string& what) {
        failures_.push_back(fmt::format("t={} peer {}: {}", sim_.now(), at, what));
    }

    /// Whether the votes counted are a majority of the voters of the configuration the
    /// decision counted them in (§9 step 7: the decider's committed one, recorded with it).
    static bool is_quorum(const election_decision& d) {
        peer_set ids;
        for (const auto& [id, v] : d.counted) ids.insert(id);
        return quorum_system::of(d.counted_in).contains_quorum(ids);
    }
    bool is_voter_at(peer_id at, peer_id id) const {
        if (const auto* p = sim_.peer_of(at)) return internals(*p).quorums().is_voter(id);
        return sim_.config().is_voter(id);
    }

    void check() {
        for (const auto& n : sim_.nodes()) {
            if constexpr (requires { n.peer->election().round_initial_vote(); }) {
                if (n.peer) {
                    // What each voter's vote may only move up from, per round it entered.
                    const vote& initial = n.peer->election().round_initial_vote();
                    initial_votes_.insert({n.id, n.peer->election().logical_clock(),
                                           initial.leader, initial.leader_zxid.value(),
                                           initial.leader_epoch});
                }
            }
            if (!n.peer || !n.peer->last_decision()) continue;
            const auto& d = *n.peer->last_decision();
            auto& last = seen_[n.id];
            if (last.first == n.incarnation && last.second >= d.sequence) continue;
            last = {n.incarnation, d.sequence};
            ++decisions_;
            check_decision(n.id, d);
        }
    }

    void check_decision(peer_id at, const election_decision& d) {
        using basis = election_decision::basis;
        if (d.how == basis::fixed) return;
        if (d.how == basis::newer_configuration) {
            // A replica that missed a reconfiguration follows a leader that says it leads
            // under a newer one (§9): only ever following, never leading, on that leader's
            // own LEADING vote.
            ++by_newer_configuration_;
            const bool own_vote = d.counted.size() == 1 && d.counted[0].first == d.decided.leader &&
                                  d.counted[0].second.state == peer_state::leading;
            if (d.decided.state == peer_state::leading || !own_vote)
                fail(at, fmt::format("followed {} for its configuration without its own LEADING "
                                     "vote", d.decided));
            return;
        }
        if (d.how == basis::handed_over) {
            // An established leader named its successor (§6.4): a voter other than itself,
            // with the leader's epoch. Safety does not rest on this decision (discovery's
            // epoch quorum does), so the check is only that it names someone who may lead.
            ++by_handover_;
            if (!is_voter_at(at, d.decided.leader))
                fail(at, fmt::format("handed over to {}, which is not a voter", d.decided));
            if (d.decided.state == peer_state::leading && d.decided.leader != at)
                fail(at, fmt::format("leads after a hand-off to {}", d.decided));
            return;
        }
        if (!is_quorum(d))
            fail(at, fmt::format("decided {} without a quorum ({} votes of voters {}, basis {})", d.decided,
                                 d.counted.size(), fmt::join(d.counted_in.voters(), " "), static_cast<int>(d.how)));
        if (d.how == basis::looking_quorum) {
            ++by_looking_;
            vote target = d.decided;
            target.state = peer_state::looking;
            for (const auto& [voter, v] : d.counted) {
                if (!votes_agree(v, target))
                    fail(at, fmt::format("counted vote {} of {} differs from {}", v, voter,
                                         d.decided));
                if (voter != at && !delivered_.contains(key(at, voter, v)))
                    fail(at, fmt::format("counted vote {} of {} was never delivered", v, voter));
                // A LOOKING voter only ever moves its vote up from its own (§3.4 step 4), so
                // the leader it backs is at least as recent as it is. A FOLLOWING/LEADING vote
                // of the same round also counts, as in ZooKeeper: that voter joined an
                // established leader instead of comparing (checked by delivery above).
                // Compared with the voter's own vote when it entered that round (its history
                // then: epochs and logs move on once leaders are established).
                if (v.state != peer_state::looking) continue;
                bool justified = false;
                for (auto it = initial_votes_.lower_bound({voter, v.round, 0, 0, 0});
                     it != initial_votes_.end() && std::get<0>(*it) == voter &&
                     std::get<1>(*it) == v.round;
                     ++it) {
                    const auto [id, round, leader, zxid_value, epoch] = *it;
                    if (leader == voter &&
                        std::tie(d.decided.leader_epoch, d.decided.leader_zxid, d.decided.leader) >=
                            std::make_tuple(epoch, zxid::from_value(zxid_value), voter))
                        justified = true;
                }
                if (!justified)
                    fail(at, fmt::format("leader {} is behind voter {}'s own vote in round {}",
                                         d.decided, voter, v.round));
            }
            return;
        }
        ++by_joining_;
        bool leader_said_leading = d.decided.leader == at;
        for (const auto& [voter, v] : d.counted) {
            if (!votes_agree(v, d.decided))
                fail(at, fmt::format("counted settled vote {} of {} differs from {}", v, voter,
                                     d.decided));
            if (voter != at && !delivered_.contains(key(at, voter, v)))
                fail(at, fmt::format("counted vote {} of {} was never delivered", v, voter));
        }
        // checkLeader looks at the leader's own vote in the box, whatever its epoch.
        if (told_leading_.contains({at, d.decided.leader})) leader_said_leading = true;
        if (!leader_said_leading)
            fail(at, fmt::format("joined {} without the leader's own LEADING vote (checkLeader)",
                                 d.decided));
    }

    Simulator& sim_;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> seen_;  // per id: (incarnation, seq)
    std::set<vote_key> delivered_;
    std::set<std::pair<peer_id, peer_id>> told_leading_;  ///< (receiver, leader) pairs
    /// (voter, round, its own vote's leader, zxid, epoch) for every round a voter entered.
    std::set<std::tuple<peer_id, std::uint64_t, peer_id, std::uint64_t, epoch_t>> initial_votes_;
    std::vector<std::string> failures_;
    std::uint64_t decisions_ = 0;
    std::uint64_t by_looking_ = 0;
    std::uint64_t by_joining_ = 0;
    std::uint64_t by_handover_ = 0;
    std::uint64_t by_newer_configuration_ = 0;
};

}  // namespace zab::testing
