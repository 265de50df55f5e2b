// The invariant checker of docs/protocol.md §10: a clean history passes, and every property fires
// on a small history that breaks it (named after the ZooKeeper bug it models, where one fits).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/testing/invariant_checker.hpp"

using namespace zab;
using namespace zab::testing;

namespace Catch {
template <>
struct StringMaker<property> {
    static std::string convert(property p) { return std::string{to_string(p)}; }
};
}  // namespace Catch

namespace {

constexpr peer_id A = 1;
constexpr peer_id B = 2;
constexpr peer_id C = 3;

/// A transaction; its digest stands for its bytes (a different `variant`, different bytes).
txn_id txn(epoch_t epoch, std::uint32_t counter, std::uint64_t variant = 0) {
    return txn_id{zxid{epoch, counter}, 0xab000000u + epoch * 1000u + counter + variant * 7919u};
}

// The seed example (001): X and Y in epoch 1, Z and W in epoch 2.
const txn_id X = txn(1, 1);
const txn_id Y = txn(1, 2);
const txn_id Z = txn(2, 1);
const txn_id W = txn(2, 2);

/// A well-behaved harness: keeps each server's log (durable at once), epochs and applied
/// prefix, and reports what a correct Zab run would. Negative tests start from it and then
/// report one wrong fact.
struct script {
    invariant_checker check;
    std::map<peer_id, std::vector<txn_id>> log;
    std::map<peer_id, zxid> snapshot;  // the snapshot each log starts from, zxid{} if none
    std::map<peer_id, epochs> epoch;
    std::map<peer_id, std::size_t> applied;  // how many of log[s] (after snapshot) it applied
    std::set<txn_id> committed;

    explicit script(invariant_checker_options options = {}) : check{options} {}

    zxid last(peer_id s) {
        return log[s].empty() ? snapshot[s] : std::max(snapshot[s], log[s].back().id);
    }

    void boot(const std::vector<peer_id>& servers) {
        for (peer_id s : servers) {
            check.logged(s, log[s], snapshot[s]);
            check.epochs_changed(s, epoch[s]);
            vote(s);
        }
    }
    void set_epochs(peer_id s, epochs e) {
        epoch[s] = e;
        check.epochs_changed(s, e);
    }
    void vote(peer_id s) {
        check.advertised(s, last(s), epoch[s].current, log[s], epoch[s], snapshot[s]);
    }
    void append(peer_id s, txn_id t) {
        log[s].push_back(t);
        check.logged(s, log[s], snapshot[s]);
    }

    /// Discovery and synchronization of `follower` with `leader` of epoch `e` (§4, §5): the
    /// follower's log becomes the leader's (DIFF, or TRUNC then DIFF), each synced txn goes
    /// as PROPOSAL + COMMIT, then history durable → current epoch → NEWLEADER ACK.
    void sync(peer_id leader, epoch_t e, peer_id follower) {
        check.accepted_epoch_sent(follower, epoch[follower].accepted,
                                  epoch[follower]);  // FOLLOWERINFO
        set_epochs(follower, {e, epoch[follower].current});
        check.accepted_epoch_sent(follower, e, epoch[follower]);  // ACKEPOCH
        vote(follower);                                           // ACKEPOCH's (epoch, zxid)
        check.connection_reset(leader, follower);
        auto& mine = log[follower];
        std::size_t common = 0;
        while (common < mine.size() && common < log[leader].size() &&
               mine[common] == log[leader][common])
            ++common;
        if (common < mine.size()) {  // TRUNC
            mine.resize(common);
            check.logged(follower, mine, snapshot[follower]);
        }
        applied[follower] = std::min(applied[follower], common);
        for (std::size_t i = common; i < log[leader].size(); ++i) {
            append(follower, log[leader][i]);
            check.commit_sent(leader, follower, log[leader][i].id, {});
            check.commit_received(follower, log[leader][i].id, log[leader][i].id, true);
        }
        set_epochs(follower, {e, e});
        check.newleader_acked(follower, e, mine, epoch[follower], snapshot[follower]);
    }

    /// `leader` leads epoch `e` with `followers` as its NEWLEADER quorum.
    void establish(peer_id leader, epoch_t e, const std::vector<peer_id>& followers) {
        set_epochs(leader, {e, epoch[leader].current});
        check.accepted_epoch_sent(leader, e, epoch[leader]);  // LEADERINFO (ZOOKEEPER-1291)
        set_epochs(leader, {e, e});
        for (peer_id f : followers) sync(leader, e, f);
        check.established(leader, e, log[leader], snapshot[leader]);
        for (const auto& t : log[leader]) committed.insert(t);  // §5.5
        catch_up(leader);
        for (peer_id f : followers) catch_up(f);
    }

    /// A learner joining the established leader of `e` (§6.3).
    void join(peer_id leader, epoch_t e, peer_id learner) {
        sync(leader, e, learner);
        catch_up(learner);
    }

    /// Broadcast of `t` by `leader` of `e`, acknowledged and applied by `followers` (§6.1).
    void propose(peer_id leader, epoch_t e, txn_id t, const std::vector<peer_id>& followers) {
        check.broadcast(leader, e, t);
        append(leader, t);
        check.acked(leader, t.id, log[leader], snapshot[leader]);
        for (peer_id f : followers) {
            append(f, t);
            check.acked(f, t.id, log[f], snapshot[f]);
        }
        committed.insert(t);
        check.committed(t);
        for (peer_id f : followers) {
            check.commit_sent(leader, f, t.id, {});
            check.commit_received(f, t.id, t.id, true);
        }
        catch_up(leader);
        for (peer_id f : followers) catch_up(f);
    }

    /// Applies every committed txn of the log not applied yet, in order.
    void catch_up(peer_id s) {
        auto& done = applied[s];
        while (done < log[s].size() && committed.contains(log[s][done])) {
            check.delivered(s, log[s][done]);
            ++done;
        }
    }

    void crash(peer_id s) {
        check.crashed(s);
        applied[s] = 0;
    }
    void restart(peer_id s) {
        check.restarted(s, log[s], epoch[s], snapshot[s]);
        vote(s);
    }
};

/// The seed's first epoch: A leads epoch 1 with B and C; X and Y committed and applied on all.
void first_epoch(script& s) {
    s.boot({A, B, C});
    s.establish(A, 1, {B, C});
    s.propose(A, 1, X, {B, C});
    s.propose(A, 1, Y, {B, C});
}

std::vector<property> fired(const invariant_checker& c) { return c.properties_fired(); }

}  // namespace

// --- clean histories ---------------------------------------------------------------------------

TEST_CASE("the seed example (001) passes: X, Y in epoch 1, A fails, C leads epoch 2, A rejoins") {
    script s;
    first_epoch(s);
    s.crash(A);
    s.vote(B);
    s.vote(C);
    s.establish(C, 2, {B});
    s.propose(C, 2, Z, {B});
    s.restart(A);
    s.join(C, 2, A);  // A re-applies X, Y, Z from scratch
    s.propose(C, 2, W, {A, B});
    INFO(s.check.report());
    CHECK(s.check.ok());
    CHECK(s.check.violations().empty());
    CHECK(s.check.checks() > 100);
    CHECK(s.check.observations() > 50);
}

TEST_CASE("the seed's sync (001) passes: C at <1,11> syncs B at <1,10> by DIFF") {
    script s;
    std::vector<txn_id> history;
    for (std::uint32_t c = 1; c <= 11; ++c) history.push_back(txn(1, c));
    s.check.preexisting(history);
    s.log[C] = history;
    s.log[B] = {history.begin(), history.end() - 1};
    s.epoch[B] = s.epoch[C] = {1, 1};
    s.boot({B, C});
    s.establish(C, 2, {B});  // commits all of <1,1>..<1,11> (§5.5); both apply them
    s.propose(C, 2, Z, {B});
    INFO(s.check.report());
    CHECK(s.check.ok());
    CHECK(s.applied[B] == 12);
}

TEST_CASE("an uncommitted suffix is truncated (TRUNC, §5.6) and a learner installs a snapshot") {
    script s;
    first_epoch(s);
    // A proposes <1,3>; only B logs it. Nobody else has it: it is not committed.
    const txn_id lost = txn(1, 3);
    s.check.broadcast(A, 1, lost);
    s.append(A, lost);
    s.append(B, lost);
    s.check.acked(B, lost.id, s.log[B]);
    s.crash(A);
    s.establish(C, 2, {B});  // B is truncated back to <1,2>
    CHECK(s.log[B].size() == 2);
    s.propose(C, 2, Z, {B});

    // A comes back with a wiped disk and is synced by SNAP at Z: snapshot, then new records.
    s.log[A].clear();
    s.epoch[A] = {0, 0};
    s.check.crashed(A);  // a second power loss, disk replaced
    s.applied[A] = 0;
    s.check.restarted(A, {}, {1, 1});  // epoch files survived on another volume
    s.epoch[A] = {1, 1};
    s.set_epochs(A, {2, 1});
    s.check.accepted_epoch_sent(A, 2, s.epoch[A]);
    s.check.connection_reset(C, A);
    s.snapshot[A] = Z.id;
    s.check.logged(A, {}, Z.id);
    s.check.state_restored(A, Z.id);
    s.set_epochs(A, {2, 2});
    s.check.newleader_acked(A, 2, s.log[A], s.epoch[A], Z.id);
    s.vote(A);
    s.propose(C, 2, W, {A, B});
    INFO(s.check.report());
    CHECK(s.check.ok());
}

TEST_CASE("the initial-counter hook (§1) moves where an epoch starts") {
    invariant_checker_options options;
    options.first_counter = 0xfffffff0u;
    script s{options};
    s.boot({A, B});
    s.establish(A, 1, {B});
    s.propose(A, 1, txn(1, 0xfffffff0u), {B});
    s.propose(A, 1, txn(1, 0xfffffff1u), {B});
    s.crash(A);
    s.establish(B, 2, {});
    s.propose(B, 2, txn(2, 0xfffffff0u), {});
    INFO(s.check.report());
    CHECK(s.check.ok());
}

// --- §10.1 integrity
// ------------------------------------------------------------------------------

TEST_CASE("integrity: a server applies bytes no leader proposed") {
    script s;
    first_epoch(s);
    const txn_id forged = txn(1, 3);  // never broadcast
    s.check.committed(forged);
    s.check.delivered(A, forged);
    CHECK(fired(s.check) == std::vector{property::integrity});
}

TEST_CASE("integrity: a txn applied with other bytes than the proposal's") {
    script s;
    s.boot({A, B});
    s.establish(A, 1, {B});
    s.check.broadcast(A, 1, X);
    const txn_id corrupted = txn(1, 1, 1);
    s.check.committed(corrupted);
    s.check.delivered(B, corrupted);
    CHECK(fired(s.check) == std::vector{property::integrity});
}

TEST_CASE("integrity: a state machine restored from a snapshot no server ever reached") {
    script s;
    first_epoch(s);
    s.check.state_restored(B, zxid{1, 7});
    CHECK(fired(s.check) == std::vector{property::integrity});
}

// --- §10.2 total order, §10.3 agreement, §10.8 prefix consistency ---------------------------
// These three share one detector: every delivered sequence must be a prefix of the longest.
// A mismatch is always a prefix_consistency violation, and also total_order (the txn is
// applied at another position than elsewhere) or agreement (the sequences diverge).

TEST_CASE("total order: a server applies Z before X, which another server applied before Z") {
    invariant_checker c;
    c.established(A, 1, {});
    c.broadcast(A, 1, X);
    c.committed(X);
    c.delivered(A, X);
    c.established(C, 2, {X});
    c.broadcast(C, 2, Z);
    c.committed(Z);
    c.delivered(A, Z);
    c.delivered(B, Z);  // B never applied X
    CHECK(fired(c) == std::vector{property::total_order, property::prefix_consistency});
}

TEST_CASE("total order: a server applies the same txn twice") {
    script s;
    first_epoch(s);
    s.check.delivered(B, Y);
    // B's [X, Y, Y] and A's [X, Y] are still prefix-related: only total order breaks.
    CHECK(fired(s.check) == std::vector{property::total_order});
}

TEST_CASE("agreement: a stale leader commits Y after C took over without it") {
    invariant_checker c;
    c.established(A, 1, {});
    c.broadcast(A, 1, X);
    c.broadcast(A, 1, Y);
    c.committed(X);
    c.delivered(A, X);
    c.delivered(B, X);
    c.established(C, 2, {X});  // Y was not committed then: fine so far
    c.broadcast(C, 2, Z);
    c.committed(Z);
    c.delivered(B, Z);
    c.committed(Y);  // A, deposed but unaware, still counts acks
    c.delivered(A, Y);
    // A has Y where B has Z: they diverge. C proposed without a delivered txn of epoch 1.
    CHECK(fired(c) == std::vector{property::agreement, property::primary_integrity,
                                  property::prefix_consistency});
}

TEST_CASE("agreement: two different txns committed with one zxid") {
    invariant_checker c;
    c.committed(X);
    c.committed(txn(1, 1, 1));
    CHECK(fired(c) == std::vector{property::agreement});
}

TEST_CASE(
    "prefix consistency: after a restart a server re-applies a different prefix (the "
    "data-loss oracle of §10)") {
    script s;
    first_epoch(s);
    s.crash(A);
    s.establish(C, 2, {B});
    s.propose(C, 2, Z, {B});
    s.restart(A);
    // A's state machine restarts empty and must re-apply X, Y, Z. It skips Y.
    s.check.delivered(A, X);
    s.check.delivered(A, Z);
    CHECK(fired(s.check) == std::vector{property::total_order, property::prefix_consistency});
    CHECK(s.check.violations().front().what == property::prefix_consistency);
}

// --- §10.4 local primary order ------------------------------------------------------------------

TEST_CASE("local primary order: a follower applies Y before X") {
    invariant_checker c;
    c.established(A, 1, {});
    c.broadcast(A, 1, X);
    c.broadcast(A, 1, Y);
    c.committed(X);
    c.committed(Y);
    c.delivered(B, Y);  // the first delivery anywhere: nothing to compare with but B_1
    CHECK(fired(c) == std::vector{property::local_primary_order});
}

// --- §10.5 global primary order ------------------------------------------------------------------

TEST_CASE("global primary order: a server applies X of epoch 1 after Z of epoch 2") {
    invariant_checker c;
    c.established(A, 1, {});
    c.broadcast(A, 1, X);
    c.committed(X);
    c.established(C, 2, {X});
    c.broadcast(C, 2, Z);
    c.committed(Z);
    c.delivered(B, Z);
    c.delivered(B, X);
    CHECK(fired(c) == std::vector{property::global_primary_order});
}

// --- §10.6 primary integrity ---------------------------------------------------------------------

TEST_CASE(
    "primary integrity: a leader proposes without a txn of an older epoch that was "
    "applied") {
    // C is established without Y (not committed then); the deposed A, unaware, then commits
    // and applies Y. Whichever comes first, C's first proposal or A's delivery, C's epoch
    // proposes from a history that lacks a delivered txn of epoch 1.
    invariant_checker c;
    c.established(A, 1, {});
    c.broadcast(A, 1, X);
    c.broadcast(A, 1, Y);
    c.committed(X);
    c.delivered(A, X);
    c.established(C, 2, {X});
    SECTION("Y applied first: checked at the new leader's first proposal") {
        c.committed(Y);
        c.delivered(A, Y);
        CHECK(c.ok());
        c.broadcast(C, 2, Z);
    }
    SECTION("the new leader proposed first: checked when Y is applied") {
        c.broadcast(C, 2, Z);
        c.committed(Y);
        CHECK(c.ok());
        c.delivered(A, Y);
    }
    CHECK(fired(c) == std::vector{property::primary_integrity});
}

// --- §10.7 durability ---------------------------------------------------------------------------

TEST_CASE("durability: a leader is established without a committed txn") {
    script s;
    first_epoch(s);
    s.check.established(C, 2, {X});  // C's history lacks Y, which a quorum acknowledged
    CHECK(fired(s.check) == std::vector{property::durability});
}

TEST_CASE("durability: a committed txn nobody applied yet is lost at the next epoch") {
    invariant_checker c;
    c.established(A, 1, {});
    c.broadcast(A, 1, X);
    c.committed(X);  // a quorum of durable logs holds X; no server applied it yet
    c.established(B, 2, {});
    CHECK(fired(c) == std::vector{property::durability});
}

TEST_CASE("durability is about later epochs: a lower epoch established late need not hold a higher one's txns") {
    // Leader B of epoch 2 commits Z; leader A of epoch 1 completes its establishment only
    // afterwards (an ACK of NEWLEADER(1) sent before that voter moved on). Z is not epoch
    // 1's to hold; a leader of epoch 3 without Z loses it.
    invariant_checker c;
    c.established(B, 2, {});
    c.broadcast(B, 2, Z);
    c.committed(Z);
    c.established(A, 1, {});
    CHECK(c.ok());
    c.established(C, 3, {});
    CHECK(fired(c) == std::vector{property::durability});
}

// --- §10.9 leadership ---------------------------------------------------------------------------

TEST_CASE("leadership: two leaders established in one epoch") {
    script s;
    first_epoch(s);
    s.check.established(C, 2, {X, Y});
    s.check.established(B, 2, {X, Y});
    CHECK(fired(s.check) == std::vector{property::leadership});
}

TEST_CASE("leadership: the same epoch established twice") {
    invariant_checker c;
    c.established(A, 1, {});
    c.established(A, 1, {});
    CHECK(fired(c) == std::vector{property::leadership});
}

TEST_CASE("leadership: two different txns broadcast with one zxid") {
    invariant_checker c;
    c.established(A, 1, {});
    c.broadcast(A, 1, X);
    c.broadcast(A, 1, txn(1, 1, 1));
    CHECK(fired(c) == std::vector{property::leadership});
}

TEST_CASE("leadership: a server proposes in an epoch it was not established for") {
    invariant_checker c;
    c.established(A, 1, {});
    SECTION("another server's epoch") { c.broadcast(B, 1, X); }
    SECTION("an epoch nobody established") { c.broadcast(A, 2, Z); }
    SECTION("a zxid of another epoch") { c.broadcast(A, 1, Z); }
    CHECK(fired(c) == std::vector{property::leadership});
}

// --- §10.10 epoch monotonicity -------------------------------------------------------------------

TEST_CASE("epoch monotonicity: a server's current epoch goes down after a restart") {
    script s;
    first_epoch(s);
    s.establish(C, 2, {B});
    s.crash(B);
    s.check.restarted(B, s.log[B], {2, 1});
    CHECK(fired(s.check) == std::vector{property::epoch_monotonicity});
}

TEST_CASE("epoch monotonicity: accepted epoch below current epoch") {
    invariant_checker c;
    c.epochs_changed(B, {1, 1});
    c.epochs_changed(B, {1, 2});  // ZOOKEEPER-2307: refused at start-up
    CHECK(fired(c) == std::vector{property::epoch_monotonicity});
}

TEST_CASE("epoch monotonicity: accepted epoch goes down") {
    invariant_checker c;
    c.epochs_changed(B, {3, 1});
    c.epochs_changed(B, {2, 1});
    CHECK(fired(c) == std::vector{property::epoch_monotonicity});
}

// --- §10.11 advertise ≤ durable ------------------------------------------------------------------

TEST_CASE(
    "ZOOKEEPER-3911: a NEWLEADER ACK from a follower whose durable log lacks the synced "
    "txns") {
    script s;
    first_epoch(s);
    s.crash(A);
    // C syncs B, which missed Y; B acknowledges NEWLEADER before Y is durable.
    s.log[B] = {X};
    s.check.logged(B, s.log[B]);  // (recovered after a crash, say)
    s.set_epochs(B, {2, 2});
    SECTION("the ACK comes before the leader is established: checked when it is") {
        s.check.newleader_acked(B, 2, {X}, s.epoch[B]);
        CHECK(s.check.ok());
        s.set_epochs(C, {2, 2});
        s.check.established(C, 2, {X, Y});
    }
    SECTION("a learner joining an established leader: checked at once") {
        s.set_epochs(C, {2, 2});
        s.check.established(C, 2, {X, Y});
        s.check.newleader_acked(B, 2, {X}, s.epoch[B]);
    }
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

TEST_CASE("ZOOKEEPER-4643: current epoch written before the history is durable") {
    script s;
    first_epoch(s);
    s.crash(A);
    s.log[B] = {X};
    s.check.logged(B, s.log[B]);
    s.set_epochs(B, {2, 2});  // the epoch file first, Y still in flight
    s.set_epochs(C, {2, 2});
    SECTION("the NEWLEADER ACK then vouches for a history that is not durable") {
        s.check.established(C, 2, {X, Y});
        s.check.newleader_acked(B, 2, {X}, s.epoch[B]);
    }
    SECTION("a crash at that instant recovers epoch 2 without its history") {
        s.check.crashed(B);
        s.check.restarted(B, {X}, {2, 2});
        CHECK(s.check.ok());  // C is not established yet: checked when it is
        s.check.established(C, 2, {X, Y});
    }
    SECTION("a vote then claims epoch 2 with a log that lacks its history") {
        s.check.established(C, 2, {X, Y});
        s.check.advertised(B, X.id, 2, {X}, s.epoch[B]);
    }
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

TEST_CASE("ZOOKEEPER-1282: NEWLEADER acknowledged before current epoch is durable") {
    script s;
    first_epoch(s);
    s.set_epochs(B, {2, 1});
    s.check.newleader_acked(B, 2, s.log[B], s.epoch[B]);
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

TEST_CASE("ZOOKEEPER-1291: LEADERINFO sent before the leader's accepted epoch is durable") {
    script s;
    first_epoch(s);
    s.check.accepted_epoch_sent(C, 2, s.epoch[C]);  // still {1, 1} on disk
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

TEST_CASE("advertise ≤ durable: an ACK sent before the proposal was fsynced") {
    script s;
    s.boot({A, B});
    s.establish(A, 1, {B});
    s.check.broadcast(A, 1, X);
    s.check.acked(B, X.id, {});  // X appended, not yet durable
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

TEST_CASE("advertise ≤ durable: a vote claims a zxid or an epoch that is not durable") {
    script s;
    first_epoch(s);
    SECTION("zxid") { s.check.advertised(B, Y.id, 1, {X}, s.epoch[B]); }
    SECTION("epoch") { s.check.advertised(B, Y.id, 2, s.log[B], s.epoch[B]); }
    SECTION("the epoch marker of an epoch not acknowledged") {
        s.check.advertised(B, zxid{2, 0}, 1, s.log[B], s.epoch[B]);
    }
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

TEST_CASE("ZOOKEEPER-2845: a vote reports the applied zxid, below what was acknowledged") {
    script s;
    first_epoch(s);
    // B logged and acknowledged <1,3> but has not applied it: its vote must still say <1,3>.
    const txn_id pending = txn(1, 3);
    s.check.broadcast(A, 1, pending);
    s.append(B, pending);
    s.check.acked(B, pending.id, s.log[B]);
    s.crash(A);
    s.check.advertised(B, Y.id, 1, s.log[B], s.epoch[B]);
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

TEST_CASE("advertise ≤ durable, reversed: a restart recovers more than was ever logged") {
    script s;
    first_epoch(s);
    s.crash(B);
    s.check.restarted(B, {X, Y, txn(1, 3)}, s.epoch[B]);
    CHECK(fired(s.check) == std::vector{property::advertise_durable});
}

// --- §10.12 commit order -------------------------------------------------------------------------

TEST_CASE("commit order: a COMMIT sent while an earlier zxid is outstanding") {
    invariant_checker c;
    c.commit_sent(A, B, Y.id, {X.id});
    CHECK(fired(c) == std::vector{property::commit_order});
}

TEST_CASE("commit order: COMMITs go backwards on one connection, not across a reset") {
    invariant_checker c;
    c.commit_sent(A, B, X.id, {});
    c.commit_sent(A, B, Y.id, {});
    c.connection_reset(A, B);
    c.commit_sent(A, B, X.id, {});  // a new connection: fine
    CHECK(c.ok());
    c.commit_sent(A, C, Y.id, {});
    c.commit_sent(A, C, X.id, {});
    CHECK(fired(c) == std::vector{property::commit_order});
}

TEST_CASE("commit order: a follower's COMMIT names no pending proposal") {
    invariant_checker c;
    c.commit_received(B, X.id, X.id, true);
    c.commit_received(B, Y.id, X.id, true);  // covers X too: a run committed at once (§6.1)
    CHECK(c.ok());
    SECTION("one it never received") { c.commit_received(B, Y.id, X.id, false); }
    SECTION("one committed already") { c.commit_received(B, X.id, Y.id, false); }
    SECTION("nothing is pending") { c.commit_received(B, Y.id, std::nullopt, false); }
    CHECK(fired(c) == std::vector{property::commit_order});
}

// --- §10.13 contiguity ---------------------------------------------------------------------------

TEST_CASE("contiguity: a log with a hole <1,1>, <1,3>") {
    invariant_checker c;
    c.logged(B, {X});
    c.logged(B, {X, txn(1, 3)});
    CHECK(fired(c) == std::vector{property::contiguity});
}

TEST_CASE("ZOOKEEPER-4925: a DIFF that skips a txn leaves a hole in the follower's log") {
    script s;
    first_epoch(s);
    s.crash(A);
    s.establish(C, 2, {B});
    s.propose(C, 2, Z, {B});
    s.propose(C, 2, W, {B});
    s.restart(A);
    s.check.logged(A, {X, Y, W});  // Z skipped
    CHECK(fired(s.check) == std::vector{property::contiguity});
}

TEST_CASE("contiguity: a new epoch starts at counter 2, or zxids go down") {
    invariant_checker c;
    SECTION("epoch start") { c.logged(B, {X, Y, W}); }
    SECTION("descending") { c.logged(B, {Z, X}); }
    CHECK(fired(c) == std::vector{property::contiguity});
}

TEST_CASE("contiguity: a leader broadcasts with a hole") {
    invariant_checker c;
    c.established(A, 1, {});
    SECTION("in the middle") {
        c.broadcast(A, 1, X);
        c.broadcast(A, 1, txn(1, 3));
    }
    SECTION("at the start") { c.broadcast(A, 1, Y); }
    CHECK(fired(c) == std::vector{property::contiguity});
}

TEST_CASE("contiguity: the first record may start anywhere; appends are checked incrementally") {
    invariant_checker c;
    std::vector<txn_id> log{txn(1, 5)};  // after a snapshot at <1,4>
    c.logged(B, log, zxid{1, 4});
    const auto before = c.checks();
    for (std::uint32_t counter = 6; counter < 106; ++counter) {
        log.push_back(txn(1, counter));
        c.logged(B, log, zxid{1, 4});
    }
    CHECK(c.ok());
    CHECK(c.checks() - before == 100);  // one neighbour pair per append, not a rescan
}

// --- §11.10, docs/design.md rule 5: only committed txns are applied ---------------------------------

TEST_CASE("applied committed: a server applies a txn that was never committed") {
    script s;
    first_epoch(s);
    const txn_id pending = txn(1, 3);
    s.check.broadcast(A, 1, pending);
    s.check.delivered(A, pending);
    CHECK(fired(s.check) == std::vector{property::applied_committed});
}

TEST_CASE(
    "applied committed: a restarted server replays its uncommitted tail (ZooKeeper's "
    "start-up, docs/design.md rule 5)") {
    script s;
    first_epoch(s);
    const txn_id pending = txn(1, 3);
    s.check.broadcast(A, 1, pending);
    s.append(B, pending);
    s.crash(B);
    s.restart(B);
    s.check.delivered(B, X);
    s.check.delivered(B, Y);
    s.check.delivered(B, pending);
    CHECK(fired(s.check) == std::vector{property::applied_committed});
}

// --- results
// ---------------------------------------------------------------------------------------

TEST_CASE("every property has its own name and citation") {
    std::set<std::string_view> names, citations;
    for (int p = 0; p <= static_cast<int>(property::quorum_durable); ++p) {
        names.insert(to_string(static_cast<property>(p)));
        citations.insert(citation(static_cast<property>(p)));
    }
    CHECK(names.size() == 15);
    CHECK(citations.size() == 15);
    CHECK(names.count("?") == 0);
    CHECK(fmt::format("{}", property::durability) == "durability");
}

TEST_CASE("the report has one line per violation, naming the property and the observation") {
    invariant_checker c;
    c.epochs_changed(B, {1, 2});
    c.commit_sent(A, B, Y.id, {X.id});
    const std::string report = c.report();
    CHECK(std::count(report.begin(), report.end(), '\n') == 2);
    CHECK(report.find("#1 epoch_monotonicity (§10.10): server 2") == 0);
    CHECK(report.find("#2 commit_order (§10.12): leader 1 sent COMMIT(<1, 2>) to server 2 while "
                      "<1, 1> was still outstanding") != std::string::npos);
    CHECK(c.violations()[1].observation == 2);
}

TEST_CASE("the same fact is reported once; past the limit violations are only counted") {
    invariant_checker_options options;
    options.max_violations = 2;
    invariant_checker c{options};
    for (int i = 0; i < 3; ++i) c.commit_received(B, Y.id, X.id, false);
    CHECK(c.violations().size() == 1);
    c.commit_received(B, Y.id, Z.id, false);
    c.commit_received(B, Y.id, W.id, false);
    CHECK(c.violations().size() == 2);
    CHECK_FALSE(c.ok());
    CHECK(c.report().find("and 1 more") != std::string::npos);
}
