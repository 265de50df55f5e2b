// zab/core/election.hpp — the Election policy interface, and Fast Leader Election (§3).
//
// An election policy is the seam users swap first (docs/design.md rule 4). It is constructed
// with the peer's context and gets these calls, always from the peer's own step:
//   start()                     the peer entered LOOKING: begin a new election
//   on_notification(from, n)    a notification arrived — in *every* state: settled peers
//                               answer LOOKING ones (§3.4 step 7)
//   on_connected(peer)          a connection to `peer` came up
//   on_tick()                   time advanced (ctx.now_tick)
//   next_deadline()             the tick at which on_tick has something to do, if any
// It reports its result with `ctx.decide(...)`; the peer then leaves LOOKING.
//
// An election that lasts initLimit without a leader is logged at warning level, again each
// time its length has doubled, and at least once per notification_timeout_max_ticks after
// that: which voters back a candidate, which vote for
// nobody (voting suspended until synced, ZOOKEEPER-261), which were not heard from. A group
// that cannot form a quorum waits (safety before availability) and says why.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <map>
#include <tuple>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "zab/core/logging.hpp"
#include "zab/core/peer_context.hpp"
#include "zab/core/vote.hpp"

namespace zab {

/// What the peer requires of an election policy (see the comment at the top of this file).
template <typename E>
concept election_policy = std::constructible_from<E, peer_context&> &&
    requires(E& e, const E& const_e, peer_id from, const wire::notification& n) {
        { e.start() } -> std::same_as<void>;
        { e.on_notification(from, n) } -> std::same_as<void>;
        { e.on_connected(from) } -> std::same_as<void>;
        { e.on_tick() } -> std::same_as<void>;
        { const_e.next_deadline() } -> std::same_as<std::optional<std::uint64_t>>;
    };

/// ZooKeeper's Fast Leader Election, docs/protocol.md §3, event-driven: ZooKeeper's blocking
/// `lookForLeader` loop and its receiver thread become `on_notification` and `on_tick`.
class fast_leader_election {
public:
    explicit fast_leader_election(peer_context& ctx) : ctx_{ctx} {}

    /// §3.4 step 1: a new round with my own vote; the vote boxes start empty.
    void start() {
        ++logical_clock_;
        ++ctx_.counters.elections_started;
        proposal_ = round_initial_vote_ = initial_vote();
        received_.clear();
        out_of_election_.clear();
        finalize_deadline_.reset();
        notification_timeout_ = ctx_.opts().notification_timeout_min_ticks;
        last_poll_tick_ = ctx_.now_tick;
        looking_since_ = ctx_.now_tick;
        stall_warning_tick_ = ctx_.now_tick + ctx_.opts().init_limit_ticks;
        abstaining_.clear();
        log(log_level::debug, "peer {}: LOOKING, round {}, my vote {}", ctx_.self(),
            logical_clock_, proposal_);
        send_notifications();
        drain_loopback();
    }

    void on_notification(peer_id from, const wire::notification& n) {
        ++ctx_.counters.notifications_received;
        // §9 step 7: a leader whose configuration is newer than mine. I missed a
        // reconfiguration, and the voters my configuration names may be gone for good, so
        // no quorum of them will ever agree: I follow it, which is always safe (discovery and
        // synchronization decide; FLE only proposes), and its sync brings the
        // reconfiguration.
        if (ctx_.state == peer_state::looking && n.state == peer_state::leading &&
            n.leader == from && ctx_.frame_config_version > ctx_.config().version()) {
            const vote v = vote::from(n);
            votes box{{from, v}};
            finish(election_decision::basis::newer_configuration, box, v);
            return;
        }
        // A follower or an observer under a newer configuration names its leader, which may
        // be no voter of mine, so I never asked it: ask it now; its LEADING answer carries its
        // version. (An observer is what a joiner whose members all left may still reach:
        // zab_fuzz_cluster's fuzz/crashes/cluster-joiner-left-looking-6d1f4798.)
        if (ctx_.state == peer_state::looking &&
            (n.state == peer_state::following || n.state == peer_state::observing) &&
            n.leader != ctx_.self() && n.leader != 0 &&
            ctx_.frame_config_version > ctx_.config().version() && !ctx_.quorums().is_voter(n.leader))
            ctx_.send(n.leader, proposal_notification());
        // Any other frame under a newer configuration than mine (a removed replica's answer,
        // say) tells me I missed a reconfiguration whose members may be none of my voters —
        // and a member it removed is never invited back. Ask every replica I am connected
        // to, at most once a poll each: a member of the newer configuration answers with its
        // leader, whose sync tells me what I am now (removed, if so). Protocol sweep seed
        // 116919 (compaction mode): a voter removed while partitioned, LOOKING for good.
        if (ctx_.state == peer_state::looking &&
            ctx_.frame_config_version > ctx_.config().version())
            for (peer_id id : ctx_.connected_peers())
                if (id != from && !ctx_.quorums().is_voter(id)) answer_at_most_every_poll(id);
        // §3.4 step 7, the receiver thread: non-voters are answered at once and go no further.
        if (!ctx_.quorums().is_voter(from)) {
            // Members and replicas joining the group alike (§9): a joiner finds the leader so.
            answer_at_most_every_poll(from);
            return;
        }
        if (ctx_.state != peer_state::looking) {
            // Settled: answer a LOOKING peer with my settled vote, so joiners find the leader.
            if (n.state == peer_state::looking) reply(from);
            return;
        }
        // A laggard voter is answered so that it catches up. An observer does not answer:
        // voters ignore observers' votes, and a voter answers every observer message, so the
        // two would answer each other forever.
        if (n.state == peer_state::looking && n.round < logical_clock_ &&
            ctx_.quorums().is_voter(ctx_.self()))
            answer_at_most_every_poll(from);
        drop_unwinnable_proposal();
        process(from, vote::from(n));
        drain_loopback();
    }

    /// ZooKeeper resends the last message when a connection comes up; resending my current
    /// vote to the new connection is the equivalent, and spares a notification timeout.
    void on_connected(peer_id peer) {
        if (ctx_.state == peer_state::looking && ctx_.quorums().is_voter(peer) &&
            peer != ctx_.self())
            ctx_.send(peer, proposal_notification());
    }

    void on_tick() {
        if (ctx_.state != peer_state::looking) return;
        if (drop_unwinnable_proposal()) return;
        if (finalize_deadline_ && ctx_.now_tick >= *finalize_deadline_) {
            // §3.4 step 4: finalizeWait passed with nothing better: decide — if the votes
            // are still a quorum: a committed reconfiguration learned meanwhile (§9) may
            // have changed who votes.
            if (ctx_.election_quorums().contains_quorum(agreeing(received_, looking_target()))) {
                finish(election_decision::basis::looking_quorum, received_, looking_target());
                return;
            }
            finalize_deadline_.reset();
        }
        if (!finalize_deadline_ && ctx_.now_tick >= last_poll_tick_ + notification_timeout_) {
            // §3.4 step 2: silence. Send again and double the wait, up to the cap.
            ++ctx_.counters.notification_timeouts;
            send_notifications();
            notification_timeout_ = std::min(notification_timeout_ * 2,
                                             ctx_.opts().notification_timeout_max_ticks);
            last_poll_tick_ = ctx_.now_tick;
            drain_loopback();
        }
        if (ctx_.state == peer_state::looking && ctx_.now_tick >= stall_warning_tick_)
            warn_stalled();
    }

    std::optional<std::uint64_t> next_deadline() const {
        if (ctx_.state != peer_state::looking) return std::nullopt;
        if (finalize_deadline_) return *finalize_deadline_;
        // A finalizeWait cut short by a settled vote leaves a poll timeout that may have
        // run out meanwhile (settled votes do not reset it, step 2): due at the next tick.
        return std::max(last_poll_tick_ + notification_timeout_, ctx_.now_tick + 1);
    }

    // Observability (tests, traces).
    std::uint64_t logical_clock() const noexcept { return logical_clock_; }
    const vote& proposal() const noexcept { return proposal_; }
    /// My own vote as it stood when the current round began (what my proposal may only
    /// move up from, §3.4 step 4).
    const vote& round_initial_vote() const noexcept { return round_initial_vote_; }
    const std::map<peer_id, vote>& received_votes() const noexcept { return received_; }
    bool finalizing() const noexcept { return finalize_deadline_.has_value(); }

private:
    using votes = std::map<peer_id, vote>;

    /// My own vote: (me, last logged, current epoch); an observer's cannot win (§3.2).
    vote initial_vote() const {
        if (!ctx_.self_votes()) return vote{0, zxid{}, 0, logical_clock_, peer_state::looking};
        return vote{ctx_.self(), ctx_.last_logged, ctx_.durable_epochs.current, logical_clock_,
                    peer_state::looking};
    }

    /// A voter of my configurations — or a candidate whose log is ahead of mine: it may
    /// hold a reconfiguration I have not seen that makes it a voter (§9 step 7), and only a
    /// replica that votes in its own configurations proposes itself. Safety never rests on
    /// who is elected (discovery's quorums decide, §3.4), so this only keeps a replica that
    /// lags behind a reconfiguration from blocking the election of the one that does not.
    /// Its last zxid, not its epoch: a newer current epoch over the same last zxid adds no
    /// record to its log, so no reconfiguration I lack (machines sweep seed 58939: a voter
    /// whose crash left its current epoch behind kept voting for an observer with the same
    /// log and a newer epoch, which the other voter knew could not win: no quorum, ever).
    bool can_win(const vote& v) const {
        if (ctx_.refused_leaders.contains(v.leader)) return false;  // §4.5: options differ
        if (ctx_.quorums().is_voter(v.leader)) return true;
        return v.leader != 0 && v.leader != ctx_.self() && v.leader_zxid > ctx_.last_logged;
    }

    /// A voter whose voting is suspended (ZOOKEEPER-261) keeps voting for nobody: the
    /// others count its notifications as a voter's, so echoing a candidate would lend that
    /// candidate a vote backed by nothing. It learns the leader from settled peers' votes.
    // Nor does a replica without a vote of its own in its configurations — a joiner, or an
    // observer — whose notifications others may count as a voter's once they know of a
    // reconfiguration it has not seen yet (§9).
    bool adopts_votes() const { return ctx_.self_votes(); }

    vote looking_target() const {
        vote v = proposal_;
        v.round = logical_clock_;
        v.state = peer_state::looking;
        return v;
    }

    wire::notification proposal_notification() const {
        return looking_target().to_notification(peer_state::looking);
    }

    /// Answers `to` with what I stand for now: my proposal while LOOKING, my settled vote
    /// (with the round it was decided in) otherwise.
    void reply(peer_id to) {
        if (ctx_.state == peer_state::looking)
            ctx_.send(to, proposal_notification());
        else
            ctx_.send(to, ctx_.current_vote.to_notification(ctx_.state));
    }

    /// The two answers that two replicas whose configurations disagree could trade forever
    /// (each answer is the other's reason to answer: a non-voter's notification, and a
    /// laggard's from an older round) go to each peer at most once per
    /// notification_timeout_min_ticks: a laggard still hears within one poll.
    void answer_at_most_every_poll(peer_id to) {
        const auto [it, first] = answered_at_.try_emplace(to, ctx_.now_tick);
        if (!first) {
            if (ctx_.now_tick < it->second + ctx_.opts().notification_timeout_min_ticks) return;
            it->second = ctx_.now_tick;
        }
        reply(to);
    }

    /// Sends my proposal to every voter; my own copy goes through the loopback queue, as
    /// ZooKeeper's does, so my vote enters my own vote box like anyone else's.
    /// A candidate that votes in none of my configurations (can_win: its history is ahead
    /// of mine, and may hold a reconfiguration that makes it a voter, §9) is told too: it
    /// decides on the votes it hears, and without mine it may never see the quorum that
    /// elected it while the others follow it (protocol sweep seed 7830).
    void send_notifications() {
        for (peer_id id : ctx_.all_voters())
            if (id != ctx_.self()) ctx_.send(id, proposal_notification());
        const peer_id candidate = proposal_.leader;
        if (candidate != 0 && candidate != ctx_.self() && !ctx_.quorums().is_voter(candidate))
            ctx_.send(candidate, proposal_notification());
        if (ctx_.quorums().is_voter(ctx_.self())) loopback_pending_ = true;
    }

    void drain_loopback() {
        while (loopback_pending_ && ctx_.state == peer_state::looking) {
            loopback_pending_ = false;
            process(ctx_.self(), looking_target());
        }
        loopback_pending_ = false;
    }

    /// The main loop's handling of one notification (§3.4 steps 3–6).
    void process(peer_id from, const vote& received) {
        // §3.4 step 2's silence is silence from LOOKING peers: settled peers speak unasked
        // too (a leader inviting absent members, §9), and a settled vote that decides
        // nothing must not hold back the notifications whose answers would.
        // Nor is a LOOKING notification of an older round (a laggard's, already answered).
        if (received.state == peer_state::looking && received.round >= logical_clock_)
            last_poll_tick_ = ctx_.now_tick;
        if (!can_win(received)) {  // step 3: the proposed leader must be a voter
            abstaining_[from] = received.leader;
            // Its round still counts (ZooKeeper's FLE moves to a newer electionEpoch whatever
            // it proposes): dropped, a vote for a candidate only its sender can elect would
            // leave me in an older round, whose notifications the sender ignores, for good.
            if (received.state == peer_state::looking && received.round > logical_clock_)
                enter_newer_round(received.round, std::nullopt);
            return;
        }
        abstaining_.erase(from);
        vote n = received;
        if (n.leader == ctx_.self() && from != ctx_.self()) {
            // A vote for me carries what *I* hold. Another peer may still propose me with
            // the zxid I advertised before a crash that lost (or a TRUNC that removed) the
            // tail of my log; adopting that would make me advertise a history I do not
            // have, and a quorum could follow me past committed transactions it holds
            // (§2 "advertise last_logged", §10.11). (Only what I adopt changes: the vote
            // box records what the sender said, so its stale claim agrees with nothing I
            // propose.)
            const vote mine = initial_vote();
            n.leader_zxid = mine.leader_zxid;
            n.leader_epoch = mine.leader_epoch;
        }
        if (finalize_deadline_) {
            // In finalizeWait: a better vote reopens the election; anything else is consumed
            // and dropped, and the wait starts again (step 4).
            if (!vote_beats(n, can_win(n), proposal_)) {
                finalize_deadline_ = ctx_.now_tick + ctx_.opts().finalize_wait_ticks;
                return;
            }
            finalize_deadline_.reset();
        }
        switch (n.state) {
            case peer_state::looking: return process_looking(from, n, received);
            case peer_state::observing: return;  // step 5
            case peer_state::following:
            case peer_state::leading: return process_settled(from, received);
        }
    }

    void process_looking(peer_id from, const vote& n, const vote& as_sent) {
        if (n.round > logical_clock_) {
            enter_newer_round(n.round, n);
        } else if (n.round < logical_clock_) {
            return;  // stale round: already answered by the receiver part
        } else if (adopts_votes() && vote_beats(n, can_win(n), proposal_)) {
            proposal_ = n;
            send_notifications();
        }
        vote recorded = as_sent;
        recorded.state = peer_state::looking;
        received_[from] = recorded;
        if (ctx_.election_quorums().contains_quorum(agreeing(received_, looking_target())))
            finalize_deadline_ = ctx_.now_tick + ctx_.opts().finalize_wait_ticks;
    }

    /// My proposal names a candidate that can no longer win — a reconfiguration learned
    /// while LOOKING took its vote away (ZooKeeper restarts its election on a new quorum
    /// verifier), or its options were refused: a new round with my own vote, which the
    /// others adopt. Kept, it holds the election for good: the voters that know the change
    /// abstain from my vote, and I keep outbidding theirs (protocol sweep seed 117390,
    /// compaction mode: a vote for the leader that the change removed, after its hand-off).
    /// True if it began a round.
    bool drop_unwinnable_proposal() {
        if (proposal_.leader == 0 || can_win(proposal_)) return false;
        log(log_level::info, "peer {}: my vote's candidate {} can no longer win; round {}",
            ctx_.self(), proposal_.leader, logical_clock_ + 1);
        enter_newer_round(logical_clock_ + 1, std::nullopt);
        finalize_deadline_.reset();
        drain_loopback();
        return true;
    }

    /// A newer round: adopt it, forget the old box, and propose the better of `n` (the
    /// vote that announced the round, if it may win) and my *initial* vote.
    void enter_newer_round(std::uint64_t round, const std::optional<vote>& n) {
        logical_clock_ = round;
        received_.clear();
        const vote mine = round_initial_vote_ = initial_vote();
        proposal_ = n && adopts_votes() && vote_beats(*n, can_win(*n), mine) ? *n : mine;
        send_notifications();
    }

    void process_settled(peer_id from, const vote& n) {
        if (n.round == logical_clock_) {
            received_[from] = n;
            if (ctx_.election_quorums().contains_quorum(agreeing(received_, n)) &&
                check_leader(received_, n.leader, n.round)) {
                finish(election_decision::basis::settled_this_round, received_, n);
                return;
            }
        }
        out_of_election_[from] = n;
        if (ctx_.election_quorums().contains_quorum(agreeing(out_of_election_, n)) &&
            check_leader(out_of_election_, n.leader, n.round)) {
            logical_clock_ = n.round;
            finish(election_decision::basis::settled_any_round, out_of_election_, n);
        }
    }

    /// Peers whose recorded vote agrees with `target` (ZooKeeper's getVoteTracker).
    static peer_set agreeing(const votes& box, const vote& target) {
        peer_set ids;
        for (const auto& [id, v] : box)
            if (votes_agree(v, target)) ids.insert(id);
        return ids;
    }

    /// §3.4 step 6, checkLeader: following someone else needs that peer's own LEADING vote;
    /// leading myself needs the round to be mine. Stops re-electing a dead ex-leader.
    bool check_leader(const votes& box, peer_id leader, std::uint64_t round) const {
        if (leader != ctx_.self()) {
            auto it = box.find(leader);
            return it != box.end() && it->second.state == peer_state::leading;
        }
        return logical_clock_ == round;
    }

    /// The stalled-election warning (see the top of this file); rate-limited by
    /// `stall_warning_tick_`. Only logs: the election itself is unchanged, and so is
    /// next_deadline() (a driver that sleeps until it hears the warning at the next wake).
    void warn_stalled() {
        const std::uint64_t ticks = ctx_.now_tick - looking_since_;
        stall_warning_tick_ =
            ctx_.now_tick +
            std::max<std::uint64_t>(1, std::min<std::uint64_t>(
                                           ticks, ctx_.opts().notification_timeout_max_ticks));
        if (!log_enabled(log_level::warn)) return;
        peer_set candidate, nobody, unwinnable, silent;
        for (peer_id id : ctx_.config().voters()) {
            if (const auto it = abstaining_.find(id); it != abstaining_.end())
                (it->second == 0 ? nobody : unwinnable).insert(id);
            else if (received_.contains(id) || out_of_election_.contains(id))
                candidate.insert(id);
            else
                silent.insert(id);
        }
        const auto ids = [](const peer_set& set) {
            return set.empty() ? std::string{"none"} : fmt::format("{}", fmt::join(set, ", "));
        };
        log(log_level::warn,
            "peer {}: no leader elected after {} ticks, round {}: a quorum of voters "
            "{} must agree; voting for a candidate: {}; voting for nobody (not synced since "
            "their data was wiped or found damaged): {}; not heard from: {}{}{}",
            ctx_.self(), ticks, logical_clock_,
            fmt::join(ctx_.config().voters(), ", "), ids(candidate), ids(nobody), ids(silent),
            unwinnable.empty() ? std::string{}
                               : fmt::format("; voting for a candidate that cannot win here "
                                             "(removed, no voter, or refused): {}",
                                             ids(unwinnable)),
            ctx_.voting_suspended ? "; this replica itself votes for nobody until a leader "
                                    "syncs it"
                                  : "");
    }

    void finish(election_decision::basis how, const votes& box, const vote& target) {
        election_decision d;
        d.how = how;
        d.decided = target;
        d.decided.round = logical_clock_;
        if (target.leader == ctx_.self())
            d.decided.state = peer_state::leading;
        else
            d.decided.state = ctx_.self_type() == learner_type::participant
                                  ? peer_state::following
                                  : peer_state::observing;
        for (const auto& [id, v] : box)
            if (votes_agree(v, target)) d.counted.emplace_back(id, v);
        finalize_deadline_.reset();
        received_.clear();
        out_of_election_.clear();
        ctx_.decide(std::move(d));
    }

    peer_context& ctx_;
    std::uint64_t logical_clock_ = 0;
    vote proposal_;
    vote round_initial_vote_;
    votes received_;          ///< ZooKeeper's recvset: this round's votes
    votes out_of_election_;   ///< ZooKeeper's outofelection: settled votes of any round
    std::optional<std::uint64_t> finalize_deadline_;
    std::uint32_t notification_timeout_ = 1;
    std::uint64_t last_poll_tick_ = 0;
    std::map<peer_id, std::uint64_t> answered_at_;  ///< answer_at_most_every_poll's last answers
    bool loopback_pending_ = false;
    std::uint64_t looking_since_ = 0;       ///< when start() began this election
    std::uint64_t stall_warning_tick_ = 0;  ///< when warn_stalled() may speak next
    /// Voters whose last vote counts for nobody, with the candidate each named (0: none).
    std::map<peer_id, peer_id> abstaining_;
};

static_assert(election_policy<fast_leader_election>);

/// A fixed leader, named by configuration: no messages, decided at once. For tests that
/// want a known leader, and for deployments that pin one. Every member must be given the
/// same `leader`; safety still comes from discovery and synchronization.
class fixed_leader_election {
public:
    explicit fixed_leader_election(peer_context& ctx) : ctx_{ctx} {}

    void start() {
        ++ctx_.counters.elections_started;
        ++round_;
        // options::fixed_leader, or by default the voter with the highest id.
        const peer_id leader =
            ctx_.opts().fixed_leader != 0 ? ctx_.opts().fixed_leader : ctx_.config().voters().back();
        election_decision d;
        d.how = election_decision::basis::fixed;
        d.decided = vote{leader, zxid{}, 0, round_, peer_state::looking};
        if (leader == ctx_.self())
            d.decided.state = peer_state::leading;
        else
            d.decided.state = ctx_.self_type() == learner_type::participant
                                  ? peer_state::following
                                  : peer_state::observing;
        ctx_.decide(std::move(d));
    }
    void on_notification(peer_id from, const wire::notification& n) {
        ++ctx_.counters.notifications_received;
        // Answer LOOKING peers (perhaps running FLE during a migration) with the fixed result.
        if (n.state == peer_state::looking && ctx_.state != peer_state::looking &&
            ctx_.config().contains(from))
            ctx_.send(from, ctx_.current_vote.to_notification(ctx_.state));
    }
    void on_connected(peer_id) {}
    void on_tick() {}
    std::optional<std::uint64_t> next_deadline() const { return std::nullopt; }

private:
    peer_context& ctx_;
    std::uint64_t round_ = 0;
};

static_assert(election_policy<fixed_leader_election>);

}  // namespace zab
