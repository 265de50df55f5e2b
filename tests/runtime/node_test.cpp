// zab::asio::node (include/zab/runtime/): real replicas in one process, over loopback TCP,
// driven by one io_context in the test thread (a file log's fsyncs on a one-thread pool).
// Waits are conditions with a generous deadline that only turns a hang into a failure;
// nothing asserts on time.
//
// What every run checks at the end (the core's agreement, total order and durability, §10,
// on what the replicas applied): each replica's applied sequence has strictly increasing
// zxids and is a prefix of the longest one, and every write that completed with a zxid is
// in it with its bytes.
#if defined(__GNUC__) && !defined(__clang__)
// g++ 12 at -O1 with the sanitizers reports -Wmaybe-uninitialized inside Boost.Asio's
// use_future (promise_handler's constructor, inlined into async_initiate): a false positive
// in Boost's code, which this file only instantiates.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "zab/runtime/node.hpp"
#include "zab/runtime/metrics_registry.hpp"
#include "zab/runtime/replica_impl.hpp"
#include "zab/storage/file_log.hpp"
#include "zab/storage/memory_log.hpp"
#include "zab/testing/recording_state_machine.hpp"
#include "../run_until.hpp"

using namespace std::chrono_literals;
using zab::peer_id;
using zab::zxid;
using zab::testing::recording_state_machine;

namespace {

/// A temporary directory, removed with everything in it.
struct temp_dir {
    std::filesystem::path path;
    temp_dir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "zab-node-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~temp_dir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

/// The outcome of one client operation, as the completion handler saw it.
struct outcome {
    bool done = false;
    boost::system::error_code error;
    zab::asio::reply reply;
    int completions = 0;
};

template <typename Log>
struct cluster {
    using node_type = zab::asio::node<Log, recording_state_machine>;
    struct replica {
        std::unique_ptr<Log> log;
        std::unique_ptr<recording_state_machine> machine;
        std::unique_ptr<node_type> node;
    };

    boost::asio::io_context io;
    boost::asio::thread_pool disk{1};
    std::size_t voters;
    std::optional<temp_dir> dir;  // file logs only
    std::map<peer_id, std::uint16_t> ports;
    std::map<peer_id, replica> replicas;
    /// Every write that completed with a zxid: (zxid, bytes).
    std::map<zxid, std::string> acknowledged;
    /// options::snapshot_every for every replica (0: no compaction).
    std::uint64_t snapshot_every = 0;
    /// Members carry client addresses "client-<id>:6379" (member::client_address).
    bool client_addresses = false;
    /// node_options::metrics per replica (none: no sink).
    std::map<peer_id, zab::metrics_sink*> metrics;
    /// options::read_lease_ticks for every replica (0: lease reads off, §7.1).
    std::uint32_t read_lease_ticks = 0;
    /// node_options::leader_wait for every replica: 0 here, so that a call made without a
    /// leader fails at once unless a test asks for the wait (propose_waiting, sync_waiting).
    std::chrono::milliseconds leader_wait{0};

    explicit cluster(std::size_t n) : voters{n} {
        if constexpr (std::is_same_v<Log, zab::file_log>) dir.emplace();
        zab::set_log_level(zab::log_level::error);
    }
    ~cluster() {
        for (auto& [id, r] : replicas) r.node.reset();
        io.poll();
        disk.join();
        zab::set_log_level(zab::log_level::warn);
    }

    zab::asio::node_options options_for(peer_id id) const {
        zab::asio::node_options o;
        o.cluster_id = 7;  // once: the node gives it to the peer and the transport
        o.config = zab::configuration::numbered(voters).value();
        if (client_addresses) {
            std::vector<zab::member> members = o.config.members();
            for (zab::member& m : members) m.client_address = fmt::format("client-{}:6379", m.id);
            o.config = zab::configuration::make(std::move(members)).value();
        }
        o.tick = 20ms;
        o.peer.sync_limit_ticks = 50;
        o.peer.snapshot_every = snapshot_every;
        if (const auto sink = metrics.find(id); sink != metrics.end()) o.metrics = sink->second;
        o.peer.read_lease_ticks = read_lease_ticks;
        o.leader_wait = leader_wait;
        o.transport.self = id;
        o.transport.reconnect_min = 10ms;
        o.transport.reconnect_max = 200ms;
        for (peer_id m = 1; m <= voters; ++m) {
            const auto port = ports.find(m);
            o.transport.peers[m] = {"127.0.0.1", port == ports.end() ? std::uint16_t{0} : port->second};
        }
        return o;
    }

    std::unique_ptr<Log> open_log(peer_id id) {
        if constexpr (std::is_same_v<Log, zab::file_log>) {
            zab::file_log_options o;
            o.directory = (dir->path / fmt::format("replica-{}", id)).string();
            o.cluster_id = 7;
            o.replica_id = id;
            auto opened = zab::file_log::open(o);
            REQUIRE(opened.has_value());
            return std::make_unique<zab::file_log>(std::move(opened).value());
        } else {
            return std::make_unique<Log>();
        }
    }

    /// Starts (or restarts, from its log's files) replica `id`. The higher id of a pair
    /// dials the lower, so replicas first start in increasing order: each knows the ports it
    /// dials. A restart binds the port it had.
    void start(peer_id id) {
        replica& r = replicas[id];
        if (!r.log) r.log = open_log(id);
        r.machine = std::make_unique<recording_state_machine>();
        std::optional<boost::asio::any_io_executor> disk_executor;
        if constexpr (std::is_same_v<Log, zab::file_log>) disk_executor = disk.get_executor();
        r.node = std::make_unique<node_type>(io.get_executor(), options_for(id), *r.log,
                                             *r.machine, disk_executor);
        REQUIRE(r.node->start().has_value());
        ports[id] = r.node->transport().local_port();
    }
    void start_all() {
        for (peer_id id = 1; id <= voters; ++id) start(id);
    }
    /// Kills replica `id` as a process death would: the node and its log objects go; the
    /// files stay (what was flushed is on disk).
    void kill(peer_id id) {
        replica& r = replicas.at(id);
        r.node.reset();
        r.log.reset();
        r.machine.reset();
    }

    node_type* node(peer_id id) { return replicas.at(id).node.get(); }

    /// Starts replica `id`, which is not in the configuration, to join the group (§9): it
    /// knows the members' ports and its own, and follows without a vote until a
    /// reconfiguration makes it a member.
    void start_joiner(peer_id id) {
        replica& r = replicas[id];
        r.log = open_log(id);
        r.machine = std::make_unique<recording_state_machine>();
        zab::asio::node_options o = options_for(id);
        o.transport.peers[id] = {"127.0.0.1", 0};
        o.peer.non_voter_until_synced = true;
        r.node = std::make_unique<node_type>(io.get_executor(), o, *r.log, *r.machine);
        REQUIRE(r.node->start().has_value());
        ports[id] = r.node->transport().local_port();
    }

    /// Member `id` as a voter, with its address.
    zab::member voter(peer_id id) const {
        return {id, zab::learner_type::participant, 0, 1, false,
                fmt::format("127.0.0.1:{}", ports.at(id))};
    }

    /// Asks replica `at` for a reconfiguration to `members` (compare-and-set on the version
    /// it has in force) and records the outcome.
    std::shared_ptr<outcome> reconfigure(peer_id at, std::vector<zab::member> members) {
        auto o = std::make_shared<outcome>();
        zab::reconfig_request request{std::move(members), node(at)->status().config.version()};
        node(at)->async_reconfigure(std::move(request), recorder(o));
        return o;
    }

    /// A completion handler that records into `o`; a write that succeeded is remembered
    /// with its bytes as acknowledged.
    auto recorder(std::shared_ptr<outcome> o, std::optional<std::string> write = std::nullopt) {
        return [this, o, write](boost::system::error_code e, zab::asio::reply r) {
            o->done = true;
            o->error = e;
            o->reply = r;
            ++o->completions;
            if (!e && write) acknowledged[r.id] = *write;
        };
    }

    template <typename Condition>
    bool run_until(Condition condition, std::chrono::seconds limit = 60s) {
        return zab::test::run_until(io, condition, limit);
    }

    peer_id leader() const {
        for (const auto& [id, r] : replicas)
            if (r.node && r.node->status().role == zab::peer_state::leading &&
                r.node->status().established)
                return id;
        return 0;
    }
    /// Every live replica established (a killed one is not waited for).
    bool all_serving() const {
        for (const auto& [id, r] : replicas)
            if (r.node && !r.node->status().established) return false;
        return leader() != 0;
    }

    /// Proposes `bytes` at `id` with a callback that records the outcome.
    std::shared_ptr<outcome> propose(peer_id id, const std::string& bytes) {
        auto o = std::make_shared<outcome>();
        node(id)->async_propose(zab::as_bytes(bytes), recorder(o, bytes));
        return o;
    }

    /// Proposes `bytes` at `id`, waiting up to `wait` for a leader (call_options).
    std::shared_ptr<outcome> propose_waiting(peer_id id, const std::string& bytes,
                                             std::chrono::milliseconds wait) {
        auto o = std::make_shared<outcome>();
        node(id)->async_propose(zab::as_bytes(bytes), zab::asio::call_options{wait},
                                recorder(o, bytes));
        return o;
    }

    /// A sync at `id`, waiting up to `wait` for a leader.
    std::shared_ptr<outcome> sync_waiting(peer_id id, std::chrono::milliseconds wait) {
        auto o = std::make_shared<outcome>();
        node(id)->async_sync(zab::asio::call_options{wait}, recorder(o));
        return o;
    }

    /// Writes `count` txns round-robin through every live replica, `window` at a time, until
    /// each completed; returns how many succeeded.
    std::size_t write_through_all(const std::string& tag, std::size_t count) {
        std::vector<std::shared_ptr<outcome>> outcomes;
        std::vector<peer_id> live;
        for (const auto& [id, r] : replicas)
            if (r.node) live.push_back(id);
        for (std::size_t i = 0; i < count; ++i)
            outcomes.push_back(propose(live[i % live.size()], fmt::format("{}-{}", tag, i)));
        REQUIRE(run_until([&] {
            for (const auto& o : outcomes)
                if (!o->done) return false;
            return true;
        }));
        std::size_t ok = 0;
        for (const auto& o : outcomes) {
            CHECK(o->completions == 1);
            if (!o->error) ++ok;
        }
        return ok;
    }

    /// Runs until every live replica applied everything the leader applied (a killed one
    /// is not waited for).
    bool converged() {
        return run_until([&] {
            if (!all_serving()) return false;
            const zxid last = node(leader())->status().last_applied;
            for (const auto& [id, r] : replicas)
                if (r.node && r.node->status().last_applied != last) return false;
            return true;
        });
    }

    /// The end-of-run check (see the file comment).
    void check_histories() {
        const std::vector<recording_state_machine::applied_txn>* longest = nullptr;
        for (const auto& [id, r] : replicas) {
            if (!r.machine) continue;
            const auto& applied = r.machine->applied();
            for (std::size_t i = 1; i < applied.size(); ++i)
                REQUIRE(applied[i - 1].id < applied[i].id);
            if (!longest || applied.size() > longest->size()) longest = &applied;
        }
        REQUIRE(longest != nullptr);
        for (const auto& [id, r] : replicas) {
            if (!r.machine) continue;
            const auto& applied = r.machine->applied();
            const std::size_t offset = longest->size() - applied.size();
            // A restarted replica applies from its log's start again: same sequence.
            (void)offset;
            for (std::size_t i = 0; i < applied.size(); ++i) {
                INFO("replica " << id << " entry " << i);
                REQUIRE(applied[i].id == (*longest)[i].id);
                REQUIRE(zab::as_string_view(applied[i].txn.view()) ==
                        zab::as_string_view((*longest)[i].txn.view()));
            }
        }
        std::map<zxid, std::string> in_longest;
        for (const auto& a : *longest) in_longest[a.id] = std::string{zab::as_string_view(a.txn.view())};
        for (const auto& [z, bytes] : acknowledged) {
            INFO("acknowledged write " << fmt::format("{}", z));
            REQUIRE(in_longest.count(z) == 1);
            CHECK(in_longest[z] == bytes);
        }
    }
};

}  // namespace

TEST_CASE("three and five replicas over loopback: election, writes from every replica, one order",
          "[runtime]") {
    for (const std::size_t n : {std::size_t{3}, std::size_t{5}}) {
        INFO(n << " replicas");
        cluster<zab::memory_log> c{n};
        c.start_all();
        REQUIRE(c.run_until([&] { return c.all_serving(); }));
        CHECK(c.write_through_all("w", 200) == 200);
        REQUIRE(c.converged());
        c.check_histories();
        CHECK(c.acknowledged.size() == 200);
        // Status: one leader; every follower serving with no lag once converged.
        const auto status = c.node(c.leader())->status();
        CHECK(status.followers.size() == n - 1);
        for (const auto& f : status.followers) {
            CHECK(f.serving);
            CHECK(f.lag == 0);
        }
    }
}

TEST_CASE("file logs: the leader (and with five replicas one more) killed, a new leader, "
          "writes go on, the killed replicas restart from their files and catch up",
          "[runtime]") {
    for (const std::size_t n : {std::size_t{3}, std::size_t{5}}) {
        INFO(n << " replicas");
        cluster<zab::file_log> c{n};
        // Compaction every 40 writes: the recording machine hands over views, which the node
        // serializes on its disk executor (options::snapshot_off_thread).
        c.snapshot_every = 40;
        c.start_all();
        REQUIRE(c.run_until([&] { return c.all_serving(); }));
        CHECK(c.write_through_all("before", 100) == 100);
        const peer_id old_leader = c.leader();
        const zab::epoch_t old_epoch = c.node(old_leader)->status().epoch;
        // A minority: the leader, and with five replicas the follower after it.
        std::vector<peer_id> killed{old_leader};
        if (n == 5) killed.push_back(static_cast<peer_id>(old_leader % n + 1));
        for (const peer_id id : killed) c.kill(id);
        REQUIRE(c.run_until([&] { return c.all_serving(); }));
        CHECK(c.leader() != old_leader);
        CHECK(c.node(c.leader())->status().epoch > old_epoch);
        CHECK(c.write_through_all("during", 100) == 100);
        for (const peer_id id : killed) c.start(id);
        REQUIRE(c.converged());
        CHECK(c.write_through_all("after", 50) == 50);
        REQUIRE(c.converged());
        c.check_histories();
        // The restarted replicas re-applied their own history from their files, then caught up.
        for (const peer_id id : killed) {
            INFO("replica " << id);
            CHECK(c.replicas.at(id).machine->applied().size() == 250);
        }
        for (const auto& [id, r] : c.replicas) {
            INFO("replica " << id);
            const auto snapshot = r.log->snapshot();
            REQUIRE(snapshot.has_value());  // compacted, from a snapshot serialized off-thread
            CHECK(snapshot->last_included > zxid{});
        }
    }
}

TEST_CASE("metrics: a node forwards its sink to the peer and times its own flush jobs and "
          "snapshots (file logs)", "[runtime]") {
    cluster<zab::file_log> c{3};
    c.snapshot_every = 10;
    std::map<peer_id, std::unique_ptr<zab::metrics_registry>> registries;
    for (peer_id id = 1; id <= 3; ++id) {
        registries[id] = std::make_unique<zab::metrics_registry>();
        c.metrics[id] = registries[id].get();
    }
    c.start_all();
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    CHECK(c.write_through_all("metered", 30) == 30);
    REQUIRE(c.converged());
    const peer_id leader = c.leader();
    // A follower applies what a quorum committed before its own flush is done: wait for
    // every replica's flush jobs and compaction.
    REQUIRE(c.run_until([&] {
        for (peer_id id = 1; id <= 3; ++id)
            if (registries[id]->of(zab::histogram_kind::flush_records).sum() < 30 ||
                c.node(id)->protocol_peer()->counters().compactions == 0)
                return false;
        return true;
    }));
    for (peer_id id = 1; id <= 3; ++id) {
        INFO("replica " << id);
        const zab::metrics_registry& r = *registries[id];
        const auto& fsync = r.of(zab::histogram_kind::fsync_seconds);
        CHECK(fsync.count() > 0);
        CHECK(fsync.sum() > 0);
        CHECK(r.of(zab::histogram_kind::apply_seconds).count() ==
              c.node(id)->protocol_peer()->counters().transactions_applied);
        CHECK(r.of(zab::histogram_kind::snapshot_seconds).count() > 0);  // serialized off-thread
        CHECK(r.of(zab::histogram_kind::snapshot_bytes).count() ==
              c.node(id)->protocol_peer()->counters().compactions);
        CHECK(r.events(zab::metric_event_kind::role_changed) >= 1);
    }
    CHECK(registries[leader]->of(zab::histogram_kind::commit_seconds).count() ==
          c.node(leader)->protocol_peer()->counters().commits);
    // Detached: nothing more is reported.
    c.node(leader)->set_metrics(nullptr);
    const auto fsyncs = registries[leader]->of(zab::histogram_kind::fsync_seconds).count();
    CHECK(c.write_through_all("unmetered", 3) == 3);
    CHECK(registries[leader]->of(zab::histogram_kind::fsync_seconds).count() == fsyncs);
}

TEST_CASE("completion tokens: callback, use_future from another thread, use_awaitable, deferred",
          "[runtime]") {
    cluster<zab::memory_log> c{3};
    c.start_all();
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    const peer_id follower = c.leader() == 1 ? 2 : 1;

    // deferred: nothing happens until the deferred operation is launched.
    auto op = c.node(follower)->async_propose(zab::as_bytes("deferred"), boost::asio::deferred);
    std::optional<zxid> deferred_zxid;
    std::move(op)([&](boost::system::error_code e, zab::asio::reply r) {
        CHECK(!e);
        deferred_zxid = r.id;
    });
    REQUIRE(c.run_until([&] { return deferred_zxid.has_value(); }));

    // use_awaitable: a coroutine that writes then syncs.
    std::optional<zxid> written, synced;
    boost::asio::co_spawn(
        c.io,
        [&]() -> boost::asio::awaitable<void> {
            auto w = co_await c.node(follower)->async_propose(zab::as_bytes("awaited"),
                                                              boost::asio::use_awaitable);
            written = w.id;
            auto s = co_await c.node(follower)->async_sync(boost::asio::use_awaitable);
            synced = s.id;
        },
        boost::asio::detached);
    REQUIRE(c.run_until([&] { return synced.has_value(); }));
    CHECK(*synced >= *written);
    CHECK(*written > *deferred_zxid);

    // use_future, from another thread, while this one runs the io_context.
    std::future<zab::asio::reply> future;
    std::thread client([&] {
        future = c.node(follower)->async_propose(zab::as_bytes("future"), boost::asio::use_future);
    });
    client.join();
    REQUIRE(c.run_until([&] {
        return future.wait_for(0s) == std::future_status::ready;
    }));
    CHECK(future.get().id > *written);

    // An error reaches an awaiting coroutine as an exception with zab's error code.
    c.node(follower)->stop();
    std::optional<boost::system::error_code> thrown;
    boost::asio::co_spawn(
        c.io,
        [&]() -> boost::asio::awaitable<void> {
            try {
                co_await c.node(follower)->async_propose(zab::as_bytes("late"),
                                                         boost::asio::use_awaitable);
            } catch (const boost::system::system_error& e) {
                thrown = e.code();
            }
        },
        boost::asio::detached);
    REQUIRE(c.run_until([&] { return thrown.has_value(); }));
    CHECK(std::error_code{*thrown} == zab::make_error_code(zab::errc::shutting_down));
}

TEST_CASE("lease syncs (§7.1): answered by the leader's read lease, at the leader and through a "
          "follower, and each sees the writes completed before it", "[runtime]") {
    cluster<zab::memory_log> c{3};
    c.read_lease_ticks = 50;
    c.start_all();
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    CHECK(c.write_through_all("before", 30) == 30);
    const zxid written = c.acknowledged.rbegin()->first;
    const peer_id leader = c.leader();
    const peer_id follower = leader == 1 ? 2 : 1;
    const auto& counters = c.node(leader)->protocol_peer()->counters();
    // Lease syncs at the leader until one is served under its lease (the first may come
    // before a quorum answered a round of its epoch: then it takes the round, and succeeds).
    for (int attempt = 0; attempt < 100 && counters.lease_syncs_served == 0; ++attempt) {
        std::optional<zxid> at_leader;
        c.node(leader)->async_lease_sync([&](boost::system::error_code e, zab::asio::reply r) {
            CHECK(!e);
            at_leader = r.id;
        });
        REQUIRE(c.run_until([&] { return at_leader.has_value(); }));
        CHECK(*at_leader >= written);
    }
    REQUIRE(counters.lease_syncs_served > 0);
    const std::uint64_t served = counters.lease_syncs_served;
    std::optional<zxid> at_follower;
    c.node(follower)->async_lease_sync([&](boost::system::error_code e, zab::asio::reply r) {
        CHECK(!e);
        at_follower = r.id;
    });
    REQUIRE(c.run_until([&] { return at_follower.has_value(); }));
    CHECK(*at_follower >= written);
    CHECK(counters.lease_syncs_served > served);
}

TEST_CASE("writes asked for in one turn of the executor reach the leader's peer as one batch",
          "[runtime]") {
    cluster<zab::memory_log> c{3};
    c.start_all();
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    const peer_id leader = c.leader();
    const auto batches = [&] { return c.node(leader)->protocol_peer()->counters().proposal_batches; };
    const std::uint64_t before = batches();
    // Asked for from this thread while the loop is not running: the initiations all run in
    // one turn, and the node hands the writes to its peer together.
    std::vector<std::shared_ptr<outcome>> writes;
    for (int i = 0; i < 50; ++i) writes.push_back(c.propose(leader, fmt::format("b{}", i)));
    REQUIRE(c.run_until([&] {
        for (const auto& o : writes)
            if (!o->done) return false;
        return true;
    }));
    CHECK(batches() == before + 1);
    // Each completed once, in order: consecutive zxids, as asked.
    for (std::size_t i = 0; i < writes.size(); ++i) {
        CHECK(writes[i]->completions == 1);
        REQUIRE(!writes[i]->error);
        if (i > 0) CHECK(writes[i - 1]->reply.id.continued_by(writes[i]->reply.id));
    }
    REQUIRE(c.converged());
    c.check_histories();
}

TEST_CASE("stop: every operation in flight completes once; later calls fail shutting_down",
          "[runtime]") {
    cluster<zab::memory_log> c{3};
    c.start_all();
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    const peer_id leader = c.leader();
    const peer_id follower = leader == 1 ? 2 : 1;
    // Writes in flight at a follower whose leader goes away: they complete, once each.
    std::vector<std::shared_ptr<outcome>> flight;
    for (int i = 0; i < 20; ++i) flight.push_back(c.propose(follower, fmt::format("f{}", i)));
    c.io.poll();  // the initiations run; some are forwarded
    c.node(follower)->stop();
    REQUIRE(c.run_until([&] {
        for (const auto& o : flight)
            if (!o->done) return false;
        return true;
    }));
    for (const auto& o : flight) {
        CHECK(o->completions == 1);
        if (o->error) {
            const std::error_code e{o->error};
            CHECK((e == zab::make_error_code(zab::errc::outcome_unknown) ||
                   e == zab::make_error_code(zab::errc::shutting_down)));
        }
    }
    auto late = c.propose(follower, "late");
    REQUIRE(c.run_until([&] { return late->done; }));
    CHECK(std::error_code{late->error} == zab::make_error_code(zab::errc::shutting_down));
    // A write at a replica without an established leader is refused with the leader's
    // address when it knows one: here, the leader is still up.
    const peer_id other = 6 - leader - follower;
    auto at_other = c.propose(other, "still fine");
    REQUIRE(c.run_until([&] { return at_other->done; }));
    CHECK(!at_other->error);
    // Nothing leaks into the next run of the loop after it: one completion each.
    c.io.poll();
    for (const auto& o : flight) CHECK(o->completions == 1);
}

TEST_CASE("leader wait: calls made before any quorum go through once a leader is established; "
          "without one they fail not_leader when the wait is over", "[runtime]") {
    cluster<zab::memory_log> c{3};
    c.client_addresses = true;
    c.leader_wait = zab::asio::node_options{}.leader_wait;  // the default: 3 s
    REQUIRE(c.leader_wait == 3000ms);
    c.start(1);
    // Alone, replica 1 has no leader: a call without a wait fails at once (nothing proposed)…
    auto at_once = c.propose_waiting(1, "at once", 0ms);
    REQUIRE(c.run_until([&] { return at_once->done; }));
    CHECK(std::error_code{at_once->error} == zab::make_error_code(zab::errc::not_leader));
    // …calls with a wait are held while it elects, and cannot complete without a quorum:
    // one given no call_options waits node_options::leader_wait, then fails not_leader.
    const auto defaulted_at = std::chrono::steady_clock::now();
    auto defaulted = c.propose(1, "defaulted");
    auto waited = c.propose_waiting(1, "waited", 120'000ms);
    auto synced = c.sync_waiting(1, 120'000ms);
    c.io.run_for(300ms);
    CHECK_FALSE(defaulted->done);
    CHECK_FALSE(waited->done);
    CHECK_FALSE(synced->done);
    REQUIRE(c.run_until([&] { return defaulted->done; }));
    CHECK(std::chrono::steady_clock::now() - defaulted_at >= 3000ms);
    CHECK(std::error_code{defaulted->error} == zab::make_error_code(zab::errc::not_leader));
    CHECK_FALSE(waited->done);
    c.start(2);
    c.start(3);
    REQUIRE(c.run_until([&] { return waited->done && synced->done; }));
    CHECK_FALSE(waited->error);
    CHECK_FALSE(synced->error);
    CHECK(waited->completions == 1);
    CHECK(synced->completions == 1);
    REQUIRE(c.converged());
    // Every replica knows every member's client address from the configuration.
    const peer_id leader = c.leader();
    for (peer_id id = 1; id <= 3; ++id)
        CHECK(c.node(id)->client_address_of(leader) == fmt::format("client-{}:6379", leader));

    // The wait runs out: the survivor of the leader and one follower killed stays leaderless.
    const peer_id survivor = leader == 3 ? 2 : 3;
    for (peer_id id = 1; id <= 3; ++id)
        if (id != survivor) c.kill(id);
    // (A write made while it still follows is forwarded, and its outcome is then unknown.)
    REQUIRE(c.run_until([&] { return !c.node(survivor)->status().established; }));
    const auto asked = std::chrono::steady_clock::now();
    auto expired = c.propose_waiting(survivor, "expired", 400ms);
    auto expired_sync = c.sync_waiting(survivor, 400ms);
    REQUIRE(c.run_until([&] { return expired->done && expired_sync->done; }));
    CHECK(std::chrono::steady_clock::now() - asked >= 400ms);
    for (const auto& o : {expired, expired_sync}) {
        CHECK(std::error_code{o->error} == zab::make_error_code(zab::errc::not_leader));
        CHECK(o->completions == 1);
        if (o->reply.leader != 0)
            CHECK(o->reply.leader_client_address ==
                  fmt::format("client-{}:6379", o->reply.leader));
    }
    // A call waiting when the node stops completes shutting_down, once.
    auto stopped = c.propose_waiting(survivor, "stopped", 120'000ms);
    c.io.run_for(100ms);
    CHECK_FALSE(stopped->done);
    c.node(survivor)->stop();
    REQUIRE(c.run_until([&] { return stopped->done; }));
    CHECK(std::error_code{stopped->error} == zab::make_error_code(zab::errc::shutting_down));
    c.io.poll();
    CHECK(stopped->completions == 1);
    c.check_histories();
    CHECK(std::count_if(c.acknowledged.begin(), c.acknowledged.end(),
                        [](const auto& a) { return a.second == "waited"; }) == 1);
}

TEST_CASE("the cluster id is given once; ids that contradict it, or the log's, are refused "
          "naming the field", "[runtime]") {
    struct capture {
        std::vector<std::string> lines;
        static void sink(void* self, zab::log_level, std::string_view line) {
            static_cast<capture*>(self)->lines.emplace_back(line);
        }
    } captured;
    const auto logged = [&](std::string_view needle) {
        return std::any_of(captured.lines.begin(), captured.lines.end(),
                           [&](const std::string& l) { return l.find(needle) != std::string::npos; });
    };
    cluster<zab::file_log> c{3};
    zab::set_log_sink(&capture::sink, &captured);
    auto log = c.open_log(1);  // a log of cluster 7
    recording_state_machine machine;
    const auto refused = [&](const zab::asio::node_options& o) {
        zab::asio::node<zab::file_log, recording_state_machine> n{c.io.get_executor(), o, *log,
                                                                  machine};
        const auto started = n.start();
        return !started && started.error() == zab::errc::invalid_options;
    };
    auto o = c.options_for(1);
    o.peer.group_id = 8;
    CHECK(refused(o));
    CHECK(logged("peer.group_id 8 is not the cluster id 7"));
    o = c.options_for(1);
    o.cluster_id = 9;
    CHECK(refused(o));
    CHECK(logged("the log belongs to cluster 7, not to cluster 9"));
    o = c.options_for(1);
    o.cluster_id = 0;
    o.transport.cluster_id = 7;  // peer.group_id left at 0: what the README's example once did
    CHECK(refused(o));
    CHECK(logged("peer.group_id 0 and transport.cluster_id 7 differ"));
    // Given once, to the log: with none of the three ids set the node takes the log's.
    o = c.options_for(1);
    o.cluster_id = 0;
    o.transport.cluster_id = 0;
    o.peer.group_id = 0;
    CHECK_FALSE(refused(o));
    o = c.options_for(1);
    o.tick = 0ms;
    CHECK(refused(o));
    zab::set_log_sink(nullptr);
}

TEST_CASE("hostile input at a live node's peer port: the cluster keeps committing", "[runtime]") {
    cluster<zab::memory_log> c{3};
    c.start_all();
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    const peer_id target = c.leader();
    using boost::asio::ip::tcp;
    const tcp::endpoint at{boost::asio::ip::make_address("127.0.0.1"), c.ports.at(target)};
    // Garbage, a hello of the wrong shape, and 150 connections that never say anything.
    std::vector<std::unique_ptr<tcp::socket>> sockets;
    for (int i = 0; i < 150; ++i) {
        auto socket = std::make_unique<tcp::socket>(c.io);
        boost::system::error_code ignored;
        socket->connect(at, ignored);
        if (i % 10 == 0 && !ignored) {
            std::string junk(64 + i, static_cast<char>(i));
            if (i % 20 == 0) junk.replace(0, 4, "ZAB1");  // the frame magic, not the hello's
            boost::asio::write(*socket, boost::asio::buffer(junk), ignored);
        }
        sockets.push_back(std::move(socket));
    }
    CHECK(c.write_through_all("under-attack", 100) == 100);
    REQUIRE(c.converged());
    c.check_histories();
    const auto& counters = c.node(target)->transport().counters();
    CHECK(counters.rejected.bad_magic + counters.rejected.too_many_pending +
              counters.rejected.malformed >
          0);
    CHECK(c.node(target)->transport().pending_handshakes() <= 64);
}

TEST_CASE("membership: a joiner outside the configuration is added with its address, the "
          "group commits with it, then an original follower and the leader are removed",
          "[runtime]") {
    cluster<zab::memory_log> c{3};
    c.start_all();
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    CHECK(c.write_through_all("three", 30) == 30);

    // 4 is in no configuration and no member knows its address: it connects to them (the
    // higher id dials) and follows the leader without a vote.
    c.start_joiner(4);
    REQUIRE(c.run_until([&] { return c.node(4)->status().established; }));
    CHECK(!c.node(4)->status().config.contains(4));
    CHECK(c.node(1)->transport().peer_info(4)->kind == zab::asio::peer_kind::joiner);

    // Added through a follower (forwarded to the leader), every member with its address.
    const peer_id leader = c.leader();
    const peer_id follower = leader == 1 ? 2 : 1;
    auto grown = c.reconfigure(follower, {c.voter(1), c.voter(2), c.voter(3), c.voter(4)});
    REQUIRE(c.run_until([&] { return grown->done; }));
    REQUIRE(!grown->error);
    CHECK(grown->completions == 1);
    const std::uint64_t version = grown->reply.id.value();
    CHECK(version > 0);
    REQUIRE(c.run_until([&] {
        for (peer_id id = 1; id <= 4; ++id)
            if (c.node(id)->status().config.version() != version) return false;
        return true;
    }));
    for (peer_id id = 1; id <= 4; ++id) {
        INFO("replica " << id);
        const zab::asio::node_status s = c.node(id)->status();
        CHECK(s.config.is_voter(4));
        CHECK(s.config.members().size() == 4);
        CHECK(!s.reconfig_pending);
        CHECK(!s.removed);
        if (id == 4) continue;
        // The members learned 4's address from the configuration.
        const auto info = c.node(id)->transport().peer_info(4);
        REQUIRE(info.has_value());
        CHECK(info->kind == zab::asio::peer_kind::member);
        CHECK(info->address.port == c.ports.at(4));
        CHECK(c.node(id)->address_of(4)->port == c.ports.at(4));
    }
    // The same change again is a stale compare-and-set.
    auto stale = c.node(follower);
    auto again = std::make_shared<outcome>();
    stale->async_reconfigure({{c.voter(1), c.voter(2), c.voter(3)}, 0},
                             [again](boost::system::error_code e, zab::asio::reply) {
                                 again->done = true;
                                 again->error = e;
                             });
    REQUIRE(c.run_until([&] { return again->done; }));
    CHECK(std::error_code{again->error} == zab::make_error_code(zab::errc::version_mismatch));

    CHECK(c.write_through_all("four", 40) == 40);
    REQUIRE(c.converged());
    CHECK(c.node(c.leader())->status().followers.size() == 3);

    // An original follower leaves: it stops, says so, and refuses writes; the others retire it.
    const peer_id leaving = 6 - leader - follower;  // the third original member
    std::vector<zab::member> without;
    for (const peer_id id : {peer_id{1}, peer_id{2}, peer_id{3}, peer_id{4}})
        if (id != leaving) without.push_back(c.voter(id));
    auto shrunk = c.reconfigure(leader, without);
    REQUIRE(c.run_until([&] { return shrunk->done; }));
    REQUIRE(!shrunk->error);
    REQUIRE(c.run_until([&] { return c.node(leaving)->status().removed; }));
    auto refused = c.propose(leaving, "to a removed replica");
    REQUIRE(c.run_until([&] { return refused->done; }));
    CHECK(std::error_code{refused->error} == zab::make_error_code(zab::errc::not_a_member));
    for (const peer_id id : {leader, follower, peer_id{4}}) {
        INFO("replica " << id);
        REQUIRE(c.run_until(
            [&] { return c.node(id)->status().config.version() == shrunk->reply.id.value(); }));
        CHECK(c.node(id)->transport().peer_info(leaving)->kind == zab::asio::peer_kind::retired);
    }
    c.kill(leaving);
    CHECK(c.write_through_all("three-again", 30) == 30);

    // The leader leaves too: it hands over to a voter of the new configuration, and the
    // remaining two (one of them the joiner) go on.
    std::vector<zab::member> pair;
    for (const peer_id id : {follower, peer_id{4}}) pair.push_back(c.voter(id));
    auto handed = c.reconfigure(follower, pair);
    REQUIRE(c.run_until([&] { return handed->done; }));
    REQUIRE(!handed->error);
    REQUIRE(c.run_until([&] { return c.node(leader)->status().removed; }));
    c.kill(leader);
    REQUIRE(c.run_until([&] { return c.all_serving(); }));
    CHECK(c.write_through_all("two", 30) == 30);
    REQUIRE(c.converged());
    c.check_histories();
}

TEST_CASE("membership: a joiner whose id is not above every member id it knows is refused at "
          "start, naming the id to pick", "[runtime]") {
    struct capture {
        std::vector<std::string> lines;
        static void sink(void* self, zab::log_level, std::string_view line) {
            static_cast<capture*>(self)->lines.emplace_back(line);
        }
    } captured;
    cluster<zab::memory_log> c{3};
    zab::set_log_sink(&capture::sink, &captured);
    zab::memory_log log;
    recording_state_machine machine;
    zab::asio::node_options o = c.options_for(4);
    o.config = zab::configuration::make({{1}, {2}, {5}}).value();
    o.transport.peers[4] = {"127.0.0.1", 0};
    o.transport.peers[5] = {"127.0.0.1", 1};
    o.peer.non_voter_until_synced = true;
    zab::asio::node<zab::memory_log, recording_state_machine> joiner{c.io.get_executor(), o, log,
                                                                     machine};
    const auto started = joiner.start();
    REQUIRE(!started);
    CHECK(started.error() == zab::errc::invalid_options);
    CHECK(std::any_of(captured.lines.begin(), captured.lines.end(), [](const std::string& l) {
        return l.find("member 5 has a higher id") != std::string::npos &&
               l.find("Start it with an id above 5 (e.g. 6)") != std::string::npos;
    }));
    zab::set_log_sink(nullptr);
}

namespace {

/// A counter behind zab::asio::replicated_machine: each write adds its length; `apply`
/// returns the new total as decimal text (a result for the writer).
class counter_machine final : public zab::asio::replicated_machine {
public:
    zab::shared_bytes apply(zxid z, zab::byte_view txn) override {
        last_ = z;
        total_ += txn.size();
        const std::string text = std::to_string(total_);
        return zab::shared_bytes{std::vector<std::byte>(
            reinterpret_cast<const std::byte*>(text.data()),
            reinterpret_cast<const std::byte*>(text.data()) + text.size())};
    }
    zxid last_applied() const override { return last_; }
    zab::shared_bytes snapshot() const override {
        const std::string text = std::to_string(total_);
        return zab::shared_bytes{std::vector<std::byte>(
            reinterpret_cast<const std::byte*>(text.data()),
            reinterpret_cast<const std::byte*>(text.data()) + text.size())};
    }
    zab::result<void> restore(zxid z, zab::byte_view image) override {
        const auto text = zab::as_string_view(image);
        std::uint64_t total = 0;
        for (char c : text) {
            if (c < '0' || c > '9') return make_error_code(zab::errc::malformed);
            total = total * 10 + static_cast<std::uint64_t>(c - '0');
        }
        total_ = total;
        last_ = z;
        return zab::success();
    }
    std::uint64_t total() const { return total_; }

private:
    zxid last_;
    std::uint64_t total_ = 0;
};

}  // namespace

TEST_CASE("the compile firewall (zab/runtime/replica.hpp): three replicas with file logs, "
          "results from apply, the leader killed and restarted from its directory; a log of "
          "another cluster is refused", "[runtime][replica]") {
    boost::asio::io_context io;
    temp_dir dir;
    zab::set_log_level(zab::log_level::error);
    std::map<peer_id, std::uint16_t> ports;
    std::map<peer_id, counter_machine> machines;
    std::map<peer_id, std::unique_ptr<zab::asio::replica>> replicas;

    const auto options_for = [&](peer_id id) {
        zab::asio::replica_options o;
        o.log.directory = (dir.path / fmt::format("replica-{}", id)).string();
        o.log.cluster_id = 7;  // given once, to the log
        o.log.replica_id = id;
        o.disk_threads = 1;
        o.node.config = zab::configuration::numbered(3).value();
        o.node.tick = 20ms;
        o.node.transport.self = id;
        o.node.transport.reconnect_min = 10ms;
        o.node.transport.reconnect_max = 200ms;
        for (peer_id m = 1; m <= 3; ++m)
            o.node.transport.peers[m] = {"127.0.0.1", ports.count(m) ? ports[m] : std::uint16_t{0}};
        return o;
    };
    const auto start = [&](peer_id id) {
        machines[id] = counter_machine{};
        auto opened = zab::asio::open_replica(io, options_for(id), machines[id]);
        REQUIRE(opened.has_value());
        replicas[id] = std::move(opened).value();
        REQUIRE(replicas[id]->start().has_value());
        ports[id] = replicas[id]->peer_port();
        CHECK(ports[id] != 0);
    };
    const auto run_until = [&](auto condition) { return zab::test::run_until(io, condition); };
    const auto leader = [&]() -> peer_id {
        for (auto& [id, r] : replicas)
            if (r && r->status().role == zab::peer_state::leading && r->status().established) return id;
        return 0;
    };
    for (peer_id id = 1; id <= 3; ++id) start(id);
    REQUIRE(run_until([&] { return leader() != 0; }));

    // Writes through every replica (the calls wait node_options::leader_wait for a leader):
    // each completes with its zxid and the counter's total after it, as the machine returned.
    std::map<zxid, std::string> results;
    int completed = 0;
    for (int i = 0; i < 9; ++i) {
        replicas[static_cast<peer_id>(i % 3 + 1)]->propose(
            zab::as_bytes("abc"), [&](std::error_code e, zab::asio::reply r) {
                ++completed;
                REQUIRE(!e);
                results[r.id] = std::string{zab::as_string_view(r.response.view())};
            });
    }
    REQUIRE(run_until([&] { return completed == 9; }));
    REQUIRE(results.size() == 9);
    std::uint64_t expected = 0;
    for (const auto& [z, text] : results) CHECK(text == std::to_string(expected += 3));

    // The leader dies (its replica object and log go; the files stay) and comes back.
    const peer_id first = leader();
    replicas[first].reset();
    REQUIRE(run_until([&] { return leader() != 0 && leader() != first; }));
    std::error_code written;
    bool done = false;
    replicas[leader()]->propose(zab::as_bytes("defg"), [&](std::error_code e, zab::asio::reply) {
        written = e;
        done = true;
    });
    REQUIRE(run_until([&] { return done; }));
    CHECK(!written);
    start(first);
    REQUIRE(run_until([&] { return machines[first].total() == 31; }));
    bool synced = false;
    replicas[first]->sync([&](std::error_code e, zab::asio::reply r) {
        CHECK(!e);
        CHECK(r.id == machines[first].last_applied());
        synced = true;
    });
    REQUIRE(run_until([&] { return synced; }));
    for (auto& [id, m] : machines) CHECK(m.total() == 31);

    // Replica 2's directory opened as another cluster's: refused, nothing started.
    replicas.clear();
    io.poll();
    zab::asio::replica_options wrong = options_for(2);
    wrong.log.cluster_id = 8;
    counter_machine other;
    auto refused = zab::asio::open_replica(io, wrong, other);
    REQUIRE(!refused.has_value());
    CHECK(refused.error() != std::error_code{});
    zab::set_log_level(zab::log_level::warn);
}
