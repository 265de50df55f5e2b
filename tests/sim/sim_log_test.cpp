// zab::testing::sim_log — durability only after completion, completions in order, what a
// sync covers, epoch writes independent of log syncs, snapshot installs (compacted reads,
// atomic at a crash), and the crash model (kept / dropped / torn un-synced records;
// recovery cuts at the first loss); storage faults per operation kind, on sim_log and
// sim_file_log alike.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/testing/event_queue.hpp"
#include "zab/testing/random.hpp"
#include "zab/testing/sim_file_log.hpp"
#include "zab/testing/sim_log.hpp"

using zab::epochs;
using zab::log_record;
using zab::storage_op;
using zab::log_snapshot;
using zab::shared_bytes;
using zab::zxid;
using zab::testing::disk_options;
using zab::testing::event_queue;
using zab::testing::prng;
using zab::testing::sim_log;
using zab::testing::sim_time;
using zab::testing::storage_completion;

namespace {

log_record record(std::uint32_t epoch, std::uint32_t counter) {
    const std::string text = "txn " + std::to_string(epoch) + "." + std::to_string(counter);
    return {zxid{epoch, counter}, shared_bytes::copy_of(zab::as_bytes(text))};
}

std::vector<log_record> records(std::uint32_t epoch, std::uint32_t first, std::uint32_t last) {
    std::vector<log_record> out;
    for (std::uint32_t c = first; c <= last; ++c) out.push_back(record(epoch, c));
    return out;
}

std::vector<zxid> ids(const std::vector<log_record>& log) {
    std::vector<zxid> out;
    for (const auto& r : log) out.push_back(r.id);
    return out;
}

struct completion_seen {
    storage_completion completion;
    sim_time time;
};

// One disk on its own queue, recording every completion.
struct disk {
    explicit disk(std::uint64_t seed, disk_options options = {})
        : random{seed}, log{events, random, options} {
        log.set_completion_handler([this](const storage_completion& c) {
            seen.push_back({c, events.now()});
        });
    }
    void run() {
        while (events.run_next()) {}
    }
    event_queue events;
    prng random;
    sim_log log;
    std::vector<completion_seen> seen;
};

bool is_prefix(const std::vector<zxid>& prefix, const std::vector<zxid>& of) {
    return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

shared_bytes state_at(zxid z) {
    return shared_bytes::copy_of(zab::as_bytes("state at " + std::to_string(z.value())));
}

// What a replica restarted from this disk finds: the snapshot's zxid (if any) and the
// records after it.
using recovered_log = std::pair<std::optional<zxid>, std::vector<zxid>>;

recovered_log recovered(const sim_log& log) {
    const auto snapshot = log.snapshot();
    return {snapshot ? std::optional<zxid>{snapshot->last_included} : std::nullopt,
            ids(log.records())};
}

}  // namespace

TEST_CASE("sim_log: writes are visible at once, durable only after the sync completes",
          "[sim][sim_log]") {
    disk d{1};
    const auto batch = records(1, 1, 3);
    d.log.append(1, batch);
    d.log.make_durable(1);
    CHECK(ids(d.log.records()) == ids(batch));
    CHECK(d.log.last_zxid() == zxid{1, 3});
    CHECK(d.log.durable_records().empty());
    CHECK(d.seen.empty());  // never from inside the call (docs/design.md rule 2)
    CHECK(d.log.pending_syncs() == 1);

    REQUIRE(d.events.run_next());
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].completion.what == storage_completion::kind::log_durable);
    CHECK(d.seen[0].completion.op == 1);
    CHECK_FALSE(d.seen[0].completion.error);
    CHECK(d.seen[0].time >= 200);
    CHECK(d.seen[0].time <= 5000);
    CHECK(ids(d.log.durable_records()) == ids(batch));
    CHECK(d.log.durable_records()[2].txn == batch[2].txn);
    CHECK(d.log.stats().syncs_completed == 1);
}

TEST_CASE("sim_log: sync completions arrive in operation order", "[sim][sim_log]") {
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
        disk d{seed};
        for (std::uint32_t op = 1; op <= 30; ++op) {
            d.log.append(op, records(1, op, op));
            d.log.make_durable(op);
            if (op % 3 == 0) d.events.run_next();  // interleave a little
        }
        d.run();
        REQUIRE(d.seen.size() == 30);
        for (std::size_t i = 0; i < d.seen.size(); ++i) {
            CHECK(d.seen[i].completion.op == i + 1);
            if (i > 0) CHECK(d.seen[i].time >= d.seen[i - 1].time);
        }
        CHECK(d.log.durable_records().size() == 30);
    }
}

TEST_CASE("sim_log: a sync covers only the operations issued before it", "[sim][sim_log]") {
    disk d{2};
    d.log.append(1, records(1, 1, 2));
    d.log.make_durable(1);
    d.log.append(2, records(1, 3, 4));  // after the sync: not covered by it
    REQUIRE(d.events.run_next());
    CHECK(ids(d.log.durable_records()) == std::vector<zxid>{{1, 1}, {1, 2}});
    CHECK(d.log.records().size() == 4);
    d.log.make_durable(2);
    d.run();
    CHECK(d.log.durable_records().size() == 4);
}

TEST_CASE("sim_log: sync(op) covers the log operations numbered <= op", "[sim][sim_log]") {
    disk d{3};
    d.log.append(1, records(1, 1, 1));
    d.log.append(2, records(1, 2, 2));
    d.log.make_durable(1);
    d.run();
    CHECK(ids(d.log.durable_records()) == std::vector<zxid>{{1, 1}});
    d.log.make_durable(2);
    d.run();
    CHECK(d.log.durable_records().size() == 2);
}

TEST_CASE("sim_log: truncation is visible at once and durable after a sync", "[sim][sim_log]") {
    disk d{4};
    d.log.append(1, records(1, 1, 5));
    d.log.make_durable(1);
    d.run();
    d.log.truncate_after(2, zxid{1, 2});
    CHECK(d.log.last_zxid() == zxid{1, 2});
    CHECK(d.log.durable_records().size() == 5);
    d.log.append(3, records(2, 1, 1));
    d.log.make_durable(3);
    d.run();
    CHECK(ids(d.log.durable_records()) == std::vector<zxid>{{1, 1}, {1, 2}, {2, 1}});
    CHECK(d.log.stats().truncates == 1);
}

TEST_CASE("sim_log: read returns records after a zxid, at most max", "[sim][sim_log]") {
    disk d{5};
    d.log.append(1, records(1, 1, 10));
    auto all = d.log.read(zxid{}, 100);
    REQUIRE(all);
    CHECK(all.value().size() == 10);
    auto some = d.log.read(zxid{1, 4}, 3);
    REQUIRE(some);
    CHECK(ids(some.value()) == std::vector<zxid>{{1, 5}, {1, 6}, {1, 7}});
    auto none = d.log.read(zxid{1, 10}, 3);
    REQUIRE(none);
    CHECK(none.value().empty());
    CHECK(d.log.read(zxid{}, 0).value().empty());
}

TEST_CASE("sim_log snapshot: an install is visible at once, durable after the sync covering it",
          "[sim][sim_log][snapshot]") {
    disk d{21};
    d.log.append(1, records(1, 1, 5));
    d.log.make_durable(1);
    d.run();
    const auto state = state_at(zxid{1, 3});
    d.log.install_snapshot(2, zxid{1, 3}, state, {});  // below the old last zxid: 1.4, 1.5 go too
    REQUIRE(d.log.snapshot());
    CHECK(d.log.snapshot()->last_included == zxid{1, 3});
    CHECK(d.log.snapshot()->state == state);
    CHECK(d.log.records().empty());
    CHECK(d.log.last_zxid() == zxid{1, 3});
    CHECK(d.log.stats().snapshot_installs == 1);
    // Not durable yet: a crash now could still find the old log.
    CHECK_FALSE(d.log.durable_snapshot());
    CHECK(d.log.durable_records().size() == 5);
    CHECK(d.log.durable_last_zxid() == zxid{1, 5});

    d.log.make_durable(1);  // covers op 1 only, not the install
    d.run();
    CHECK_FALSE(d.log.durable_snapshot());
    CHECK(d.log.durable_records().size() == 5);

    d.log.make_durable(2);
    d.run();
    REQUIRE(d.seen.size() == 3);
    CHECK(d.seen[2].completion.what == storage_completion::kind::log_durable);
    CHECK(d.seen[2].completion.op == 2);
    REQUIRE(d.log.durable_snapshot());
    CHECK(d.log.durable_snapshot()->last_included == zxid{1, 3});
    CHECK(d.log.durable_snapshot()->state == state);
    CHECK(d.log.durable_records().empty());
    CHECK(d.log.durable_last_zxid() == zxid{1, 3});
}

TEST_CASE("sim_log compact: visible at once, durable with the next sync, lost whole at a crash "
          "before it (the records stay)",
          "[sim][sim_log][snapshot]") {
    for (const bool synced : {false, true}) {
        INFO("synced " << synced);
        disk_options lose_all;
        lose_all.crash_keep = 0;  // whatever is not synced is lost at the crash
        disk d{31, lose_all};
        d.log.append(1, records(1, 1, 5));
        d.log.make_durable(1);
        d.run();
        CHECK_FALSE(d.log.compact(zxid{1, 6}, state_at(zxid{1, 6})));  // not a record
        REQUIRE(d.log.compact(zxid{1, 3}, state_at(zxid{1, 3})));
        CHECK_FALSE(d.log.compact(zxid{1, 2}, state_at(zxid{1, 2})));  // below the snapshot
        CHECK(d.log.snapshot()->last_included == zxid{1, 3});
        CHECK(ids(d.log.records()) == std::vector<zxid>{{1, 4}, {1, 5}});
        CHECK(d.log.read(zxid{1, 2}, 10).error() == zab::errc::compacted);
        CHECK(d.log.stats().compactions == 1);
        CHECK_FALSE(d.log.durable_snapshot());
        CHECK(d.log.durable_records().size() == 5);
        if (synced) {
            d.log.make_durable(1);  // a sync of the last log op covers the compaction issued after it
            d.run();
            REQUIRE(d.log.durable_snapshot());
            CHECK(d.log.durable_snapshot()->last_included == zxid{1, 3});
        }
        d.log.crash();
        if (synced) {
            CHECK(recovered(d.log) == recovered_log{zxid{1, 3}, {{1, 4}, {1, 5}}});
        } else {
            CHECK(recovered(d.log) == recovered_log{std::nullopt, ids(records(1, 1, 5))});
            CHECK(d.log.stats().crash_reports.back().compactions_lost == 1);
        }
    }
}

TEST_CASE("sim_log snapshot: appends continue after the snapshot's zxid",
          "[sim][sim_log][snapshot]") {
    disk d{22};
    d.log.append(1, records(1, 1, 10));
    d.log.install_snapshot(2, zxid{1, 4}, state_at(zxid{1, 4}), {});
    // Above the snapshot, though below the replaced log's last zxid (1.10).
    d.log.append(3, records(1, 5, 6));
    CHECK(ids(d.log.records()) == std::vector<zxid>{{1, 5}, {1, 6}});
    CHECK(d.log.last_zxid() == zxid{1, 6});
    d.log.install_snapshot(4, zxid{2, 7}, state_at(zxid{2, 7}), {});  // a second SNAP replaces all
    d.log.append(5, records(2, 8, 9));
    d.log.make_durable(5);  // one sync covers appends, installs and appends after them, in order
    d.run();
    REQUIRE(d.log.durable_snapshot());
    CHECK(d.log.durable_snapshot()->last_included == zxid{2, 7});
    CHECK(d.log.durable_snapshot()->state == state_at(zxid{2, 7}));
    CHECK(ids(d.log.durable_records()) == std::vector<zxid>{{2, 8}, {2, 9}});
    CHECK(d.log.durable_last_zxid() == zxid{2, 9});
    CHECK(d.log.stats().snapshot_installs == 2);
}

TEST_CASE("sim_log snapshot: read below the snapshot is compacted, from it on gives records",
          "[sim][sim_log][snapshot]") {
    disk d{23};
    d.log.append(1, records(2, 1, 4));
    CHECK(d.log.read(zxid{}, 10).value().size() == 4);  // no snapshot: everything readable
    d.log.install_snapshot(2, zxid{2, 5}, state_at(zxid{2, 5}), {});
    d.log.append(3, records(2, 6, 8));

    for (const zxid below : {zxid{}, zxid{1, 9}, zxid{2, 1}, zxid{2, 4}}) {
        const auto r = d.log.read(below, 10);
        REQUIRE_FALSE(r);
        CHECK(r.error() == zab::errc::compacted);
    }
    const auto from_snapshot = d.log.read(zxid{2, 5}, 10);
    REQUIRE(from_snapshot);
    CHECK(ids(from_snapshot.value()) == std::vector<zxid>{{2, 6}, {2, 7}, {2, 8}});
    const auto middle = d.log.read(zxid{2, 6}, 1);
    REQUIRE(middle);
    CHECK(ids(middle.value()) == std::vector<zxid>{{2, 7}});
    const auto end = d.log.read(zxid{2, 8}, 10);
    REQUIRE(end);
    CHECK(end.value().empty());
    const auto beyond = d.log.read(zxid{3, 0}, 10);
    REQUIRE(beyond);
    CHECK(beyond.value().empty());
}

TEST_CASE("sim_log snapshot: truncating below the snapshot keeps it and drops every record",
          "[sim][sim_log][snapshot]") {
    disk d{24};
    d.log.install_snapshot(1, zxid{2, 5}, state_at(zxid{2, 5}), {});
    d.log.append(2, records(2, 6, 8));
    d.log.truncate_after(3, zxid{2, 6});  // above the snapshot: an ordinary truncation
    CHECK(ids(d.log.records()) == std::vector<zxid>{{2, 6}});
    d.log.truncate_after(4, zxid{1, 9});  // below it: the snapshot stays, the records go
    REQUIRE(d.log.snapshot());
    CHECK(d.log.snapshot()->last_included == zxid{2, 5});
    CHECK(d.log.records().empty());
    CHECK(d.log.last_zxid() == zxid{2, 5});
    CHECK(d.log.read(zxid{2, 5}, 10).value().empty());
    CHECK(d.log.read(zxid{1, 9}, 10).error() == zab::errc::compacted);
    d.log.append(5, records(3, 1, 1));
    d.log.make_durable(5);
    d.run();
    REQUIRE(d.log.durable_snapshot());
    CHECK(d.log.durable_snapshot()->last_included == zxid{2, 5});
    CHECK(ids(d.log.durable_records()) == std::vector<zxid>{{3, 1}});

    // Un-synced at a crash, it is applied or lost like any truncation; the snapshot survives.
    std::set<std::vector<zxid>> outcomes;
    for (std::uint64_t seed = 0; seed < 100; ++seed) {
        disk c{seed};
        c.log.install_snapshot(1, zxid{2, 5}, state_at(zxid{2, 5}), {});
        c.log.append(2, records(2, 6, 7));
        c.log.make_durable(2);
        c.run();
        c.log.truncate_after(3, zxid{1, 1});
        c.log.crash();
        REQUIRE(c.log.durable_snapshot());
        REQUIRE(c.log.durable_snapshot()->last_included == zxid{2, 5});
        outcomes.insert(ids(c.log.records()));
    }
    const std::set<std::vector<zxid>> possible = {{}, {{2, 6}, {2, 7}}};
    CHECK(outcomes == possible);
}

TEST_CASE("sim_log snapshot crash model: an un-synced install leaves the old log or the "
          "snapshot, never a mix",
          "[sim][sim_log][snapshot]") {
    std::set<recovered_log> outcomes;
    std::uint64_t applied = 0, lost = 0;
    for (std::uint64_t seed = 0; seed < 400; ++seed) {
        disk d{seed};
        d.log.append(1, records(1, 1, 5));
        d.log.make_durable(1);
        d.run();
        d.log.append(2, records(1, 6, 6));                           // un-synced old record
        d.log.install_snapshot(3, zxid{1, 3}, state_at(zxid{1, 3}), {});  // below the old tail
        d.log.append(4, records(2, 1, 2));
        d.log.make_durable(4);  // in flight at the crash: guarantees nothing
        d.log.crash();

        const auto found = recovered(d.log);
        const auto& report = d.log.stats().crash_reports.back();
        REQUIRE(report.snapshot_installs_applied + report.snapshot_installs_lost == 1);
        CHECK(d.log.durable_snapshot().has_value() == found.first.has_value());
        CHECK(ids(d.log.durable_records()) == found.second);
        if (found.first) {
            // The snapshot, whole, and only records appended after it: no old record, neither
            // at or below its zxid (a mix) nor after it (a stale tail, ZOOKEEPER-2832).
            ++applied;
            REQUIRE(*found.first == zxid{1, 3});
            CHECK(d.log.snapshot()->state == state_at(zxid{1, 3}));
            for (const zxid z : found.second) REQUIRE(z.epoch() == 2);
        } else {
            // The old log, and nothing written after the lost install.
            ++lost;
            REQUIRE(report.snapshot_installs_lost == 1);
            for (const zxid z : found.second) REQUIRE(z.epoch() == 1);
        }
        outcomes.insert(found);
    }
    const std::set<recovered_log> possible = {
        {std::nullopt, {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}}},          // 1.6 lost: cut
        {std::nullopt, {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}}},  // install lost
        {zxid{1, 3}, {}},                                                 // install applied
        {zxid{1, 3}, {{2, 1}}},
        {zxid{1, 3}, {{2, 1}, {2, 2}}},
    };
    CHECK(outcomes == possible);
    CHECK(applied > 0);
    CHECK(lost > 0);
}

TEST_CASE("sim_log snapshot crash model: an install over a durable snapshot is atomic too",
          "[sim][sim_log][snapshot]") {
    std::set<recovered_log> outcomes;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        disk d{seed};
        d.log.install_snapshot(1, zxid{1, 3}, state_at(zxid{1, 3}), {});
        d.log.append(2, records(2, 1, 1));
        d.log.make_durable(2);
        d.run();
        d.log.install_snapshot(3, zxid{3, 5}, state_at(zxid{3, 5}), {});
        d.log.crash();
        const auto found = recovered(d.log);
        REQUIRE(found.first);
        CHECK(d.log.snapshot()->state == state_at(*found.first));  // never one zxid's state
        outcomes.insert(found);                                    // under another's
    }
    const std::set<recovered_log> possible = {{zxid{1, 3}, {{2, 1}}}, {zxid{3, 5}, {}}};
    CHECK(outcomes == possible);
}

TEST_CASE("sim_log snapshot crash model: after the covering sync, the snapshot survives",
          "[sim][sim_log][snapshot]") {
    disk_options lose_all;  // every un-synced write is lost: only what is durable remains
    lose_all.crash_keep = 0;
    lose_all.crash_drop = 1;
    lose_all.crash_tear = 0;
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
        disk d{seed, seed % 2 == 0 ? disk_options{} : lose_all};
        d.log.append(1, records(1, 1, 5));
        d.log.install_snapshot(2, zxid{1, 3}, state_at(zxid{1, 3}), {});
        d.log.append(3, records(2, 1, 2));
        d.log.make_durable(3);
        d.run();
        d.log.append(4, records(2, 3, 4));  // un-synced: may or may not survive
        d.log.crash();
        REQUIRE(d.log.snapshot());
        CHECK(d.log.snapshot()->last_included == zxid{1, 3});
        CHECK(d.log.snapshot()->state == state_at(zxid{1, 3}));
        const auto found = ids(d.log.records());
        CHECK(is_prefix({{2, 1}, {2, 2}}, found));
        CHECK(is_prefix(found, {{2, 1}, {2, 2}, {2, 3}, {2, 4}}));
        if (seed % 2 == 1) CHECK(found.size() == 2);
        CHECK(d.log.last_zxid() == d.log.durable_last_zxid());
        CHECK(d.log.read(zxid{1, 2}, 10).error() == zab::errc::compacted);
    }
}

TEST_CASE("sim_log: epoch writes are visible at once, durable at their own completion",
          "[sim][sim_log]") {
    disk d{6};
    d.log.write_epochs(1, epochs{3, 2});
    CHECK(d.log.stored_epochs() == epochs{3, 2});
    CHECK(d.log.durable_epochs() == epochs{});
    d.run();
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].completion.what == storage_completion::kind::epochs_durable);
    CHECK(d.seen[0].completion.op == 1);
    CHECK(d.log.durable_epochs() == epochs{3, 2});
}

TEST_CASE("sim_log: epoch writes complete independently of earlier log syncs", "[sim][sim_log]") {
    // Over seeds, an epoch write issued after a log sync must sometimes complete first (the
    // adversarial order the concept allows) and sometimes after.
    bool epoch_first = false, log_first = false;
    for (std::uint64_t seed = 0; seed < 200 && !(epoch_first && log_first); ++seed) {
        disk d{seed};
        d.log.append(1, records(1, 1, 1));
        d.log.make_durable(1);
        d.log.write_epochs(2, epochs{1, 1});
        d.run();
        REQUIRE(d.seen.size() == 2);
        if (d.seen[0].completion.what == storage_completion::kind::epochs_durable) {
            epoch_first = true;
            CHECK(d.seen[0].completion.op == 2);
        } else {
            log_first = true;
        }
    }
    CHECK(epoch_first);
    CHECK(log_first);
}

TEST_CASE("sim_log: epoch writes complete in order among themselves", "[sim][sim_log]") {
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
        disk d{seed};
        for (std::uint32_t op = 1; op <= 10; ++op) d.log.write_epochs(op, epochs{op, op});
        d.run();
        REQUIRE(d.seen.size() == 10);
        for (std::uint32_t i = 0; i < 10; ++i) CHECK(d.seen[i].completion.op == i + 1);
        CHECK(d.log.durable_epochs() == epochs{10, 10});
    }
}

TEST_CASE("sim_log: slow_factor stretches latencies", "[sim][sim_log]") {
    disk_options slow;
    slow.slow_factor = 10.0;
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
        disk d{seed, slow};
        d.log.make_durable(1);
        d.run();
        REQUIRE(d.seen.size() == 1);
        CHECK(d.seen[0].time >= 2000);
        CHECK(d.seen[0].time <= 50000);
    }
}

TEST_CASE("sim_log: fail_next_sync delivers failed and makes nothing durable", "[sim][sim_log]") {
    disk d{7};
    const auto error = make_error_code(zab::errc::storage_failed);
    d.log.append(1, records(1, 1, 2));
    d.log.fail_next_sync(error);
    d.log.make_durable(1);
    d.run();
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].completion.what == storage_completion::kind::failed);
    CHECK(d.seen[0].completion.op == 1);
    CHECK(d.seen[0].completion.error == error);
    CHECK(d.log.durable_records().empty());
    CHECK(d.log.stats().syncs_failed == 1);
    // Only the next one: a later sync works (the peer would be in its failed state anyway).
    d.log.make_durable(2);
    d.run();
    REQUIRE(d.seen.size() == 2);
    CHECK(d.seen[1].completion.what == storage_completion::kind::log_durable);
    CHECK(d.log.durable_records().size() == 2);

    d.log.fail_next_epoch_write(error);
    d.log.write_epochs(3, epochs{5, 5});
    d.run();
    REQUIRE(d.seen.size() == 3);
    CHECK(d.seen[2].completion.what == storage_completion::kind::failed);
    CHECK(d.log.durable_epochs() == epochs{});
}

TEST_CASE("sim_log: after a crash, completions issued before it are never delivered",
          "[sim][sim_log]") {
    disk d{8};
    d.log.append(1, records(1, 1, 3));
    d.log.make_durable(1);
    d.log.write_epochs(2, epochs{1, 1});
    d.log.crash();
    d.run();
    CHECK(d.seen.empty());
    CHECK(d.events.events_run() == 0);  // cancelled, not merely ignored
    CHECK(d.log.pending_syncs() == 0);
    CHECK(d.log.stats().crash_reports.at(0).completions_discarded == 2);
    CHECK(ids(d.log.records()) == ids(d.log.durable_records()));
    CHECK(d.log.stored_epochs() == d.log.durable_epochs());

    // The restarted replica numbers its operations from 1 again; the disk works on.
    d.log.append(1, records(2, 1, 1));
    d.log.make_durable(1);
    d.run();
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].completion.op == 1);
    CHECK(d.log.durable_records().back().id == zxid{2, 1});
}

TEST_CASE("sim_log crash model: un-synced records are kept, dropped or torn; recovery is a prefix",
          "[sim][sim_log]") {
    std::uint64_t kept = 0, dropped = 0, torn = 0, unreachable = 0, runs_with_survivors = 0,
                  runs_with_nothing = 0, runs_with_all = 0;
    for (std::uint64_t seed = 0; seed < 500; ++seed) {
        disk d{seed};
        d.log.append(1, records(1, 1, 3));
        d.log.make_durable(1);
        d.run();
        const auto durable = ids(d.log.durable_records());
        d.log.append(2, records(1, 4, 6));
        d.log.append(3, records(1, 7, 8));
        d.log.make_durable(3);  // in flight at the crash: guarantees nothing
        const auto visible = ids(d.log.records());
        d.log.crash();
        const auto recovered = ids(d.log.records());
        const auto& report = d.log.stats().crash_reports.back();

        // The recovered log is the durable image plus a prefix of the un-synced writes: it
        // never holds a record that follows a dropped or torn one.
        REQUIRE(is_prefix(durable, recovered));
        REQUIRE(is_prefix(recovered, visible));
        REQUIRE(recovered.size() - durable.size() == report.records_kept);
        REQUIRE(report.records_kept + report.records_dropped + report.records_torn +
                    report.records_unreachable ==
                5);
        if (report.records_kept < 5) REQUIRE(report.records_dropped + report.records_torn > 0);
        CHECK(ids(d.log.durable_records()) == recovered);

        kept += report.records_kept;
        dropped += report.records_dropped;
        torn += report.records_torn;
        unreachable += report.records_unreachable;
        runs_with_survivors += report.records_kept > 0 ? 1 : 0;
        runs_with_nothing += report.records_kept == 0 ? 1 : 0;
        runs_with_all += report.records_kept == 5 ? 1 : 0;
    }
    CHECK(kept > 0);
    CHECK(dropped > 0);
    CHECK(torn > 0);
    CHECK(unreachable > 0);          // written whole, but behind a cut
    CHECK(runs_with_survivors > 0);  // uncommitted transactions can be resurrected
    CHECK(runs_with_nothing > 0);
    CHECK(runs_with_all > 0);
}

TEST_CASE("sim_log crash model: the weights decide the fates", "[sim][sim_log]") {
    disk_options keep_all;
    keep_all.crash_keep = 1;
    keep_all.crash_drop = 0;
    keep_all.crash_tear = 0;
    disk_options tear_all = keep_all;
    tear_all.crash_keep = 0;
    tear_all.crash_tear = 1;
    for (std::uint64_t seed = 0; seed < 10; ++seed) {
        disk keeper{seed, keep_all};
        keeper.log.append(1, records(1, 1, 4));
        keeper.log.crash();
        CHECK(keeper.log.records().size() == 4);
        CHECK(keeper.log.stats().crash_reports[0].records_kept == 4);

        disk tearer{seed, tear_all};
        tearer.log.append(1, records(1, 1, 4));
        tearer.log.write_epochs(2, epochs{1, 1});
        tearer.log.crash();
        CHECK(tearer.log.records().empty());
        CHECK(tearer.log.stats().crash_reports[0].records_torn == 4);
        CHECK(tearer.log.durable_epochs() == epochs{});  // a torn temp file is never renamed
    }
}

TEST_CASE("sim_log crash model: an un-synced truncation is applied or lost, never reordered",
          "[sim][sim_log]") {
    std::set<std::vector<zxid>> outcomes;
    for (std::uint64_t seed = 0; seed < 300; ++seed) {
        disk d{seed};
        d.log.append(1, records(1, 1, 5));
        d.log.make_durable(1);
        d.run();
        d.log.truncate_after(2, zxid{1, 2});
        d.log.append(3, records(2, 1, 2));
        d.log.crash();
        outcomes.insert(ids(d.log.records()));
    }
    const std::set<std::vector<zxid>> possible = {
        {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}},  // truncation lost: nothing after it survives
        {{1, 1}, {1, 2}},                          // truncation applied, appends lost
        {{1, 1}, {1, 2}, {2, 1}},
        {{1, 1}, {1, 2}, {2, 1}, {2, 2}},
    };
    CHECK(outcomes == possible);
}

TEST_CASE("sim_log crash model: a pending epoch write lands whole or not at all",
          "[sim][sim_log]") {
    std::set<std::pair<std::uint32_t, std::uint32_t>> outcomes;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        disk d{seed};
        d.log.write_epochs(1, epochs{1, 1});
        d.run();
        d.log.write_epochs(2, epochs{2, 1});
        d.log.write_epochs(3, epochs{2, 2});
        d.log.crash();
        const auto e = d.log.durable_epochs();
        CHECK(d.log.stored_epochs() == e);
        outcomes.insert({e.accepted, e.current});
    }
    const std::set<std::pair<std::uint32_t, std::uint32_t>> possible = {{1, 1}, {2, 1}, {2, 2}};
    CHECK(outcomes == possible);
}

TEST_CASE("sim_log: one seed, one history", "[sim][sim_log]") {
    auto history = [](std::uint64_t seed) {
        disk d{seed};
        std::vector<std::uint64_t> out;
        for (std::uint32_t op = 1; op <= 20; ++op) {
            d.log.append(op, records(1, op, op));
            if (op % 2 == 0) d.log.make_durable(op);
            if (op % 5 == 0) d.log.write_epochs(op, epochs{op, op});
            if (op == 13) d.log.crash();
            d.events.run_next();
        }
        d.run();
        for (const auto& s : d.seen) {
            out.push_back(s.time);
            out.push_back(s.completion.op);
        }
        for (const auto& r : d.log.durable_records()) out.push_back(r.id.value());
        return out;
    };
    CHECK(history(11) == history(11));
    CHECK(history(11) != history(12));
}

TEST_CASE("sim_log snapshot crash model: a snapshot installed with its history is one operation",
          "[sim][sim_log][snapshot]") {
    // The old log is <1,1>..<1,6>; a SNAP at <0,0> brings the history <1,1>, <1,2>, <2,1>
    // after it. A crash before the sync keeps the old log or the whole new one — never the
    // snapshot with only part of its history (§11.1).
    std::set<recovered_log> outcomes;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
        disk d{seed};
        d.log.append(1, records(1, 1, 6));
        d.log.make_durable(1);
        d.run();
        std::vector<log_record> history = records(1, 1, 2);
        history.push_back(records(2, 1, 1).front());
        d.log.install_snapshot(2, zxid{}, state_at(zxid{}), history);
        CHECK(d.log.last_zxid() == zxid(2, 1));
        CHECK(ids(d.log.records()) == ids(history));
        d.log.crash();
        outcomes.insert(recovered(d.log));
    }
    const std::set<recovered_log> possible = {
        {std::nullopt, {{1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}}},
        {zxid{}, {{1, 1}, {1, 2}, {2, 1}}}};
    CHECK(outcomes == possible);
}

TEST_CASE("sim_log: epoch_latency_factor orders epoch writes against log syncs",
          "[sim][sim_log]") {
    // Far faster: the epoch write issued after the sync is durable first; far slower: last.
    for (const double factor : {0.0, 100.0}) {
        disk_options o;
        o.epoch_latency_factor = factor;
        disk d{7, o};
        d.log.append(1, records(1, 1, 1));
        d.log.make_durable(1);
        d.log.write_epochs(2, epochs{1, 1});
        d.run();
        REQUIRE(d.seen.size() == 2);
        const auto first = factor == 0.0 ? storage_completion::kind::epochs_durable
                                         : storage_completion::kind::log_durable;
        CHECK(d.seen[0].completion.what == first);
    }
}

TEST_CASE("sim_log: a stall delays a completion by stall_latency", "[sim][sim_log]") {
    disk_options o;
    o.sync_latency_min = o.sync_latency_max = 100;
    o.stall_probability = 1.0;
    o.stall_latency = 50'000;
    disk d{8, o};
    d.log.append(1, records(1, 1, 1));
    d.log.make_durable(1);
    d.run();
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].time == 50'100);
}

TEST_CASE("sim_log: a lying disk reports a sync durable and loses the writes at a crash",
          "[sim][sim_log]") {
    disk_options o;
    o.lie_probability = 1.0;
    o.crash_keep = 0;  // every un-synced write is lost at the crash
    o.crash_drop = 1;
    o.crash_tear = 0;
    disk d{9, o};
    d.log.append(1, records(1, 1, 3));
    d.log.make_durable(1);
    d.run();
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].completion.what == storage_completion::kind::log_durable);
    CHECK(d.log.stats().syncs_lied == 1);
    CHECK(d.log.durable_records().empty());  // the truth: nothing reached the platter
    d.log.crash();
    CHECK(d.log.records().empty());
}

// --- storage faults: one API on sim_log and sim_file_log ----------------------------------

namespace {
using zab::testing::sim_file_log;
using zab::testing::storage_event;
using zab::testing::storage_fault;
using zab::testing::storage_fault_mode;
using zab::testing::storage_op_kind;

template <typename Log>
struct any_disk {
    explicit any_disk(std::uint64_t seed, disk_options options = {})
        : random{seed}, log{events, random, options} {
        log.set_completion_handler(
            [this](const storage_completion& c) { seen.push_back({c, events.now()}); });
    }
    void run() {
        while (events.run_next()) {}
    }
    event_queue events;
    prng random;
    Log log;
    std::vector<completion_seen> seen;
};

disk_options fixed_latency() {
    disk_options o;
    o.sync_latency_min = o.sync_latency_max = 1'000;
    return o;
}
}  // namespace

TEMPLATE_TEST_CASE("storage faults: a terminal append fault fails the sync that covers it",
                   "[sim][sim_log][storage_faults]", sim_log, sim_file_log) {
    any_disk<TestType> d{8, fixed_latency()};
    const auto error = std::make_error_code(std::errc::no_space_on_device);
    d.log.inject({storage_op_kind::append, storage_fault_mode::terminal, 1, error});
    d.log.append(1, records(1, 1, 2));
    d.log.make_durable(1);
    d.run();
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].completion.what == storage_completion::kind::failed);
    // sim_log reports the fault's error; file_log its own (errc::storage_failed).
    if constexpr (std::is_same_v<TestType, sim_log>) CHECK(d.seen[0].completion.error == error);
    CHECK(d.log.durable_records().empty());
    CHECK(d.log.fault_stats().terminal[0] == 1);
}

TEMPLATE_TEST_CASE("storage faults: each kind fails terminally, until healed when times is 0",
                   "[sim][sim_log][storage_faults]", sim_log, sim_file_log) {
    const auto kind = GENERATE(storage_op_kind::append, storage_op_kind::truncate,
                               storage_op_kind::install_snapshot, storage_op_kind::sync,
                               storage_op_kind::epoch_write);
    CAPTURE(to_string(kind));
    any_disk<TestType> d{9, fixed_latency()};
    d.log.inject({kind, storage_fault_mode::terminal, 0});
    // Every round issues one operation of each kind and a sync: the faulty kind fails it.
    storage_op op = 0;
    auto round = [&](std::uint32_t epoch) {
        d.seen.clear();
        d.log.write_epochs(++op, epochs{epoch, epoch});  // first: no record above acceptedEpoch
        d.log.append(++op, records(epoch, 1, 2));
        d.log.truncate_after(++op, zxid{epoch, 1});
        d.log.install_snapshot(++op, zxid{epoch, 1}, state_at(zxid{epoch, 1}), records(epoch, 2, 2));
        d.log.make_durable(op);
        d.run();
        std::size_t failed = 0;
        for (const auto& s : d.seen) failed += s.completion.what == storage_completion::kind::failed;
        return failed;
    };
    CHECK(round(1) >= 1);
    CHECK(round(2) >= 1);  // until healed
    d.log.heal_storage_faults();
    // file_log's failed state lasts until it is opened again (a restart), so both restart.
    d.log.crash();
    CHECK(round(3) == 0);
    CHECK(d.log.durable_epochs() == epochs{3, 3});
}

TEMPLATE_TEST_CASE("storage faults: a transient fault is retried by the log layer: the "
                   "completion comes retry_delay late and succeeds",
                   "[sim][sim_log][storage_faults]", sim_log, sim_file_log) {
    const auto kind = GENERATE(storage_op_kind::append, storage_op_kind::sync,
                               storage_op_kind::epoch_write);
    CAPTURE(to_string(kind));
    auto run = [&](bool faulty) {
        any_disk<TestType> d{10, fixed_latency()};
        if (faulty) d.log.inject({kind, storage_fault_mode::transient, 1, {}, 7'000});
        if (kind == storage_op_kind::epoch_write) d.log.write_epochs(1, epochs{2, 2});
        else {
            d.log.append(1, records(1, 1, 3));
            d.log.make_durable(1);
        }
        d.run();
        REQUIRE(d.seen.size() == 1);
        CHECK(d.seen[0].completion.what != storage_completion::kind::failed);
        CHECK(d.log.durable_records().size() == (kind == storage_op_kind::epoch_write ? 0u : 3u));
        return d.seen[0].time;
    };
    const sim_time plain = run(false);
    CHECK(run(true) == plain + 7'000);
}

TEMPLATE_TEST_CASE("storage faults: set_slow delays the completions covering that kind only",
                   "[sim][sim_log][storage_faults]", sim_log, sim_file_log) {
    any_disk<TestType> d{11, fixed_latency()};
    d.log.set_slow(storage_op_kind::truncate, 40'000);
    d.log.append(1, records(1, 1, 3));
    d.log.make_durable(1);
    d.run();
    REQUIRE(d.seen.size() == 1);
    CHECK(d.seen[0].time == 1'000);  // no truncation covered
    const sim_time start = d.events.now();
    d.log.truncate_after(2, zxid{1, 1});
    d.log.make_durable(2);
    d.run();
    REQUIRE(d.seen.size() == 2);
    CHECK(d.seen[1].time - start == 41'000);
    CHECK(d.log.fault_stats().slowed[1] == 1);
}

TEMPLATE_TEST_CASE("storage faults: the operation observer sees every operation issued and "
                   "completed, with what a sync made durable",
                   "[sim][sim_log][storage_faults]", sim_log, sim_file_log) {
    any_disk<TestType> d{12, fixed_latency()};
    std::vector<storage_event> events;
    d.log.set_operation_observer([&](const storage_event& e) { events.push_back(e); });
    d.log.append(1, records(1, 1, 3));
    d.log.truncate_after(2, zxid{1, 2});
    d.log.make_durable(2);
    d.run();
    d.log.write_epochs(3, epochs{4, 1});
    d.run();
    REQUIRE(events.size() == 6);
    using phase = storage_event::phase;
    CHECK((events[0].kind == storage_op_kind::append && events[0].at == phase::issued));
    CHECK((events[1].kind == storage_op_kind::truncate && events[1].at == phase::issued));
    CHECK((events[2].kind == storage_op_kind::sync && events[2].at == phase::issued));
    CHECK((events[3].kind == storage_op_kind::sync && events[3].at == phase::completed));
    CHECK(events[3].covered == 0b11);  // append and truncate
    CHECK((events[4].kind == storage_op_kind::epoch_write && events[4].value == epochs{4, 1} &&
           events[4].previous == epochs{}));
    CHECK((events[5].at == phase::completed && events[5].previous == epochs{}));
}

// --- kill -9: the page cache survives, and the open makes it durable (issue 34, defect 3) --

TEMPLATE_TEST_CASE("kill: synced records stay, un-synced ones survive as a prefix that the "
                   "recovery makes durable, and nothing pending completes",
                   "[sim][sim_log][kill]", sim_log, sim_file_log) {
    std::size_t kept_some = 0, lost_some = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        CAPTURE(seed);
        any_disk<TestType> d{seed, fixed_latency()};
        d.log.write_epochs(1, epochs{1, 1});
        d.log.append(2, records(1, 1, 5));
        d.log.make_durable(2);
        d.run();
        REQUIRE(d.log.durable_last_zxid() == zxid{1, 5});
        // Written, a sync issued, the process killed before it completes.
        d.log.append(3, records(1, 6, 12));
        d.log.make_durable(3);
        d.seen.clear();
        d.log.kill();
        d.run();
        CHECK(d.seen.empty());  // completions of the dead process never arrive
        const zxid last = d.log.last_zxid();
        REQUIRE(last >= zxid{1, 5});
        REQUIRE(last <= zxid{1, 12});
        // What the recovery vouches for is durable: a power loss now keeps all of it.
        CHECK(d.log.durable_last_zxid() == last);
        CHECK(d.log.durable_epochs() == epochs{1, 1});
        d.log.crash();
        CHECK(d.log.last_zxid() == last);
        if (last > zxid{1, 5}) ++kept_some;
        if (last < zxid{1, 12}) ++lost_some;
    }
    // sim_file_log: a job killed before its first write leaves nothing; after its writes,
    // everything (the job writes them in one step here). sim_log: any prefix.
    CHECK(kept_some > 0);
    CHECK(lost_some > 0);
}
