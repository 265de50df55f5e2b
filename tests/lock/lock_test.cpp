// The lock example (examples/lock/lock_machine.hpp): the machine alone (grants, busy,
// releases, leases, its image, determinism), and lock_service in a simulated 3-replica
// cluster, where a retried ACQUIRE answered `duplicate` gets the first grant's fencing token
// (session_reply::applied_at, docs/protocol.md §6.7), not its own zxid.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lock/lock_machine.hpp"
#include "../sim_settle.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::lock;
using namespace zab::testing;

namespace {

std::vector<std::byte> lock_txn(lock_op op, std::string name, std::string owner,
                                std::uint64_t argument, std::uint64_t now_ms = 0) {
    auto bytes = encode(lock_command{op, now_ms, std::move(name), std::move(owner), argument});
    REQUIRE(bytes);
    return std::move(bytes).value();
}
std::vector<std::byte> acquire(std::string name, std::string owner, std::uint64_t lease_ms = 0,
                               std::uint64_t now_ms = 0) {
    return lock_txn(lock_op::acquire, std::move(name), std::move(owner), lease_ms, now_ms);
}
std::vector<std::byte> release(std::string name, std::string owner, std::uint64_t token,
                               std::uint64_t now_ms = 0) {
    return lock_txn(lock_op::release, std::move(name), std::move(owner), token, now_ms);
}

/// A lock_machine and the next zxid to apply at.
struct lock_driver {
    lock_machine machine;
    std::uint32_t counter = 0;
    zxid last;
    lock_answer apply(const std::vector<std::byte>& txn) {
        last = zxid{1, ++counter};
        auto a = decode_result(machine.apply(last, txn).view());
        REQUIRE(a);
        return a.value();
    }
};

}  // namespace

TEST_CASE("lock machine: grant, busy, release only with the holder's token", "[lock]") {
    lock_driver d;
    const lock_answer granted = d.apply(acquire("printer", "alice"));
    CHECK(granted.status == lock_status::granted);
    CHECK_FALSE(granted.token);  // the token is the write's zxid, not in the result
    const zxid grant = d.last;
    REQUIRE(d.machine.holder("printer"));
    CHECK(d.machine.holder("printer")->owner == "alice");
    CHECK(d.machine.holder("printer")->token == grant.value());

    const lock_answer busy = d.apply(acquire("printer", "bob"));
    CHECK(busy.status == lock_status::busy);
    CHECK(busy.holder == "alice");
    CHECK(busy.token == grant.value());
    CHECK(d.apply(acquire("printer", "alice")).status == lock_status::busy);   // no re-entry
    CHECK(d.apply(acquire("scanner", "bob")).status == lock_status::granted);  // another lock

    // The wrong token (here a later zxid, as a retry's would be), or the right token from
    // another owner, releases nothing.
    const lock_answer wrong = d.apply(release("printer", "alice", grant.value() + 1));
    CHECK(wrong.status == lock_status::not_holder);
    CHECK(wrong.holder == "alice");
    CHECK(wrong.token == grant.value());
    CHECK(d.apply(release("printer", "bob", grant.value())).status == lock_status::not_holder);
    REQUIRE(d.machine.holder("printer"));
    CHECK(d.apply(release("printer", "alice", grant.value())).status == lock_status::released);
    CHECK_FALSE(d.machine.holder("printer"));
    const lock_answer free = d.apply(release("printer", "alice", grant.value()));
    CHECK(free.status == lock_status::not_holder);
    CHECK(free.token == 0u);
    CHECK(free.holder.empty());
    // Free again: the next grant's token is its own, later zxid.
    CHECK(d.apply(acquire("printer", "bob")).status == lock_status::granted);
    CHECK(d.machine.holder("printer")->token == d.last.value());
    CHECK(d.machine.holder("printer")->token > grant.value());
}

TEST_CASE("lock machine: a lease passes by the clock the commands carry", "[lock]") {
    lock_driver d;
    CHECK(d.apply(acquire("db", "alice", 100, 1'000)).status == lock_status::granted);
    const std::uint64_t first = d.last.value();
    CHECK(d.apply(acquire("db", "bob", 0, 1'099)).status == lock_status::busy);
    CHECK(d.machine.clock_ms() == 1'099);
    // A command stamped earlier does not move the clock back.
    CHECK(d.apply(acquire("db", "bob", 0, 500)).status == lock_status::busy);
    CHECK(d.machine.clock_ms() == 1'099);
    CHECK(d.apply(acquire("db", "bob", 0, 1'100)).status == lock_status::granted);
    const std::uint64_t second = d.last.value();
    CHECK(second > first);
    // alice's lease passed while she was away: her token no longer releases anything, and a
    // resource fencing on tokens refuses her writes (first < second).
    CHECK(d.apply(release("db", "alice", first)).status == lock_status::not_holder);
    CHECK(d.machine.holder("db")->owner == "bob");
    // A holder whose lease passed may still release while nobody took it.
    CHECK(d.apply(acquire("cache", "carol", 10, 2'000)).status == lock_status::granted);
    const std::uint64_t carol = d.last.value();
    CHECK(d.apply(acquire("other", "carol", 0, 2'050)).status == lock_status::granted);
    CHECK_FALSE(d.machine.holder("cache"));
    CHECK(d.apply(release("cache", "carol", carol)).status == lock_status::released);
    CHECK(d.machine.locks().count("cache") == 0);
}

TEST_CASE("lock machine: malformed commands are answered alike and change nothing", "[lock]") {
    CHECK(encode(lock_command{lock_op::acquire, 0, "", "alice", 0}).error() ==
          make_error_code(errc::invalid_argument));
    CHECK(encode(lock_command{lock_op::acquire, 0, std::string(max_name_bytes + 1, 'n'), "a", 0})
              .error() == make_error_code(errc::invalid_argument));
    lock_driver d;
    d.apply(acquire("printer", "alice"));
    const auto locks_before = d.machine.locks();
    auto trailing = acquire("printer", "bob");
    trailing.push_back(std::byte{0});
    auto bad_op = acquire("printer", "bob");
    bad_op[0] = std::byte{3};
    auto truncated = acquire("printer", "bob");
    truncated.pop_back();
    const std::vector<std::vector<std::byte>> bad = {{}, trailing, bad_op, truncated};
    for (const auto& txn : bad) {
        CHECK(d.apply(txn).status == lock_status::malformed);
        CHECK(decode_command(txn).error() == make_error_code(errc::malformed));
    }
    CHECK(d.machine.last_applied() == d.last);  // applied (and answered), nothing else
    CHECK(d.machine.locks() == locks_before);
    CHECK(d.machine.holder("printer")->owner == "alice");
}

TEST_CASE("lock machine: deterministic apply and a snapshot that round-trips or is refused",
          "[lock]") {
    const std::vector<std::vector<std::byte>> history = {
        acquire("a", "alice", 50, 10), acquire("b", "bob", 0, 20),
        acquire("a", "bob", 0, 30),    release("b", "bob", zxid{1, 2}.value(), 40),
        acquire("a", "carol", 0, 60),  acquire("c", "alice", 0, 70)};
    lock_driver one, two;
    for (const auto& txn : history) {
        const auto a = one.apply(txn), b = two.apply(txn);
        CHECK(a.status == b.status);
        CHECK(a.token == b.token);
    }
    const shared_bytes image = one.machine.snapshot();
    CHECK(image == two.machine.snapshot());            // byte for byte
    CHECK(one.machine.holder("a")->owner == "carol");  // alice's lease passed at 60
    CHECK_FALSE(one.machine.holder("b"));

    lock_machine restored;
    REQUIRE(restored.restore(one.last, image.view()));
    CHECK(restored.snapshot() == image);
    CHECK(restored.locks() == one.machine.locks());
    CHECK(restored.clock_ms() == 70u);
    // Both go on alike.
    const auto txn = acquire("a", "dave", 0, 80);
    CHECK(restored.apply(zxid{2, 1}, txn) == one.machine.apply(zxid{2, 1}, txn));

    lock_machine target;
    target.apply(zxid{1, 1}, acquire("x", "y"));
    const shared_bytes before = target.snapshot();
    const auto refused = [&](zxid z, const std::vector<std::byte>& bytes) {
        const auto r = target.restore(z, bytes);
        CHECK(target.snapshot() == before);
        return r ? std::error_code{} : r.error();
    };
    const std::vector<std::byte> good(image.data(), image.data() + image.size());
    for (std::size_t at = 0; at < good.size(); ++at) {
        auto bad = good;
        bad[at] ^= std::byte{0x04};
        CHECK(refused(one.last, bad));
    }
    CHECK(refused(one.last, {good.begin(), good.end() - 1}));
    CHECK(refused(zxid{1, 5}, good) == make_error_code(errc::corrupt));  // another zxid's
    auto versioned = good;
    versioned[4] = std::byte{2};
    CHECK(refused(one.last, versioned) == make_error_code(errc::unsupported_version));
    CHECK(refused(one.last, {}) == make_error_code(errc::corrupt));
}

TEST_CASE("lock service: a retried ACQUIRE answered duplicate carries the first grant's token",
          "[lock]") {
    lock_service service;
    const auto txn = session_envelope::wrap(acquire("printer", "alice"), session_tag{7, 1});
    const auto first = answer_of(service.apply(zxid{1, 1}, txn).view());
    REQUIRE(first);
    CHECK(first.value().status == lock_status::granted);
    CHECK(first.value().token == zxid{1, 1}.value());
    CHECK_FALSE(first.value().duplicate);
    service.apply(zxid{1, 2}, session_envelope::wrap(acquire("printer", "bob"), session_tag{8, 1}));
    const auto retry = answer_of(service.apply(zxid{2, 1}, txn).view());  // after a failover
    REQUIRE(retry);
    CHECK(retry.value().duplicate);
    CHECK(retry.value().status == lock_status::granted);
    CHECK(retry.value().token == zxid{1, 1}.value());  // not (2,1): its own zxid
    CHECK(service.inner().holder("printer")->token == zxid{1, 1}.value());
    // An older request of alice's: applied earlier, its answer not kept.
    service.apply(
        zxid{2, 2},
        session_envelope::wrap(release("printer", "alice", zxid{1, 1}.value()), session_tag{7, 2}));
    const auto older = answer_of(service.apply(zxid{2, 3}, txn).view());
    REQUIRE(older);
    CHECK_FALSE(older.value().status);
    CHECK_FALSE(older.value().token);
    const std::byte not_a_reply[] = {std::byte{9}};
    CHECK(answer_of(byte_view{not_a_reply, 1}).error() == make_error_code(errc::malformed));
}

namespace {

using zab::test::leader_of;

using zab::test::settle;

}  // namespace

TEST_CASE(
    "lock service in a 3-replica cluster: an ACQUIRE retried across leader failures is "
    "granted once, and every answer's token is the grant's zxid on every replica",
    "[lock]") {
    cluster_options o;
    o.seed = 33;
    simulator<lock_service> sim{o};
    std::map<std::pair<peer_id, request_id>, client_completion> done;
    sim.set_completion_observer([&](peer_id at, const client_completion& c) {
        done.emplace(std::pair{at, c.id}, c);
    });
    sim.start();
    settle(sim);
    const auto submit_and_wait = [&](peer_id at, const std::vector<std::byte>& txn) {
        const auto id = sim.submit(at, txn);
        REQUIRE(id);
        REQUIRE(sim.run_until([&] { return done.contains({at, *id}); }, sim.now() + 30'000'000));
        return done.at({at, *id});
    };
    const auto answer = [](const client_completion& c) {
        REQUIRE(c.outcome);
        auto a = answer_of(c.response.view());
        REQUIRE(a);
        return a.value();
    };

    // A retry of a write that committed (its reply lost, say): the first token, not the
    // retry's zxid.
    const auto txn = session_envelope::wrap(acquire("printer", "alice"), session_tag{1, 1});
    const client_completion first = submit_and_wait(leader_of(sim), txn);
    const client_completion again = submit_and_wait(leader_of(sim), txn);
    CHECK(answer(first).token == first.outcome.value().value());
    CHECK_FALSE(answer(first).duplicate);
    CHECK(answer(again).duplicate);
    CHECK(answer(again).token == first.outcome.value().value());
    CHECK(again.outcome.value() > first.outcome.value());  // the retry committed on its own

    // The leader dies with an ACQUIRE in flight (from "never reached it" to "applied"); the
    // client retries through the new leader until it hears back.
    int duplicates = 0;
    const std::vector<sim_time> delays = {0, 1'000, 3'000, 6'000, 12'000, 50'000};
    std::map<std::string, std::uint64_t> tokens;
    for (std::size_t i = 0; i < delays.size(); ++i) {
        const std::string name = "lock-" + std::to_string(i);
        const auto request = session_envelope::wrap(acquire(name, "bob"), session_tag{2, i + 1});
        const peer_id leader = leader_of(sim);
        peer_id at = 0;
        for (const auto& n : sim.nodes())
            if (n.peer && n.id != leader) at = n.id;
        const auto id = sim.submit(at, request);
        REQUIRE(id);
        sim.run_for(delays[i]);
        sim.crash(leader);
        REQUIRE(sim.run_until([&] { return done.contains({at, *id}); }, sim.now() + 30'000'000));
        const client_completion lost = done.at({at, *id});
        settle(sim);
        sim.restart(leader);
        settle(sim);
        done.clear();  // a restarted peer numbers its requests from 1 again
        const client_completion retry = submit_and_wait(leader_of(sim), request);
        const lock_answer a = answer(retry);
        INFO("delay " << delays[i] << " first " << (lost.outcome ? "ok" : "unknown"));
        CHECK(a.status == lock_status::granted);
        REQUIRE(a.token);
        if (lost.outcome) {
            CHECK(a.duplicate);
            CHECK(*a.token == lost.outcome.value().value());
        }
        if (a.duplicate) {
            ++duplicates;
            CHECK(*a.token != retry.outcome.value().value());
        } else {
            CHECK(*a.token == retry.outcome.value().value());
        }
        tokens[name] = *a.token;
    }
    CHECK(duplicates > 0);

    // Every replica holds every lock with the token its client was told, byte-equal.
    sim.run_for(2'000'000);
    const shared_bytes reference = sim.at(1).machine->snapshot();
    for (const auto& n : sim.nodes()) {
        INFO("replica " << n.id);
        CHECK(n.machine->snapshot() == reference);
        CHECK(n.machine->inner().holder("printer")->token == first.outcome.value().value());
        for (const auto& [name, token] : tokens) {
            REQUIRE(n.machine->inner().holder(name));
            CHECK(n.machine->inner().holder(name)->token == token);
        }
    }
}
