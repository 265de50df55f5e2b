// The client path (docs/protocol.md §6.1, §7): writes submitted on any replica, one honest outcome
// each; linearizable sync; lease syncs (§7.1); bounds; zxid counter exhaustion (§1).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../sim_settle.hpp"
#include "zab/testing/client_checker.hpp"
#include "zab/testing/peer_internals.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

/// Every completion, per replica and request id.
struct outcomes {
    std::map<std::pair<peer_id, request_id>, std::vector<client_completion>> seen;

    explicit outcomes(sim_type& sim) {
        sim.set_completion_observer([this](peer_id at, const client_completion& c) {
            seen[{at, c.id}].push_back(c);
        });
    }
    const client_completion* find(peer_id at, request_id id) const {
        const auto it = seen.find({at, id});
        return it == seen.end() || it->second.empty() ? nullptr : &it->second.front();
    }
    bool done(peer_id at, request_id id) const { return find(at, id) != nullptr; }
};

/// The established leader of a simulator of any machine, 0 if none.
using zab::test::leader_of;

/// A 3-voter cluster with an established leader whose followers are all serving.
sim_type& settled(sim_type& sim) {
    sim.start();
    REQUIRE(sim.run_until(
        [&] {
            if (leader_of(sim) == 0) return false;
            for (const auto& n : sim.nodes())
                if (!n.peer || !n.peer->established()) return false;
            return true;
        },
        20'000'000));
    return sim;
}

peer_id some_follower(sim_type& sim) {
    for (const auto& n : sim.nodes())
        if (n.peer && n.peer->state() == peer_state::following) return n.id;
    return 0;
}

bool applied_with(const sim_type& sim, peer_id at, zxid z, std::string_view bytes) {
    for (const auto& a : sim.at(at).machine->applied())
        if (a.id == z) return as_string_view(a.txn.view()) == bytes;
    return false;
}

}  // namespace

TEST_CASE("a write submitted on a follower is forwarded, committed, and completes once applied there") {
    cluster_options o;
    o.seed = 51;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id follower = some_follower(sim);
    REQUIRE(follower != 0);
    const auto id = sim.submit(follower, as_bytes("hello"));
    REQUIRE(id);
    REQUIRE(sim.run_until([&] { return out.done(follower, *id); }, sim.now() + 5'000'000));
    const client_completion& c = *out.find(follower, *id);
    REQUIRE(c.outcome.has_value());
    // Applied on the replica where it was submitted before it completed, and the same txn
    // on the leader.
    CHECK(applied_with(sim, follower, c.outcome.value(), "hello"));
    CHECK(applied_with(sim, leader_of(sim), c.outcome.value(), "hello"));
    CHECK(sim.peer_of(follower)->counters().requests_forwarded == 1);
    // Nothing more arrives for it.
    sim.run_for(2'000'000);
    CHECK(out.seen.at({follower, *id}).size() == 1);
}

TEST_CASE("writes from every replica commit in one order") {
    cluster_options o;
    o.seed = 52;
    o.voters = 5;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    std::vector<std::pair<peer_id, request_id>> submitted;
    for (int round = 0; round < 4; ++round)
        for (peer_id p = 1; p <= 5; ++p)
            submitted.emplace_back(p, *sim.submit(p, as_bytes(fmt::format("w{}-{}", p, round))));
    REQUIRE(sim.run_until(
        [&] {
            for (const auto& [p, id] : submitted)
                if (!out.done(p, id)) return false;
            return true;
        },
        sim.now() + 10'000'000));
    for (const auto& [p, id] : submitted) {
        INFO("replica " << p << " request " << id);
        REQUIRE(out.find(p, id)->outcome.has_value());
    }
    sim.run_for(1'000'000);
    const auto& reference = sim.at(1).machine->applied();
    CHECK(reference.size() == submitted.size());
    for (peer_id p = 2; p <= 5; ++p) {
        const auto& applied = sim.at(p).machine->applied();
        REQUIRE(applied.size() == reference.size());
        for (std::size_t i = 0; i < applied.size(); ++i) CHECK(applied[i].id == reference[i].id);
    }
}

TEST_CASE("a replica without an established leader refuses definitely, naming what it knows") {
    cluster_options o;
    o.seed = 53;
    sim_type sim{o};
    outcomes out{sim};
    sim.start();  // LOOKING: nothing is established yet
    const auto w = sim.submit(1, as_bytes("early"));
    const auto s = sim.sync(1);
    REQUIRE(w);
    REQUIRE(s);
    REQUIRE(out.done(1, *w));
    REQUIRE(out.done(1, *s));
    CHECK(out.find(1, *w)->outcome.error() == make_error_code(errc::not_leader));
    CHECK(out.find(1, *s)->outcome.error() == make_error_code(errc::not_leader));
    // And it is never applied anywhere.
    settled(sim);
    sim.run_for(2'000'000);
    for (const auto& n : sim.nodes())
        for (const auto& a : n.machine->applied()) CHECK(as_string_view(a.txn.view()) != "early");
}

TEST_CASE("a forwarded write whose leader is lost before the answer completes outcome_unknown") {
    cluster_options o;
    o.seed = 54;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id follower = some_follower(sim);
    const auto id = sim.submit(follower, as_bytes("in doubt"));
    REQUIRE(id);
    sim.crash(leader);  // the REQUEST may or may not have been proposed
    REQUIRE(sim.run_until([&] { return out.done(follower, *id); }, sim.now() + 20'000'000));
    CHECK(out.find(follower, *id)->outcome.error() == make_error_code(errc::outcome_unknown));
    CHECK(out.seen.at({follower, *id}).size() == 1);
}

TEST_CASE("sync is linearizable: answered after a quorum round; an isolated leader never answers") {
    cluster_options o;
    o.seed = 55;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id follower = some_follower(sim);

    // A write completes at the leader; a sync at a follower then sees it applied there.
    const auto w = sim.submit(leader, as_bytes("before"));
    REQUIRE(sim.run_until([&] { return out.done(leader, *w); }, sim.now() + 5'000'000));
    const zxid written = out.find(leader, *w)->outcome.value();
    const auto s = sim.sync(follower);
    REQUIRE(sim.run_until([&] { return out.done(follower, *s); }, sim.now() + 5'000'000));
    REQUIRE(out.find(follower, *s)->outcome.has_value());
    CHECK(out.find(follower, *s)->outcome.value() >= written);
    CHECK(applied_with(sim, follower, written, "before"));
    CHECK(sim.peer_of(leader)->counters().syncs_answered >= 1);

    // The leader cut off from everyone: no quorum answers its round, so its own sync never
    // succeeds; it fails, definitely, when the leader steps down.
    std::vector<peer_id> others;
    for (peer_id p = 1; p <= 3; ++p)
        if (p != leader) others.push_back(p);
    sim.network().partition({{leader}, others});
    const auto isolated = sim.sync(leader);
    REQUIRE(isolated);
    REQUIRE(sim.run_until([&] { return out.done(leader, *isolated); }, sim.now() + 20'000'000));
    CHECK(out.find(leader, *isolated)->outcome.error() == make_error_code(errc::not_leader));
}

TEST_CASE("bounds: requests in flight, outstanding proposals, forwarded per learner") {
    cluster_options o;
    o.seed = 56;
    o.peer.max_pending_requests = 3;
    o.peer.max_outstanding_proposals = 4;
    o.peer.max_forwarded_per_learner = 2;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id follower = some_follower(sim);
    std::vector<request_id> local;
    for (int i = 0; i < 5; ++i) local.push_back(*sim.submit(leader, as_bytes(fmt::format("l{}", i))));
    // Three in flight at once: the fourth and fifth are refused at once.
    REQUIRE(out.done(leader, local[3]));
    REQUIRE(out.done(leader, local[4]));
    CHECK(out.find(leader, local[3])->outcome.error() == make_error_code(errc::backpressure));
    CHECK(out.find(leader, local[4])->outcome.error() == make_error_code(errc::backpressure));
    REQUIRE(sim.run_until(
        [&] { return out.done(leader, local[0]) && out.done(leader, local[1]) && out.done(leader, local[2]); },
        sim.now() + 5'000'000));

    // Forwarded writes: with commits stalled (the leader's own disk turned very slow), the
    // leader accepts two from this learner and refuses the third, definitely.
    disk_options slow;
    slow.sync_latency_min = slow.sync_latency_max = 3'000'000;
    sim.at(leader).log->set_options(slow);
    std::vector<request_id> forwarded;
    for (int i = 0; i < 3; ++i)
        forwarded.push_back(*sim.submit(follower, as_bytes(fmt::format("f{}", i))));
    REQUIRE(sim.run_until([&] { return out.done(follower, forwarded[2]); }, sim.now() + 2'000'000));
    CHECK(out.find(follower, forwarded[2])->outcome.error() == make_error_code(errc::backpressure));
    CHECK_FALSE(out.done(follower, forwarded[0]));
    sim.at(leader).log->set_options(disk_options{});
    REQUIRE(sim.run_until(
        [&] { return out.done(follower, forwarded[0]) && out.done(follower, forwarded[1]); },
        sim.now() + 10'000'000));
    CHECK(out.find(follower, forwarded[0])->outcome.has_value());
    CHECK(out.find(follower, forwarded[1])->outcome.has_value());
    for (const auto& n : sim.nodes())
        for (const auto& a : n.machine->applied()) CHECK(as_string_view(a.txn.view()) != "f2");
}

TEST_CASE("batched writes (§6.1): at the leader one PROPOSALS frame and one ACK per follower; "
          "at a follower one REQUESTS frame, proposed as one batch and answered by one REPLIES; "
          "every one completes once, applied in order") {
    cluster_options o;
    o.seed = 157;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id follower = some_follower(sim);
    std::map<wire::message_type, int> to_leader;  // frames the followers sent the leader
    sim.set_message_observer([&](peer_id receiver, peer_id, const wire::message& m) {
        if (receiver == leader) ++to_leader[type_of(m)];
    });
    std::vector<std::string> txns;
    for (int i = 0; i < 20; ++i) txns.push_back(fmt::format("b{}", i));
    std::vector<byte_view> views;
    for (const auto& t : txns) views.push_back(as_bytes(t));
    const auto first = sim.submit_batch(leader, views);
    REQUIRE(first);
    const auto everywhere = [&](std::size_t n) {
        for (const auto& node : sim.nodes())
            if (node.machine->applied().size() < n) return false;
        return true;
    };
    REQUIRE(sim.run_until([&] { return out.done(leader, *first + 19) && everywhere(20); },
                          sim.now() + 5'000'000));
    sim.run_for(500'000);  // the slower follower's ACK, after the commit it was not needed for
    CHECK(sim.peer_of(leader)->counters().proposal_batches == 1);
    // One durable append of the batch on each follower, so one ACK each covers all twenty.
    CHECK(to_leader[wire::message_type::ack] == 2);
    zxid previous;
    for (request_id id = *first; id < *first + 20; ++id) {
        const client_completion* c = out.find(leader, id);
        REQUIRE(c != nullptr);
        REQUIRE(c->outcome.has_value());
        if (id > *first) CHECK(previous.continued_by(c->outcome.value()));
        previous = c->outcome.value();
        CHECK(applied_with(sim, follower, c->outcome.value(), txns[id - *first]));
    }

    // At a follower: one REQUESTS frame (protocol 0x10001, §0.2), one PROPOSALS batch, and
    // one REPLIES naming the batch's zxids.
    to_leader.clear();
    std::map<wire::message_type, int> to_follower;
    sim.set_message_observer([&](peer_id receiver, peer_id, const wire::message& m) {
        if (receiver == leader) ++to_leader[type_of(m)];
        if (receiver == follower) ++to_follower[type_of(m)];
    });
    const auto forwarded = sim.submit_batch(follower, views);
    REQUIRE(forwarded);
    REQUIRE(sim.run_until([&] { return out.done(follower, *forwarded + 19) && everywhere(40); },
                          sim.now() + 5'000'000));
    CHECK(to_leader[wire::message_type::forwarded_batch] == 1);
    CHECK(to_leader[wire::message_type::forwarded_request] == 0);
    CHECK(to_follower[wire::message_type::reply_batch] == 1);
    CHECK(to_follower[wire::message_type::forwarded_reply] == 0);
    CHECK(sim.peer_of(follower)->counters().forwarded_batches == 1);
    CHECK(sim.peer_of(follower)->counters().requests_forwarded == 20);
    CHECK(sim.peer_of(leader)->counters().proposal_batches == 2);
    previous = zxid{};
    for (request_id id = *forwarded; id < *forwarded + 20; ++id) {
        const client_completion* c = out.find(follower, id);
        REQUIRE(c->outcome.has_value());
        CHECK(out.seen.at({follower, id}).size() == 1);
        if (id > *forwarded) CHECK(previous.continued_by(c->outcome.value()));
        previous = c->outcome.value();
        CHECK(applied_with(sim, leader, c->outcome.value(), txns[id - *forwarded]));
    }
    sim.run_for(1'000'000);
    for (const auto& node : sim.nodes()) CHECK(node.machine->applied().size() == 40);
}

TEST_CASE("zxid counter exhaustion (§1, ZOOKEEPER-1277): refused, the leader steps down, a new epoch follows") {
    cluster_options o;
    o.seed = 57;
    o.peer.test_only.initial_counter = 0xfffffffcu;  // two proposals left in each epoch
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const epoch_t epoch = zab::testing::internals(*sim.peer_of(leader)).leading->epoch;
    // One at a time, or as one batch: the batch takes the two counters left (one PROPOSALS
    // frame) and its third write finds none, alone.
    const bool batched = GENERATE(false, true);
    std::optional<request_id> a, b, c;
    if (batched) {
        const std::vector<byte_view> abc{as_bytes("a"), as_bytes("b"), as_bytes("c")};
        a = sim.submit_batch(leader, abc);
        b = *a + 1;
        c = *a + 2;
        CHECK(sim.peer_of(leader)->counters().proposal_batches == 1);
    } else {
        a = sim.submit(leader, as_bytes("a"));
        b = sim.submit(leader, as_bytes("b"));
        c = sim.submit(leader, as_bytes("c"));
    }
    REQUIRE(out.done(leader, *c));
    CHECK(out.find(leader, *c)->outcome.error() == make_error_code(errc::zxid_exhausted));
    REQUIRE(sim.run_until([&] { return out.done(leader, *a) && out.done(leader, *b); },
                          sim.now() + 20'000'000));
    // a and b were proposed before the step-down: committed by the next leader (or not).
    for (const auto id : {*a, *b}) {
        const auto& r = out.find(leader, id)->outcome;
        if (r) CHECK(r.value().epoch() == epoch);
        else CHECK(r.error() == make_error_code(errc::outcome_unknown));
    }
    // A new epoch is established; writes go on in it; "c" was never applied.
    REQUIRE(sim.run_until(
        [&] {
            const peer_id l = leader_of(sim);
            return l != 0 && zab::testing::internals(*sim.peer_of(l)).leading->epoch > epoch;
        },
        sim.now() + 30'000'000));
    const peer_id next = leader_of(sim);
    const auto d = sim.submit(next, as_bytes("d"));
    REQUIRE(sim.run_until([&] { return out.done(next, *d); }, sim.now() + 5'000'000));
    REQUIRE(out.find(next, *d)->outcome.has_value());
    CHECK(out.find(next, *d)->outcome.value().epoch() > epoch);
    CHECK(out.find(next, *d)->outcome.value().counter() == 0xfffffffdu);
    for (const auto& n : sim.nodes())
        for (const auto& x : n.machine->applied()) CHECK(as_string_view(x.txn.view()) != "c");
}

TEST_CASE("shutdown resolves every request in flight exactly once") {
    cluster_options o;
    o.seed = 58;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id follower = some_follower(sim);
    const auto w = sim.submit(follower, as_bytes("pending"));
    const auto s = sim.sync(follower);
    sim.crash(follower);  // the simulator's crash shuts the peer down for its clients
    REQUIRE(out.done(follower, *w));
    REQUIRE(out.done(follower, *s));
    CHECK(out.find(follower, *w)->outcome.error() == make_error_code(errc::outcome_unknown));
    CHECK(out.find(follower, *s)->outcome.error() == make_error_code(errc::shutting_down));
}

TEST_CASE("back-pressure: a flood with a slow follower and a partitioned one keeps committing, bounded") {
    cluster_options o;
    o.seed = 59;
    o.voters = 5;
    o.peer.max_outstanding_proposals = 40;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    std::vector<peer_id> followers;
    for (peer_id p = 1; p <= 5; ++p)
        if (p != leader) followers.push_back(p);
    // One follower's disk turns very slow; another is cut off from everyone.
    disk_options slow;
    slow.sync_latency_min = slow.sync_latency_max = 2'000'000;
    sim.at(followers[0]).log->set_options(slow);
    std::vector<peer_id> rest;
    for (peer_id p = 1; p <= 5; ++p)
        if (p != followers[1]) rest.push_back(p);
    sim.network().partition({{followers[1]}, rest});
    std::size_t most_outstanding = 0;
    sim.add_checker([&](sim_type& s) {
        if (const auto* p = s.peer_of(leader); p && zab::testing::internals(*p).leading)
            most_outstanding = std::max(most_outstanding, zab::testing::internals(*p).leading->outstanding.size());
    });
    // A flood: 300 writes at once at the leader.
    std::vector<request_id> flood;
    for (int i = 0; i < 300; ++i)
        flood.push_back(*sim.submit(leader, as_bytes(fmt::format("flood {}", i))));
    REQUIRE(sim.run_until(
        [&] {
            for (const auto id : flood)
                if (!out.done(leader, id)) return false;
            return true;
        },
        sim.now() + 10'000'000));
    std::size_t done = 0, refused = 0;
    for (const auto id : flood) {
        const auto& r = out.find(leader, id)->outcome;
        if (r) ++done;
        else if (r.error() == make_error_code(errc::backpressure)) ++refused;
    }
    CHECK(done == 40);          // the bound, exactly: everything beyond it is refused at once
    CHECK(refused == 260);      // ... with a clear, definite error
    CHECK(most_outstanding <= 40);
    // The cluster keeps committing with the healthy majority: a second wave goes through
    // while the slow and the partitioned followers lag.
    std::vector<request_id> wave;
    for (int i = 0; i < 30; ++i) wave.push_back(*sim.submit(leader, as_bytes(fmt::format("wave {}", i))));
    REQUIRE(sim.run_until(
        [&] {
            for (const auto id : wave)
                if (!out.done(leader, id)) return false;
            return true;
        },
        sim.now() + 5'000'000));
    for (const auto id : wave) CHECK(out.find(leader, id)->outcome.has_value());
    CHECK(sim.peer_of(followers[1])->last_applied() < out.find(leader, wave.back())->outcome.value());
    // Healed and fast again, the laggards catch up to the same history.
    sim.network().heal();
    sim.at(followers[0]).log->set_options(disk_options{});
    const zxid last = out.find(leader, wave.back())->outcome.value();
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id p = 1; p <= 5; ++p)
                if (!sim.peer_of(p) || sim.peer_of(p)->last_applied() < last) return false;
            return true;
        },
        sim.now() + 30'000'000));
    const auto& reference = sim.at(leader).machine->applied();
    for (peer_id p = 1; p <= 5; ++p) CHECK(sim.at(p).machine->applied().size() == reference.size());
}

namespace {

/// Every replica established, following `leader`, which leads.
bool all_follow(const sim_type& sim, peer_id leader) {
    for (const auto& n : sim.nodes()) {
        if (!n.peer || !n.peer->established() || n.peer->current_vote().leader != leader)
            return false;
    }
    const auto* p = sim.peer_of(leader);
    return p != nullptr && p->state() == peer_state::leading;
}

std::uint64_t elections_started(const sim_type& sim) {
    std::uint64_t sum = 0;
    for (const auto& n : sim.nodes())
        if (n.peer) sum += n.peer->counters().elections_started;
    return sum;
}

}  // namespace

TEST_CASE("leadership transfer: writes pause, the target leads the next epoch within a few "
          "round trips, nothing committed is lost, and nobody runs an election") {
    cluster_options o;
    o.seed = 61;
    o.observers = 1;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id old_leader = leader_of(sim);
    const peer_id target = some_follower(sim);
    const epoch_t old_epoch = sim.peer_of(old_leader)->status().durable_epochs.current;
    const std::uint64_t elections_before = elections_started(sim);

    // Writes still outstanding when the transfer starts: it waits for them to commit.
    std::vector<request_id> before;
    for (int i = 0; i < 5; ++i)
        before.push_back(*sim.submit(old_leader, as_bytes("before-" + std::to_string(i))));
    const sim_time asked = sim.now();
    const auto transfer = sim.transfer_leadership(old_leader, target);
    REQUIRE(transfer);
    // New writes, at the leader and through a follower, are refused while it hands over.
    const auto during = sim.submit(old_leader, as_bytes("during"));
    REQUIRE(out.done(old_leader, *during));
    CHECK(out.find(old_leader, *during)->outcome.error() == make_error_code(errc::transferring));
    CHECK(out.find(old_leader, *during)->leader_hint == target);

    REQUIRE(sim.run_until([&] { return all_follow(sim, target); }, sim.now() + 20'000'000));
    const sim_time took = sim.now() - asked;
    INFO("handed over in " << took << " us");
    // A dead leader is noticed only after sync_limit (5 s here); the hand-off is a few round
    // trips, a discovery and a DIFF.
    CHECK(took < 2'000'000);
    CHECK(elections_started(sim) == elections_before);

    const auto& done = out.find(old_leader, *transfer);
    REQUIRE(done != nullptr);
    REQUIRE(done->outcome.has_value());
    CHECK(done->op == client_op::transfer);
    for (std::size_t i = 0; i < before.size(); ++i) {
        const auto* c = out.find(old_leader, before[i]);
        REQUIRE(c != nullptr);
        REQUIRE(c->outcome.has_value());
        CHECK(c->outcome.value() <= done->outcome.value());
        CHECK(applied_with(sim, target, c->outcome.value(), "before-" + std::to_string(i)));
    }
    CHECK(sim.peer_of(target)->status().durable_epochs.current > old_epoch);
    CHECK(sim.peer_of(old_leader)->counters().transfers_handed_over == 1);
    CHECK(sim.peer_of(old_leader)->state() == peer_state::following);

    // The new leader takes writes from anywhere, the old leader included.
    const auto after = sim.submit(old_leader, as_bytes("after"));
    REQUIRE(sim.run_until([&] { return out.done(old_leader, *after); }, sim.now() + 5'000'000));
    REQUIRE(out.find(old_leader, *after)->outcome.has_value());
    CHECK(out.find(old_leader, *after)->outcome.value().epoch() ==
          sim.peer_of(target)->status().durable_epochs.current);
}

TEST_CASE("leadership transfer to a voter that caught up by a sync, after the last write: its "
          "ACK of NEWLEADER is the proof, and the hand-over completes (issue 34 defect 8)") {
    const bool wiped = GENERATE(false, true);
    INFO((wiped ? "the target was wiped and synced by SNAP" : "the target restarted, synced by DIFF"));
    cluster_options o;
    o.seed = 64;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id target = some_follower(sim);
    std::vector<request_id> writes;
    for (int i = 0; i < 3; ++i) writes.push_back(*sim.submit(leader, as_bytes("w" + std::to_string(i))));
    REQUIRE(sim.run_until([&] { return out.done(leader, writes.back()); }, sim.now() + 5'000'000));
    sim.crash(target);
    if (wiped) REQUIRE(sim.wipe(target));
    sim.restart(target);
    REQUIRE(sim.run_until([&] { return sim.peer_of(target)->established(); }, sim.now() + 20'000'000));
    // No write after the sync: nothing the target could acknowledge on its new link.
    const auto transfer = sim.transfer_leadership(leader, target);
    REQUIRE(transfer);
    REQUIRE(sim.run_until([&] { return out.done(leader, *transfer); }, sim.now() + 20'000'000));
    REQUIRE(out.find(leader, *transfer)->outcome.has_value());
    REQUIRE(sim.run_until([&] { return all_follow(sim, target); }, sim.now() + 20'000'000));
    CHECK(sim.peer_of(leader)->counters().transfers_handed_over == 1);
    CHECK(sim.peer_of(leader)->counters().transfers_timed_out == 0);
    for (std::size_t i = 0; i < writes.size(); ++i)
        CHECK(applied_with(sim, target, out.find(leader, writes[i])->outcome.value(),
                           "w" + std::to_string(i)));
}

TEST_CASE("leadership transfer: a target that cannot catch up is given up after "
          "transfer_timeout_ticks and the leader takes writes again; bad requests are refused") {
    cluster_options o;
    o.seed = 62;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id target = some_follower(sim);
    std::vector<peer_id> others;
    for (peer_id p = 1; p <= 3; ++p)
        if (p != target) others.push_back(p);

    // Refused at once: at a follower, to itself, to a stranger.
    const auto at_follower = sim.transfer_leadership(target, leader);
    CHECK(out.find(target, *at_follower)->outcome.error() == make_error_code(errc::not_leader));
    CHECK(out.find(target, *at_follower)->leader_hint == leader);
    const auto to_self = sim.transfer_leadership(leader, leader);
    CHECK(out.find(leader, *to_self)->outcome.error() == make_error_code(errc::invalid_argument));
    const auto to_stranger = sim.transfer_leadership(leader, 99);
    CHECK(out.find(leader, *to_stranger)->outcome.error() ==
          make_error_code(errc::invalid_argument));

    // The target cut off with a write outstanding that it never acknowledges.
    sim.network().partition({{target}, others});
    (void)sim.submit(leader, as_bytes("unseen by the target"));
    const auto transfer = sim.transfer_leadership(leader, target);
    REQUIRE(transfer);
    const auto second = sim.transfer_leadership(leader, 0);
    CHECK(out.find(leader, *second)->outcome.error() == make_error_code(errc::backpressure));
    const sim_time asked = sim.now();
    REQUIRE(sim.run_until([&] { return out.done(leader, *transfer); }, sim.now() + 20'000'000));
    CHECK(out.find(leader, *transfer)->outcome.error() == make_error_code(errc::timed_out));
    CHECK(sim.now() - asked >= o.peer.transfer_timeout_ticks * o.tick_us - o.tick_us);
    CHECK(sim.peer_of(leader)->counters().transfers_timed_out == 1);

    // Still the leader, taking writes again.
    REQUIRE(leader_of(sim) == leader);
    const auto w = sim.submit(leader, as_bytes("resumed"));
    REQUIRE(sim.run_until([&] { return out.done(leader, *w); }, sim.now() + 5'000'000));
    CHECK(out.find(leader, *w)->outcome.has_value());
}

TEST_CASE("leadership transfer to the best candidate: the synced voter that acknowledged the "
          "most") {
    cluster_options o;
    o.seed = 63;
    o.voters = 5;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id leader = leader_of(sim);
    const auto transfer = sim.transfer_leadership(leader, 0);
    REQUIRE(transfer);
    REQUIRE(sim.run_until([&] { return out.done(leader, *transfer); }, sim.now() + 5'000'000));
    REQUIRE(out.find(leader, *transfer)->outcome.has_value());
    // Every follower was caught up: the lowest id among them is chosen.
    const peer_id expected = leader == 1 ? 2 : 1;
    REQUIRE(sim.run_until([&] { return all_follow(sim, expected); }, sim.now() + 20'000'000));
}

TEST_CASE("a HANDOVER is taken only from this replica's own leader, and only to a voter") {
    cluster_options o;
    o.seed = 64;
    sim_type sim{o};
    settled(sim);
    const peer_id leader = leader_of(sim);
    std::vector<peer_id> followers;
    for (peer_id id = 1; id <= 3; ++id)
        if (id != leader) followers.push_back(id);
    auto& p = *sim.peer_of(followers[0]);
    const auto forged = [&](peer_id from, const wire::handover& m) {
        p.on_receive(from, *zab::testing::internals(p).connection_to(from),
                     encode(frame_context{}, m));
    };
    const epoch_t epoch = p.status().durable_epochs.current;

    // From the other follower, naming itself: not this replica's leader, ignored.
    const auto before = p.counters();
    forged(followers[1], wire::handover{followers[1], zxid{epoch, 0}, epoch, 0});
    CHECK(p.counters().ignored_for(ignore_reason::not_from_my_leader) ==
          before.ignored_for(ignore_reason::not_from_my_leader) + 1);
    CHECK(p.counters().handovers_followed == before.handovers_followed);
    CHECK(p.state() == peer_state::following);
    CHECK(p.current_vote().leader == leader);

    // From the leader, naming a peer that is not a voter: the leader misbehaved; this replica
    // looks for a leader again instead of following a stranger.
    const auto unexpected = p.counters().unexpected_messages;
    forged(leader, wire::handover{99, zxid{epoch, 0}, epoch, 0});
    CHECK(p.counters().unexpected_messages == unexpected + 1);
    CHECK(p.counters().handovers_followed == before.handovers_followed);
    CHECK(p.state() == peer_state::looking);

    // The group settles again, and a HANDOVER naming the leader itself is refused the same way.
    REQUIRE(sim.run_until([&] { return all_follow(sim, leader_of(sim)) && leader_of(sim) != 0; },
                          sim.now() + 20'000'000));
    auto& q = *sim.peer_of(followers[1]);
    const peer_id now_leading = leader_of(sim);
    if (followers[1] != now_leading) {
        const auto misbehaved = q.counters().unexpected_messages;
        q.on_receive(now_leading, *zab::testing::internals(q).connection_to(now_leading),
                     encode(frame_context{}, wire::handover{now_leading, zxid{}, 0, 0}));
        CHECK(q.counters().unexpected_messages == misbehaved + 1);
        CHECK(q.state() == peer_state::looking);
    }
}

TEST_CASE("disk-stall fencing (§6.5): a leader whose disk hangs steps down and the group elects a "
          "healthy one; a follower whose disk hangs says so; both rejoin when the disk is back") {
    cluster_options o;
    o.seed = 57;
    o.peer.disk_stall_ticks = 30;
    sim_type sim{o};
    outcomes out{sim};
    settled(sim);
    const peer_id stalled = leader_of(sim);
    REQUIRE(stalled != 0);
    // Every sync and epoch write from now on takes 20 s: the disk hangs.
    sim.at(stalled).log->set_slow(storage_op_kind::sync, 20'000'000);
    sim.at(stalled).log->set_slow(storage_op_kind::epoch_write, 20'000'000);
    const auto before = sim.submit(stalled, as_bytes("written while the disk hangs"));
    REQUIRE(before);
    // 30 ticks later it reports the stall and steps down; the other two elect a leader of
    // their own, well before the hung writes complete, and take writes.
    REQUIRE(sim.run_until([&] { return sim.peer_of(stalled)->status().disk_stalled; },
                          sim.now() + 5'000'000));
    CHECK(sim.peer_of(stalled)->state() != peer_state::leading);
    CHECK(sim.peer_of(stalled)->counters().disk_stalls == 1);
    REQUIRE(sim.run_until([&] { const peer_id l = leader_of(sim); return l != 0 && l != stalled; },
                          sim.now() + 10'000'000));
    const peer_id healthy = leader_of(sim);
    const auto during = sim.submit(healthy, as_bytes("written to the healthy leader"));
    REQUIRE(during);
    REQUIRE(sim.run_until([&] { return out.done(healthy, *during); }, sim.now() + 5'000'000));
    REQUIRE(out.find(healthy, *during)->outcome);
    CHECK(sim.peer_of(stalled)->status().disk_stalled);  // its writes are still pending
    // The disk comes back (what was issued completes at its late time): the replica is no
    // longer stalled, follows the new leader and holds both writes.
    sim.at(stalled).log->set_slow(storage_op_kind::sync, 0);
    sim.at(stalled).log->set_slow(storage_op_kind::epoch_write, 0);
    REQUIRE(sim.run_until(
        [&] {
            const auto* p = sim.peer_of(stalled);
            return !p->status().disk_stalled && p->established() &&
                   p->last_applied() >= out.find(healthy, *during)->outcome.value();
        },
        sim.now() + 40'000'000));
    CHECK(sim.peer_of(stalled)->state() == peer_state::following);

    // A follower whose disk hangs: it reports the stall, the leader keeps committing with
    // the other follower, and it catches up once its disk is back.
    const peer_id leader = leader_of(sim);
    peer_id slow = 0;
    for (const auto& n : sim.nodes())
        if (n.id != leader) slow = n.id;
    sim.at(slow).log->set_slow(storage_op_kind::sync, 20'000'000);
    REQUIRE(sim.submit(leader, as_bytes("the follower's disk hangs")));
    REQUIRE(sim.run_until([&] { return sim.peer_of(slow)->status().disk_stalled; },
                          sim.now() + 5'000'000));
    const auto meanwhile = sim.submit(leader, as_bytes("committed without it"));
    REQUIRE(meanwhile);
    REQUIRE(sim.run_until([&] { return out.done(leader, *meanwhile); }, sim.now() + 5'000'000));
    CHECK(out.find(leader, *meanwhile)->outcome);
    sim.at(slow).log->set_slow(storage_op_kind::sync, 0);
    REQUIRE(sim.run_until(
        [&] {
            const auto* p = sim.peer_of(slow);
            return !p->status().disk_stalled &&
                   p->last_applied() >= out.find(leader, *meanwhile)->outcome.value();
        },
        sim.now() + 40'000'000));
}

// --- results from apply (§6.6) and client sessions (§6.7) --------------------------------

#include "zab/session/session_machine.hpp"

namespace {

/// A recording machine whose `apply` returns a result: the transaction and how many this
/// machine holds after it, e.g. "w#3" — the same on every replica.
struct answering_machine : recording_state_machine {
    shared_bytes apply(zxid id, byte_view txn) {
        recording_state_machine::apply(id, txn);
        return shared_bytes::copy_of(
            as_bytes(fmt::format("{}#{}", as_string_view(txn), applied().size())));
    }
};
static_assert(result_machine<answering_machine>);
static_assert(!result_machine<recording_state_machine>);

/// The position of `txn` among what replica `at` applied (1-based), 0 if absent.
template <typename Sim>
std::size_t position_of(const Sim& sim, peer_id at, zxid z) {
    const auto& applied = sim.at(at).machine->applied();
    for (std::size_t i = 0; i < applied.size(); ++i)
        if (applied[i].id == z) return i + 1;
    return 0;
}

using zab::test::settle;

/// Every completion of a simulator of any machine, per replica and request id (clear it
/// when a replica restarts: its new peer numbers requests from 1 again).
template <typename Sim>
struct completions {
    std::map<std::pair<peer_id, request_id>, client_completion> seen;
    explicit completions(Sim& sim) {
        sim.set_completion_observer([this](peer_id at, const client_completion& c) {
            seen.emplace(std::pair{at, c.id}, c);
        });
    }
    const client_completion* find(peer_id at, request_id id) const {
        const auto it = seen.find({at, id});
        return it == seen.end() ? nullptr : &it->second;
    }
    /// Runs `sim` until every request of `ids` completed (10 s of virtual time at most).
    void wait_all(Sim& sim, const std::vector<std::pair<peer_id, request_id>>& ids) const {
        REQUIRE(sim.run_until(
            [&] {
                for (const auto& [at, id] : ids)
                    if (!find(at, id)) return false;
                return true;
            },
            sim.now() + 20'000'000));
    }
};

/// A started 3-voter simulator of `Machine`, settled, with its completions recorded.
template <typename Machine>
struct settled_cluster {
    explicit settled_cluster(std::uint64_t seed) : sim{[seed] {
                                                       cluster_options o;
                                                       o.seed = seed;
                                                       return o;
                                                   }()} {
        sim.start();
        settle(sim);
    }
    simulator<Machine> sim;
    completions<simulator<Machine>> out{sim};
};

/// session_machine over answering_machine: expiry after 1,000 ms of leader clock, at most 8
/// sessions (default-constructible, as the simulator builds its machines).
struct session_double : session_machine<answering_machine> {
    session_double()
        : session_machine{session_options{.max_sessions = 8, .expiry_ms = 1'000,
                                          .max_result_bytes = 64}} {}
};
static_assert(result_machine<session_double>);
static_assert(deferred_snapshot_machine<session_double>);
static_assert(system_txn_machine<session_double>);

std::vector<std::byte> tagged(std::string_view payload, std::uint64_t client, std::uint64_t seq,
                              std::optional<std::uint64_t> clock = std::nullopt) {
    return session_envelope::wrap(as_bytes(payload), session_tag{client, seq}, clock);
}

session_reply reply_of(const client_completion& c) {
    REQUIRE(c.outcome.has_value());
    REQUIRE_FALSE(c.response_unknown);
    auto r = session_reply::decode(c.response.view());
    REQUIRE(r.has_value());
    return r.value();
}

}  // namespace

TEST_CASE("results from apply (§6.6): the proposer gets what its replica's apply returned, "
          "on the leader and through forwarding, before and after a failover") {
    settled_cluster<answering_machine> cluster{81};
    auto& [sim, out] = cluster;
    // A write at every replica: the leader's own, the followers' forwarded.
    const auto check_round = [&](std::string_view tag) {
        std::vector<std::pair<peer_id, request_id>> ids;
        for (const auto& n : sim.nodes())
            if (n.peer) ids.emplace_back(n.id, *sim.submit(n.id, as_bytes(fmt::format("{}{}", tag, n.id))));
        out.wait_all(sim, ids);
        for (const auto& [at, id] : ids) {
            const client_completion& c = *out.find(at, id);
            INFO("replica " << at);
            REQUIRE(c.outcome.has_value());
            CHECK_FALSE(c.response_unknown);
            // What this replica's apply returned: the txn and its position here.
            CHECK(as_string_view(c.response.view()) ==
                  fmt::format("{}{}#{}", tag, at, position_of(sim, at, c.outcome.value())));
        }
    };
    check_round("before-");
    const peer_id old_leader = leader_of(sim);
    sim.crash(old_leader);
    settle(sim);
    REQUIRE(leader_of(sim) != old_leader);
    check_round("after-");
    // Syncs and refusals carry no result.
    const auto s = sim.sync(leader_of(sim));
    REQUIRE(sim.run_until([&] { return out.find(leader_of(sim), *s) != nullptr; },
                          sim.now() + 5'000'000));
    CHECK(out.find(leader_of(sim), *s)->response.empty());
}

TEST_CASE("results from apply (§6.6): a write applied here inside a snapshot completes with its "
          "result unknown, distinct from outcome_unknown") {
    // The simulator keeps every link FIFO, so a learner always learns its write's zxid
    // (REPLY) before it applies it; the table is what makes the promise, tested directly.
    client_table t;
    const request_id a = t.next_id(), b = t.next_id(), c = t.next_id();
    t.add_write(a, zxid{1, 1});
    t.add_write(b, zxid{1, 2});
    t.add_write(c, zxid{1, 4});
    t.applied(zxid{1, 1}, shared_bytes::copy_of(as_bytes("one")));
    t.applied(zxid{1, 3}, shared_bytes::copy_of(as_bytes("not ours")));  // another's write
    t.applied_through(zxid{1, 2});  // a snapshot at (1,2): b is in it
    const auto done = t.take();
    REQUIRE(done.size() == 2);
    CHECK(done[0].id == a);
    CHECK(as_string_view(done[0].response.view()) == "one");
    CHECK_FALSE(done[0].response_unknown);
    CHECK(done[1].id == b);
    CHECK(done[1].outcome.value() == zxid{1, 2});  // applied: the write is known
    CHECK(done[1].response_unknown);                  // its result is not
    CHECK(done[1].response.empty());
    t.abandon(errc::not_leader, 0);
    const auto lost = t.take();
    REQUIRE(lost.size() == 1);
    CHECK(lost[0].outcome.error() == make_error_code(errc::outcome_unknown));
    CHECK_FALSE(lost[0].response_unknown);
    CHECK(t.in_flight() == 0);
}

TEST_CASE("client sessions (§6.7): a tagged write retried across leader changes is applied once, "
          "the retry answers the first result marked duplicate, an older one is stale") {
    settled_cluster<session_double> cluster{82};
    auto& [sim, out] = cluster;
    const auto submit_and_wait = [&](peer_id at, const std::vector<std::byte>& txn) {
        const auto id = sim.submit(at, txn);
        REQUIRE(id);
        REQUIRE(sim.run_until([&] { return out.find(at, *id) != nullptr; }, sim.now() + 30'000'000));
        return *out.find(at, *id);
    };
    int duplicates = 0;
    const std::vector<sim_time> delays = {0, 1'000, 3'000, 6'000, 12'000, 50'000};
    for (std::uint64_t seq = 1; seq <= delays.size(); ++seq) {
        const auto txn = tagged(fmt::format("w{}", seq), 7, seq);
        const peer_id leader = leader_of(sim);
        peer_id at = 0;
        for (const auto& n : sim.nodes())
            if (n.peer && n.id != leader) at = n.id;
        // The leader dies with the write in flight: it may or may not commit.
        const auto id = sim.submit(at, txn);
        REQUIRE(id);
        sim.run_for(delays[seq - 1]);  // from "never reached the leader" to "applied"
        sim.crash(leader);
        REQUIRE(sim.run_until([&] { return out.find(at, *id) != nullptr; }, sim.now() + 30'000'000));
        const client_completion first = *out.find(at, *id);
        settle(sim);
        sim.restart(leader);
        settle(sim);
        out.seen.clear();  // a restarted peer numbers its requests from 1 again
        // The client retries until it hears back, through another replica each time.
        std::optional<std::string> result;
        if (first.outcome) {
            const session_reply r = reply_of(first);
            CHECK(r.status == session_status::applied);
            result = std::string{as_string_view(r.result)};
        } else {
            CHECK(first.outcome.error() == make_error_code(errc::outcome_unknown));
        }
        const client_completion retry = submit_and_wait(leader_of(sim), txn);
        const session_reply r = reply_of(retry);
        if (result) CHECK(r.status == session_status::duplicate);
        if (r.status == session_status::duplicate) ++duplicates;
        REQUIRE(r.status != session_status::stale);
        if (result) CHECK(as_string_view(r.result) == *result);
        INFO("seq " << seq << " first " << (first.outcome ? "ok" : first.outcome.error().message())
                    << " retry result " << as_string_view(r.result) << " status "
                    << int(r.status));
        CHECK(as_string_view(r.result).starts_with(fmt::format("w{}#", seq)));
    }
    CHECK(duplicates > 0);  // some first attempts committed despite their leader's crash
    CHECK(duplicates < static_cast<int>(delays.size()));  // and some did not
    // An older sequence is a definite error: nothing applied, no result.
    const session_reply stale = reply_of(submit_and_wait(leader_of(sim), tagged("w1", 7, 1)));
    CHECK(stale.status == session_status::stale);
    CHECK(stale.result.empty());
    // Every replica applied each write exactly once, and they agree byte for byte.
    sim.run_for(2'000'000);
    const shared_bytes reference = sim.at(1).machine->snapshot();
    for (const auto& n : sim.nodes()) {
        INFO("replica " << n.id);
        std::map<std::string, int> counts;
        for (const auto& a : n.machine->inner().applied()) ++counts[std::string{as_string_view(a.txn.view())}];
        for (std::uint64_t seq = 1; seq <= delays.size(); ++seq)
            CHECK(counts[fmt::format("w{}", seq)] == 1);
        CHECK(n.machine->last_sequence(7) == delays.size());
        CHECK(n.machine->snapshot() == reference);
    }
}

TEST_CASE("client sessions (§6.7): expiry by the leader's clock and eviction are the same on "
          "every replica, and memory stays bounded under a flood of client ids") {
    settled_cluster<session_double> cluster{83};
    auto& [sim, out] = cluster;
    std::vector<std::pair<peer_id, request_id>> ids;
    const auto wait_all = [&] { out.wait_all(sim, ids); };
    // 60 clients from every replica, with the leader's clock moving 10 ms a write.
    std::uint64_t clock = 0;
    for (std::uint64_t client = 1; client <= 60; ++client) {
        const peer_id at = static_cast<peer_id>(1 + client % 3);
        clock += 10;
        ids.emplace_back(at, *sim.submit(at, tagged("c", client, 1, clock)));
        if (client % 10 == 0) wait_all();  // several leaders' turns, not one batch
    }
    wait_all();
    sim.run_for(2'000'000);
    const shared_bytes reference = sim.at(1).machine->snapshot();
    for (const auto& n : sim.nodes()) {
        CHECK(n.machine->sessions().size() == 8);  // max_sessions: the 8 most recent
        CHECK(n.machine->snapshot() == reference);
    }
    // A leader clock 1,000 ms past the last activity expires every session, on every replica.
    ids.clear();
    ids.emplace_back(1, *sim.submit(1, session_envelope::wrap(as_bytes("tick"), std::nullopt,
                                                               clock + 1'000)));
    wait_all();
    sim.run_for(2'000'000);
    for (const auto& n : sim.nodes()) {
        CHECK(n.machine->sessions().size() == 0);
        CHECK(n.machine->sessions().clock_ms() == clock + 1'000);
        CHECK(n.machine->snapshot() == sim.at(1).machine->snapshot());
    }
}

TEST_CASE("client sessions (§6.7): the table's bounds, expiry, and a restore that refuses "
          "corrupt images and changes nothing") {
    using machine = session_machine<answering_machine>;
    const session_options opts{.max_sessions = 100, .expiry_ms = 500, .max_result_bytes = 16};
    machine m{opts};
    std::uint32_t counter = 0;
    const auto apply = [&](machine& target, const std::vector<std::byte>& txn) {
        auto r = session_reply::decode(target.apply(zxid{1, ++counter}, txn).view());
        REQUIRE(r.has_value());
        return r.value();
    };
    // A flood of new client ids: never more than max_sessions, the least recent evicted.
    for (std::uint64_t client = 1; client <= 20'000; ++client) apply(m, tagged("x", client, 1, 0));
    CHECK(m.sessions().size() == 100);
    CHECK_FALSE(m.last_sequence(19'900));
    CHECK(m.last_sequence(19'901) == 1u);
    // Per session: its ids, zxids, time and one result of at most max_result_bytes.
    CHECK(m.sessions().encoded_size() <= 16 + 100 * (8 * 5 + 1 + 4 + 16));
    // A duplicate answers the recorded result; a result above max_result_bytes is not kept.
    const auto first = apply(m, tagged("y", 20'000, 2, 100));
    CHECK(first.status == session_status::applied);
    const auto again = apply(m, tagged("y", 20'000, 2));
    CHECK(again.status == session_status::duplicate);
    CHECK(again.result_kept);
    CHECK(std::string{as_string_view(again.result)} == std::string{as_string_view(first.result)});
    const std::string large(40, 'L');
    CHECK(apply(m, tagged(large, 20'000, 3)).status == session_status::applied);
    const auto large_again = apply(m, tagged(large, 20'000, 3));
    CHECK(large_again.status == session_status::duplicate);
    CHECK_FALSE(large_again.result_kept);
    CHECK(large_again.result.empty());
    // Expiry: 500 ms of leader clock without activity; a client that comes back after it is
    // applied again (the promise is bounded).
    CHECK(m.next_expiry_ms() == 500u);  // the flood was seen at clock 0
    apply(m, session_envelope::wrap(as_bytes("tick"), std::nullopt, 550));
    CHECK(m.sessions().size() == 1);  // client 20,000, last seen at 100
    CHECK(m.next_expiry_ms() == 600u);
    CHECK(apply(m, tagged("x", 19'999, 1)).status == session_status::applied);  // expired: again
    CHECK(apply(m, tagged("y", 20'000, 2)).status == session_status::stale);

    // Restore: a copy restores exactly; every corruption is refused with the state unchanged.
    const shared_bytes image = m.snapshot();
    machine copy{opts};
    REQUIRE(copy.restore(m.last_applied(), image.view()));
    CHECK(copy.snapshot() == image);
    CHECK(copy.sessions() == m.sessions());
    machine target{opts};
    apply(target, tagged("z", 1, 1, 0));
    const shared_bytes before = target.snapshot();
    const auto refused = [&](machine& into, zxid z, const std::vector<std::byte>& bytes) {
        const auto r = into.restore(z, bytes);
        CHECK(into.snapshot() == before);
        return r ? std::error_code{} : r.error();
    };
    const std::vector<std::byte> good(image.data(), image.data() + image.size());
    for (std::size_t at = 0; at < good.size(); at += 7) {
        auto bad = good;
        bad[at] ^= std::byte{0x10};
        CHECK(refused(target, m.last_applied(), bad));
    }
    CHECK(refused(target, m.last_applied(), {good.begin(), good.end() - 1}));
    CHECK(refused(target, zxid{9, 9}, good) == make_error_code(errc::corrupt));
    // Well-formed images that break this replica's options: too many sessions, sessions
    // that its expiry says are gone, results above its bound.
    machine small{session_options{.max_sessions = 0, .expiry_ms = 500, .max_result_bytes = 16}};
    const shared_bytes small_before = small.snapshot();
    CHECK(small.restore(m.last_applied(), image.view()).error() == make_error_code(errc::corrupt));
    CHECK(small.snapshot() == small_before);
    machine strict{session_options{.max_sessions = 100, .expiry_ms = 0, .max_result_bytes = 16}};
    CHECK(strict.restore(m.last_applied(), image.view()).error() == make_error_code(errc::corrupt));
    machine tight{session_options{.max_sessions = 100, .expiry_ms = 500, .max_result_bytes = 2}};
    CHECK(tight.restore(m.last_applied(), image.view()).error() == make_error_code(errc::corrupt));
    // Another image version (neither 2 nor 1, which still restores) is refused as such.
    auto versioned = good;
    versioned[4] = std::byte{3};
    CHECK(refused(target, m.last_applied(), versioned) == make_error_code(errc::unsupported_version));
}

namespace {

/// Lease reads on (§7.1): promise 10 ticks, drift bound 50 %, so the leader's lease is
/// ⌊8 / 1.5⌋ = 5 ticks from the sending of a round a quorum answered.
cluster_options lease_cluster(std::uint64_t seed) {
    cluster_options o;
    o.seed = seed;
    o.peer.init_limit_ticks = 20;
    o.peer.sync_limit_ticks = 10;
    o.peer.read_lease_ticks = 10;
    o.peer.max_clock_drift_ppm = 500'000;
    return o;
}

std::vector<peer_id> all_but(const sim_type& sim, peer_id leader) {
    std::vector<peer_id> others;
    for (const auto& n : sim.nodes())
        if (n.id != leader) others.push_back(n.id);
    return others;
}

}  // namespace

TEST_CASE("lease options are validated: no lease shorter than a tick, drift within a factor 2") {
    options o;
    CHECK(o.read_lease_ticks == 0);  // off by default
    CHECK(o.lease_duration_ticks() == 0);
    o.read_lease_ticks = 10;
    o.max_clock_drift_ppm = 500'000;
    CHECK(o.lease_duration_ticks() == 5);
    CHECK(o.validate());
    o.max_clock_drift_ppm = 0;
    CHECK(o.lease_duration_ticks() == 8);  // two ticks of granularity, whatever the drift
    o.read_lease_ticks = 2;
    CHECK(o.validate().error() == make_error_code(errc::invalid_options));
    o.read_lease_ticks = 10;
    o.max_clock_drift_ppm = 1'000'001;
    CHECK(o.validate().error() == make_error_code(errc::invalid_options));
    o.max_clock_drift_ppm = 1'000'000;
    o.read_lease_ticks = 3;  // ⌊1 / 2⌋ = 0: no lease at all
    CHECK(o.validate().error() == make_error_code(errc::invalid_options));
}

TEST_CASE("lease sync: answered at once under the lease, forwarded ones without a round; "
          "a quorum round once the lease lapsed") {
    sim_type sim{lease_cluster(71)};
    outcomes out{sim};
    settled(sim);
    sim.run_for(1'000'000);  // a few rounds answered: the lease is held
    const peer_id leader = leader_of(sim);
    const peer_id follower = some_follower(sim);
    const auto w = sim.submit(leader, as_bytes("before"));
    REQUIRE(sim.run_until([&] { return out.done(leader, *w); }, sim.now() + 5'000'000));
    const zxid written = out.find(leader, *w)->outcome.value();

    const auto& counters = sim.peer_of(leader)->counters();
    const std::uint64_t rounds_answered = counters.syncs_answered;
    const auto local = sim.lease_sync(leader);
    REQUIRE(local);
    REQUIRE(out.done(leader, *local));  // within the call: no round trip
    CHECK(out.find(leader, *local)->outcome.value() >= written);
    CHECK(counters.lease_syncs_served == 1);

    // At a follower: the leader answers at once, after the COMMIT it sent before.
    const auto forwarded = sim.lease_sync(follower);
    REQUIRE(forwarded);
    REQUIRE(sim.run_until([&] { return out.done(follower, *forwarded); }, sim.now() + 5'000'000));
    CHECK(out.find(follower, *forwarded)->outcome.value() >= written);
    CHECK(applied_with(sim, follower, written, "before"));
    CHECK(counters.lease_syncs_served == 2);
    CHECK(counters.syncs_answered == rounds_answered);  // neither took a quorum round

    // Its links silent both ways (the connections hold): once the lease lapses, 5 ticks after
    // the last round a quorum answered, a lease sync takes the quorum round, which never
    // comes; it fails when the leader steps down (sync_limit, 10 ticks).
    for (peer_id f : all_but(sim, leader)) sim.network().set_pair_delay(leader, f, 60'000'000, 60'000'000);
    sim.run_for(700'000);
    REQUIRE(sim.peer_of(leader)->state() == peer_state::leading);
    const auto late = sim.lease_sync(leader);
    REQUIRE(late);
    CHECK_FALSE(out.done(leader, *late));
    CHECK(counters.lease_sync_fallbacks == 1);
    REQUIRE(sim.run_until([&] { return out.done(leader, *late); }, sim.now() + 20'000'000));
    CHECK(out.find(leader, *late)->outcome.error() == make_error_code(errc::not_leader));

    // Lease reads off: a lease sync is a sync.
    sim_type plain{[] {
        cluster_options o;
        o.seed = 72;
        return o;
    }()};
    outcomes plain_out{plain};
    settled(plain);
    const peer_id plain_leader = leader_of(plain);
    const auto s = plain.lease_sync(plain_leader);
    CHECK_FALSE(plain_out.done(plain_leader, *s));
    REQUIRE(plain.run_until([&] { return plain_out.done(plain_leader, *s); }, plain.now() + 5'000'000));
    CHECK(plain_out.find(plain_leader, *s)->outcome);
    CHECK(plain.peer_of(plain_leader)->counters().lease_sync_fallbacks == 1);
}

TEST_CASE("lease promise: a follower that lost its leader, or restarted, takes no part in an "
          "election until its promise expires") {
    sim_type sim{lease_cluster(73)};
    outcomes out{sim};
    settled(sim);
    sim.run_for(1'000'000);
    const peer_id leader = leader_of(sim);
    const auto others = all_but(sim, leader);
    // The leader's connections break: the followers are LOOKING at once, but hold their
    // election until 10 ticks after they last heard from it.
    std::uint64_t heard = 0;
    for (peer_id f : others) heard = std::max(heard, sim.peer_of(f)->now_tick());
    std::vector<std::uint64_t> started;
    for (peer_id f : others) started.push_back(sim.peer_of(f)->counters().elections_started);
    sim.network().partition({{leader}, others});
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id f : others)
                if (sim.peer_of(f)->state() != peer_state::looking) return false;
            return true;
        },
        sim.now() + 5'000'000));
    sim.run_for(700'000);  // 7 ticks: every follower still within its promise
    for (std::size_t i = 0; i < others.size(); ++i) {
        CHECK(sim.peer_of(others[i])->state() == peer_state::looking);
        CHECK(sim.peer_of(others[i])->counters().elections_started == started[i]);
    }
    REQUIRE(sim.run_until([&] { return leader_of(sim) != 0 && leader_of(sim) != leader; },
                          sim.now() + 10'000'000));
    for (peer_id f : others) CHECK(sim.peer_of(f)->now_tick() >= heard + 10);

    // A restarted replica that accepted an epoch before: nothing durable says when it last
    // promised, so it keeps a whole promise from its start.
    sim.network().heal();
    const peer_id restarted = others.front();
    sim.crash(restarted);
    sim.restart(restarted);
    sim.run_for(800'000);
    CHECK(sim.peer_of(restarted)->counters().elections_started == 0);
    CHECK(sim.peer_of(restarted)->state() == peer_state::looking);
    REQUIRE(sim.run_until([&] { return sim.peer_of(restarted)->established(); },
                          sim.now() + 10'000'000));
    CHECK(sim.peer_of(restarted)->now_tick() >= 10);
}

namespace {

/// §7.1's race, one schedule: the leader holds its lease; it is cut off from both followers,
/// whose clocks run `follower_ppm` fast; they elect a new leader, which commits a write;
/// then the old leader is asked for a lease sync. The client checker (the sweep's check of
/// §7: a sync sees every write completed before it) judges it. Returns its failures.
/// `follower_lease_ticks`, when set, is the followers' promise (each is restarted with it
/// before the race), shorter than the leader's.
std::vector<std::string> lease_race(std::int64_t follower_ppm, std::uint64_t& served_stale,
                                    std::optional<std::uint32_t> follower_lease_ticks = {}) {
    sim_type sim{lease_cluster(74)};
    client_checker clients;
    sim.set_completion_observer([&](peer_id at, const client_completion& c) {
        const auto& n = sim.at(at);
        clients.completed(at, n.incarnation, c, n.machine->applied(), n.machine->last_applied());
    });
    settled(sim);
    const peer_id leader = leader_of(sim);
    const auto others = all_but(sim, leader);
    if (follower_lease_ticks) {
        // One at a time, so the leader keeps its quorum.
        for (peer_id f : others) {
            options shorter = sim.options().peer;
            shorter.read_lease_ticks = *follower_lease_ticks;
            if (shorter.lease_duration_ticks() == 0) shorter.max_clock_drift_ppm = 0;
            shorter.sync_limit_ticks = 2;  // they notice the silence at once
            sim.crash(f);
            sim.restart(f, shorter);
            REQUIRE(sim.run_until([&] { return sim.peer_of(f)->established(); }, sim.now() + 20'000'000));
        }
        REQUIRE(leader_of(sim) == leader);
    }
    for (peer_id f : others) sim.set_clock_rate(f, follower_ppm);
    sim.run_for(1'000'000);
    // The lease is held (served at once) unless the followers' promise differs from the
    // leader's: then none of their answers counts (§4.2).
    const auto held = sim.lease_sync(leader);
    REQUIRE(held);
    clients.submitted(leader, sim.at(leader).incarnation, *held, client_op::sync);
    const std::uint64_t served_before = sim.peer_of(leader)->counters().lease_syncs_served;
    if (!follower_lease_ticks) REQUIRE(served_before == 1);

    // The leader's links go silent both ways (delayed for a minute; the connections hold, so
    // nobody notices before the silence limits): the followers elect a leader among
    // themselves, which takes a write.
    for (peer_id f : others) sim.network().set_pair_delay(leader, f, 60'000'000, 60'000'000);
    REQUIRE(sim.run_until([&] { return leader_of(sim) != 0 && leader_of(sim) != leader; },
                          sim.now() + 10'000'000));
    const peer_id successor = leader_of(sim);
    const auto w = sim.submit(successor, as_bytes("after the partition"));
    REQUIRE(w);
    clients.submitted(successor, sim.at(successor).incarnation, *w, client_op::write,
                      "after the partition");
    REQUIRE(sim.run_until([&] { return clients.write_successes() == 1; }, sim.now() + 5'000'000));
    // The old leader, still leading (its sync_limit has not passed), is asked for a lease sync.
    REQUIRE(sim.peer_of(leader)->state() == peer_state::leading);
    const auto read = sim.lease_sync(leader);
    REQUIRE(read);
    clients.submitted(leader, sim.at(leader).incarnation, *read, client_op::sync);
    served_stale = sim.peer_of(leader)->counters().lease_syncs_served - served_before;
    sim.network().clear_link_delays();
    REQUIRE(sim.run_until([&] { return clients.sync_successes() + clients.sync_failures() == 2; },
                          sim.now() + 20'000'000));
    for (const auto& n : sim.nodes()) sim.stop_clients(n.id);
    std::vector<std::vector<recording_state_machine::applied_txn>> sequences;
    for (const auto& n : sim.nodes())
        if (n.machine) sequences.push_back(n.machine->applied());
    clients.finish(sequences);
    return clients.failures();
}

}  // namespace

TEST_CASE("lease race: within the drift bound the lease ends before a new leader can commit; "
          "beyond it the checker catches a stale read (negative control)") {
    std::uint64_t stale = 0;
    // Followers' clocks 40 % fast, within the 50 % bound: the old leader's lease has ended
    // when the new leader commits, so the lease sync takes a quorum round, which fails.
    CHECK(lease_race(400'000, stale).empty());
    CHECK(stale == 0);
    // Followers' clocks 4 times as fast, beyond the bound: their promise ends before the
    // leader's lease, they elect a leader that commits, and the old leader serves a stale
    // read under its lease. The checker must say so.
    const auto failures = lease_race(3'000'000, stale);
    CHECK(stale == 1);
    REQUIRE(failures.size() == 1);
    CHECK(failures.front().find("answered sync") != std::string::npos);
}

TEST_CASE("lease options are compared in discovery (§4.2): followers that promise less than "
          "the leader assumes are not counted toward its lease, so the race above cannot serve a "
          "stale read") {
    // The followers promise 3 ticks (drift bound 0) where the leader assumes 10 (lease 5),
    // their clocks 50 % fast, within the leader's bound, and they notice silence after 2
    // ticks: a leader that counted their answers would lease past their promise, and they
    // elect a leader that commits before its lease ends — a stale read (it did, before).
    std::uint64_t stale = 0;
    CHECK(lease_race(500'000, stale, 3).empty());
    CHECK(stale == 0);
}

TEST_CASE("lease options are compared in discovery (§4.2): a follower whose promise or drift "
          "bound differs is never counted toward the lease, counted and shown in learners()") {
    cluster_options o = lease_cluster(76);
    sim_type sim{o};
    outcomes out{sim};
    // Three replicas that pairwise disagree, whoever leads: 10 ticks at 50 %, 12 ticks at
    // 50 %, 10 ticks at 40 %.
    sim.nodes()[1].peer_options = o.peer;
    sim.nodes()[1].peer_options->read_lease_ticks = 12;
    sim.nodes()[2].peer_options = o.peer;
    sim.nodes()[2].peer_options->max_clock_drift_ppm = 400'000;
    settled(sim);
    sim.run_for(1'000'000);  // many rounds answered, none counted
    const peer_id leader = leader_of(sim);
    const auto& counters = sim.peer_of(leader)->counters();
    CHECK(counters.lease_options_mismatches >= 2);
    CHECK(counters.learners_refused_options == 0);
    const auto learners = sim.peer_of(leader)->learners();
    REQUIRE(learners.size() == 2);
    for (const auto& l : learners) {
        INFO("learner " << l.id);
        CHECK_FALSE(l.lease_counted);
        REQUIRE(l.conflict);
        CHECK(l.conflict->peer == l.id);
        CHECK((std::string_view{l.conflict->option} == "read_lease_ticks" ||
               std::string_view{l.conflict->option} == "max_clock_drift_ppm"));
        CHECK(l.conflict->mine != l.conflict->theirs);
    }
    // No lease: a lease sync takes a quorum round. Writes and syncs work as ever.
    const auto read = sim.lease_sync(leader);
    REQUIRE(read);
    CHECK_FALSE(out.done(leader, *read));
    CHECK(counters.lease_syncs_served == 0);
    CHECK(counters.lease_sync_fallbacks == 1);
    REQUIRE(sim.run_until([&] { return out.done(leader, *read); }, sim.now() + 5'000'000));
    CHECK(out.find(leader, *read)->outcome);
    const auto w = sim.submit(some_follower(sim), as_bytes("still writable"));
    REQUIRE(w);
    REQUIRE(sim.run_until([&] { return out.done(some_follower(sim), *w); }, sim.now() + 5'000'000));
    CHECK(out.find(some_follower(sim), *w)->outcome);
}

TEST_CASE("options::agreed_fingerprint (§4.5): a replica whose application options differ "
          "refuses to follow, says why, and the others elect a leader without it; fixed and "
          "restarted, it follows") {
    cluster_options o;
    o.seed = 77;
    sim_type sim{o};
    outcomes out{sim};
    // Replica 3, the highest id, which FLE would elect first, runs other session options.
    sim.nodes()[2].peer_options = o.peer;
    sim.nodes()[2].peer_options->agreed_fingerprint = fingerprint_of({4096, 0, 1u << 20});
    sim.start();
    REQUIRE(sim.run_until(
        [&] {
            const peer_id l = leader_of(sim);
            return l != 0 && l != 3 && sim.peer_of(l == 1 ? 2 : 1)->established();
        },
        60'000'000));
    sim.run_for(5'000'000);
    const peer_id leader = leader_of(sim);
    const auto& odd = *sim.peer_of(3);
    CHECK_FALSE(odd.established());
    CHECK(odd.counters().leaders_refused_options >= 1);
    const auto refused = odd.status().refused_leader;
    REQUIRE(refused);
    CHECK(std::string_view{refused->option} == "agreed_fingerprint");
    CHECK(refused->mine == fingerprint_of({4096, 0, 1u << 20}));
    CHECK(refused->theirs == 0);
    const auto w = sim.submit(leader, as_bytes("without 3"));
    REQUIRE(w);
    REQUIRE(sim.run_until([&] { return out.done(leader, *w); }, sim.now() + 5'000'000));
    const zxid written = out.find(leader, *w)->outcome.value();
    sim.run_for(1'000'000);
    CHECK_FALSE(applied_with(sim, 3, written, "without 3"));
    // The leader saw its FOLLOWERINFO: counted, never synced.
    CHECK(sim.peer_of(leader)->counters().learners_refused_options >= 1);

    // Restarted with the group's options, it follows and catches up.
    sim.crash(3);
    sim.restart(3, o.peer);
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, sim.now() + 30'000'000));
    CHECK_FALSE(sim.peer_of(3)->status().refused_leader);
    REQUIRE(sim.run_until([&] { return applied_with(sim, 3, written, "without 3"); },
                          sim.now() + 5'000'000));
}

namespace {

/// §0.2: a group of the previous release (protocol 0x10000, frame version 5 only) upgraded
/// one replica at a time: a simulated group, the first id of every batch of five writes
/// submitted, and their completions.
struct rolling_upgrade {
    sim_type sim;
    outcomes out{sim};
    std::vector<std::pair<peer_id, request_id>> batches;  ///< the first id of each batch

    explicit rolling_upgrade(cluster_options o) : sim{o} {}

    /// Five writes at every replica running, as one submit_batch each.
    void write_everywhere(int step) {
        for (const auto& node : sim.nodes()) {
            if (!node.peer) continue;
            std::vector<std::string> mine;
            for (int i = 0; i < 5; ++i) mine.push_back(fmt::format("s{}-r{}-w{}", step, node.id, i));
            std::vector<byte_view> v;
            for (const auto& t : mine) v.push_back(as_bytes(t));
            // The core copies each write into its frame within the call.
            const auto first = sim.submit_batch(node.id, std::span<const byte_view>{v});
            REQUIRE(first);
            batches.emplace_back(node.id, *first);
        }
    }

    bool all_answered() const {
        for (const auto& [at, first] : batches)
            for (request_id id = first; id < first + 5; ++id)
                if (!out.done(at, id)) return false;
        return true;
    }

    /// Every write of this step succeeded, once; then forgets them (a restarted replica
    /// numbers its requests from 1 again).
    void check_and_forget() {
        for (const auto& [at, first] : batches)
            for (request_id id = first; id < first + 5; ++id) {
                INFO("replica " << at << " request " << id);
                REQUIRE(out.find(at, id)->outcome.has_value());
                CHECK(out.seen.at({at, id}).size() == 1);
                ++succeeded;
            }
        batches.clear();
        out.seen.clear();
    }
    std::size_t succeeded = 0;

    bool all_serving() {
        if (leader_of(sim) == 0) return false;
        for (const auto& n : sim.nodes())
            if (!n.peer || !n.peer->established()) return false;
        return true;
    }
};

}  // namespace

TEST_CASE("mixed versions (§0.2): a group of the previous release upgraded one replica at a "
          "time, the leader last, with writes at every replica before and after each step: "
          "every write applied once everywhere, no frame refused, REQUESTS only to a leader "
          "that speaks them") {
    cluster_options o;
    o.seed = 361;
    o.peer.test_only.protocol = oldest_protocol_version;  // every replica starts as 0.1
    rolling_upgrade u{o};
    settled(u.sim);
    zab::options upgraded = o.peer;
    upgraded.test_only.protocol = 0;
    const peer_id old_leader = leader_of(u.sim);
    std::vector<peer_id> order;
    for (const auto& n : u.sim.nodes())
        if (n.id != old_leader) order.push_back(n.id);
    order.push_back(old_leader);

    int step = 0;
    for (const peer_id id : order) {
        INFO("upgrading replica " << id);
        u.write_everywhere(step++);
        REQUIRE(u.sim.run_until([&] { return u.all_answered(); }, u.sim.now() + 10'000'000));
        u.check_and_forget();
        u.sim.crash(id);
        u.sim.restart(id, upgraded);
        REQUIRE(u.sim.run_until([&] { return u.all_serving(); }, u.sim.now() + 30'000'000));
        CHECK(u.sim.peer_of(id)->status().protocol == protocol_version);
        const peer_id leader = leader_of(u.sim);
        for (const auto& n : u.sim.nodes()) {
            // Each link speaks the lower version of its two ends.
            const std::uint32_t expected = std::min(n.peer->status().protocol,
                                                    u.sim.peer_of(leader)->status().protocol);
            if (n.id != leader) CHECK(n.peer->status().leader_protocol == expected);
        }
        u.write_everywhere(step++);
        REQUIRE(u.sim.run_until([&] { return u.all_answered(); }, u.sim.now() + 10'000'000));
        u.check_and_forget();
        // While the leader is of the previous release, nobody sent it a REQUESTS frame: its
        // decoder would have refused it (bad_frames) and dropped the learner.
        for (const auto& n : u.sim.nodes()) CHECK(n.peer->counters().bad_frames == 0);
        if (u.sim.peer_of(leader)->status().protocol == oldest_protocol_version)
            for (const auto& n : u.sim.nodes()) CHECK(n.peer->counters().forwarded_batches == 0);
    }
    // All upgraded: the followers' batches now go as REQUESTS.
    std::uint64_t batched = 0;
    for (const auto& n : u.sim.nodes()) batched += n.peer->counters().forwarded_batches;
    CHECK(batched >= 2);
    u.sim.run_for(1'000'000);
    const auto& reference = u.sim.nodes().front().machine->applied();
    CHECK(reference.size() == u.succeeded);
    CHECK(u.succeeded == 6 * 3 * 5);
    for (const auto& n : u.sim.nodes()) {
        INFO("replica " << n.id);
        REQUIRE(n.machine->applied().size() == reference.size());
        for (std::size_t i = 0; i < reference.size(); ++i) {
            CHECK(n.machine->applied()[i].id == reference[i].id);
            CHECK(as_string_view(n.machine->applied()[i].txn.view()) ==
                  as_string_view(reference[i].txn.view()));
        }
    }
}

TEST_CASE("mixed versions, negative control (§0.2): an upgraded follower that ignores its "
          "leader's protocol version sends REQUESTS to a leader of the previous release, which "
          "refuses the frame and drops it; its writes do not succeed") {
    cluster_options o;
    o.seed = 362;
    o.peer.test_only.protocol = oldest_protocol_version;
    rolling_upgrade u{o};
    settled(u.sim);
    zab::options broken = o.peer;
    broken.test_only.protocol = 0;
    broken.test_only.no_version_negotiation = true;
    const peer_id leader = leader_of(u.sim);
    const peer_id follower = some_follower(u.sim);
    u.sim.crash(follower);
    u.sim.restart(follower, broken);
    REQUIRE(u.sim.run_until([&] { return u.all_serving(); }, u.sim.now() + 30'000'000));
    std::vector<std::string> txns{"x1", "x2", "x3"};
    std::vector<byte_view> views;
    for (const auto& t : txns) views.push_back(as_bytes(t));
    const auto first = u.sim.submit_batch(follower, std::span<const byte_view>{views});
    REQUIRE(first);
    REQUIRE(u.sim.run_until([&] { return u.out.done(follower, *first + 2); }, u.sim.now() + 30'000'000));
    CHECK(u.sim.peer_of(leader)->counters().bad_frames >= 1);
    for (request_id id = *first; id < *first + 3; ++id) CHECK(!u.out.find(follower, id)->outcome.has_value());
}
