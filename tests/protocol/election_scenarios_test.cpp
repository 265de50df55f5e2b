// Fast Leader Election on the simulator: whole clusters, with and without faults.
#include <catch2/catch.hpp>

#include "zab/core/concepts.hpp"
#include "zab/testing/election_checker.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

cluster_options cluster(std::size_t voters, std::size_t observers, std::uint64_t seed) {
    cluster_options o;
    o.seed = seed;
    o.voters = voters;
    o.observers = observers;
    return o;
}

// Ten seconds of virtual time: far beyond what a fault-free election needs (well under one).
constexpr sim_time ten_seconds = 10'000'000;

/// Gives replica `id` a recovered history: current epoch `epoch`, last logged `last`.
void give_history(sim_type& sim, peer_id id, epoch_t epoch, zxid last) {
    auto& log = *sim.at(id).log;
    log.write_epochs(1, epochs{epoch, epoch});
    const log_record record{last, shared_bytes::copy_of(as_bytes("txn"))};
    log.append(2, std::span<const log_record>{&record, 1});
    log.make_durable(2);
}

peer_id leader_of(sim_type& sim) { return sim.peer_of(1)->current_vote().leader; }

}  // namespace

TEST_CASE("1, 3, 5 and 7 voters, with and without observers, elect the highest sid on a tie") {
    for (std::size_t voters : {1, 3, 5, 7}) {
        for (std::size_t observers : {0, 2}) {
            INFO(voters << " voters, " << observers << " observers");
            sim_type sim{cluster(voters, observers, 100 + voters * 10 + observers)};
            election_checker<sim_type> checker{sim};
            sim.start();
            REQUIRE(sim.run_until([&] { return checker.all_decided_same_leader(); },
                                  sim.now() + ten_seconds));
            CHECK(checker.failures().empty());
            CHECK(leader_of(sim) == voters);  // equal histories: the highest sid wins
            for (const auto& n : sim.nodes()) {
                const auto expected = n.id == voters      ? peer_state::leading
                                      : n.id <= voters    ? peer_state::following
                                                          : peer_state::observing;
                CHECK(n.peer->state() == expected);
            }
        }
    }
}

TEST_CASE("a longer log beats a higher sid; a higher current epoch beats a longer log") {
    SECTION("longer log") {
        sim_type sim{cluster(3, 0, 7)};
        election_checker<sim_type> checker{sim};
        give_history(sim, 1, 1, zxid{1, 60});
        give_history(sim, 2, 1, zxid{1, 50});
        give_history(sim, 3, 1, zxid{1, 10});
        sim.start();
        REQUIRE(sim.run_until([&] { return checker.all_decided_same_leader(); },
                              sim.now() + ten_seconds));
        CHECK(leader_of(sim) == 1);
        CHECK(checker.failures().empty());
    }
    SECTION("higher epoch") {
        sim_type sim{cluster(3, 0, 8)};
        election_checker<sim_type> checker{sim};
        give_history(sim, 1, 2, zxid{2, 3});
        give_history(sim, 2, 1, zxid{1, 50});
        give_history(sim, 3, 1, zxid{1, 10});
        sim.start();
        REQUIRE(sim.run_until([&] { return checker.all_decided_same_leader(); },
                              sim.now() + ten_seconds));
        CHECK(leader_of(sim) == 1);
        CHECK(checker.failures().empty());
    }
}

TEST_CASE("a restarted follower joins the established ensemble through settled votes") {
    sim_type sim{cluster(5, 1, 11)};
    election_checker<sim_type> checker{sim};
    sim.start();
    REQUIRE(sim.run_until([&] { return checker.all_decided_same_leader(); },
                          sim.now() + ten_seconds));
    const auto leader_decision = sim.peer_of(5)->last_decision()->sequence;
    sim.crash(2);
    sim.crash(6);  // the observer too
    sim.run_for(100'000);
    sim.restart(2);
    sim.restart(6);
    REQUIRE(sim.run_until([&] { return checker.all_decided_same_leader(); },
                          sim.now() + ten_seconds));
    for (peer_id id : {2, 6}) {
        const auto& d = *sim.peer_of(id)->last_decision();
        CHECK(d.decided.leader == 5);
        CHECK(d.how != election_decision::basis::looking_quorum);  // joined, no new election
    }
    CHECK(sim.peer_of(5)->last_decision()->sequence == leader_decision);  // leader undisturbed
    CHECK(sim.peer_of(6)->state() == peer_state::observing);
    CHECK(checker.failures().empty());
}

TEST_CASE("a minority partition never decides; after the heal everyone follows one leader") {
    sim_type sim{cluster(5, 0, 12)};
    election_checker<sim_type> checker{sim};
    sim.network().partition({{1, 2}, {3, 4, 5}});
    sim.start();
    const sim_time heal_at = sim.now() + 30'000'000;
    bool minority_decided = false;
    sim.add_checker([&](sim_type& s) {
        for (peer_id id : {1, 2})
            if (s.now() < heal_at && s.peer_of(id)->state() != peer_state::looking)
                minority_decided = true;
    });
    sim.run_until([] { return false; }, heal_at - 1);
    CHECK_FALSE(minority_decided);
    for (peer_id id : {3, 4, 5}) CHECK(sim.peer_of(id)->state() != peer_state::looking);
    // The minority kept looking, backing off its notifications up to the cap.
    CHECK(sim.peer_of(1)->counters().notification_timeouts > 3);

    sim.network().heal();
    const sim_time healed = sim.now();
    REQUIRE(sim.run_until([&] { return checker.all_decided_same_leader(); },
                          healed + ten_seconds));
    CHECK(leader_of(sim) == 5);
    CHECK(checker.failures().empty());
}

TEST_CASE("the leader's crash sends its followers back to election; a new leader emerges") {
    sim_type sim{cluster(3, 0, 13)};
    election_checker<sim_type> checker{sim};
    sim.start();
    REQUIRE(sim.run_until([&] { return checker.all_decided_same_leader(); },
                          sim.now() + ten_seconds));
    REQUIRE(leader_of(sim) == 3);
    sim.crash(3);
    REQUIRE(sim.run_until(
        [&] {
            return sim.peer_of(1)->state() != peer_state::looking &&
                   sim.peer_of(2)->state() == peer_state::leading;
        },
        sim.now() + ten_seconds));
    CHECK(sim.peer_of(1)->current_vote().leader == 2);
    CHECK(checker.failures().empty());
}

TEST_CASE("one seed replays exactly; another seed runs differently") {
    auto run = [](std::uint64_t seed) {
        cluster_options o = cluster(5, 1, seed);
        sim_type sim{o};
        sim.start();
        sim.run_for(1'000'000);
        sim.network().partition({{1, 2, 3}, {4, 5, 6}});
        sim.crash(2);
        sim.run_for(3'000'000);
        sim.network().heal();
        sim.restart(2);
        sim.run_for(5'000'000);
        return sim.trace_hash_value();
    };
    CHECK(run(42) == run(42));
    CHECK(run(42) != run(43));
}

TEST_CASE("a per-event trace can be switched on, one line per event") {
    sim_type sim{cluster(3, 0, 5)};
    std::vector<std::string> lines;
    sim.set_trace([&](std::string_view line) { lines.emplace_back(line); });
    sim.start();
    sim.run_for(1'000'000);
    REQUIRE(lines.size() > 10);
    CHECK(lines.front().find("START") != std::string::npos);
    bool saw_notification = false;
    for (const auto& l : lines) saw_notification |= l.find("NOTIFICATION <3, 0, <0, 0>>") != std::string::npos;
    CHECK(saw_notification);
}

// A deliberately broken election: decides for itself at once, on its own vote. The checker
// must report it — a checker that never fires proves nothing.
class hasty_election {
public:
    explicit hasty_election(peer_context& ctx) : ctx_{ctx} {}
    void start() {
        election_decision d;
        d.how = election_decision::basis::looking_quorum;
        d.decided = vote{ctx_.self(), ctx_.last_logged, ctx_.durable_epochs.current, 1,
                         peer_state::leading};
        d.counted.emplace_back(ctx_.self(), vote{ctx_.self(), ctx_.last_logged,
                                                  ctx_.durable_epochs.current, 1,
                                                  peer_state::looking});
        ctx_.decide(std::move(d));
    }
    void on_notification(peer_id, const wire::notification&) {}
    void on_connected(peer_id) {}
    void on_tick() {}
    std::optional<std::uint64_t> next_deadline() const { return std::nullopt; }

private:
    peer_context& ctx_;
};

TEST_CASE("the election checker catches a decision without a quorum") {
    using broken_sim = simulator<recording_state_machine, policies<hasty_election>>;
    broken_sim sim{cluster(3, 0, 1)};
    election_checker<broken_sim> checker{sim};
    sim.start();
    sim.run_for(100'000);
    REQUIRE_FALSE(checker.failures().empty());
    CHECK(checker.failures().front().find("without a quorum") != std::string::npos);
}

TEST_CASE("fixed_leader_election: the configured leader leads, at once, without votes") {
    using fixed_sim = simulator<recording_state_machine, policies<fixed_leader_election>>;
    cluster_options o = cluster(3, 1, 3);
    o.peer.fixed_leader = 2;
    fixed_sim sim{o};
    sim.start();
    for (const auto& n : sim.nodes()) {
        CHECK(n.peer->current_vote().leader == 2);
        CHECK(n.peer->state() == (n.id == 2   ? peer_state::leading
                                  : n.id <= 3 ? peer_state::following
                                              : peer_state::observing));
        CHECK(n.peer->counters().notifications_sent == 0);
    }
}
