// The seeds' discovery, synchronization and broadcast walkthroughs (001_ad25c1081e87fcd6.txt),
// on the simulator with the real peers.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

std::string text(const shared_bytes& b) { return std::string{as_string_view(b.view())}; }

/// Gives replica `id` epoch `epoch` and a log of transactions <1,1> … <1,last>.
void give_log(sim_type& sim, peer_id id, epoch_t epoch, std::uint32_t last) {
    auto& log = *sim.at(id).log;
    log.write_epochs(1, epochs{epoch, epoch});
    std::vector<log_record> records;
    for (std::uint32_t c = 1; c <= last; ++c)
        records.push_back({zxid{1, c}, shared_bytes::copy_of(as_bytes("txn " + std::to_string(c)))});
    log.append(2, records);
    log.make_durable(2);
}

/// Describes a message as the seed writes it: FOLLOWERINFO(1), LEADERINFO(<2, 0>), …
std::string describe(const wire::message& m) {
    return std::visit(
        [](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            const std::string name{to_string(wire::message_type_v<T>)};
            if constexpr (std::is_same_v<T, wire::follower_info>)
                return fmt::format("{}({})", name, v.accepted_epoch);
            else if constexpr (std::is_same_v<T, wire::leader_info>)
                return fmt::format("{}({})", name, zxid{v.new_epoch, 0});
            else if constexpr (std::is_same_v<T, wire::ack_epoch>)
                return fmt::format("{}({}, {})", name, v.last_logged, v.current_epoch.value_or(0));
            else if constexpr (std::is_same_v<T, wire::diff>)
                return fmt::format("{}({})", name, v.last);
            else if constexpr (std::is_same_v<T, wire::proposal> || std::is_same_v<T, wire::commit>)
                return fmt::format("{}({})", name, v.id);
            else if constexpr (std::is_same_v<T, wire::new_leader>)
                return fmt::format("{}({})", name, v.epoch_zxid);
            else if constexpr (std::is_same_v<T, wire::ack>)
                return fmt::format("{}({})", name, v.acked);
            else
                return name;
        },
        m);
}

}  // namespace

// "B and C's largest committed zxids are <1, 10> and <1, 11>; A, the old leader of epoch 1,
// is down. B sends FOLLOWERINFO with epoch 1; C answers LEADERINFO with <2, 0>; B answers
// ACKEPOCH. C repairs B by DIFF — the proposal <1, 11> — and NEWLEADER; B acknowledges;
// C, with a majority, sends UPTODATE."
TEST_CASE("seed 001: discovery with FOLLOWERINFO(1), LEADERINFO(<2, 0>), ACKEPOCH; DIFF of <1, 11>") {
    cluster_options o;
    o.seed = 2001;
    o.voters = 3;
    sim_type sim{o};
    give_log(sim, 2, 1, 10);  // B
    give_log(sim, 3, 1, 11);  // C
    std::vector<std::string> b_to_c, c_to_b;
    sim.set_message_observer([&](peer_id receiver, peer_id sender, const wire::message& m) {
        if (std::holds_alternative<wire::notification>(m) || std::holds_alternative<wire::ping>(m)) return;
        if (receiver == 3 && sender == 2) b_to_c.push_back(describe(m));
        if (receiver == 2 && sender == 3) c_to_b.push_back(describe(m));
    });
    sim.start();
    sim.crash(1);  // A is down
    REQUIRE(sim.run_until(
        [&] {
            return sim.peer_of(2)->established() && sim.peer_of(3)->established() &&
                   sim.peer_of(2)->last_applied() == zxid{1, 11};
        },
        sim.now() + 10'000'000));

    CHECK(sim.peer_of(3)->state() == peer_state::leading);
    CHECK(sim.peer_of(2)->state() == peer_state::following);
    CHECK(b_to_c == std::vector<std::string>{"FOLLOWERINFO(1)", "ACKEPOCH(<1, 10>, 1)",
                                             "ACK(<2, 0>)"});
    CHECK(c_to_b == std::vector<std::string>{"LEADERINFO(<2, 0>)", "DIFF(<1, 11>)",
                                             "PROPOSAL(<1, 11>)", "COMMIT(<1, 11>)",
                                             "NEWLEADER(<2, 0>)", "UPTODATE"});
    // Both now hold epoch 2, durably, and B's log has <1, 11> durably.
    for (peer_id id : {2, 3}) {
        CHECK(sim.at(id).log->durable_epochs() == epochs{2, 2});
        CHECK(sim.at(id).log->durable_records().back().id == zxid{1, 11});
        CHECK(sim.at(id).machine->applied().size() == 11);  // applied once committed
    }
    CHECK(sim.peer_of(3)->counters().syncs_diff == 1);
}

// "The leader proposes X and Y as <1, 1> and <1, 2>; it commits strictly in zxid order, so X
// is committed before Y."
TEST_CASE("seed 001: X and Y are <1, 1> and <1, 2>, committed and applied in order everywhere") {
    cluster_options o;
    o.seed = 2002;
    o.voters = 3;
    sim_type sim{o};
    std::vector<std::pair<peer_id, zxid>> commits_received;
    sim.set_message_observer([&](peer_id receiver, peer_id, const wire::message& m) {
        if (const auto* c = std::get_if<wire::commit>(&m)) commits_received.emplace_back(receiver, c->id);
    });
    sim.start();
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 10'000'000));
    auto x = sim.propose(3, as_bytes("X"));
    auto y = sim.propose(3, as_bytes("Y"));
    REQUIRE(x.has_value());
    REQUIRE(y.has_value());
    CHECK(x.value() == zxid{1, 1});
    CHECK(y.value() == zxid{1, 2});
    CHECK(sim.propose(1, as_bytes("Z")).error() == make_error_code(errc::not_leader));
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id id : {1, 2, 3})
                if (sim.peer_of(id)->last_applied() != zxid{1, 2}) return false;
            return true;
        },
        sim.now() + 10'000'000));
    for (peer_id id : {1, 2, 3}) {
        const auto& applied = sim.at(id).machine->applied();
        REQUIRE(applied.size() == 2);
        CHECK(applied[0].id == zxid{1, 1});
        CHECK(text(applied[0].txn) == "X");
        CHECK(applied[1].id == zxid{1, 2});
        CHECK(text(applied[1].txn) == "Y");
    }
    for (peer_id follower : {1, 2}) {
        std::vector<zxid> order;
        for (const auto& [r, z] : commits_received)
            if (r == follower) order.push_back(z);
        CHECK(order == std::vector<zxid>{zxid{1, 1}, zxid{1, 2}});
    }
}

TEST_CASE("a follower restarted after the leader committed catches up and applies in order") {
    cluster_options o;
    o.seed = 2003;
    o.voters = 3;
    sim_type sim{o};
    sim.start();
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 10'000'000));
    sim.crash(1);
    for (int i = 0; i < 20; ++i) REQUIRE(sim.propose(3, as_bytes("w" + std::to_string(i))));
    sim.run_for(1'000'000);
    sim.restart(1);
    REQUIRE(sim.run_until([&] { return sim.peer_of(1)->last_applied() == zxid{1, 20}; },
                          sim.now() + 10'000'000));
    CHECK(sim.at(1).machine->applied().size() == 20);
    CHECK(sim.peer_of(3)->counters().commits == 20);
}

// Found by the protocol sweep (seed 226): the leader fixed its first zxid when it began to
// lead, before a learner's FOLLOWERINFO raised the epoch (§4.3), and proposed <1, 1> as the
// leader of epoch 6 (§1, §10.9).
TEST_CASE("a leader proposes in the epoch it finally chose, not the one it started with") {
    cluster_options o;
    o.seed = 2004;
    o.voters = 3;
    sim_type sim{o};
    sim.at(1).log->write_epochs(1, epochs{5, 0});  // 1 promised epoch 5 to a leader long gone
    sim.start();
    sim.crash(2);  // the quorum needs 1, so its promise counts
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 10'000'000));
    CHECK(sim.peer_of(3)->durable_epochs() == epochs{6, 6});
    auto x = sim.propose(3, as_bytes("X"));
    REQUIRE(x.has_value());
    CHECK(x.value() == zxid{6, 1});
    REQUIRE(sim.run_until([&] { return sim.peer_of(1)->last_applied() == zxid{6, 1}; },
                          sim.now() + 10'000'000));
}
