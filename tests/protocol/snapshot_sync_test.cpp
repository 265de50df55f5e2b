// Snapshots (issue #6). SNAP sync streamed in chunks (docs/protocol.md §5.2 step 5): a large
// state reaches a learner in frames of at most `snapshot_chunk_bytes`, with at most
// `snapshot_chunks_in_flight` of them unanswered, while the leader keeps committing; a
// learner refuses a stream with a hole in it. Compaction by bytes (`snapshot_every_bytes`),
// and snapshots serialized off the peer's thread from a copy-on-write view
// (zab::deferred_snapshot_machine).
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

/// A dense key-value state: keys 0..n-1, each a u64. Transactions are "fill n" (grow to n
/// keys, key k = k) and "set k v"; both little-endian u64s after a one-byte tag. The snapshot
/// is every value, 8 bytes a key, so a million keys is 8 MB.
///
/// zab::deferred_snapshot_machine by copy-on-write: the values live in chunks of 4096 keys,
/// shared with any snapshot view handed out; a write copies its chunk only while a view
/// still holds it. So handing over a view costs a pointer per chunk, and the serialization
/// happens wherever the view is called.
class dense_kv {
public:
    static constexpr std::size_t chunk_keys = 4096;
    using chunk = std::vector<std::uint64_t>;
    using chunks = std::vector<std::shared_ptr<chunk>>;

    void apply(zxid z, byte_view txn) {
        ZAB_ASSERT(z > last_, "applied out of order");
        last_ = z;
        if (txn.size() == 9 && txn[0] == std::byte{'f'}) {
            const auto n = get(txn, 1);
            for (std::uint64_t k = size_; k < n; ++k) {
                if (k % chunk_keys == 0) chunks_.push_back(std::make_shared<chunk>());
                writable(k / chunk_keys).push_back(k);
            }
            size_ = std::max(size_, n);
        } else if (txn.size() == 17 && txn[0] == std::byte{'s'}) {
            const auto k = get(txn, 1);
            if (k < size_) writable(k / chunk_keys)[k % chunk_keys] = get(txn, 9);
        }
    }
    zxid last_applied() const { return last_; }
    shared_bytes snapshot() const {
        ++snapshot_calls;
        return encode(chunks_, size_);
    }
    deferred_snapshot snapshot_later() const {
        return [view = chunks_, size = size_] { return encode(view, size); };
    }
    result<void> restore(zxid z, byte_view bytes) {
        if (bytes.size() % 8 != 0) return make_error_code(errc::malformed);
        chunks_.clear();
        size_ = bytes.size() / 8;
        for (std::size_t at = 0; at < size_; at += chunk_keys) {
            const std::size_t n = std::min(chunk_keys, size_ - at);
            auto c = std::make_shared<chunk>(n);
            std::memcpy(c->data(), bytes.data() + 8 * at, 8 * n);
            chunks_.push_back(std::move(c));
        }
        last_ = z;
        ++restores;
        return success();
    }
    std::vector<std::uint64_t> values() const {
        std::vector<std::uint64_t> out;
        for (const auto& c : chunks_) out.insert(out.end(), c->begin(), c->end());
        return out;
    }
    std::uint64_t restores = 0;
    mutable std::uint64_t snapshot_calls = 0;  ///< serializations on the peer's thread
    std::uint64_t chunk_copies = 0;            ///< chunks a write copied from a view

    static std::vector<std::byte> fill(std::uint64_t n) { return txn('f', n, std::nullopt); }
    static std::vector<std::byte> set(std::uint64_t k, std::uint64_t v) { return txn('s', k, v); }

private:
    chunk& writable(std::size_t index) {
        auto& c = chunks_[index];
        if (c.use_count() > 1) {
            c = std::make_shared<chunk>(*c);
            ++chunk_copies;
        }
        return *c;
    }
    static shared_bytes encode(const chunks& view, std::size_t size) {
        return shared_bytes::make(8 * size, [&](std::span<std::byte> out) {
            std::size_t at = 0;
            for (const auto& c : view) {
                const std::size_t n = std::min(c->size(), size - at);
                if (n != 0) std::memcpy(out.data() + 8 * at, c->data(), 8 * n);
                at += n;
            }
        });
    }
    static std::uint64_t get(byte_view b, std::size_t at) {
        std::uint64_t v = 0;
        std::memcpy(&v, b.data() + at, 8);
        return v;
    }
    static std::vector<std::byte> txn(char tag, std::uint64_t a, std::optional<std::uint64_t> b) {
        std::vector<std::byte> out(b ? 17 : 9);
        out[0] = static_cast<std::byte>(tag);
        std::memcpy(out.data() + 1, &a, 8);
        if (b) std::memcpy(out.data() + 9, &*b, 8);
        return out;
    }
    zxid last_;
    chunks chunks_;
    std::size_t size_ = 0;
};
static_assert(deferred_snapshot_machine<dense_kv>);

/// SNAP traffic on one ordered pair of the simulated network: the most snapshot bytes ever
/// sent and not yet delivered, the largest chunk, and how many chunks.
struct snap_meter {
    snap_meter(peer_id sender, peer_id receiver) : from{sender}, to{receiver} {}
    peer_id from, to;
    std::uint64_t in_flight = 0, max_in_flight = 0, max_chunk = 0, chunks = 0, bytes = 0;
    std::map<const std::byte*, std::uint64_t> sizes;  // frame → its chunk size

    void observe(const network_event& e) {
        if (e.from != from || e.to != to || e.frame.size() == 0) return;
        if (e.what == network_event::kind::send) {
            auto decoded = decode(e.frame.view());
            if (!decoded) return;
            const auto* s = std::get_if<wire::snap>(&decoded.value().msg);
            if (s == nullptr) return;
            sizes[e.frame.data()] = s->chunk.size();
            in_flight += s->chunk.size();
            max_in_flight = std::max(max_in_flight, in_flight);
            max_chunk = std::max<std::uint64_t>(max_chunk, s->chunk.size());
            ++chunks;
            bytes += s->chunk.size();
        } else if (e.what == network_event::kind::deliver || e.what == network_event::kind::drop) {
            if (auto it = sizes.find(e.frame.data()); it != sizes.end()) {
                in_flight -= it->second;
                sizes.erase(it);
            }
        }
    }
};

template <typename Policies = default_policies>
using kv_sim = simulator<dense_kv, Policies>;

cluster_options snapshot_cluster(std::uint64_t seed, std::uint32_t chunk, std::uint32_t window) {
    cluster_options o;
    o.seed = seed;
    o.voters = 3;
    o.peer.snapshot_every = 50;  // the leader's log is compacted: a lagging learner gets SNAP
    o.peer.snapshot_chunk_bytes = chunk;
    o.peer.snapshot_chunks_in_flight = window;
    return o;
}

template <typename Sim>
zxid propose_all(Sim& sim, peer_id leader, const std::vector<std::byte>& txn) {
    auto z = sim.propose(leader, byte_view{txn});
    REQUIRE(z.has_value());
    return z.value();
}

/// Runs until replicas 2 and 3 applied `z`.
template <typename Sim>
void await_applied(Sim& sim, zxid z) {
    REQUIRE(sim.run_until([&] { return sim.peer_of(2)->last_applied() >= z &&
                                       sim.peer_of(3)->last_applied() >= z; },
                          sim.now() + 30'000'000));
}

}  // namespace

TEST_CASE("SNAP: a million keys reach a restarted learner in bounded chunks while writes go on",
          "[snapshot]") {
    constexpr std::uint64_t keys = 1'000'000;
    constexpr std::uint32_t chunk = 256 << 10;
    constexpr std::uint32_t window = 2;
    kv_sim<> sim{snapshot_cluster(61, chunk, window)};
    snap_meter meter(3, 1);
    sim.network().set_observer([&](const network_event& e) { meter.observe(e); });
    sim.start();
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 10'000'000));

    // Replica 1 is down while the state grows to a million keys and the log is compacted.
    sim.crash(1);
    propose_all(sim, 3, dense_kv::fill(keys));
    zxid last;
    for (std::uint64_t i = 0; i < 600; ++i)  // beyond the leader's DIFF window of 500
        last = propose_all(sim, 3, dense_kv::set(i * 7919 % keys, i));
    await_applied(sim, last);
    sim.run_for(1'000'000);  // the last snapshots serialized off the peers' threads land
    REQUIRE(sim.peer_of(3)->counters().compactions > 0);

    // It comes back; writes keep flowing while its SNAP streams.
    sim.restart(1);
    std::uint64_t written = 600;
    const auto caught_up = [&] {
        return sim.peer_of(1)->established() &&
               sim.peer_of(1)->last_applied() == sim.peer_of(3)->last_applied();
    };
    const sim_time deadline = sim.now() + 120'000'000;
    while (!caught_up() || written < 700) {
        REQUIRE(sim.now() < deadline);
        if (written < 700 && sim.peer_of(3)->established()) {
            propose_all(sim, 3, dense_kv::set(written * 104729 % keys, written));
            ++written;
        }
        sim.run_for(20'000);
    }
    REQUIRE(sim.run_until([&] { return sim.peer_of(1)->last_applied() ==
                                       sim.peer_of(3)->last_applied(); },
                          sim.now() + 10'000'000));

    const auto& c = sim.peer_of(3)->counters();
    INFO("SNAP chunks " << meter.chunks << ", bytes " << meter.bytes << ", max in flight "
                        << meter.max_in_flight << ", largest chunk " << meter.max_chunk);
    CHECK(c.syncs_snap >= 1);
    CHECK(sim.at(1).machine->restores >= 1);
    CHECK(meter.bytes >= 8 * keys);                    // the whole state went, in chunks
    CHECK(meter.chunks >= 8 * keys / chunk);
    CHECK(meter.max_chunk == chunk);                   // no frame carries more than a chunk
    CHECK(meter.max_in_flight <= std::uint64_t{window} * chunk);  // flow control held
    CHECK(sim.at(1).machine->values() == sim.at(3).machine->values());
    CHECK(sim.at(1).machine->values().size() == keys);
    // Every compaction of the million keys was serialized off the peer's thread, from a
    // copy-on-write view, while writes went on and copied the chunks they touched.
    const auto& follower = sim.peer_of(2)->counters();
    CHECK(follower.compactions > 0);
    CHECK(follower.snapshots_handed_off >= follower.compactions);
    CHECK(sim.at(2).machine->snapshot_calls == 0);
    CHECK(sim.at(2).machine->chunk_copies > 0);
    // The leader's SNAP streamed its log's snapshot: it serialized nothing either.
    CHECK(sim.at(3).machine->snapshot_calls == 0);
}

namespace {

/// A leader whose stream skips a byte after the first SNAPACK: the next chunk's offset does
/// not continue the one before.
struct holey_synchronization : zab_synchronization {
    using zab_synchronization::zab_synchronization;
    void leader_on_snap_ack(learner_link& link, const wire::snap_ack& m) {
        if (m.received == link.snapshot_queued && link.snapshot_queued < link.snapshot.size())
            ++link.snapshot_queued;
        zab_synchronization::leader_on_snap_ack(link, m);
    }
};
using holey_policies = policies<fast_leader_election, zab_discovery, holey_synchronization,
                                zab_broadcast>;

}  // namespace

TEST_CASE("SNAP: a learner refuses a stream with a hole and never restores it", "[snapshot]") {
    set_log_level(log_level::error);  // the learner warns at every refused stream
    kv_sim<holey_policies> sim{snapshot_cluster(62, 4096, 1)};
    sim.start();
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 10'000'000));
    sim.crash(1);
    propose_all(sim, 3, dense_kv::fill(20'000));  // 160 KB: 40 chunks
    zxid last;
    for (std::uint64_t i = 0; i < 600; ++i) last = propose_all(sim, 3, dense_kv::set(i, i + 1));
    await_applied(sim, last);
    sim.restart(1);
    sim.run_for(20'000'000);
    CHECK(sim.peer_of(3)->counters().syncs_snap >= 2);  // it kept trying
    CHECK(sim.peer_of(1)->counters().unexpected_messages >= 2);
    CHECK(sim.at(1).machine->restores == 0);            // nothing with a hole was installed
    CHECK(sim.peer_of(1)->last_applied() < sim.peer_of(3)->last_applied());
    CHECK(!sim.peer_of(1)->established());
}

TEST_CASE("snapshot_every_bytes: the log is compacted by the bytes applied, off the peer's "
          "thread", "[snapshot]") {
    cluster_options o = snapshot_cluster(63, 1u << 20, 4);
    o.peer.snapshot_every = 0;
    o.peer.snapshot_every_bytes = 1024;
    kv_sim<> sim{o};
    sim.start();
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 10'000'000));
    // 9 + 50 × 17 = 859 bytes: below the threshold.
    propose_all(sim, 3, dense_kv::fill(100));
    zxid last;
    for (std::uint64_t i = 0; i < 50; ++i) last = propose_all(sim, 3, dense_kv::set(i, i));
    await_applied(sim, last);
    sim.run_for(1'000'000);
    for (peer_id id : {2, 3}) CHECK(sim.peer_of(id)->counters().compactions == 0);
    // 20 more: 1,199 bytes. The 60th "set" (9 + 60 × 17 = 1,029) crosses it.
    std::vector<zxid> sets;
    for (std::uint64_t i = 50; i < 70; ++i) sets.push_back(propose_all(sim, 3, dense_kv::set(i, i)));
    await_applied(sim, sets.back());
    sim.run_for(1'000'000);
    for (peer_id id : {2, 3}) {
        INFO("replica " << id);
        const auto& c = sim.peer_of(id)->counters();
        CHECK(c.compactions == 1);
        CHECK(c.snapshots_handed_off == 1);
        CHECK(sim.at(id).machine->snapshot_calls == 0);  // serialized off the peer's thread
        const auto snapshot = sim.at(id).log->snapshot();
        REQUIRE(snapshot.has_value());
        CHECK(snapshot->last_included >= sets[9]);
        CHECK(snapshot->last_included <= sets.back());
    }
}

// Issue 34 defect 1: a state machine that is no zab::system_txn_machine (the example's
// kv_store) never sees a reconfiguration, so its own last_applied() stays behind the core's
// when a reconfiguration is the last transaction applied. Its snapshots must still restore:
// at a restart, and at a learner synced by SNAP. This machine checks its label strictly,
// as kv_store does.
namespace {

template <bool Deferred>
class strict_machine {
public:
    void apply(zxid z, byte_view txn) {
        ZAB_ASSERT(z > last_, "applied out of order");
        ZAB_ASSERT(!is_system_txn(txn), "a system transaction reached a machine without apply_system");
        last_ = z;
        ++count_;
    }
    zxid last_applied() const { return last_; }
    shared_bytes snapshot() const { return encode(last_, count_); }
    deferred_snapshot snapshot_later() const
        requires Deferred
    {
        return [last = last_, count = count_] { return encode(last, count); };
    }
    result<void> restore(zxid z, byte_view bytes) {
        if (bytes.size() != 16) return make_error_code(errc::corrupt);
        std::uint64_t label = 0, count = 0;
        std::memcpy(&label, bytes.data(), 8);
        std::memcpy(&count, bytes.data() + 8, 8);
        if (zxid::from_value(label) != z) return make_error_code(errc::corrupt);  // kv_store's check
        last_ = z;
        count_ = count;
        return success();
    }
    std::uint64_t count() const { return count_; }

private:
    static shared_bytes encode(zxid last, std::uint64_t count) {
        return shared_bytes::make(16, [&](std::span<std::byte> out) {
            const std::uint64_t label = last.value();
            std::memcpy(out.data(), &label, 8);
            std::memcpy(out.data() + 8, &count, 8);
        });
    }
    zxid last_;
    std::uint64_t count_ = 0;
};
static_assert(!system_txn_machine<strict_machine<false>>);
static_assert(deferred_snapshot_machine<strict_machine<true>>);

}  // namespace

TEMPLATE_TEST_CASE("a machine that does not see reconfigurations restores its snapshots: after "
                   "a compaction at a reconfiguration, at every restart and by SNAP (issue 34 "
                   "defect 1)", "[snapshot][reconfig]", strict_machine<false>, strict_machine<true>) {
    using sim_type = simulator<TestType>;
    cluster_options o;
    o.seed = 71;
    o.joiners = 1;
    o.peer.snapshot_every = 1;  // a compaction after every applied transaction
    sim_type sim{o};
    std::map<std::pair<peer_id, request_id>, client_completion> seen;
    sim.set_completion_observer(
        [&](peer_id at, const client_completion& c) { seen.emplace(std::pair{at, c.id}, c); });
    const auto leader_of = [&]() -> peer_id {
        for (const auto& n : sim.nodes())
            if (n.peer && n.peer->state() == peer_state::leading && n.peer->established()) return n.id;
        return 0;
    };
    const auto complete = [&](peer_id at, std::optional<request_id> id) {
        REQUIRE(id);
        REQUIRE(sim.run_until([&] { return seen.count({at, *id}) != 0; }, sim.now() + 30'000'000));
        return seen.at({at, *id}).outcome;
    };
    const auto all_established = [&](std::initializer_list<peer_id> ids) {
        return sim.run_until([&] {
            for (peer_id id : ids)
                if (!sim.peer_of(id) || !sim.peer_of(id)->established()) return false;
            return true;
        }, sim.now() + 30'000'000);
    };
    sim.start();
    REQUIRE(all_established({1, 2, 3}));
    const peer_id leader = leader_of();
    const peer_id wiped = leader == 1 ? 2 : 1;
    for (int i = 0; i < 3; ++i)
        REQUIRE(complete(leader, sim.submit(leader, as_bytes("w" + std::to_string(i)))));
    std::vector<member> grown;
    for (peer_id id : {1, 2, 3, 4}) grown.push_back({id, learner_type::participant});
    const auto version = complete(leader, sim.reconfigure(leader, {grown, 0}));
    REQUIRE(version);
    // Every replica compacts with the reconfiguration as the last transaction applied.
    REQUIRE(sim.run_until([&] {
        for (peer_id id : {1, 2, 3, 4}) {
            const auto snapshot = sim.at(id).log->snapshot();
            if (!snapshot || snapshot->last_included != version.value()) return false;
        }
        return true;
    }, sim.now() + 30'000'000));
    CHECK(sim.at(leader).machine->last_applied() < version.value());
    // A whole-group restart: every replica starts from its snapshot.
    for (peer_id id : {1, 2, 3, 4}) sim.crash(id);
    for (peer_id id : {1, 2, 3, 4}) sim.restart(id);
    REQUIRE(all_established({1, 2, 3, 4}));
    for (peer_id id : {1, 2, 3, 4}) {
        INFO("replica " << id);
        CHECK(sim.peer_of(id)->last_applied() == version.value());
        CHECK(sim.at(id).machine->count() == 3);
        CHECK(sim.peer_of(id)->configuration_in_force().version() == version.value().value());
    }
    // A wiped replica is synced by SNAP from that snapshot, and restarts from it again.
    sim.crash(wiped);
    REQUIRE(sim.wipe(wiped));
    sim.restart(wiped);
    REQUIRE(all_established({wiped}));
    CHECK(sim.peer_of(wiped)->counters().transactions_applied == 0);
    CHECK(sim.at(wiped).machine->count() == 3);
    const peer_id now_leading = leader_of();
    REQUIRE(now_leading != 0);
    REQUIRE(complete(now_leading, sim.submit(now_leading, as_bytes("after"))));
    sim.crash(wiped);
    sim.restart(wiped);
    REQUIRE(all_established({wiped}));
    REQUIRE(sim.run_until([&] { return sim.at(wiped).machine->count() == 4; }, sim.now() + 30'000'000));
}

// Issue 34 defect 2: a learner synced by the log's snapshot and the history after it, more
// of it than the leader's in-memory window, reads that history from the log. A compaction
// while it streams used to take the records from under it, and the leader took the
// "compacted" read for a storage failure and stopped. Now compaction waits for the stream
// (a bounded number of periods), and a stream that still loses its history to a compaction
// is synced again, by SNAP.
TEST_CASE("a sync that reads the history from the log outlives the compactions that happen "
          "while it streams (issue 34 defect 2)", "[snapshot]") {
    const bool overdue = GENERATE(false, true);
    INFO((overdue ? "compaction overdue: the learner resyncs" : "compaction postponed"));
    cluster_options o;
    o.seed = 83;
    o.voters = 3;
    o.peer.snapshot_every = 1000;
    o.peer.sync_window_records = 64;  // the smallest window: the stream takes round trips
    o.network.delay_min = 5'000;  // of 5–10 ms a frame
    o.network.delay_max = 10'000;
    kv_sim<> sim{o};
    sim.start();
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 30'000'000));
    const peer_id lagging = 1;
    sim.crash(lagging);
    // 1,800 transactions: the leader's log snapshot is at the 1,000th, 800 records follow
    // it, and the in-memory window holds the last 500: the first 300 after the snapshot
    // stream from the log.
    std::vector<std::vector<std::byte>> txns;
    for (std::uint64_t i = 0; i < 1'800; ++i) txns.push_back(dense_kv::set(i, i));
    for (std::size_t from = 0; from < txns.size(); from += 200) {
        std::vector<byte_view> batch;
        for (std::size_t i = from; i < from + 200; ++i) batch.push_back(byte_view{txns[i]});
        REQUIRE(sim.submit_batch(3, batch));
        REQUIRE(sim.run_until([&] { return sim.peer_of(3)->last_applied().counter() >= from + 200; },
                              sim.now() + 30'000'000));
    }
    REQUIRE(sim.at(3).log->snapshot());
    sim.restart(lagging);
    const auto streaming_from_log = [&] {
        const auto& ctx = internals(*sim.peer_of(3));
        if (!ctx.leading) return false;
        for (const auto& link : ctx.leading->links)
            if (link.id == lagging && link.at == learner_link::stage::streaming_history &&
                link.history_queued < ctx.leading->committed_base)
                return true;
        return false;
    };
    REQUIRE(sim.run_until(streaming_from_log, sim.now() + 30'000'000));
    // Writes go on: enough for one compaction, or (overdue) for more than the postponement.
    const std::size_t more = overdue ? 4'300 : 300;
    for (std::uint64_t i = 0; i < more; ++i) txns.push_back(dense_kv::set(i, i + 1));
    std::vector<byte_view> batch;
    for (std::size_t i = 1'800; i < txns.size(); ++i) batch.push_back(byte_view{txns[i]});
    REQUIRE(sim.submit_batch(3, batch));
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->last_applied().counter() >= txns.size(); },
                          sim.now() + 60'000'000));
    REQUIRE(sim.run_until([&] { return sim.peer_of(lagging)->established() &&
                                       sim.peer_of(lagging)->last_applied() ==
                                           sim.peer_of(3)->last_applied(); },
                          sim.now() + 60'000'000));
    const auto& counters = sim.peer_of(3)->counters();
    CHECK_FALSE(sim.peer_of(3)->failed());
    CHECK(sim.peer_of(3)->established());
    CHECK(counters.compactions >= 2);
    if (overdue) {
        CHECK(counters.syncs_restarted >= 1);
    } else {
        CHECK(counters.compactions_postponed >= 1);
        CHECK(counters.syncs_restarted == 0);
    }
}

TEST_CASE("a restarted learner's sync is reported (DIFF or SNAP, records, bytes, ticks), and its "
          "leader sees it caught up at once, before any new write", "[snapshot]") {
    kv_sim<> sim{snapshot_cluster(7, 1u << 20, 4)};  // compaction every 50 transactions
    sim.start();
    REQUIRE(sim.run_until([&] { return sim.peer_of(3)->established(); }, 10'000'000));
    const epoch_t epoch = sim.peer_of(3)->status().durable_epochs.current;
    propose_all(sim, 3, dense_kv::fill(100));
    zxid last;
    for (std::uint64_t i = 0; i < 19; ++i) last = propose_all(sim, 3, dense_kv::set(i, i));
    await_applied(sim, last);
    CHECK(last.counter() == 20);

    // Replica 1's lag as its leader shows it, once it follows again.
    const auto lag_of_1 = [&]() -> std::optional<std::uint64_t> {
        for (const learner_status& l : sim.peer_of(3)->learners())
            if (l.id == 1 && l.stage == learner_link::stage::broadcasting) return l.lag;
        return std::nullopt;
    };
    const auto restart_1 = [&] {
        sim.restart(1);
        REQUIRE(sim.run_until([&] { return sim.peer_of(1)->established() && lag_of_1(); },
                              sim.now() + 30'000'000));
        sim.run_for(20'000);  // a few round trips (virtual µs): no write is proposed meanwhile
    };

    // 1. Restarted with nothing missing: an empty DIFF, and the leader knows at once that it
    //    holds everything (it used to count it 20 behind until the next write).
    sim.crash(1);
    restart_1();
    CHECK(lag_of_1() == std::uint64_t{0});
    auto report = sim.peer_of(1)->status().last_sync;
    REQUIRE(report.has_value());
    CHECK(report->how == sync_summary::method::diff);
    CHECK(report->leader == 3);
    CHECK(report->epoch == epoch);
    CHECK(report->records == 0);
    CHECK(report->synced_to == last);

    // 2. Ten writes missed: a DIFF of ten records of 17 bytes each.
    sim.crash(1);
    for (std::uint64_t i = 0; i < 10; ++i) last = propose_all(sim, 3, dense_kv::set(i, 100 + i));
    restart_1();
    CHECK(lag_of_1() == std::uint64_t{0});
    report = sim.peer_of(1)->status().last_sync;
    REQUIRE(report.has_value());
    CHECK(report->how == sync_summary::method::diff);
    CHECK(report->records == 10);
    CHECK(report->bytes == 10 * 17);
    CHECK(report->synced_to == last);

    // 3. Six hundred missed, beyond the leader's DIFF window of 500 and past its compactions:
    //    a SNAP of the dense state (100 keys, 800 bytes), then the history after it.
    sim.crash(1);
    for (std::uint64_t i = 0; i < 600; ++i) last = propose_all(sim, 3, dense_kv::set(i % 100, 200 + i));
    await_applied(sim, last);
    sim.run_for(1'000'000);  // the last snapshots serialized off the peers' threads land
    restart_1();
    CHECK(lag_of_1() == std::uint64_t{0});
    report = sim.peer_of(1)->status().last_sync;
    REQUIRE(report.has_value());
    CHECK(report->how == sync_summary::method::snap);
    CHECK(report->snapshot_bytes == 800);
    CHECK(report->snapshot_at <= last);
    CHECK(report->records == last.counter() - report->snapshot_at.counter());
    CHECK(report->synced_to == last);
    CHECK(sim.peer_of(1)->last_applied() == last);
}
