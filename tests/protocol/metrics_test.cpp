// The metrics hook (zab/core/metrics.hpp) under the simulator: distributions and events reach
// the sink as the protocol runs, timed by the simulator's virtual clock.
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/runtime/metrics_exposition.hpp"
#include "zab/runtime/metrics_registry.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

peer_id metrics_leader_of(sim_type& sim) {
    for (const auto& n : sim.nodes())
        if (n.peer && n.peer->state() == peer_state::leading && n.peer->established()) return n.id;
    return 0;
}

bool metrics_all_established(sim_type& sim) {
    if (metrics_leader_of(sim) == 0) return false;
    for (const auto& n : sim.nodes())
        if (n.peer && !n.peer->established()) return false;
    return true;
}

/// One registry per replica, on the simulator's virtual clock, and every event they saw.
struct sinks {
    std::vector<std::unique_ptr<metrics_registry>> registries;
    std::vector<metric_event> events;

    explicit sinks(sim_type& sim) {
        for (const auto& n : sim.nodes()) {
            auto r = std::make_unique<metrics_registry>(
                [&sim] { return static_cast<double>(sim.now()) / 1e6; });
            r->set_event_handler([this](const metric_event& e) { events.push_back(e); });
            sim.set_metrics(n.id, r.get());
            registries.push_back(std::move(r));
        }
    }
    metrics_registry& of(peer_id id) { return *registries.at(id - 1); }
    /// The last event of `kind` replica `id` reported, if any.
    const metric_event* last(peer_id id, metric_event_kind kind) const {
        for (auto it = events.rbegin(); it != events.rend(); ++it)
            if (it->self == id && it->kind == kind) return &*it;
        return nullptr;
    }
};

}  // namespace

TEST_CASE("metrics hook: role and leader events, commit and apply latency, batches, on "
          "virtual time; a new leader after a crash is reported") {
    cluster_options o;
    o.seed = 71;
    sim_type sim{o};
    sinks s{sim};
    sim.start();
    REQUIRE(sim.run_until([&] { return metrics_all_established(sim); }, 20'000'000));
    const peer_id leader = metrics_leader_of(sim);
    for (peer_id id = 1; id <= 3; ++id) {
        const metric_event* role = s.last(id, metric_event_kind::role_changed);
        REQUIRE(role != nullptr);
        CHECK(role->role == (id == leader ? peer_state::leading : peer_state::following));
        const metric_event* led = s.last(id, metric_event_kind::leader_changed);
        REQUIRE(led != nullptr);
        CHECK(led->leader == leader);
    }
    CHECK(sim.peer_of(leader)->counters().elections_won == 1);

    const auto before = sim.peer_of(leader)->counters();
    const std::uint64_t timed_before = s.of(leader).of(histogram_kind::commit_seconds).count();
    for (int i = 0; i < 10; ++i) REQUIRE(sim.submit(leader, as_bytes("write " + std::to_string(i))));
    REQUIRE(sim.run_until([&] { return sim.peer_of(leader)->counters().commits >= before.commits + 10; },
                          sim.now() + 10'000'000));
    const auto& after = sim.peer_of(leader)->counters();
    const histogram& commit = s.of(leader).of(histogram_kind::commit_seconds);
    // One commit latency per commit; each waited for fsyncs of at least 200 µs (disk_options).
    CHECK(commit.count() - timed_before == after.commits - before.commits);
    CHECK(commit.sum() >= 0.0002 * static_cast<double>(commit.count()));
    CHECK(commit.sum() < 1.0 * static_cast<double>(commit.count()));
    CHECK(commit.bucket_count(commit.bounds()) == commit.count());
    // Every transaction applied was timed (the simulated machine takes no virtual time).
    sim.run_for(1'000'000);
    for (peer_id id = 1; id <= 3; ++id) {
        CHECK(s.of(id).of(histogram_kind::apply_seconds).count() ==
              sim.peer_of(id)->counters().transactions_applied);
        CHECK(s.of(id).of(histogram_kind::append_records).sum() >= 10);  // every replica logged them
    }
    // No leader-side latency at a follower.
    for (peer_id id = 1; id <= 3; ++id)
        if (id != leader) CHECK(s.of(id).of(histogram_kind::commit_seconds).count() == 0);

    // The leader crashes: a follower reports becoming leader, the other its new leader.
    sim.crash(leader);
    REQUIRE(sim.run_until([&] { const peer_id l = metrics_leader_of(sim); return l != 0 && l != leader && metrics_all_established(sim); },
                          sim.now() + 20'000'000));
    const peer_id successor = metrics_leader_of(sim);
    const metric_event* role = s.last(successor, metric_event_kind::role_changed);
    REQUIRE(role != nullptr);
    CHECK(role->role == peer_state::leading);
    for (peer_id id = 1; id <= 3; ++id) {
        if (id == leader) continue;
        const metric_event* led = s.last(id, metric_event_kind::leader_changed);
        REQUIRE(led != nullptr);
        CHECK(led->leader == successor);
    }
    CHECK(sim.peer_of(successor)->counters().elections_won == 1);
    CHECK(sim.peer_of(successor)->counters().elections_decided == 2);
}

TEST_CASE("metrics hook: a stalled disk, its recovery and a storage failure are events") {
    cluster_options o;
    o.seed = 57;
    o.peer.disk_stall_ticks = 30;
    sim_type sim{o};
    sinks s{sim};
    sim.start();
    REQUIRE(sim.run_until([&] { return metrics_all_established(sim); }, 20'000'000));
    const peer_id leader = metrics_leader_of(sim);
    const peer_id slow = leader == 1 ? 2 : 1;
    sim.at(slow).log->set_slow(storage_op_kind::sync, 20'000'000);
    REQUIRE(sim.submit(leader, as_bytes("the follower's disk hangs")));
    REQUIRE(sim.run_until([&] { return sim.peer_of(slow)->status().disk_stalled; },
                          sim.now() + 10'000'000));
    REQUIRE(s.of(slow).events(metric_event_kind::disk_stalled) == 1);
    CHECK(s.last(slow, metric_event_kind::disk_stalled)->count >= 30);
    CHECK(s.of(slow).events(metric_event_kind::disk_recovered) == 0);
    sim.at(slow).log->set_slow(storage_op_kind::sync, 0);
    REQUIRE(sim.run_until([&] { return !sim.peer_of(slow)->status().disk_stalled; },
                          sim.now() + 40'000'000));
    CHECK(s.of(slow).events(metric_event_kind::disk_recovered) == 1);
    CHECK(s.of(leader).events(metric_event_kind::disk_stalled) == 0);

    // A failed fsync stops the replica for good, and says so once.
    sim.at(slow).log->inject(storage_fault{storage_op_kind::sync});
    REQUIRE(sim.submit(leader, as_bytes("this fsync fails at the follower")));
    REQUIRE(sim.run_until([&] { return sim.peer_of(slow)->failed(); }, sim.now() + 10'000'000));
    REQUIRE(s.of(slow).events(metric_event_kind::storage_failed) == 1);
    CHECK(s.last(slow, metric_event_kind::storage_failed)->error == std::errc::io_error);
}

TEST_CASE("metrics hook: snapshot sizes; a peer without a sink, or whose sink was removed, "
          "reports nothing") {
    cluster_options o;
    o.seed = 73;
    o.peer.snapshot_every = 5;
    sim_type sim{o};
    sinks s{sim};
    sim.set_metrics(3, nullptr);  // replica 3 runs without a sink
    sim.start();
    REQUIRE(sim.run_until([&] { return metrics_all_established(sim); }, 20'000'000));
    const peer_id leader = metrics_leader_of(sim);
    for (int i = 0; i < 12; ++i) REQUIRE(sim.submit(leader, as_bytes("x" + std::to_string(i))));
    REQUIRE(sim.run_until(
        [&] {
            for (peer_id id = 1; id <= 3; ++id)
                if (sim.peer_of(id)->counters().compactions < 2) return false;
            return true;
        },
        sim.now() + 20'000'000));
    for (peer_id id = 1; id <= 2; ++id) {
        const histogram& size = s.of(id).of(histogram_kind::snapshot_bytes);
        CHECK(size.count() == sim.peer_of(id)->counters().compactions);
        CHECK(size.sum() > 0);
    }
    const metrics_registry& none = s.of(3);
    for (std::size_t h = 0; h < histogram_kind_count; ++h)
        CHECK(none.of(static_cast<histogram_kind>(h)).count() == 0);
    for (std::size_t e = 0; e < metric_event_kind_count; ++e)
        CHECK(none.events(static_cast<metric_event_kind>(e)) == 0);

    // Removing replica 1's sink stops its reports.
    sim.set_metrics(1, nullptr);
    const std::uint64_t applied = s.of(1).of(histogram_kind::apply_seconds).count();
    REQUIRE(sim.submit(leader, as_bytes("after")));
    sim.run_for(2'000'000);
    CHECK(sim.peer_of(1)->counters().transactions_applied > applied);
    CHECK(s.of(1).of(histogram_kind::apply_seconds).count() == applied);
}

TEST_CASE("metrics_registry: fixed buckets are cumulative, +Inf counts everything") {
    histogram h{1, 2, 4};
    for (const double v : {0.5, 1.0, 1.5, 3.0, 100.0}) h.observe(v);
    CHECK(h.bounds() == 3);
    CHECK(h.bucket_count(0) == 2);  // <= 1: 0.5 and 1.0
    CHECK(h.bucket_count(1) == 3);  // <= 2
    CHECK(h.bucket_count(2) == 4);  // <= 4
    CHECK(h.bucket_count(3) == 5);  // +Inf
    CHECK(h.count() == 5);
    CHECK(h.sum() == Approx(106.0));
}

TEST_CASE("Prometheus exposition: every sample belongs to a family declared once, in the text "
          "format; the figures are the peer's, the transport's and the registry's") {
    peer_counters c;
    c.commits = 7;
    c.proposals = 9;
    c.elections_decided = 5;
    c.elections_won = 2;
    c.syncs_snap = 2;
    c.learners_dropped = 6;
    c.learners_refused = 1;
    c.learners_silent = 2;
    c.ignored[static_cast<std::size_t>(ignore_reason::out_of_stage)] = 4;
    peer_status st;
    st.role = peer_state::leading;
    st.established = true;
    st.leader = 3;
    st.durable_epochs = epochs{4, 4};
    st.outstanding_proposals = 2;
    learner_status l;
    l.id = 2;
    l.lag = 11;
    l.stage = learner_link::stage::streaming_snapshot;
    l.snapshot_bytes = 1000;
    l.snapshot_sent = 600;
    l.snapshot_acknowledged = 400;
    st.learners.push_back(l);
    asio::transport_counters t;
    t.bytes_sent = 123;
    t.rejected.duplicate_id = 1;
    metrics_registry registry{[] { return 0.0; }};
    registry.observe(histogram_kind::fsync_seconds, 0.0008);
    registry.observe(histogram_kind::fsync_seconds, 3.0);
    metric_event led;
    led.kind = metric_event_kind::leader_changed;
    registry.on_event(led);

    prometheus_text out;
    write_peer_status(out, st);
    write_peer_counters(out, c);
    write_transport_counters(out, t);
    write_registry(out, registry);
    const std::string& text = out.text();

    const std::regex sample_line{
        R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*\})? (-?[0-9.]+(e[-+][0-9]+)?|\+Inf)$)"};
    const std::regex type_line{R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)"};
    const std::regex help_line{R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^\n]+$)"};
    std::set<std::string> declared;
    std::string current, current_type;
    std::istringstream lines{text};
    std::size_t samples = 0;
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_match(line, m, help_line)) continue;
        if (std::regex_match(line, m, type_line)) {
            INFO(line);
            CHECK(declared.insert(m[1]).second);  // each family once
            current = m[1];
            current_type = m[2];
            continue;
        }
        INFO(line);
        REQUIRE(std::regex_match(line, m, sample_line));
        ++samples;
        const std::string name = m[1];
        if (current_type == "histogram")
            CHECK((name == current + "_bucket" || name == current + "_sum" || name == current + "_count"));
        else
            CHECK(name == current);  // a sample follows its own family's TYPE
    }
    CHECK(samples > 100);
    CHECK(text.back() == '\n');
    for (const char* expected : {
             "zab_commits_total 7\n", "zab_proposals_total 9\n",
             "zab_elections_total{outcome=\"won\"} 2\n", "zab_elections_total{outcome=\"lost\"} 3\n",
             "zab_syncs_total{kind=\"snap\"} 2\n",
             "zab_ignored_messages_total{reason=\"out_of_stage\"} 4\n",
             "zab_learners_dropped_total{reason=\"silent\"} 2\n",
             "zab_learners_dropped_total{reason=\"other\"} 3\n",
             "zab_role{role=\"leading\"} 1\n", "zab_role{role=\"following\"} 0\n",
             "zab_established 1\n", "zab_leader 3\n", "zab_current_epoch 4\n",
             "zab_outstanding_proposals 2\n", "zab_learner_lag{learner=\"2\"} 11\n",
             "zab_learner_sync_stage{learner=\"2\"} 3\n",
             "zab_learner_snapshot_acknowledged_bytes{learner=\"2\"} 400\n",
             "zab_transport_bytes_total{direction=\"sent\"} 123\n",
             "zab_transport_handshake_rejections_total{reason=\"duplicate_id\"} 1\n",
             "# TYPE zab_fsync_duration_seconds histogram\n",
             "zab_fsync_duration_seconds_bucket{le=\"0.0005\"} 0\n",
             "zab_fsync_duration_seconds_bucket{le=\"0.001\"} 1\n",
             "zab_fsync_duration_seconds_bucket{le=\"2.5\"} 1\n",
             "zab_fsync_duration_seconds_bucket{le=\"5\"} 2\n",
             "zab_fsync_duration_seconds_bucket{le=\"+Inf\"} 2\n",
             "zab_fsync_duration_seconds_count 2\n", "zab_fsync_duration_seconds_sum 3.0008\n",
             "zab_commit_latency_seconds_count 0\n",
             "zab_events_total{kind=\"leader_changed\"} 1\n",
             "zab_events_total{kind=\"disk_stalled\"} 0\n"}) {
        INFO(expected);
        CHECK(text.find(expected) != std::string::npos);
    }
}
