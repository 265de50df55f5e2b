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
