// Reconfiguration (docs/protocol.md §9): a reconfiguration is a transaction; joiners follow
// without a vote until one makes them voters; the old and the new quorum both hold a change
// until it commits; a leader the change leaves without a vote hands over; a removed member
// stops; the configuration survives restarts and compaction.
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/reconfig.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

struct outcomes {
    std::map<std::pair<peer_id, request_id>, client_completion> seen;
    explicit outcomes(sim_type& sim) {
        sim.set_completion_observer(
            [this](peer_id at, const client_completion& c) { seen.emplace(std::pair{at, c.id}, c); });
    }
    const client_completion* find(peer_id at, request_id id) const {
        const auto it = seen.find({at, id});
        return it == seen.end() ? nullptr : &it->second;
    }
};

peer_id leader_of(sim_type& sim) {
    for (const auto& n : sim.nodes())
        if (n.peer && n.peer->state() == peer_state::leading && n.peer->established()) return n.id;
    return 0;
}

/// Every running replica (but the removed) established.
bool settled(sim_type& sim) {
    if (leader_of(sim) == 0) return false;
    for (const auto& n : sim.nodes())
        if (n.peer && !n.peer->status().removed && !n.peer->established()) return false;
    return true;
}

/// Starts the cluster and runs until a leader and everyone else are established.
void start_settled(sim_type& sim) {
    sim.start();
    REQUIRE(sim.run_until([&] { return settled(sim); }, 30'000'000));
}

/// Runs until `id`'s request completes; returns its outcome.
result<zxid> complete(sim_type& sim, outcomes& out, peer_id at, std::optional<request_id> id) {
    REQUIRE(id);
    REQUIRE(sim.run_until([&] { return out.find(at, *id) != nullptr; }, sim.now() + 30'000'000));
    return out.find(at, *id)->outcome;
}

std::vector<member> voters(std::initializer_list<peer_id> ids) {
    std::vector<member> m;
    for (peer_id id : ids) m.push_back({id, learner_type::participant});
    return m;
}

std::uint64_t config_version(sim_type& sim, peer_id id) {
    return sim.peer_of(id)->configuration_in_force().version();
}

}  // namespace

TEST_CASE("the reconfiguration transaction and a snapshot's configuration round-trip; bad bytes "
          "are refused") {
    reconfig_request r{{{3, learner_type::participant}, {1, learner_type::observer}}, 42};
    const auto txn = encode_reconfig(r);
    CHECK(is_system_txn(txn.view()));
    auto back = decode_reconfig(txn.view());
    REQUIRE(back);
    CHECK(back.value().expected_version == 42u);
    REQUIRE(back.value().members.size() == 2);
    CHECK(back.value().members[0].id == 1);  // sorted
    CHECK(back.value().members[1].type == learner_type::participant);
    // Every truncation, and trailing bytes, are malformed.
    for (std::size_t n = 0; n < txn.size(); ++n)
        CHECK_FALSE(decode_reconfig(txn.view().first(n)));
    std::vector<std::byte> longer(txn.view().begin(), txn.view().end());
    longer.push_back(std::byte{0});
    CHECK_FALSE(decode_reconfig(longer));

    auto config = configuration::make(voters({1, 2, 4}), 77).value();
    const auto state = as_bytes("the machine's state");
    const auto wrapped = wrap_snapshot(config, state);
    auto unwrapped = unwrap_snapshot(wrapped.view());
    REQUIRE(unwrapped);
    REQUIRE(unwrapped.value().config);
    CHECK(unwrapped.value().config->members() == config.members());
    CHECK(unwrapped.value().config->version() == 77);
    CHECK(as_string_view(unwrapped.value().state) == "the machine's state");
    // A plain state machine snapshot passes through; a damaged header is corrupt.
    auto plain = unwrap_snapshot(state);
    REQUIRE(plain);
    CHECK_FALSE(plain.value().config);
    std::vector<std::byte> damaged(wrapped.view().begin(), wrapped.view().end());
    damaged[17] ^= std::byte{1};
    CHECK(unwrap_snapshot(damaged).error() == make_error_code(errc::corrupt));

    // Addresses travel with their members, in transactions and snapshots; members without
    // one encode as they always did.
    std::vector<member> addressed = voters({1, 2, 3});
    addressed[0].address = "10.0.0.1:2888";
    addressed[2].address = "[::1]:3000";
    const auto with_addresses = encode_reconfig({addressed, {}});
    CHECK(with_addresses.size() == txn.size() + 18 + 2 * 1 + 13 + 10);
    auto decoded = decode_reconfig(with_addresses.view());
    REQUIRE(decoded);
    CHECK(decoded.value().members == addressed);
    for (std::size_t n = 0; n < with_addresses.size(); ++n)
        CHECK_FALSE(decode_reconfig(with_addresses.view().first(n)));
    auto addressed_config = configuration::make(addressed, 99).value();
    auto round_trip = unwrap_snapshot(wrap_snapshot(addressed_config, state).view());
    REQUIRE(round_trip);
    CHECK(round_trip.value().config->members() == addressed);
    // A flag bit no version defines, and an empty address behind the address bit, are
    // malformed; an address too long or with a space is no valid configuration.
    std::vector<std::byte> bad_flags(with_addresses.view().begin(), with_addresses.view().end());
    bad_flags[22 + 17] = std::byte{8};
    CHECK_FALSE(decode_reconfig(bad_flags));
    std::vector<std::byte> empty_address(with_addresses.view().begin(), with_addresses.view().end());
    empty_address[22 + 18] = std::byte{0};
    CHECK_FALSE(decode_reconfig(empty_address));
    addressed[1].address = std::string(max_address_size + 1, 'a');
    CHECK_FALSE(configuration::make(addressed));
    addressed[1].address = "host name:1";
    CHECK_FALSE(configuration::make(addressed));

    // Client addresses travel the same way, after the peer address, with or without one.
    std::vector<member> with_clients = voters({1, 2, 3});
    with_clients[0].address = "10.0.0.1:2888";
    with_clients[0].client_address = "10.0.0.1:6379";
    with_clients[1].client_address = "db-2:6379";
    const auto clients_txn = encode_reconfig({with_clients, 5});
    CHECK(clients_txn.size() == txn.size() + 18 + 3 * 1 + 13 + 13 + 9);
    auto clients_decoded = decode_reconfig(clients_txn.view());
    REQUIRE(clients_decoded);
    CHECK(clients_decoded.value().members == with_clients);
    for (std::size_t n = 0; n < clients_txn.size(); ++n)
        CHECK_FALSE(decode_reconfig(clients_txn.view().first(n)));
    auto clients_config = configuration::make(with_clients, 100).value();
    auto clients_round_trip = unwrap_snapshot(wrap_snapshot(clients_config, state).view());
    REQUIRE(clients_round_trip);
    CHECK(clients_round_trip.value().config->members() == with_clients);
    // Member 2 has only the client address (flags 4): its length byte follows the flags.
    std::vector<std::byte> empty_client(clients_txn.view().begin(), clients_txn.view().end());
    const std::size_t second_member = 22 + 18 + 1 + 13 + 1 + 13;
    REQUIRE(empty_client[second_member + 17] == std::byte{4});
    empty_client[second_member + 18] = std::byte{0};
    CHECK_FALSE(decode_reconfig(empty_client));
    with_clients[2].client_address = std::string(max_address_size + 1, 'c');
    CHECK_FALSE(configuration::make(with_clients));
    with_clients[2].client_address = "db\t3:1";
    CHECK_FALSE(configuration::make(with_clients));
}

TEST_CASE("growing 3 voters to 5: joiners follow without a vote, the reconfiguration commits on "
          "both quorums, its zxid is the new version, and every replica agrees") {
    cluster_options o;
    o.seed = 7;
    o.joiners = 2;
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    const peer_id leader = leader_of(sim);
    // The joiners are synced followers, and count for nothing.
    for (peer_id j : {4, 5}) {
        CHECK(sim.peer_of(j)->state() == peer_state::following);
        CHECK(sim.peer_of(j)->established());
    }

    // A client transaction with zab's prefix is refused before anything is proposed.
    const auto forged = encode_reconfig({voters({1}), std::nullopt});
    CHECK(complete(sim, out, leader, sim.submit(leader, forged.view())).error() ==
          make_error_code(errc::invalid_argument));
    // An address no configuration may carry is refused where it is asked for, at a
    // follower as at the leader.
    auto spaced = voters({1, 2, 3});
    spaced[1].address = "host name:7002";
    for (peer_id at : {peer_id{1}, peer_id{2}, peer_id{3}})
        CHECK(complete(sim, out, at, sim.reconfigure(at, {spaced, {}})).error() ==
              make_error_code(errc::invalid_argument));
    // A new configuration whose voters synced with the leader are no quorum of it.
    CHECK(complete(sim, out, leader, sim.reconfigure(leader, {voters({1, 2, 3, 6, 7, 8, 9}), {}}))
              .error() == make_error_code(errc::new_config_no_quorum));
    // Compare-and-set against another version.
    CHECK(complete(sim, out, leader, sim.reconfigure(leader, {voters({1, 2, 3, 4, 5}), 12345}))
              .error() == make_error_code(errc::version_mismatch));
    CHECK(complete(sim, out, leader, sim.reconfigure(leader, {{}, {}})).error() ==
          make_error_code(errc::invalid_argument));

    const auto grow = sim.reconfigure(leader, {voters({1, 2, 3, 4, 5}), 0});
    // A second change while the first is not committed is refused.
    const auto second = sim.reconfigure(leader, {voters({1, 2, 3}), {}});
    CHECK(complete(sim, out, leader, second).error() == make_error_code(errc::reconfig_in_progress));
    const auto grown = complete(sim, out, leader, grow);
    REQUIRE(grown);
    CHECK(config_version(sim, leader) == grown.value().value());
    // Asked at a follower: forwarded to the leader like a write, with a compare-and-set on
    // the version just made.
    const peer_id follower = leader == 1 ? 2 : 1;
    const auto version = complete(
        sim, out, follower, sim.reconfigure(follower, {voters({1, 2, 3, 4, 5}), grown.value().value()}));
    REQUIRE(version);
    CHECK(version.value() > grown.value());
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id id = 1; id <= 5; ++id)
                if (config_version(sim, id) != version.value().value()) return false;
            return true;
        },
        sim.now() + 10'000'000));
    for (peer_id id = 1; id <= 5; ++id) {
        CHECK(sim.peer_of(id)->configuration_in_force().voters() ==
              std::vector<peer_id>{1, 2, 3, 4, 5});
        CHECK(sim.peer_of(id)->pending_configurations().empty());
    }

    // Five voters now: with two of the old three down, the new quorum (3 of 5) still commits.
    sim.crash(leader == 3 ? 2 : 3);
    sim.crash(follower);
    REQUIRE(sim.run_until([&] { return leader_of(sim) != 0; }, sim.now() + 60'000'000));
    const peer_id now_leading = leader_of(sim);
    const auto write = complete(sim, out, now_leading, sim.submit(now_leading, as_bytes("five")));
    CHECK(write);
}

TEST_CASE("a reconfiguration that removes the leader hands over to the best new voter without an "
          "election; removed replicas stop and say so; the group survives restarts") {
    cluster_options o;
    o.seed = 11;
    o.joiners = 1;
    o.peer.snapshot_every = 5;  // compaction past the reconfiguration: the snapshot carries it
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    const peer_id leader = leader_of(sim);
    for (int i = 0; i < 7; ++i)
        REQUIRE(complete(sim, out, leader, sim.submit(leader, as_bytes("w" + std::to_string(i)))));

    // Replace the leader by the joiner: {others, 4}.
    std::vector<peer_id> rest;
    for (peer_id id = 1; id <= 3; ++id)
        if (id != leader) rest.push_back(id);
    const auto version =
        complete(sim, out, leader, sim.reconfigure(leader, {voters({rest[0], rest[1], 4}), {}}));
    REQUIRE(version);
    REQUIRE(sim.run_until([&] { return sim.peer_of(leader)->status().removed && settled(sim); },
                          sim.now() + 20'000'000));
    const peer_id successor = leader_of(sim);
    CHECK(successor != leader);
    CHECK(sim.peer_of(leader)->counters().transfers_handed_over == 1);
    CHECK(sim.peer_of(leader)->state() == peer_state::looking);
    CHECK(complete(sim, out, leader, sim.submit(leader, as_bytes("x"))).error() ==
          make_error_code(errc::not_a_member));

    // Writes continue; then a follower is removed, and learns it.
    for (int i = 0; i < 7; ++i)
        REQUIRE(complete(sim, out, successor, sim.submit(successor, as_bytes("v" + std::to_string(i)))));
    const peer_id dropped = successor == rest[0] ? rest[1] : rest[0];
    std::vector<member> remaining = voters({successor, 4});
    if (successor == 4) remaining = voters({4, successor == rest[0] ? rest[0] : rest[1]});
    std::erase_if(remaining, [&](const member& m) { return m.id == dropped; });
    if (remaining.size() < 2) remaining.push_back({dropped == rest[0] ? rest[1] : rest[0], learner_type::participant});
    REQUIRE(complete(sim, out, successor, sim.reconfigure(successor, {remaining, {}})));
    REQUIRE(sim.run_until([&] { return sim.peer_of(dropped)->status().removed; }, sim.now() + 10'000'000));
    for (int i = 0; i < 7; ++i)
        REQUIRE(complete(sim, out, successor, sim.submit(successor, as_bytes("u" + std::to_string(i)))));

    // Every replica restarts: the configuration comes back from the log and its snapshot.
    const auto in_force = sim.peer_of(successor)->configuration_in_force();
    for (peer_id id = 1; id <= 4; ++id) sim.crash(id);
    for (peer_id id = 1; id <= 4; ++id) sim.restart(id);
    REQUIRE(sim.run_until([&] { return settled(sim); }, sim.now() + 60'000'000));
    for (const member& m : in_force.members()) {
        INFO("replica " << m.id);
        CHECK(sim.peer_of(m.id)->configuration_in_force().members() == in_force.members());
        CHECK_FALSE(sim.peer_of(m.id)->status().removed);
    }
    CHECK(sim.peer_of(leader)->status().removed);
    CHECK(sim.peer_of(dropped)->status().removed);
    const peer_id last = leader_of(sim);
    CHECK(in_force.is_voter(last));
    CHECK(complete(sim, out, last, sim.submit(last, as_bytes("after restart"))));
}

TEST_CASE("weighted and hierarchical verifiers count weights and groups (ZooKeeper's "
          "QuorumHierarchical)") {
    auto weighted = configuration::make({{1, learner_type::participant, 0, 3},
                                         {2, learner_type::participant, 0, 1},
                                         {3, learner_type::participant, 0, 1},
                                         {4, learner_type::observer}})
                        .value();
    const auto w = quorum_system::of(weighted);
    peer_set one;
    one.insert(1);
    CHECK(w.contains_quorum(one));
    peer_set two_three;
    two_three.insert(2);
    two_three.insert(3);
    two_three.insert(4);  // an observer adds nothing
    CHECK_FALSE(w.contains_quorum(two_three));
    CHECK_FALSE(w.is_voter(4));

    // Three sites: {1,2,3}, {4}, {5}; a majority of sites, each by a majority of its weight.
    auto sites = configuration::make({{1, learner_type::participant, 1, 1},
                                      {2, learner_type::participant, 1, 1},
                                      {3, learner_type::participant, 1, 1},
                                      {4, learner_type::participant, 2, 1},
                                      {5, learner_type::participant, 3, 1}})
                     .value();
    const auto h = quorum_system::of(sites);
    auto set_of = [](std::initializer_list<peer_id> ids) {
        peer_set s;
        for (peer_id id : ids) s.insert(id);
        return s;
    };
    CHECK(h.contains_quorum(set_of({4, 5})));        // two sites of three
    CHECK(h.contains_quorum(set_of({1, 2, 5})));     // site 1 by 2 of 3, and site 3
    CHECK_FALSE(h.contains_quorum(set_of({1, 2, 3})));  // one site only
    CHECK_FALSE(h.contains_quorum(set_of({1, 4})));     // site 1 by 1 of 3: not a majority
    CHECK(h.simple_majority() == std::nullopt);

    // Invalid: groups for some voters only, a total weight of 0, promotion of a voter.
    CHECK_FALSE(configuration::make({{1, learner_type::participant, 1, 1},
                                     {2, learner_type::participant, 0, 1}}));
    CHECK_FALSE(configuration::make({{1, learner_type::participant, 0, 0}}));
    CHECK_FALSE(configuration::make({{1, learner_type::participant, 0, 1, true}}));
    // Groups and weights travel with the reconfiguration.
    auto back = decode_reconfig(encode_reconfig({sites.members(), {}}).view());
    REQUIRE(back);
    CHECK(back.value().members == sites.members());
}

TEST_CASE("a hierarchical configuration keeps committing with two sites of three up, where a "
          "majority of heads would not") {
    cluster_options o;
    o.seed = 23;
    o.voters = 5;
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    const peer_id leader = leader_of(sim);
    std::vector<member> sites{{1, learner_type::participant, 1, 1},
                              {2, learner_type::participant, 1, 1},
                              {3, learner_type::participant, 1, 1},
                              {4, learner_type::participant, 2, 1},
                              {5, learner_type::participant, 3, 1}};
    REQUIRE(complete(sim, out, leader, sim.reconfigure(leader, {sites, {}})));
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id id = 1; id <= 5; ++id)
                if (!sim.peer_of(id)->configuration_in_force().hierarchical()) return false;
            return true;
        },
        sim.now() + 10'000'000));
    // Site 1 goes down whole: 2 replicas of 5 are left, two sites of three.
    for (peer_id id = 1; id <= 3; ++id) sim.crash(id);
    REQUIRE(sim.run_until([&] { return leader_of(sim) != 0; }, sim.now() + 60'000'000));
    const peer_id now = leader_of(sim);
    CHECK((now == 4 || now == 5));
    CHECK(complete(sim, out, now, sim.submit(now, as_bytes("two sites"))));
}

TEST_CASE("learner promotion: members marked promote follow without a vote and the leader makes "
          "each a voter once caught up — a single voter grows to three") {
    cluster_options o;
    o.seed = 5;
    o.voters = 1;
    o.joiners = 2;
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    REQUIRE(leader_of(sim) == 1);
    for (int i = 0; i < 5; ++i) REQUIRE(complete(sim, out, 1, sim.submit(1, as_bytes("w"))));
    // Learners: the leader makes each a voter once it is caught up, one reconfiguration at a
    // time, each checked against the followers synced then.
    std::vector<member> grow{{1, learner_type::participant},
                             {2, learner_type::observer, 0, 1, true},
                             {3, learner_type::observer, 0, 1, true}};
    REQUIRE(complete(sim, out, 1, sim.reconfigure(1, {grow, 0})));
    // Until every replica knows the last promotion committed, losing the leader would leave
    // the others with {1, 2} and the pending {1, 2, 3} — rightly stuck without 1.
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id id = 1; id <= 3; ++id)
                if (sim.peer_of(id)->configuration_in_force().voters() != std::vector<peer_id>{1, 2, 3})
                    return false;
            return true;
        },
        sim.now() + 20'000'000));
    CHECK(sim.peer_of(1)->counters().learners_promoted == 2);
    // Three voters: the first one may go, and the group still commits.
    sim.crash(1);
    REQUIRE(sim.run_until([&] { return leader_of(sim) != 0; }, sim.now() + 60'000'000));
    const peer_id now = leader_of(sim);
    CHECK(complete(sim, out, now, sim.submit(now, as_bytes("three"))));
}

// ZooKeeper's reconfiguration bugs, as schedules (issue 18). Each names the failure it guards.

TEST_CASE("ZOOKEEPER-3814: a replica down during a reconfiguration takes the new configuration "
          "when it comes back, also from a snapshot after compaction") {
    cluster_options o;
    o.seed = 31;
    o.joiners = 1;
    o.peer.snapshot_every = 3;
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id down = leader == 3 ? 2 : 3;
    sim.crash(down);
    const auto version = complete(sim, out, leader,
                                  sim.reconfigure(leader, {voters({1, 2, 3, 4}), 0}));
    REQUIRE(version);
    for (int i = 0; i < 12; ++i)  // compacts past the reconfiguration on the others
        REQUIRE(complete(sim, out, leader, sim.submit(leader, as_bytes("c" + std::to_string(i)))));
    sim.restart(down);
    REQUIRE(sim.run_until(
        [&] { return sim.peer_of(down)->established() && config_version(sim, down) >= version.value().value(); },
        sim.now() + 30'000'000));
    CHECK(sim.peer_of(down)->configuration_in_force().voters() == std::vector<peer_id>{1, 2, 3, 4});
}

TEST_CASE("ZOOKEEPER-3830: a member added by a reconfiguration can lead, and the group commits "
          "under it") {
    cluster_options o;
    o.seed = 37;
    o.joiners = 1;
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    const peer_id leader = leader_of(sim);
    REQUIRE(complete(sim, out, leader, sim.reconfigure(leader, {voters({1, 2, 3, 4}), 0})));
    REQUIRE(sim.run_until([&] { return config_version(sim, 4) != 0; }, sim.now() + 10'000'000));
    REQUIRE(complete(sim, out, leader, sim.transfer_leadership(leader, 4)));
    REQUIRE(sim.run_until([&] { return leader_of(sim) == 4 && settled(sim); }, sim.now() + 20'000'000));
    CHECK(complete(sim, out, 4, sim.submit(4, as_bytes("under the new member"))));
    const peer_id follower = leader == 1 ? 2 : 1;
    CHECK(complete(sim, out, follower, sim.submit(follower, as_bytes("through a follower"))));
}

TEST_CASE("ZOOKEEPER-2746 / ZOOKEEPER-2865: a reconfiguration removing the leader, interrupted by "
          "its isolation, is completed by the next leader; the old one, back, learns it was "
          "removed and stops; every replica agrees") {
    cluster_options o;
    o.seed = 41;
    o.voters = 5;
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    const peer_id leader = leader_of(sim);
    std::vector<peer_id> rest;
    for (peer_id id = 1; id <= 5; ++id)
        if (id != leader) rest.push_back(id);
    const auto change = sim.reconfigure(leader, {voters({rest[0], rest[1], rest[2], rest[3]}), {}});
    REQUIRE(change);
    // Cut the leader off once a follower logged the change, before it can commit.
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id id : rest)
                if (!sim.peer_of(id)->pending_configurations().empty()) return true;
            return false;
        },
        sim.now() + 5'000'000));
    const bool committed_already = out.find(leader, *change) != nullptr;
    sim.network().partition({{leader}});
    REQUIRE(sim.run_until([&] { return leader_of(sim) != 0 && leader_of(sim) != leader; },
                          sim.now() + 60'000'000));
    const peer_id now = leader_of(sim);
    REQUIRE(complete(sim, out, now, sim.submit(now, as_bytes("under the next leader"))));
    // The next leader's history held the change: committed at its establishment, if not before.
    CHECK(sim.peer_of(now)->configuration_in_force().voters() == rest);
    sim.network().heal();
    REQUIRE(sim.run_until([&] { return sim.peer_of(leader)->status().removed; },
                          sim.now() + 60'000'000));
    INFO("the change had committed before the cut: " << committed_already);
    for (peer_id id : rest) {
        REQUIRE(sim.run_until([&] { return config_version(sim, id) == config_version(sim, now); },
                              sim.now() + 10'000'000));
        CHECK(sim.peer_of(id)->configuration_in_force().voters() == rest);
    }
}

TEST_CASE("ZOOKEEPER-2172: joiners started to join cannot elect each other, whatever they are "
          "started with") {
    cluster_options o;
    o.seed = 43;
    o.joiners = 2;
    sim_type sim{o};
    start_settled(sim);
    // The members go away; the two joiners are alone, both unsynced with any quorum of theirs.
    for (peer_id id = 1; id <= 3; ++id) sim.crash(id);
    sim.run_for(30'000'000);
    for (peer_id j : {4, 5}) {
        CHECK(sim.peer_of(j)->state() != peer_state::leading);
        CHECK_FALSE(sim.peer_of(j)->established());
    }
}

TEST_CASE("a member that missed the reconfiguration that replaced every other voter finds the new "
          "leader: the leader invites the members of its configuration that do not follow it") {
    // Found by zab_fuzz_cluster: the replica's own configuration names only voters that were
    // removed and stopped, so its notifications reach nobody who knows the new one.
    cluster_options o;
    o.seed = 47;
    o.joiners = 2;
    sim_type sim{o};
    outcomes out{sim};
    start_settled(sim);
    const peer_id leader = leader_of(sim);
    const peer_id down = leader == 3 ? 2 : 3;
    sim.crash(down);
    const auto version =
        complete(sim, out, leader, sim.reconfigure(leader, {voters({down, 4, 5}), 0}));
    REQUIRE(version);
    // Both old voters but `down` learn they were removed and stop.
    for (peer_id id = 1; id <= 3; ++id) {
        if (id == down) continue;
        REQUIRE(sim.run_until([&] { return sim.peer_of(id)->status().removed; },
                              sim.now() + 30'000'000));
    }
    REQUIRE(sim.run_until([&] { return leader_of(sim) == 4 || leader_of(sim) == 5; },
                          sim.now() + 30'000'000));
    sim.restart(down);
    REQUIRE(sim.run_until(
        [&] {
            return sim.peer_of(down)->established() &&
                   config_version(sim, down) >= version.value().value();
        },
        sim.now() + 30'000'000));
    CHECK(sim.peer_of(down)->configuration_in_force().voters() == std::vector<peer_id>{down, 4, 5});
    // It votes again: with one of the two others down the group still commits.
    const peer_id now = leader_of(sim);
    sim.crash(now == 4 ? 5 : 4);
    CHECK(complete(sim, out, now, sim.submit(now, as_bytes("after"))));
}
