// A log that reads its tail by position and knows where its system transactions are
// (zab::tail_readable_log, zab::system_txn_indexed_log: memory_log, file_log) makes a peer
// start and lead exactly as a log without them, which the peer reads whole instead: the same
// membership recovered (§9), the same committed window and base (§5.1), the same read error.
#include <optional>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include "manual_peer.hpp"
#include "zab/core/peer.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/storage/memory_log.hpp"
#include "zab/testing/peer_internals.hpp"
#include "zab/testing/recording_state_machine.hpp"

using namespace zab;
using namespace zab::test;

namespace {

/// A memory_log seen through the members of `log_store` alone (no optional capability).
struct plain_log {
    memory_log inner;
    void append(storage_op op, std::span<const log_record> rs) { inner.append(op, rs); }
    void truncate_after(storage_op op, zxid z) { inner.truncate_after(op, z); }
    void install_snapshot(storage_op op, zxid z, const shared_bytes& state,
                          std::span<const log_record> rs) {
        inner.install_snapshot(op, z, state, rs);
    }
    void make_durable(storage_op op) { inner.make_durable(op); }
    void write_epochs(storage_op op, epochs e) { inner.write_epochs(op, e); }
    zxid last_zxid() const { return inner.last_zxid(); }
    epochs stored_epochs() const { return inner.stored_epochs(); }
    std::optional<log_snapshot> snapshot() const { return inner.snapshot(); }
    result<std::vector<log_record>> read(zxid after, std::size_t max) const {
        return inner.read(after, max);
    }
};
static_assert(!tail_readable_log<plain_log> && !system_txn_indexed_log<plain_log>);
static_assert(tail_readable_log<memory_log> && system_txn_indexed_log<memory_log>);

template <typename Log>
using fixed_peer =
    peer<recording_transport, Log, testing::recording_state_machine, policies<fixed_leader_election>>;

/// `count` records of epoch 1 and then epoch 2, with a reconfiguration in each epoch: the
/// first committed at start (a later epoch's record follows it), the second pending.
log_image long_history(std::uint32_t count) {
    const auto reconfig = [](std::vector<member> members) {
        return encode_reconfig(reconfig_request{std::move(members), std::nullopt});
    };
    const member one{1, learner_type::participant}, two{2, learner_type::participant},
        three{3, learner_type::participant};
    log_image image;
    for (std::uint32_t c = 1; c <= count; ++c) {
        shared_bytes txn = shared_bytes::copy_of(as_bytes("txn"));
        if (c == count / 3) txn = reconfig({one, two, three, member{4, learner_type::observer}});
        image.records.push_back({zxid{1, c}, txn});
    }
    for (std::uint32_t c = 1; c <= count; ++c) {
        shared_bytes txn = shared_bytes::copy_of(as_bytes("txn"));
        if (c == count / 2) txn = reconfig({one, two, three});
        image.records.push_back({zxid{2, c}, txn});
    }
    return image;
}

struct started {
    std::uint64_t version = 0;
    std::vector<std::uint64_t> pending;
    std::vector<zxid> window;
    zxid base;
};

template <typename Log>
started start_leading(Log& log) {
    options opts;
    opts.fixed_leader = 1;
    recording_transport transport;
    testing::recording_state_machine machine;
    auto created = fixed_peer<Log>::create(1, voters(3), opts, transport, log, machine);
    REQUIRE(created.has_value());
    auto& p = *created.value();
    started s;
    const peer_context& ctx = testing::peer_internals::of(p);
    s.version = ctx.config().version();
    for (const auto& c : ctx.pending_configs()) s.pending.push_back(c.version());
    p.start();
    REQUIRE(p.state() == peer_state::leading);
    for (const auto& r : ctx.leading->committed) s.window.push_back(r.id);
    s.base = ctx.leading->committed_base;
    return s;
}

}  // namespace

TEST_CASE("a tail-readable, system-indexed log starts and leads as one read whole") {
    for (const std::uint32_t count : {3u, 200u, 250u, 251u, 1000u}) {
        INFO(count << " records per epoch");
        memory_log capable{long_history(count), epochs{2, 2}};
        plain_log plain{memory_log{long_history(count), epochs{2, 2}}};
        const started a = start_leading(capable);
        const started b = start_leading(plain);
        CHECK(a.version == b.version);
        CHECK(a.version == zxid(1, count / 3).value());  // the first one, committed
        CHECK(a.pending == b.pending);
        CHECK(a.pending == std::vector<std::uint64_t>{zxid(2, count / 2).value()});
        CHECK(a.window == b.window);
        CHECK(a.base == b.base);
        CHECK(a.window.size() == std::min<std::size_t>(2 * count, leader_state::committed_window_max));
        CHECK(a.window.back() == zxid(2, count));
    }
}

TEST_CASE("a leader's window after a compaction starts above the snapshot, as when read whole") {
    memory_log capable{long_history(300), epochs{2, 2}};
    plain_log plain{memory_log{long_history(300), epochs{2, 2}}};
    const shared_bytes state = testing::recording_state_machine{}.snapshot();
    REQUIRE(capable.compact(zxid{2, 100}, state));
    REQUIRE(plain.inner.compact(zxid{2, 100}, state));
    const started a = start_leading(capable);
    const started b = start_leading(plain);
    CHECK(a.window == b.window);
    CHECK(a.base == b.base);
    CHECK(a.base == zxid(2, 100));
    CHECK(a.window.front() == zxid(2, 101));
    CHECK(a.pending == b.pending);
    CHECK(a.version == b.version);
}
