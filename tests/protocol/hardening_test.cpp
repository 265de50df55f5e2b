// Directed regressions for the defects found from outside the project (issue 15): each drives
// one real zab::peer by hand, message by message, through the interleaving that broke it,
// and asserts the rule the defect broke. The classes they belong to are checked in every run
// of the protocol sweeps by the invariant checker (property::quorum_durable, §6.1).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include "manual_peer.hpp"
#include "zab/testing/peer_internals.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/peer.hpp"
#include "zab/runtime/metrics_registry.hpp"

using namespace zab;
using namespace zab::test;

namespace {

using fixed_policies = policies<fixed_leader_election>;
using leader_peer =
    peer<recording_transport, hand_log, testing::recording_state_machine, fixed_policies>;

/// Every message the leader sent to `to` since the transport was last cleared.
template <typename M>
std::vector<M> sent_to(const recording_transport& t, peer_id to) {
    std::vector<M> out;
    for (const auto& s : t.sent) {
        if (s.to != to) continue;
        auto decoded = decode(s.frame.view());
        REQUIRE(decoded.has_value());
        if (const auto* m = std::get_if<M>(&decoded.value().msg)) out.push_back(*m);
    }
    return out;
}

/// Replica 3 of three voters, leading by configuration, driven by hand.
struct hand_leader {
    recording_transport transport;
    hand_log log;
    testing::recording_state_machine machine;
    std::unique_ptr<leader_peer> p;
    connection_id next_connection = 100;

    /// `history` records of epoch 1 already in its log (epochs {1, 1} then), and `opts`.
    explicit hand_leader(std::uint32_t history = 0, options opts = {}) {
        opts.fixed_leader = 3;
        for (std::uint32_t i = 1; i <= history; ++i)
            log.records.push_back({zxid{1, i}, shared_bytes{std::vector<std::byte>(100)}});
        if (history > 0) log.stored = epochs{1, 1};
        auto created = leader_peer::create(3, voters(3), opts, transport, log, machine);
        REQUIRE(created.has_value());
        p = std::move(created).value();
        p->on_connected(1, 1);
        p->on_connected(2, 2);
        p->start();
        REQUIRE(p->state() == peer_state::leading);
    }

    template <typename M>
    void from(peer_id id, const M& m) {
        p->on_receive(id, *zab::testing::internals(*p).connection_to(id), encode(frame_context{}, m));
    }

    /// Makes every log operation and epoch write issued so far durable.
    void disk_catches_up() {
        if (!log.epoch_writes.empty()) p->on_epochs_durable(log.epoch_writes.back());
        if (!log.syncs.empty()) p->on_log_durable(log.syncs.back());
    }

    /// Discovery and synchronization with learners 1 and 2 (empty histories): established.
    void establish() {
        from(1, wire::follower_info{0});
        from(2, wire::follower_info{0});
        disk_catches_up();
        from(1, wire::ack_epoch{zxid{}, epoch_t{0}});
        from(2, wire::ack_epoch{zxid{}, epoch_t{0}});
        disk_catches_up();
        const zxid marker{p->durable_epochs().current, 0};
        from(1, wire::ack{marker});
        from(2, wire::ack{marker});
        REQUIRE(p->established());
        transport.sent.clear();
    }

    /// Learner `id`'s connection is replaced by a new one (a reconnect).
    void reconnect(peer_id id) {
        p->on_disconnected(id, *zab::testing::internals(*p).connection_to(id));
        p->on_connected(id, ++next_connection);
    }
};

/// Replica 1 of three voters, following 3 by configuration, driven by hand.
struct hand_follower {
    recording_transport transport;
    hand_log log;
    testing::recording_state_machine machine;
    std::unique_ptr<leader_peer> p;

    hand_follower() {
        options opts;
        opts.fixed_leader = 3;
        auto created = leader_peer::create(1, voters(3), opts, transport, log, machine);
        REQUIRE(created.has_value());
        p = std::move(created).value();
        p->on_connected(3, 7);
        p->start();
        REQUIRE(p->state() == peer_state::following);
    }

    void from_leader(const wire::message& m) { p->on_receive(3, 7, encode(frame_context{}, m)); }

    /// Makes every log operation and epoch write issued so far durable.
    void disk_catches_up() {
        if (!log.epoch_writes.empty()) p->on_epochs_durable(log.epoch_writes.back());
        if (!log.syncs.empty()) p->on_log_durable(log.syncs.back());
    }

    /// Discovery with `info`, then an empty DIFF sync: serving.
    void serve(const wire::leader_info& info) {
        from_leader(info);
        disk_catches_up();
        from_leader(wire::diff{zxid{}});
        from_leader(wire::new_leader{zxid{info.new_epoch, 0}});
        disk_catches_up();
        from_leader(wire::up_to_date{});
        disk_catches_up();
        REQUIRE(p->established());
    }
};

}  // namespace

// Issue 15 defect 1. Learner 1 acknowledged z; its link is replaced, and the new sync TRUNCs
// it to the committed point (z is outstanding, not committed), so z is gone from its log
// until the re-sent PROPOSAL is durable again. The leader's own fsync of z then completes:
// counting the old ACK with its own, the leader committed z held durably by itself alone.
TEST_CASE("an acknowledgement does not outlive the learner's connection") {
    hand_leader l;
    l.establish();
    const epoch_t e = l.p->durable_epochs().current;
    auto z = l.p->propose(as_bytes("x"));
    REQUIRE(z.has_value());
    l.from(1, wire::ack{z.value()});          // learner 1 has z durably; the leader's disk is slow
    REQUIRE(l.machine.applied().empty());

    l.reconnect(1);
    l.from(1, wire::follower_info{e});
    l.from(1, wire::ack_epoch{z.value(), std::nullopt});  // its history: z, beyond the committed point
    const auto truncs = sent_to<zab::wire::trunc>(l.transport, 1);
    REQUIRE(truncs.size() == 1);
    CHECK(truncs.front().truncate_to < z.value());  // it will lose z until re-logged

    l.disk_catches_up();  // the leader's own ack of z
    CHECK(l.machine.applied().empty());  // 3's ack alone is no quorum
    CHECK(sent_to<wire::commit>(l.transport, 2).empty());

    // The learner re-logs z (PROPOSAL after the TRUNC), acknowledges NEWLEADER, then z.
    l.from(1, wire::ack{zxid{e, 0}});
    l.from(1, wire::ack{z.value()});
    REQUIRE(l.machine.applied().size() == 1);
    CHECK(l.machine.applied().front().id == z.value());
}

// The same class through every other way a link ends: dropped for silence, disconnected,
// or replaced by a second FOLLOWERINFO on a connection the leader had not seen close.
TEST_CASE("acknowledgements are forgotten whenever a learner's link ends") {
    SECTION("disconnected, and not back") {
        hand_leader l;
        l.establish();
        auto z = l.p->propose(as_bytes("x"));
        REQUIRE(z.has_value());
        l.from(1, wire::ack{z.value()});
        l.p->on_disconnected(1, 1);
        l.disk_catches_up();
        CHECK(l.machine.applied().empty());
        l.from(2, wire::ack{z.value()});
        CHECK(l.machine.applied().size() == 1);
    }
    SECTION("a new FOLLOWERINFO on the same connection") {
        hand_leader l;
        l.establish();
        const epoch_t e = l.p->durable_epochs().current;
        auto z = l.p->propose(as_bytes("x"));
        REQUIRE(z.has_value());
        l.from(1, wire::ack{z.value()});
        l.from(1, wire::follower_info{e});  // it starts over: its link is new
        l.disk_catches_up();
        CHECK(l.machine.applied().empty());
    }
    SECTION("dropped for silence") {
        hand_leader l;
        l.establish();
        auto z = l.p->propose(as_bytes("x"));
        REQUIRE(z.has_value());
        l.from(1, wire::ack{z.value()});
        // Learner 2 keeps talking; learner 1 falls silent for longer than sync_limit.
        for (std::uint32_t t = 0; t <= options{}.sync_limit_ticks; ++t) {
            l.p->tick();
            l.from(2, wire::ping{zxid{}, 0});
        }
        REQUIRE_FALSE(zab::testing::internals(*l.p).connection_to(1).has_value());
        l.disk_catches_up();
        CHECK(l.machine.applied().empty());
    }
}

// Issue 15 defect 4: an established leader that refuses a voter whose history is ahead
// steps down — decided by reading the link after the drop had erased it (a use after
// erase that ASan cannot see: the slot stays inside the vector's capacity). Whatever the
// freed slot held, the leader must step down.
TEST_CASE("a voter ahead of the established leader makes it step down") {
    hand_leader l;
    l.establish();
    const epoch_t e = l.p->durable_epochs().current;
    l.reconnect(1);
    l.from(1, wire::follower_info{e});
    l.from(1, wire::ack_epoch{zxid{e + 1, 5}, e + 1});
    CHECK(l.p->counters().learners_refused == 1);
    // It left the role (the fixed election makes it leader again at once, unestablished).
    CHECK(l.p->counters().elections_started == 2);
    CHECK_FALSE(l.p->established());
}

// Issue 15 defect 10, ZOOKEEPER-3109. Replica 3 decides to lead on its own vote and voter
// 1's; then 1 hears of a better candidate (2) in the same round and changes its vote. No
// quorum is left that could establish 3: it must give up at once, not hold LEADING for
// init_limit while the others elect 2 without it — or, as here in a group of three, while
// nobody can be elected at all.
TEST_CASE("an unestablished leader whose quorum voted elsewhere gives up at once") {
    manual_peer<> s3{3, voters(3), zxid{1, 5}, 1};
    s3.p->start();
    s3.receive(1, looking(3, 1, zxid{1, 5}, 1));  // 1 votes for 3
    s3.p->tick(options{}.finalize_wait_ticks);     // finalize wait over: 3 leads
    REQUIRE(s3.p->state() == peer_state::leading);

    SECTION("a vote for another leader in the same round") {
        s3.receive(1, looking(2, 1, zxid{1, 6}, 1));  // 1 changed its mind: 2 is better
        CHECK(s3.p->state() == peer_state::looking);
        CHECK(s3.p->counters().leaderships_abandoned == 1);
    }
    SECTION("a vote of an older round is a laggard, not a change of mind") {
        s3.receive(2, looking(2, 1, zxid{1, 6}, 0));
        CHECK(s3.p->state() == peer_state::leading);
        CHECK(s3.p->counters().leaderships_abandoned == 0);
    }
    SECTION("a voter that already follows keeps the quorum") {
        s3.p->on_receive(2, 2, encode(frame_context{}, wire::follower_info{1}));
        s3.receive(1, looking(2, 1, zxid{1, 6}, 1));
        CHECK(s3.p->state() == peer_state::leading);
    }
}

namespace {

/// A sync window of 64 records, and the smallest backlog the options accept with it.
options small_sync_window() {
    options opts;
    opts.sync_window_records = 64;
    opts.max_outstanding_proposals = 10;
    opts.max_learner_backlog = 2 * 64 + 2 * 10 + 16;
    return opts;
}

/// Discovery with learner 2 up to date with `l`'s 500 records (an empty DIFF) and learner 1
/// empty (all 500 to stream); both syncs start.
void sync_far_behind_learner(hand_leader& l) {
    l.from(1, wire::follower_info{0});
    l.from(2, wire::follower_info{1});
    l.disk_catches_up();
    l.from(2, wire::ack_epoch{zxid{1, 500}, epoch_t{1}});
    l.from(1, wire::ack_epoch{zxid{}, epoch_t{0}});
    l.disk_catches_up();
}

}  // namespace

// Issue 15 defect 2. A learner far behind is sent more history than max_learner_backlog
// frames. It used to be queued in one step and the learner dropped for it, again and again,
// while the group waited; now the history streams, a window at a time, each answered by a
// SYNCACK, and the leader never holds more than a window for it.
TEST_CASE("a long sync streams under flow control and is never dropped for its length") {
    hand_leader l{500, small_sync_window()};  // 500 records: 1,000 frames, backlog 164
    const epoch_t e = 2;
    sync_far_behind_learner(l);

    std::size_t proposals = 0;
    zxid last;
    for (int round = 0; round < 100; ++round) {
        REQUIRE(zab::testing::internals(*l.p).connection_to(1).has_value());  // never dropped
        const auto sent = sent_to<wire::proposal>(l.transport, 1);
        CHECK(sent.size() <= 64);  // one window at a time
        proposals += sent.size();
        const bool done = !sent_to<wire::new_leader>(l.transport, 1).empty();
        l.transport.sent.clear();
        if (done) break;
        REQUIRE_FALSE(sent.empty());
        last = sent.back().id;
        l.from(1, wire::sync_ack{last});  // what the learner answers after each window
    }
    CHECK(proposals == 500);
    CHECK(l.p->counters().learners_over_backlog == 0);
    l.from(1, wire::ack{zxid{e, 0}});
    l.from(2, wire::ack{zxid{e, 0}});
    CHECK(l.p->established());
}

// A SYNCACK naming history that was never sent is the learner's error: it is dropped, and
// the failed sync is counted and reported.
TEST_CASE("a SYNCACK of history never sent drops the learner, and its failed syncs are reported") {
    hand_leader l{500, small_sync_window()};
    sync_far_behind_learner(l);
    l.from(1, wire::sync_ack{zxid{1, 400}});  // only 64 were sent
    CHECK_FALSE(zab::testing::internals(*l.p).connection_to(1).has_value());
    CHECK(l.p->counters().learner_sync_failures == 1);
    const auto learners = l.p->learners();
    REQUIRE(learners.size() == 1);  // learner 2, syncing; 1 is gone but its trouble is kept
    CHECK(l.p->sync_trouble(1).failures == 1);
    CHECK(std::string{l.p->sync_trouble(1).last_reason} == "a SYNCACK of history never sent");
}

// --- issue 17: the driver contract, status, ignored messages -------------------------------

TEST_CASE("ready(): a completion is handed out once; status() shows the learners' progress") {
    hand_leader l;
    l.establish();
    const request_id write = l.p->submit(as_bytes("x"));
    peer_ready ready = l.p->ready();
    CHECK(ready.completions.empty());  // not committed yet
    CHECK_FALSE(ready.flush_due);      // hand_log has no flush jobs
    REQUIRE(ready.next_deadline.has_value());
    CHECK(*ready.next_deadline == l.p->now_tick() + 1);  // a leader pings every tick
    l.disk_catches_up();
    l.from(1, wire::ack{zxid{l.p->durable_epochs().current, 1}});
    ready = l.p->ready();
    REQUIRE(ready.completions.size() == 1);
    CHECK(ready.completions[0].id == write);
    CHECK(ready.completions[0].outcome.has_value());
    CHECK(l.p->ready().completions.empty());  // once

    const peer_status s = l.p->status();
    CHECK(s.role == peer_state::leading);
    CHECK(s.established);
    CHECK(s.leader == 3);
    CHECK(s.last_committed == zxid{s.durable_epochs.current, 1});
    REQUIRE(s.learners.size() == 2);
    for (const learner_status& learner : s.learners) {
        CHECK(learner.stage == learner_link::stage::broadcasting);
        CHECK(learner.lag == (learner.id == 1 ? 0u : 1u));  // 2 never acknowledged it
    }
}

TEST_CASE("a valid message out of place is ignored with its reason, counted per reason") {
    hand_leader l;
    l.establish();
    const auto before = l.p->counters();
    l.from(1, wire::leader_info{9, 1});  // a leader's message to a leader
    l.from(2, wire::up_to_date{});
    const auto& c = l.p->counters();
    CHECK(c.ignored_for(ignore_reason::not_from_my_leader) ==
          before.ignored_for(ignore_reason::not_from_my_leader) + 2);
    CHECK(c.unexpected_messages == before.unexpected_messages + 2);
    CHECK(l.p->state() == peer_state::leading);
}

TEST_CASE("a durability report for an operation never issued makes nothing durable") {
    hand_leader l;
    l.establish();
    l.p->submit(as_bytes("y"));
    l.from(1, wire::ack{zxid{l.p->durable_epochs().current, 1}});
    REQUIRE_FALSE(l.log.syncs.empty());
    const storage_op issued = l.log.syncs.back();
    const zxid committed = l.p->last_committed();
    l.p->on_log_durable(issued + 1000);  // the leader's own append is not durable yet
    CHECK_FALSE(l.p->failed());
    CHECK(l.p->counters().unissued_completions == 1);
    CHECK(l.p->last_committed() == committed);  // 1's ACK alone is no quorum
    l.p->on_log_durable(issued);
    CHECK(l.p->last_committed() == zxid{l.p->durable_epochs().current, 1});
}

// The metrics hook: a learner whose syncs keep failing is reported once it failed
// sync_failures_reported (3) times in a row, with the last reason.
TEST_CASE("metrics hook: a learner stuck syncing is an event, with its failures and reason") {
    hand_leader l;
    l.establish();
    metrics_registry registry{[] { return 0.0; }};
    std::vector<metric_event> events;
    registry.set_event_handler([&](const metric_event& e) { events.push_back(e); });
    l.p->set_metrics(&registry);
    for (int attempt = 1; attempt <= 3; ++attempt) {
        l.reconnect(1);  // a new connection: a new sync, ended before it is done
        l.from(1, wire::follower_info{0});
        CHECK(registry.events(metric_event_kind::learner_stuck_syncing) == 0);
    }
    l.reconnect(1);
    REQUIRE(registry.events(metric_event_kind::learner_stuck_syncing) == 1);
    REQUIRE(events.size() == 1);
    CHECK(events[0].learner == 1);
    CHECK(events[0].count == 3);
    CHECK(events[0].self == 3);
    CHECK(events[0].leader == 3);
    CHECK(std::string{events[0].reason} == "its connection was lost");
}

// --- PROPOSALS batches (docs/protocol.md §6.1) ----------------------------------------------

namespace {

std::vector<byte_view> views_of(const std::vector<std::string>& txns) {
    std::vector<byte_view> out;
    for (const auto& t : txns) out.push_back(as_bytes(t));
    return out;
}

}  // namespace

TEST_CASE("a batch goes to each follower as one PROPOSALS frame; a run committed at once as one "
          "COMMIT") {
    hand_leader l;
    l.establish();
    const epoch_t e = l.p->durable_epochs().current;
    const std::vector<std::string> txns{"a", "bb", "ccc"};
    const request_id first = l.p->submit_batch(views_of(txns));
    for (const peer_id f : {1, 2}) {
        INFO("follower " << f);
        CHECK(sent_to<wire::proposal>(l.transport, f).empty());
        const auto batches = sent_to<wire::proposal_batch>(l.transport, f);
        REQUIRE(batches.size() == 1);
        CHECK(batches[0].first == zxid{e, 1});
        CHECK(batches[0].count == 3);
        std::vector<std::string> carried;
        for_each_batch_txn(batches[0], [&](zxid, byte_view txn) {
            carried.emplace_back(as_string_view(txn));
            return true;
        });
        CHECK(carried == txns);
    }
    // The leader's own log holds each as a record of its own, sharing the frame's bytes.
    REQUIRE(l.log.records.size() == 3);
    CHECK(as_string_view(l.log.records[1].txn.view()) == "bb");
    CHECK(l.p->counters().proposal_batches == 1);

    // Durable here, and follower 1 acknowledges the last: all three commit in one step.
    l.disk_catches_up();
    l.transport.sent.clear();
    l.from(1, wire::ack{zxid{e, 3}});
    CHECK(l.p->last_committed() == zxid{e, 3});
    for (const peer_id f : {1, 2}) {
        INFO("follower " << f);
        const auto commits = sent_to<wire::commit>(l.transport, f);
        REQUIRE(commits.size() == 1);  // COMMIT(<e, 3>) covers <e, 1> and <e, 2>
        CHECK(commits[0].id == zxid{e, 3});
    }
    CHECK(l.p->counters().frames_coalesced == 0);  // the other COMMITs were never made
    const auto done = l.p->ready().completions;
    REQUIRE(done.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(done[i].id == first + i);
        REQUIRE(done[i].outcome.has_value());
        CHECK(done[i].outcome.value() == zxid{e, static_cast<std::uint32_t>(1 + i)});
    }
    CHECK(l.machine.applied().size() == 3);
}

TEST_CASE("a batch with writes that may not be proposed: those refused one by one, the runs "
          "around them batched") {
    options opts;
    opts.max_txn_bytes = 4;
    opts.max_outstanding_proposals = 4;
    hand_leader l{0, opts};
    l.establish();
    const epoch_t e = l.p->durable_epochs().current;
    // "toolong" is above max_txn_bytes; "e" finds the outstanding bound full.
    const std::vector<std::string> txns{"a", "b", "toolong", "c", "d", "e"};
    const request_id first = l.p->submit_batch(views_of(txns));
    const auto batches = sent_to<wire::proposal_batch>(l.transport, 1);
    REQUIRE(batches.size() == 2);
    CHECK(batches[0].first == zxid{e, 1});
    CHECK(batches[0].count == 2);
    CHECK(batches[1].first == zxid{e, 3});
    CHECK(batches[1].count == 2);
    CHECK(sent_to<wire::proposal>(l.transport, 1).empty());
    std::map<request_id, std::error_code> refused;
    for (const auto& c : l.p->ready().completions)
        if (!c.outcome) refused[c.id] = c.outcome.error();
    CHECK(refused == std::map<request_id, std::error_code>{
                         {first + 2, make_error_code(errc::too_large)},
                         {first + 5, make_error_code(errc::backpressure)}});
    // The four proposed commit and complete with their zxids, in order.
    l.disk_catches_up();
    l.from(2, wire::ack{zxid{e, 4}});
    std::vector<std::pair<request_id, zxid>> completed;
    for (const auto& c : l.p->ready().completions) completed.emplace_back(c.id, c.outcome.value());
    CHECK(completed == std::vector<std::pair<request_id, zxid>>{{first, zxid{e, 1}},
                                                               {first + 1, zxid{e, 2}},
                                                               {first + 3, zxid{e, 3}},
                                                               {first + 4, zxid{e, 4}}});
}

TEST_CASE("a batch larger than max_batch_bytes is split; zab's own transactions are refused") {
    options opts;
    opts.max_batch_bytes = 10;  // two 1-byte writes: 4 + 1 each
    hand_leader l{0, opts};
    l.establish();
    const shared_bytes reconfig =
        encode_reconfig(reconfig_request{{member{1, learner_type::participant}}, std::nullopt});
    const std::string system_txn{as_string_view(reconfig.view())};
    const std::vector<std::string> txns{"a", "b", "c", "d", system_txn, "e"};
    const request_id first = l.p->submit_batch(views_of(txns));
    const auto batches = sent_to<wire::proposal_batch>(l.transport, 1);
    const auto singles = sent_to<wire::proposal>(l.transport, 1);
    REQUIRE(batches.size() == 2);  // a b | c d
    CHECK(batches[0].count == 2);
    CHECK(batches[1].count == 2);
    REQUIRE(singles.size() == 1);  // e: a run of one is a PROPOSAL
    CHECK(as_string_view(singles[0].txn) == "e");
    bool system_refused = false;
    for (const auto& c : l.p->ready().completions)
        if (c.id == first + 4)
            system_refused = !c.outcome && c.outcome.error() == make_error_code(errc::invalid_argument);
    CHECK(system_refused);
}

TEST_CASE("a log read that fails at start is returned with its own cause, not as corruption") {
    // recover_membership reads the log for its reconfigurations: an I/O error there is the
    // disk's, and an operator told "corrupt" would wipe a directory that may be whole.
    options opts;
    opts.fixed_leader = 3;
    recording_transport transport;
    hand_log log;
    log.read_error = std::make_error_code(std::errc::io_error);
    testing::recording_state_machine machine;
    auto created = leader_peer::create(1, voters(3), opts, transport, log, machine);
    REQUIRE_FALSE(created.has_value());
    CHECK(created.error() == std::make_error_code(std::errc::io_error));
    CHECK(created.error() != make_error_code(errc::corrupt));
}

TEST_CASE("a follower whose one fsync covers several PROPOSALs acknowledges them with one ACK") {
    // Replica 1, following 3 by configuration, driven by hand through discovery and a DIFF
    // sync to serving; then three PROPOSALs arrive, each a step of its own, and the disk
    // reports them durable at once.
    hand_follower h;
    h.serve(wire::leader_info{1});
    auto& f = *h.p;
    auto& transport = h.transport;
    auto& machine = h.machine;
    const auto from_leader = [&](const wire::message& m) { h.from_leader(m); };
    const auto disk_catches_up = [&] { h.disk_catches_up(); };
    transport.sent.clear();

    for (std::uint32_t c = 1; c <= 3; ++c)
        from_leader(wire::proposal{zxid{1, c}, as_bytes("x")});
    CHECK(sent_to<wire::ack>(transport, 3).empty());  // nothing durable yet
    disk_catches_up();                                // one report covers the three appends
    const auto acks = sent_to<wire::ack>(transport, 3);
    REQUIRE(acks.size() == 1);
    CHECK(acks[0].acked == zxid{1, 3});
    CHECK(f.counters().frames_coalesced == 2);

    // A COMMIT of the last applies the three (it covers the run, §6.1).
    from_leader(wire::commit{zxid{1, 3}});
    CHECK(machine.applied().size() == 3);
    CHECK(f.last_applied() == zxid{1, 3});
}

// Issue 34 defect 7 (the outbox). Frames held for a learner's connection that is gone are
// dropped with it: they would never be sent (the release skips a gone link's frames), but
// while held they held back everything queued after them for that peer — its new
// connection's LEADERINFO waited for the leader's currentEpoch write that NEWLEADER on the
// dead connection waited for — and counted against the new connection's backlog.
TEST_CASE("frames held for a learner's dead connection neither hold back nor count against "
          "its new connection") {
    hand_leader l;
    l.from(1, wire::follower_info{0});
    l.from(2, wire::follower_info{0});
    l.disk_catches_up();  // acceptedEpoch durable: LEADERINFO to both
    const epoch_t e = l.p->durable_epochs().accepted;
    l.from(1, wire::ack_epoch{zxid{}, epoch_t{0}});
    l.from(2, wire::ack_epoch{zxid{}, epoch_t{0}});
    // A quorum promised: the currentEpoch write is issued, NEWLEADER held until it is durable.
    REQUIRE(sent_to<wire::new_leader>(l.transport, 1).empty());
    REQUIRE(zab::testing::internals(*l.p).queued_frames(1) >= 1);
    l.transport.sent.clear();

    l.reconnect(1);  // the NEWLEADER held for the old connection can never be sent
    CHECK(zab::testing::internals(*l.p).queued_frames(1) == 0);
    l.from(1, wire::follower_info{e});
    // acceptedEpoch is durable: its new LEADERINFO leaves now, not after the currentEpoch write.
    CHECK(sent_to<wire::leader_info>(l.transport, 1).size() == 1);

    // The rest of the sync goes on as usual on the new connection.
    l.from(1, wire::ack_epoch{zxid{}, std::nullopt});
    l.disk_catches_up();
    CHECK(sent_to<wire::new_leader>(l.transport, 1).size() == 1);
    const zxid marker{l.p->durable_epochs().current, 0};
    l.from(1, wire::ack{marker});
    l.from(2, wire::ack{marker});
    CHECK(l.p->established());
}

// Issue 34 (combination sweep seed 1483). A SNAP's snapshot is committed state, and so is
// the configuration it carries: the learner takes it when the SNAP replaces its log, not
// only when its state machine restores from it at UPTODATE. Replica 1 of voters {1, 2, 3},
// synced by SNAP with a snapshot whose configuration <1, 5> is voters {2, 3, 4}, learns at
// NEWLEADER that it was removed; it used to keep the configuration of version 0 until
// UPTODATE, and with its leader lost before then it voted, and led, under it: epoch 8
// established twice in the sweep.
TEST_CASE("a SNAP's configuration is in force from NEWLEADER, not only from UPTODATE") {
    options opts;
    opts.fixed_leader = 3;
    recording_transport transport;
    hand_log log;
    testing::recording_state_machine machine;
    auto created = leader_peer::create(1, voters(3), opts, transport, log, machine);
    REQUIRE(created.has_value());
    auto& f = *created.value();
    f.on_connected(3, 7);
    f.start();
    REQUIRE(f.state() == peer_state::following);
    const auto from_leader = [&](const wire::message& m) { f.on_receive(3, 7, encode(frame_context{}, m)); };
    const auto disk_catches_up = [&] {
        if (!log.epoch_writes.empty()) f.on_epochs_durable(log.epoch_writes.back());
        if (!log.syncs.empty()) f.on_log_durable(log.syncs.back());
    };
    from_leader(wire::leader_info{2});
    disk_catches_up();
    auto newer = configuration::make({member{2}, member{3}, member{4}}, zxid{1, 5}.value());
    REQUIRE(newer.has_value());
    testing::recording_state_machine leaders_machine;
    const shared_bytes image = wrap_snapshot(newer.value(), leaders_machine.snapshot().view());
    from_leader(wire::snap{zxid{1, 9}, image.size(), 0, image.view()});
    CHECK(f.configuration_in_force().version() == 0);  // nothing replaced yet
    from_leader(wire::new_leader{zxid{2, 0}});
    CHECK(f.configuration_in_force().version() == zxid{1, 5}.value());
    CHECK(f.status().removed);
    CHECK(f.state() != peer_state::following);
}

// docs/protocol.md §0.2: versions.
TEST_CASE("REQUESTS (§6.1, §0.2): a learner's forwarded writes go out as PROPOSALS batches, "
          "each run answered by one REPLIES; one too large, or past the learner's bound, is "
          "answered alone") {
    options opts;
    opts.max_txn_bytes = 4;
    opts.max_forwarded_per_learner = 4;
    hand_leader l{0, opts};
    l.establish();
    const epoch_t e = l.p->durable_epochs().current;
    const std::vector<std::string> txns{"a", "b", "toolong", "c", "d", "e"};
    const std::vector<byte_view> views = views_of(txns);
    l.p->on_receive(1, *zab::testing::internals(*l.p).connection_to(1),
                    encode_forwarded_batch(frame_context{}, 100, views));
    const auto replies = sent_to<wire::reply_batch>(l.transport, 1);
    using wire::reply_outcome;
    CHECK(replies == std::vector<wire::reply_batch>{
                         {100, 2, reply_outcome::accepted, zxid{e, 1}},
                         {102, 1, reply_outcome::too_large, zxid{}},
                         {103, 2, reply_outcome::accepted, zxid{e, 3}},
                         {105, 1, reply_outcome::backpressure, zxid{}}});  // 4 outstanding for it
    CHECK(sent_to<wire::forwarded_reply>(l.transport, 1).empty());
    const auto batches = sent_to<wire::proposal_batch>(l.transport, 2);
    REQUIRE(batches.size() == 2);
    CHECK(batches[0].first == zxid{e, 1});
    CHECK(batches[1].first == zxid{e, 3});
    CHECK(l.p->counters().requests_refused == 2);
    CHECK(l.p->counters().proposal_batches == 2);
}

TEST_CASE("FOLLOWERINFO (§0.2): a protocol version older than any this build speaks is refused "
          "with both versions, counted and shown; a newer one is spoken at this build's") {
    hand_leader l;
    const connection_id one = *zab::testing::internals(*l.p).connection_to(1);
    l.from(1, wire::follower_info{0, 0xffff});
    CHECK(l.p->counters().protocol_refusals == 1);
    CHECK(l.p->status().last_protocol_refusal == protocol_refusal{1, 0xffff});
    CHECK(std::find(l.transport.closed.begin(), l.transport.closed.end(), std::pair{peer_id{1}, one}) !=
          l.transport.closed.end());
    l.from(2, wire::follower_info{0, 0x20000});  // a later release
    l.reconnect(1);
    l.from(1, wire::follower_info{0, oldest_protocol_version});  // the previous release
    std::map<peer_id, std::uint32_t> spoken;
    for (const auto& learner : l.p->status().learners) spoken[learner.id] = learner.protocol;
    CHECK(spoken == std::map<peer_id, std::uint32_t>{{1, oldest_protocol_version}, {2, protocol_version}});
    CHECK(l.p->counters().protocol_refusals == 1);
    // LEADERINFO announces this build's version to both.
    for (const peer_id id : {1, 2}) {
        l.disk_catches_up();
        const auto infos = sent_to<wire::leader_info>(l.transport, id);
        REQUIRE(infos.size() == 1);
        CHECK(infos[0].protocol == protocol_version);
    }
}

TEST_CASE("LEADERINFO (§0.2): a leader of a protocol version older than any this build speaks "
          "is refused, counted and shown; the previous release's is followed, and REQUESTS "
          "never go to it") {
    const std::uint32_t theirs = GENERATE(0xffffu, oldest_protocol_version, protocol_version);
    hand_follower h;
    auto& f = *h.p;
    auto& transport = h.transport;
    const auto infos = sent_to<wire::follower_info>(transport, 3);
    REQUIRE(infos.size() == 1);
    CHECK(infos[0].protocol == protocol_version);
    if (theirs < oldest_protocol_version) {
        h.from_leader(wire::leader_info{1, theirs});
        CHECK(f.counters().protocol_refusals == 1);
        CHECK(f.status().last_protocol_refusal == protocol_refusal{3, theirs});
        CHECK(sent_to<wire::ack_epoch>(transport, 3).empty());
        return;
    }
    h.serve(wire::leader_info{1, theirs});
    CHECK(f.status().leader_protocol == theirs);
    transport.sent.clear();
    const std::vector<std::string> txns{"a", "b", "c"};
    f.submit_batch(views_of(txns));
    const std::size_t batches = sent_to<wire::forwarded_batch>(transport, 3).size();
    const std::size_t singles = sent_to<wire::forwarded_request>(transport, 3).size();
    if (theirs == oldest_protocol_version) {
        CHECK(batches == 0);
        CHECK(singles == 3);
    } else {
        CHECK(batches == 1);
        CHECK(singles == 0);
    }
}
