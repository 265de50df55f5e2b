// The seeds' election walkthroughs, message by message (docs/design.md: every worked example in
// the seeds is a test).
#include <catch2/catch.hpp>

#include "manual_peer.hpp"

using namespace zab;
using namespace zab::test;

namespace {
// Vote boxes as (voter, proposed leader) pairs, the seed's notation "(2,3)".
std::vector<std::pair<peer_id, peer_id>> box_of(const fast_leader_election& e) {
    std::vector<std::pair<peer_id, peer_id>> box;
    for (const auto& [voter, v] : e.received_votes()) box.emplace_back(voter, v.leader);
    return box;
}
}  // namespace

// 000_0a87830e1edacccf.txt, steps 1–3: the round is incremented, each server votes for
// itself, and the initial vote goes to every server.
TEST_CASE("seed 000 steps 1-3: new round, vote for myself, send it to everyone") {
    manual_peer<> s1{1, voters(3), zxid{1, 5}, 1};
    s1.p->start();
    CHECK(s1.p->election().logical_clock() == 1);
    const auto sent = s1.transport.take_notifications();
    REQUIRE(sent.size() == 2);  // to servers 2 and 3; its own copy goes through the loopback
    for (const auto& [to, n] : sent) {
        CHECK((to == 2 || to == 3));
        CHECK(n == looking(1, 1, zxid{1, 5}, 1));
    }
    CHECK(box_of(s1.p->election()) == std::vector<std::pair<peer_id, peer_id>>{{1, 1}});
}

// Step 4: no external vote for a while → send the internal vote again (and wait longer).
TEST_CASE("seed 000 step 4: silence makes a server send its vote again, with back-off") {
    options opts;
    opts.notification_timeout_min_ticks = 2;
    opts.notification_timeout_max_ticks = 8;
    manual_peer<> s1{1, voters(3), zxid{1, 5}, 1, opts};
    s1.p->start();
    s1.transport.sent.clear();
    s1.p->tick();
    CHECK(s1.transport.take_notifications().empty());
    s1.p->tick();  // 2 ticks of silence
    CHECK(s1.transport.take_notifications().size() == 2);
    CHECK(s1.p->next_deadline() == std::optional<std::uint64_t>{2 + 4});  // doubled
    s1.p->tick(4);
    CHECK(s1.transport.take_notifications().size() == 2);
    CHECK(s1.p->next_deadline() == std::optional<std::uint64_t>{6 + 8});  // doubled, capped
    s1.p->tick(8);
    CHECK(s1.transport.take_notifications().size() == 2);
    CHECK(s1.p->next_deadline() == std::optional<std::uint64_t>{14 + 8});  // stays at the cap
}

// Step 5: an external vote of a later round moves my round forward, empties my box, and
// compares the vote with my *initial* vote.
TEST_CASE("seed 000 step 5: a higher round resets the vote box and re-votes from scratch") {
    manual_peer<> s1{1, voters(3), zxid{1, 5}, 1};
    s1.p->start();
    s1.receive(2, looking(2, 1, zxid{1, 3}, 1));  // round 1, worse than mine: recorded
    CHECK(box_of(s1.p->election()).size() == 2);
    s1.transport.sent.clear();

    s1.receive(3, looking(3, 1, zxid{1, 4}, 7));  // round 7, still worse than mine
    CHECK(s1.p->election().logical_clock() == 7);
    // Box emptied, then my re-sent vote (loopback) and server 3's vote recorded in round 7.
    CHECK(box_of(s1.p->election()) == std::vector<std::pair<peer_id, peer_id>>{{1, 1}, {3, 3}});
    const auto sent = s1.transport.take_notifications();
    REQUIRE(sent.size() == 2);
    for (const auto& [to, n] : sent) CHECK(n == looking(1, 1, zxid{1, 5}, 7));
}

TEST_CASE("seed 000 step 5: a vote of an older round is ignored, and the laggard is answered") {
    manual_peer<> s1{1, voters(3), zxid{1, 5}, 1};
    s1.p->start();
    s1.receive(3, looking(3, 1, zxid{1, 4}, 4));  // jump to round 4
    s1.transport.sent.clear();
    const auto before = box_of(s1.p->election());

    s1.receive(2, looking(2, 9, zxid{9, 9}, 2));  // round 2 < 4: would win, but is stale
    CHECK(box_of(s1.p->election()) == before);
    CHECK(s1.p->election().proposal().leader == 1);
    const auto sent = s1.transport.take_notifications();
    REQUIRE(sent.size() == 1);  // the answer to the laggard, with my round
    CHECK(sent[0].first == 2);
    CHECK(sent[0].second == looking(1, 1, zxid{1, 5}, 4));
}

// Step 6: PK — epoch first, then zxid, then server id.
TEST_CASE("seed 000 step 6: the PK rules, epoch then zxid then sid") {
    const vote mine{2, zxid{1, 101}, 1, 1, peer_state::looking};
    CHECK(vote_beats(vote{1, zxid{1, 1}, 2, 1, peer_state::looking}, true, mine));    // epoch
    CHECK(vote_beats(vote{1, zxid{1, 102}, 1, 1, peer_state::looking}, true, mine));  // zxid
    CHECK(vote_beats(vote{3, zxid{1, 101}, 1, 1, peer_state::looking}, true, mine));  // sid
    CHECK_FALSE(vote_beats(vote{1, zxid{1, 101}, 1, 1, peer_state::looking}, true, mine));
    CHECK_FALSE(vote_beats(mine, true, mine));
    CHECK_FALSE(vote_beats(vote{9, zxid{9, 9}, 9, 1, peer_state::looking}, false, mine));
}

// Steps 7–8, and the vote-box example: "Server_2 votes for Server_3 and Server_3 votes for
// Server_1: the vote box of Server_1 is (2,3), (3,1), (1,1)."
TEST_CASE("seed 000 steps 7-8: the vote box of Server_1 is (2,3), (3,1), (1,1)") {
    // Server_1 has the newest history, then Server_3, then Server_2.
    manual_peer<> s1{1, voters(3), zxid{1, 30}, 1};
    s1.p->start();
    s1.transport.sent.clear();
    s1.receive(2, looking(3, 1, zxid{1, 20}, 1));  // Server_2 votes for Server_3
    CHECK(s1.transport.take_notifications().empty());  // worse than mine: my vote stands
    s1.receive(3, looking(1, 1, zxid{1, 30}, 1));  // Server_3 votes for Server_1
    CHECK(box_of(s1.p->election()) ==
          std::vector<std::pair<peer_id, peer_id>>{{1, 1}, {2, 3}, {3, 1}});
}

TEST_CASE("seed 000 step 7: a better vote is adopted and sent again to everyone") {
    manual_peer<> s2{2, voters(3), zxid{1, 20}, 1};
    s2.p->start();
    s2.transport.sent.clear();
    s2.receive(3, looking(3, 1, zxid{1, 25}, 1));
    CHECK(s2.p->election().proposal().leader == 3);
    const auto sent = s2.transport.take_notifications();
    REQUIRE(sent.size() == 2);
    for (const auto& [to, n] : sent) CHECK(n == looking(3, 1, zxid{1, 25}, 1));
}

// Steps 9–10: a quorum agreeing with my vote ends the election after the finalize wait;
// the server whose id was elected leads, the others follow.
TEST_CASE("seed 000 steps 9-10: quorum, finalize wait, LEADING or FOLLOWING") {
    options opts;
    opts.finalize_wait_ticks = 2;
    manual_peer<> s1{1, voters(3), zxid{1, 30}, 1, opts};
    s1.p->start();
    s1.receive(3, looking(1, 1, zxid{1, 30}, 1));  // (1,1) and (3,1): a quorum of 3
    CHECK(s1.p->election().finalizing());
    CHECK(s1.p->state() == peer_state::looking);
    s1.p->tick();
    CHECK(s1.p->state() == peer_state::looking);
    s1.p->tick();
    CHECK(s1.p->state() == peer_state::leading);
    REQUIRE(s1.p->last_decision().has_value());
    CHECK(s1.p->last_decision()->how == election_decision::basis::looking_quorum);
    CHECK(s1.p->last_decision()->counted.size() == 2);

    manual_peer<> s3{3, voters(3), zxid{1, 25}, 1, opts};
    s3.p->start();
    s3.receive(1, looking(1, 1, zxid{1, 30}, 1));
    s3.p->tick(2);
    CHECK(s3.p->state() == peer_state::following);
    CHECK(s3.p->current_vote().leader == 1);
}

TEST_CASE("seed 000 step 9: a better vote during the finalize wait reopens the election") {
    options opts;
    opts.finalize_wait_ticks = 2;
    manual_peer<> s1{1, voters(3), zxid{1, 30}, 1, opts};
    s1.p->start();
    s1.receive(3, looking(1, 1, zxid{1, 30}, 1));
    REQUIRE(s1.p->election().finalizing());
    s1.receive(2, looking(2, 1, zxid{1, 31}, 1));  // better than mine
    CHECK(s1.p->election().proposal().leader == 2);
    CHECK(s1.p->state() == peer_state::looking);
    // (3,1) no longer agrees with my vote; (1,2) and (2,2) do: a new finalize wait, and
    // this time server 2 is elected.
    CHECK(s1.p->election().finalizing());
    s1.p->tick(2);
    CHECK(s1.p->state() == peer_state::following);
    CHECK(s1.p->current_vote().leader == 2);
}

// 001_ad25c1081e87fcd6.txt: A (sid 1) has failed. B (sid 2) and C (sid 3) both have epoch 1,
// lastZxid 101 and 102. Votes <proposedLeader, proposedEpoch, proposedLastZxid, node>.
TEST_CASE("seed 001: B and C elect C, B's changed vote is <3, 1, 102, B>") {
    options opts;
    opts.finalize_wait_ticks = 2;
    const auto config = voters(3);
    manual_peer<> b{2, config, zxid{1, 101}, 1, opts};
    manual_peer<> c{3, config, zxid{1, 102}, 1, opts};
    // A is down: neither has a connection to it.
    b.p->on_disconnected(1, 1);
    c.p->on_disconnected(1, 1);

    // Each votes for itself and sends to the cluster: <2, 1, 101, B> and <3, 1, 102, C>.
    b.p->start();
    c.p->start();
    auto from_b = b.transport.take_notifications();
    auto from_c = c.transport.take_notifications();
    REQUIRE(from_b.size() == 1);  // only C is reachable
    REQUIRE(from_c.size() == 1);
    CHECK(from_b[0] == std::pair<peer_id, wire::notification>{3, looking(2, 1, zxid{1, 101}, 1)});
    CHECK(from_c[0] == std::pair<peer_id, wire::notification>{2, looking(3, 1, zxid{1, 102}, 1)});
    // Each first received its own vote (the loopback): both boxes hold just that.
    CHECK(box_of(b.p->election()) == std::vector<std::pair<peer_id, peer_id>>{{2, 2}});
    CHECK(box_of(c.p->election()) == std::vector<std::pair<peer_id, peer_id>>{{3, 3}});

    // C receives B's vote: C's history is newer, C keeps its vote and just stores B's.
    c.receive(2, from_b[0].second);
    CHECK(c.transport.take_notifications().empty());
    CHECK(c.p->election().proposal().leader == 3);

    // B receives C's vote: same epoch, larger zxid → B changes its vote to C and sends
    // <3, 1, 102, B> to B and C.
    b.receive(3, from_c[0].second);
    auto changed = b.transport.take_notifications();
    REQUIRE(changed.size() == 1);
    CHECK(changed[0] == std::pair<peer_id, wire::notification>{3, looking(3, 1, zxid{1, 102}, 1)});
    CHECK(box_of(b.p->election()) == std::vector<std::pair<peer_id, peer_id>>{{2, 3}, {3, 3}});

    // C receives B's new vote: two of three votes for C — C is elected.
    c.receive(2, changed[0].second);
    CHECK(box_of(c.p->election()) == std::vector<std::pair<peer_id, peer_id>>{{2, 3}, {3, 3}});
    b.p->tick(2);
    c.p->tick(2);
    CHECK(c.p->state() == peer_state::leading);
    CHECK(b.p->state() == peer_state::following);
    CHECK(b.p->current_vote().leader == 3);
    CHECK(c.p->current_phase() == phase::discovery);
    CHECK(b.p->current_phase() == phase::discovery);
}

// Not from a seed (issue 15 defect 3): a group that cannot form a quorum waits, and says
// why — once the election has lasted initLimit, then each time its length has doubled, at
// least once per notification_timeout_max_ticks — without changing the election.
namespace {
std::vector<std::string> warnings;
void capture_warning(void*, log_level level, std::string_view line) {
    if (level == log_level::warn) warnings.emplace_back(line);
}
struct capture_warnings {
    capture_warnings() {
        warnings.clear();
        set_log_sink(&capture_warning);
        set_log_level(log_level::warn);
    }
    ~capture_warnings() { set_log_sink(nullptr); }
};
}  // namespace

TEST_CASE("an election without a quorum warns who votes for whom, rate-limited") {
    capture_warnings capture;
    options opts;
    opts.init_limit_ticks = 10;
    opts.sync_limit_ticks = 5;
    opts.notification_timeout_max_ticks = 30;
    manual_peer<> s3{3, voters(3), zxid{1, 5}, 1, opts};
    s3.p->start();
    // Voter 1 votes for nobody (a voter not synced since its data was wiped or found
    // damaged, ZOOKEEPER-261); voter 2 is silent.
    s3.receive(1, looking(0, 0, zxid{}, 1));
    std::vector<std::uint64_t> warned_at;
    for (std::uint64_t t = 1; t <= 130; ++t) {
        s3.p->tick();
        if (!warnings.empty() && warned_at.size() < warnings.size()) warned_at.push_back(t);
    }
    CHECK(s3.p->state() == peer_state::looking);
    // At initLimit (10), doubling (20, 40), then every 30 ticks (the cap).
    CHECK(warned_at == std::vector<std::uint64_t>{10, 20, 40, 70, 100, 130});
    REQUIRE(!warnings.empty());
    CHECK(warnings[0] ==
          "peer 3: no leader elected after 10 ticks, round 1: a quorum of voters 1, 2, "
          "3 must agree; voting for a candidate: 3; voting for nobody (not synced since their "
          "data was wiped or found damaged): 1; not heard from: 2");

    // A replica whose own voting is suspended says so too.
    warnings.clear();
    opts.non_voter_until_synced = true;
    manual_peer<> s1{1, voters(3), zxid{}, 0, opts};
    s1.p->start();
    s1.p->tick(10);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "peer 1: no leader elected after 10 ticks, round 1: a quorum of voters 1, 2, "
          "3 must agree; voting for a candidate: none; voting for nobody (not synced since their "
          "data was wiped or found damaged): 1; not heard from: 2, 3; this replica itself "
          "votes for nobody until a leader syncs it");

    // A voter whose vote names a candidate that cannot win here (9 is no member, and its
    // history is not ahead of mine) is told apart from one that votes for nobody.
    warnings.clear();
    opts.non_voter_until_synced = false;
    manual_peer<> s2{2, voters(3), zxid{1, 5}, 1, opts};
    s2.p->start();
    s2.receive(1, looking(9, 1, zxid{1, 5}, 1));
    s2.p->tick(10);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] ==
          "peer 2: no leader elected after 10 ticks, round 1: a quorum of voters 1, 2, "
          "3 must agree; voting for a candidate: 2; voting for nobody (not synced since their "
          "data was wiped or found damaged): none; not heard from: 3; voting for a candidate "
          "that cannot win here (removed, no voter, or refused): 1");
}
