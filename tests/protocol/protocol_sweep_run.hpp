// tests/protocol/protocol_sweep_run.hpp — one seed of the whole-protocol fault sweep.
//
// Shared by the sweep program (protocol_sweep.cpp, the real core) and the negative tests
// (broken_variants_test.cpp, deliberately broken variants of it): the same cluster, faults,
// proposals and §10 checks, with the state machine, the phase policies and the disk's lies
// as parameters.
//
// A seed draws a cluster (3 or 5 voters, sometimes an observer), a network, a disk (slow,
// stalling, epoch writes far faster or slower than log syncs) and a fault mix
// (sweep_faults.hpp), plus crashes armed at the four points of a learner's NEWLEADER
// handling; with sweep_variant::extended_faults (the sweep program's default) also the
// network and storage faults of fault_set::all and crashes armed at the other named crash
// points (crash_point: epoch writes, ACKEPOCH, TRUNC, snapshot install, proposal appended
// and acknowledged, COMMIT sent). Every PROPOSAL, ACK, COMMIT and promise is fed to the §10 invariant checker as
// it happens (protocol_observer.hpp). Then the faults stop, crashed replicas restart, and
// within a bound computed from the options a leader must be established with every replica
// and a new proposal applied everywhere.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sweep_faults.hpp"
#include "sweep_main.hpp"
#include "zab/testing/peer_internals.hpp"
#include "zab/testing/client_checker.hpp"
#include "zab/testing/election_checker.hpp"
#include "zab/testing/protocol_observer.hpp"
#include "zab/testing/simulator.hpp"

namespace zab::test {

/// What the sweep counts over all its seeds (its summary line).
struct protocol_totals {
    fault_counts faults;
    std::uint64_t runs = 0, events = 0, elections = 0, diffs = 0, truncs = 0, snaps = 0,
                  compactions = 0, snapshot_chunks = 0,
                  proposals = 0, commits = 0, determinism_checks = 0, failures = 0,
                  invariant_checks = 0;
    // The client path: writes submitted on any replica and their outcomes, syncs.
    std::uint64_t client_writes = 0, writes_ok = 0, writes_refused = 0, writes_unknown = 0,
                  client_syncs = 0, syncs_ok = 0;
    // Leadership transfers asked for, handed over, given up (the target did not catch up),
    // and HANDOVERs learners followed.
    std::uint64_t transfers = 0, handed_over = 0, transfers_timed_out = 0, handovers_followed = 0;
    // Reconfigurations (§9): asked, committed by kind of change, refused by reason, and what
    // they led to: leaders that handed over because a change left them without a vote,
    // replicas removed, crashes while a change was proposed and not committed.
    std::uint64_t reconfigs = 0, reconfigs_committed = 0, reconfigs_unknown = 0;
    std::array<std::uint64_t, 7> reconfig_kinds{};  // added voter, added observer, removed,
                                                    // type flipped, replaced, added learner
                                                    // (promote), weights or groups redrawn
    std::uint64_t learners_promoted = 0;
    std::uint64_t disk_stalls = 0;  ///< disk-stall fencing acting (§6.5)
    /// Lease reads (§7.1): lease syncs asked by clients, and at the leaders, answered under
    /// the lease or by a quorum round instead.
    std::uint64_t lease_syncs = 0, lease_served = 0, lease_fallbacks = 0;
    /// Batched writes: submit_batch calls, and PROPOSALS frames the leaders made of them.
    std::uint64_t batch_calls = 0, proposal_batches = 0;
    std::uint64_t refused_in_progress = 0, refused_version = 0, refused_no_quorum = 0,
                  refused_other = 0;
    std::uint64_t leaving_handoffs = 0, removed_replicas = 0, crashes_in_reconfig = 0;
    std::array<std::uint64_t, testing::newleader_point_count> newleader_crashes{};
    /// Crashes fired at each crash_point (the first four are newleader_crashes' again).
    std::array<std::uint64_t, testing::crash_point_count> point_crashes{};
    // What the extended faults did: frames a break or a delay acted on, storage faults that
    // fired (per mode) and completions slowed.
    std::uint64_t frames_broken = 0, frames_delayed = 0, storage_terminal_fired = 0,
                  storage_transient_fired = 0, storage_slowed = 0;
    testing::sim_time worst_recovery = 0, bound = 0;
    /// The combination sweep (sweep_variant::combination): seeds in which each combination
    /// of features met (see `coverage_names`), and the write storms that made learners lag.
    std::array<std::uint64_t, 10> coverage{};
    std::uint64_t write_storms = 0, storm_writes = 0;

    std::uint64_t newleader_crash_total() const {
        std::uint64_t sum = 0;
        for (auto c : newleader_crashes) sum += c;
        return sum;
    }
};

/// What the combination sweep counts: seeds in which, at least once, ...
inline constexpr std::array<const char*, 10> coverage_names{
    "compacted during a sync stream",      // a leader compacted while a learner streamed
    "sync stream read from the log",       // history older than the committed window
    "SNAP after a reconfiguration",        // a SNAP once a reconfiguration committed
    "compaction after a reconfiguration",  // a log compacted once a reconfiguration committed
    "restart after reconfig+compaction",   // a replica restarted on a compacted log, reconfigured
    "lease read under clock faults",       // a lease sync served while clocks drift and jump
    "batch during a sync",                 // a PROPOSALS batch while a learner synced
    "disk stall fenced",                   // disk-stall fencing acted (§6.5)
    "storm: learner lagged past the window",  // a write storm left a learner > 500 behind
    "kill, restart, then power loss",      // killed with un-synced data, restarted, power cut
};

/// How a seed departs from the plain sweep (the negative tests' knobs).
struct sweep_variant {
    double disk_lie_probability = 0.0;  ///< disk_options::lie_probability
    bool check_liveness = true;         ///< a broken variant may also lose liveness
    bool stop_at_first_violation = false;  ///< end the fault phase once anything fired
    bool keep_going = false;  ///< (negative tests) run the whole seed even after a violation
    /// Aim every armed crash at this point of NEWLEADER handling (a regression's interleaving)
    /// instead of a random one.
    std::optional<testing::newleader_point> crash_point;
    /// options::test_hooks::initial_counter: every epoch starts this close to counter exhaustion (§1).
    std::uint32_t initial_counter = 0;
    /// options::snapshot_every: logs compacted as replicas apply.
    std::uint64_t snapshot_every = 0;
    /// options::snapshot_chunk_bytes (0: the default), with 1 + seed % 3 chunks in flight:
    /// small chunks make every SNAP a stream under the faults.
    std::uint32_t snapshot_chunk_bytes = 0;
    /// The fault_set::all mix (slow links, one-way stalls, frame faults by message kind,
    /// storage failures and slowness) and crashes at every crash_point, not only NEWLEADER's.
    /// Off by default: the negative tests' seeds replay as they were written.
    bool extended_faults = false;
    /// Leadership transfers (docs/protocol.md §6.4) among the faults: now and then the
    /// established leader is asked to hand over, to a random voter or to the best one. Drawn
    /// from a stream of their own, so the other draws of a seed stay as they were. Off by
    /// default, like extended_faults.
    bool leadership_transfers = false;
    /// Membership changes (docs/protocol.md §9) among the faults: up to two replicas start
    /// outside the configuration as joiners, and now and then a replica asks for a change —
    /// add a joiner as voter or observer, remove a member, flip one's type, replace a voter
    /// by a joiner, a compare-and-set on a stale version, two changes at once. Drawn from a
    /// stream of their own. Off by default, like leadership_transfers.
    bool reconfigurations = false;
    /// Lease reads (docs/protocol.md §7.1) on every peer with the promise at sync_limit and
    /// the drift bound of clock_faults; lease syncs among the client requests, checked like
    /// syncs; clock_faults among the faults. Drawn from a stream of their own.
    bool lease_reads = false;
    /// Half the client writes submitted several at once (peer::submit_batch), and a third
    /// of the seeds with options::max_batch_bytes small enough to split a batch. Drawn
    /// from a stream of their own.
    bool batches = false;
    /// (negative tests) one rule of §9 removed from the core (options::test_hooks).
    options::test_hooks::reconfig_rule broken_reconfig = options::test_hooks::reconfig_rule::none;
    /// The combination sweep: every feature above at once (the caller sets their flags),
    /// with compaction drawn per seed (every 3–12 transactions, or just past the committed
    /// window, 520–800), SNAPs streamed in small chunks, and write storms — a learner
    /// crashed or cut off while the leader commits more than the committed window (500),
    /// then brought back while writes go on — so that syncs stream from the log while the
    /// log compacts. Counts `coverage_names` per seed. Drawn from a stream of its own.
    bool combination = false;
    /// Kill, then power loss (kill_faults, sweep_faults.hpp) among the faults: a replica
    /// killed with its page cache kept, restarted, and later its power cut. Drawn from a
    /// stream of its own. Off by default, like leadership_transfers.
    bool kills = false;
    /// How the sweep's transaction texts become transactions for the machine under test
    /// (the kv example's commands, say); null: the text itself.
    std::string (*encode_txn)(std::string_view text) = nullptr;
};

/// One seed's outcome: the sweep's verdict plus which §10 properties fired.
struct protocol_seed_result : seed_result {
    std::set<testing::property> fired;
    std::string report;
};

/// After the faults: reconnects, an election (with a possible init_limit wait for a learner
/// that chose a leader who did not lead), discovery and sync within init_limit, and a commit.
/// `disk_hang`: the longest a disk write issued before the heal may still take after it.
inline testing::sim_time recovery_bound(const testing::cluster_options& o,
                                        testing::sim_time disk_hang = 0) {
    const testing::sim_time round =
        o.network.reconnect_delay_max + o.network.disconnect_detect_delay +
        20 * o.network.delay_max +
        (3 * o.peer.finalize_wait_ticks + 2 * o.peer.notification_timeout_min_ticks + 4) *
            o.tick_us;
    const double slowest = std::max(1.0, o.disk.epoch_latency_factor);
    const auto disk = static_cast<testing::sim_time>(
        8 * (static_cast<double>(o.disk.sync_latency_max) * o.disk.slow_factor * slowest +
             static_cast<double>(o.disk.stall_latency)));
    return 3 * (round + o.peer.init_limit_ticks * o.tick_us) +
           2 * o.peer.sync_limit_ticks * o.tick_us + disk + disk_hang;
}

/// " config V [voters …]" and each pending configuration, once reconfigured (§9); "" before.
template <typename Peer>
std::string describe_membership(const Peer& p) {
    if (p.configuration_in_force().version() == 0 && p.pending_configurations().empty()) return {};
    auto one = [](const configuration& c) {
        return fmt::format("{} voters [{}]", zxid::from_value(c.version()), fmt::join(c.voters(), " "));
    };
    std::string out = " config " + one(p.configuration_in_force());
    for (const auto& c : p.pending_configurations()) out += ", pending " + one(c);
    if (p.status().removed) out += ", removed";
    return out;
}

template <typename Simulator>
peer_id established_leader(Simulator& sim) {
    for (const auto& n : sim.nodes())
        if (n.peer && n.peer->state() == peer_state::leading && n.peer->established()) return n.id;
    return 0;
}

template <typename StateMachine = testing::recording_state_machine,
          typename Policies = default_policies, typename Log = testing::sim_log>
protocol_seed_result run_protocol_seed(std::uint64_t seed, protocol_totals& t, bool trace,
                                       const sweep_variant& variant = {}) {
    using namespace zab::testing;
    using sim_type = simulator<StateMachine, Policies, Log>;
    prng draw{seed ^ 0x70c01ull};
    cluster_options o;
    o.seed = seed;
    o.voters = draw.chance(0.5) ? 3 : 5;
    o.observers = draw.chance(0.3) ? 1 : 0;
    o.peer.init_limit_ticks = 20;
    o.peer.sync_limit_ticks = 10;
    // Disk-stall fencing (§6.5) at 1.5 s: above every latency but the hung disk's.
    o.peer.disk_stall_ticks = 15;
    o.network.delay_min = draw.between(50, 500);
    o.network.delay_max = o.network.delay_min + draw.between(0, 10'000);
    o.network.reconnect_delay_max = draw.between(o.network.reconnect_delay_min, 100'000);
    o.disk.sync_latency_max = draw.between(o.disk.sync_latency_min, 20'000);
    if (draw.chance(0.2)) o.disk.slow_factor = 10.0;  // a slow disk
    // Independent durable operations in an adversarial order (§11.8): epoch writes far
    // faster, or far slower, than the log syncs issued before them.
    // Slower, but never so slow that one epoch write takes a good part of init_limit: a disk
    // that cannot write an epoch within the limit can never elect, rightly.
    const std::uint64_t order = draw.below(4);
    const double slowest_write =
        static_cast<double>(o.disk.sync_latency_max) * o.disk.slow_factor;
    if (order == 0) o.disk.epoch_latency_factor = 0.01;
    if (order == 1) o.disk.epoch_latency_factor = std::min(20.0, 300'000.0 / slowest_write);
    if (draw.chance(0.25)) o.disk.stall_probability = 0.05;  // completions delivered late
    o.disk.lie_probability = variant.disk_lie_probability;
    o.peer.test_only.initial_counter = variant.initial_counter;
    o.peer.snapshot_every = variant.snapshot_every;
    prng combination_draw{seed ^ 0x2f6d3b8a91e4c057ull};
    if (variant.combination && variant.snapshot_every == 0)
        o.peer.snapshot_every = combination_draw.chance(0.5) ? combination_draw.between(3, 12)
                                                             : combination_draw.between(520, 800);
    auto txn_of = [&variant](std::string text) {
        return variant.encode_txn ? variant.encode_txn(text) : text;
    };
    o.peer.test_only.broken_reconfig = variant.broken_reconfig;
    // Leadership transfers: their own draws. Half the seeds give a target a tick or two to
    // catch up (sync_limit here is 10): transfers then also time out, and race the hand-off.
    prng transfer_draw{seed ^ 0x7a4b5f3e91c2d806ull};
    if (variant.leadership_transfers && transfer_draw.chance(0.5))
        o.peer.transfer_timeout_ticks = static_cast<std::uint32_t>(transfer_draw.between(1, 3));
    prng reconfig_draw{seed ^ 0x3c9f1e7ab5d20486ull};
    if (variant.reconfigurations) o.joiners = reconfig_draw.below(3);
    prng batch_draw{seed ^ 0x5b0a7c4e2d19f863ull};
    if (variant.batches && batch_draw.chance(0.3)) o.peer.max_batch_bytes = 40;  // two or so
    prng lease_draw{seed ^ 0x1ea5e5ead5c10c4bull};
    if (variant.lease_reads) {
        o.peer.read_lease_ticks = o.peer.sync_limit_ticks;
        o.peer.max_clock_drift_ppm = clock_faults::drift_bound_ppm;
    }
    clock_faults clocks{o.peer.read_lease_ticks};
    prng kill_draw{seed ^ 0x4b1e7d0c93a5f268ull};
    kill_faults kills{kill_draw};
    if (variant.combination && variant.snapshot_chunk_bytes == 0) {
        o.peer.snapshot_chunk_bytes = static_cast<std::uint32_t>(combination_draw.between(64, 512));
        o.peer.snapshot_chunks_in_flight = static_cast<std::uint32_t>(1 + seed % 3);
    }
    if (variant.snapshot_chunk_bytes != 0) {
        o.peer.snapshot_chunk_bytes = variant.snapshot_chunk_bytes;
        o.peer.snapshot_chunks_in_flight = static_cast<std::uint32_t>(1 + seed % 3);
    }
    sim_type sim{o};
    invariant_checker invariants{invariant_checker_options{variant.initial_counter + 1}};
    protocol_observer<sim_type> observer{sim, invariants};
    election_checker<sim_type> elections{sim};
    client_checker clients;
    // Reconfiguration requests in flight, by replica, incarnation and id, with their kind.
    std::map<std::tuple<peer_id, std::uint64_t, request_id>, std::size_t> reconfig_requests;
    std::optional<std::size_t> reconfig_call;  // the kind of the reconfigure call under way
    std::vector<std::pair<peer_id, client_completion>> completed_in_call;
    std::function<void(peer_id, const client_completion&)> on_completion;
    on_completion = [&](peer_id at, const client_completion& c) {
        const auto& n = sim.at(at);
        if (reconfig_call) {
            // Inside a reconfigure call: its own refusal, or other requests that the catch-up
            // before it completed. Sorted out once the call returns the reconfiguration's id.
            completed_in_call.push_back({at, c});
            return;
        }
        if (const auto it = reconfig_requests.find({at, n.incarnation, c.id});
            it != reconfig_requests.end()) {
            // A reconfiguration's outcome: the §10 checks hold it to what it did; counted here.
            if (c.outcome) {
                ++t.reconfigs_committed;
                ++t.reconfig_kinds[it->second];
            } else if (c.outcome.error() == make_error_code(errc::reconfig_in_progress)) {
                ++t.refused_in_progress;
            } else if (c.outcome.error() == make_error_code(errc::version_mismatch)) {
                ++t.refused_version;
            } else if (c.outcome.error() == make_error_code(errc::new_config_no_quorum)) {
                ++t.refused_no_quorum;
            } else if (c.outcome.error() == make_error_code(errc::outcome_unknown)) {
                ++t.reconfigs_unknown;
            } else {
                ++t.refused_other;
            }
            reconfig_requests.erase(it);
            return;
        }
        clients.completed(at, n.incarnation, c, n.machine->applied(), n.machine->last_applied());
    };
    sim.set_completion_observer([&](peer_id at, const client_completion& c) { on_completion(at, c); });
    std::uint64_t client_number = 0;
    auto client_request = [&] {
        const auto at = static_cast<peer_id>(1 + draw.below(sim.nodes().size()));
        if (draw.chance(0.25)) {
            if (const auto id = sim.sync(at))
                clients.submitted(at, sim.at(at).incarnation, *id, client_op::sync);
            return;
        }
        if (variant.batches && batch_draw.chance(0.5)) {
            std::vector<std::string> txns(batch_draw.between(2, 8));
            std::vector<byte_view> views;
            for (auto& txn : txns) {
                txn = txn_of(fmt::format("s{}-c{}", seed, ++client_number));
                views.push_back(as_bytes(txn));
            }
            // Half at the leader, where they become PROPOSALS; elsewhere they are forwarded.
            const peer_id leader = established_leader(sim);
            const peer_id to = leader != 0 && batch_draw.chance(0.5) ? leader : at;
            if (const auto id = sim.submit_batch(to, views)) {
                ++t.batch_calls;
                for (std::size_t i = 0; i < txns.size(); ++i)
                    clients.submitted(to, sim.at(to).incarnation, *id + i, client_op::write, txns[i]);
            }
            return;
        }
        const std::string txn = txn_of(fmt::format("s{}-c{}", seed, ++client_number));
        if (const auto id = sim.submit(at, as_bytes(txn)))
            clients.submitted(at, sim.at(at).incarnation, *id, client_op::write, txn);
    };
    // A lease sync (§7.1), checked like any sync: half the time at the leader.
    auto lease_request = [&] {
        const peer_id leader = established_leader(sim);
        const peer_id at = leader != 0 && lease_draw.chance(0.5)
                               ? leader
                               : static_cast<peer_id>(1 + lease_draw.below(sim.nodes().size()));
        if (const auto id = sim.lease_sync(at)) {
            clients.submitted(at, sim.at(at).incarnation, *id, client_op::sync);
            ++t.lease_syncs;
        }
    };
    if (trace) sim.set_trace([](std::string_view line) { fmt::print("{}\n", line); });
    // Per replica and incarnation, the counters last seen (they restart with the peer).
    std::vector<peer_counters> last_counters(sim.nodes().size() + 1);
    std::vector<std::uint64_t> last_incarnation(sim.nodes().size() + 1);
    std::set<std::pair<peer_id, std::uint64_t>> removed_seen;
    auto harvest = [&] {
        for (const auto& n : sim.nodes()) {
            if (!n.peer) continue;
            if (last_incarnation[n.id] != n.incarnation) {
                last_incarnation[n.id] = n.incarnation;
                last_counters[n.id] = peer_counters{};
            }
            const auto& c = n.peer->counters();
            t.diffs += c.syncs_diff - last_counters[n.id].syncs_diff;
            t.truncs += c.syncs_trunc - last_counters[n.id].syncs_trunc;
            t.snaps += c.syncs_snap - last_counters[n.id].syncs_snap;
            t.compactions += c.compactions - last_counters[n.id].compactions;
            t.snapshot_chunks += c.snapshot_chunks_sent - last_counters[n.id].snapshot_chunks_sent;
            t.commits += c.commits - last_counters[n.id].commits;
            t.handed_over += c.transfers_handed_over - last_counters[n.id].transfers_handed_over;
            t.transfers_timed_out += c.transfers_timed_out - last_counters[n.id].transfers_timed_out;
            t.handovers_followed += c.handovers_followed - last_counters[n.id].handovers_followed;
            t.learners_promoted += c.learners_promoted - last_counters[n.id].learners_promoted;
            t.disk_stalls += c.disk_stalls - last_counters[n.id].disk_stalls;
            t.lease_served += c.lease_syncs_served - last_counters[n.id].lease_syncs_served;
            t.lease_fallbacks += c.lease_sync_fallbacks - last_counters[n.id].lease_sync_fallbacks;
            t.proposal_batches += c.proposal_batches - last_counters[n.id].proposal_batches;
            last_counters[n.id] = c;
            if (n.peer->status().removed && !removed_seen.contains({n.id, n.incarnation})) {
                removed_seen.insert({n.id, n.incarnation});
                ++t.removed_replicas;
                if (n.peer->counters().transfers_handed_over > 0) ++t.leaving_handoffs;
            }
        }
    };
    sim.start();
    if (variant.lease_reads) clocks.start(sim, lease_draw, t.faults);

    // A replica stops for a storage failure only when its disk was made to fail: any other
    // stop is the core taking its own read for one (issue 34 defect 2: a sync stream that
    // fell behind a compaction stopped the leader). A terminal fault injected into a
    // replica's log at any time explains its stop (the peer may notice it events later, or
    // after a restart over the damaged disk); a stop with none is reported. Watched after
    // every event.
    std::set<std::pair<peer_id, std::uint64_t>> failed_seen;  // (replica, incarnation)
    std::string unexplained_failures;
    sim.add_checker([&](sim_type&) {
        for (const auto& n : sim.nodes()) {
            if (!n.peer || !n.peer->failed() || !failed_seen.insert({n.id, n.incarnation}).second)
                continue;
            std::uint64_t terminal = 0;
            for (const auto k : n.log->fault_stats().terminal) terminal += k;
            if (terminal == 0)
                unexplained_failures += fmt::format(
                    "storage: replica {} (incarnation {}) stopped at t={} with no storage "
                    "fault ever injected into its log\n", n.id, n.incarnation, sim.now());
        }
    });
    // The combination sweep's coverage, watched after every event: what met what.
    std::array<bool, coverage_names.size()> covered{};
    bool reconfigured = false;  // a reconfiguration committed (some replica applied one)
    std::vector<std::pair<std::uint64_t, peer_counters>> watched(sim.nodes().size() + 1);
    if (variant.combination) {
        sim.add_checker([&](sim_type&) {
            for (const auto& n : sim.nodes()) {
                if (!n.peer) continue;
                auto& [incarnation, last] = watched[n.id];
                if (incarnation != n.incarnation) {
                    if (n.incarnation > 1 && reconfigured && n.log->snapshot()) covered[4] = true;
                    incarnation = n.incarnation;
                    last = peer_counters{};
                }
                const auto& c = n.peer->counters();
                if (n.peer->configuration_in_force().version() != 0) reconfigured = true;
                const bool compacted = c.compactions > last.compactions;
                if (compacted && reconfigured) covered[3] = true;
                if (c.disk_stalls > last.disk_stalls) covered[7] = true;
                const auto& ctx = zab::testing::internals(*n.peer);
                if (ctx.leading) {
                    bool streaming = false, syncing = false;
                    for (const auto& link : ctx.leading->links) {
                        using stage = learner_link::stage;
                        if (link.at == stage::streaming_history || link.at == stage::streaming_snapshot)
                            streaming = true;
                        if (link.at == stage::streaming_history &&
                            link.history_queued < ctx.leading->committed_base)
                            covered[1] = true;
                        if (link.at >= stage::awaiting_sync && link.at <= stage::awaiting_newleader_ack)
                            syncing = true;
                    }
                    if (compacted && streaming) covered[0] = true;
                    if (c.syncs_snap > last.syncs_snap && reconfigured) covered[2] = true;
                    if (c.proposal_batches > last.proposal_batches && syncing) covered[6] = true;
                    if (c.lease_syncs_served > last.lease_syncs_served &&
                        t.faults.clock_rates + t.faults.clock_jumps > 0)
                        covered[5] = true;
                }
                last = c;
            }
        });
    }

    const sim_time end_of_faults = sim.now() + draw.between(3'000'000, 15'000'000);
    fault_mix faults{draw, variant.extended_faults ? fault_set::all : fault_set::classic};
    std::uint64_t proposal_number = 0;
    auto propose_somewhere = [&] {
        if (const peer_id leader = established_leader(sim))
            (void)observer.propose(
                leader, as_bytes(txn_of(fmt::format("s{}-p{}", seed, ++proposal_number))));
    };
    auto maybe_transfer = [&] {
        if (!variant.leadership_transfers || !transfer_draw.chance(0.04)) return;
        const peer_id leader = established_leader(sim);
        if (leader == 0) return;
        // Half the time the best candidate; else any member, which may be a lagging,
        // partitioned or crashed voter, an observer or the leader itself (refused).
        const peer_id target = transfer_draw.chance(0.5)
                                   ? 0
                                   : static_cast<peer_id>(1 + transfer_draw.below(sim.nodes().size()));
        if (sim.transfer_leadership(leader, target)) ++t.transfers;
    };
    std::set<peer_id> ever_member;
    // A membership change from the committed configuration of a replica that knows one.
    auto maybe_reconfigure = [&] {
        if (!variant.reconfigurations || !reconfig_draw.chance(0.03)) return;
        const peer_id leader = established_leader(sim);
        if (leader == 0) return;
        const configuration current = sim.peer_of(leader)->configuration_in_force();
        std::vector<member> members = current.members();
        // Joiners that were never members: a removed replica stays out (it would need a
        // restart as a joiner, which this sweep does not do).
        for (const member& m : current.members()) ever_member.insert(m.id);
        std::vector<peer_id> outside;
        for (const auto& n : sim.nodes())
            if (!ever_member.contains(n.id) && n.id > o.voters + o.observers)
                outside.push_back(n.id);
        const std::size_t voter_count = current.voters().size();
        std::size_t kind = reconfig_draw.below(7);
        auto pick = [&](auto&& pred) -> std::optional<std::size_t> {
            std::vector<std::size_t> at;
            for (std::size_t i = 0; i < members.size(); ++i)
                if (pred(members[i])) at.push_back(i);
            if (at.empty()) return std::nullopt;
            return at[reconfig_draw.below(at.size())];
        };
        auto voter = [](const member& m) { return m.type == learner_type::participant; };
        bool changed = false;
        if ((kind == 0 || kind == 1 || kind == 4 || kind == 5) && outside.empty()) kind = 3;
        if (kind == 5) {
            // A learner: follows without a vote, promoted by the leader once caught up.
            members.push_back({outside[reconfig_draw.below(outside.size())],
                               learner_type::observer, 0, 1, true});
            changed = true;
        } else if (kind == 6) {
            // The same members, counted by new weights (1–3) or in groups (sites 1–3).
            const bool groups = reconfig_draw.chance(0.5);
            for (member& m : members) {
                m.weight = static_cast<std::uint32_t>(reconfig_draw.between(1, 3));
                m.group = groups ? static_cast<std::uint32_t>(reconfig_draw.between(1, 3)) : 0;
            }
            changed = true;
        } else if (kind == 0 || kind == 1) {
            members.push_back({outside[reconfig_draw.below(outside.size())],
                               kind == 0 ? learner_type::participant : learner_type::observer});
            changed = true;
        } else if (kind == 2) {
            // Remove a member, keeping at least two voters.
            if (auto i = pick([&](const member& m) { return !voter(m) || voter_count > 2; })) {
                members.erase(members.begin() + static_cast<std::ptrdiff_t>(*i));
                changed = true;
            }
        } else if (kind == 3) {
            if (auto i = pick([&](const member& m) { return !voter(m) || voter_count > 2; })) {
                members[*i].type = voter(members[*i]) ? learner_type::observer
                                                      : learner_type::participant;
                changed = true;
            }
        } else if (auto i = pick(voter)) {
            members[*i] = {outside[reconfig_draw.below(outside.size())], learner_type::participant};
            changed = true;
        }
        if (!changed) return;
        // Asked at the leader, or at any replica (forwarded), now and then with a stale
        // version for its compare-and-set, now and then twice at once.
        const peer_id at = reconfig_draw.chance(0.7)
                               ? leader
                               : static_cast<peer_id>(1 + reconfig_draw.below(sim.nodes().size()));
        // A request without compare-and-set replaces the member list whole, whatever
        // committed since it was built: only the leader itself (which proposes it in the
        // call) asks without one, so a list built from a configuration since replaced never
        // re-adds a replica that stopped as removed.
        std::optional<std::uint64_t> expected;
        if (at != leader || reconfig_draw.chance(0.3)) expected = current.version();
        if (reconfig_draw.chance(0.1)) expected = current.version() + 1;
        const int times = reconfig_draw.chance(0.1) ? 2 : 1;
        for (int i = 0; i < times; ++i) {
            reconfig_call = kind;
            const auto id = sim.reconfigure(at, reconfig_request{members, expected});
            reconfig_call.reset();
            if (id) {
                ++t.reconfigs;
                reconfig_requests.emplace(std::tuple{at, sim.at(at).incarnation, *id}, kind);
            }
            for (const auto& [where, c] : std::exchange(completed_in_call, {})) on_completion(where, c);
        }
    };
    // Crashes while a reconfiguration is proposed and not committed (pending somewhere).
    auto count_crashes_in_reconfig = [&](std::uint64_t crashes_before) {
        if (!variant.reconfigurations) return;
        bool pending = false;
        for (const auto& n : sim.nodes())
            if (n.peer && !n.peer->pending_configurations().empty()) pending = true;
        if (pending) t.crashes_in_reconfig += t.faults.crashes - crashes_before;
    };
    // A write storm (the combination sweep): a learner crashes while the leader commits
    // more than its committed window (500), then restarts while writes go on, so that its
    // sync streams history older than the window from a log that keeps compacting.
    std::uint64_t storm_number = 0;
    auto write_storm = [&] {
        if (!variant.combination || !combination_draw.chance(0.03)) return;
        const peer_id leader = established_leader(sim);
        if (leader == 0) return;
        std::vector<peer_id> others;
        for (const auto& n : sim.nodes())
            if (n.peer && n.id != leader && !n.peer->status().removed && !n.paused)
                others.push_back(n.id);
        if (others.empty()) return;
        ++t.write_storms;
        const peer_id lagging = others[combination_draw.below(others.size())];
        const zxid lagging_at = sim.at(lagging).log->last_zxid();
        sim.crash(lagging);
        ++t.faults.crashes;
        const std::uint64_t applied_before = sim.peer_of(leader)->counters().transactions_applied;
        auto storm_batch = [&] {
            const auto* p = sim.peer_of(leader);
            if (!p || !p->established()) return false;
            std::vector<std::string> txns(combination_draw.between(20, 60));
            std::vector<byte_view> views;
            for (auto& txn : txns) {
                txn = txn_of(fmt::format("s{}-w{}", seed, ++storm_number));
                views.push_back(as_bytes(txn));
            }
            if (const auto id = sim.submit_batch(leader, views)) {
                ++t.batch_calls;
                t.storm_writes += txns.size();
                for (std::size_t i = 0; i < txns.size(); ++i)
                    clients.submitted(leader, sim.at(leader).incarnation, *id + i,
                                      client_op::write, txns[i]);
            }
            sim.run_for(combination_draw.between(1'000, 6'000));
            return true;
        };
        const std::uint64_t target = combination_draw.between(520, 1'200);
        for (int batches = 0; batches < 200 && storm_batch(); ++batches) {
            const auto* p = sim.peer_of(leader);
            if (p && p->counters().transactions_applied - applied_before >= target) break;
        }
        const auto* p = sim.peer_of(leader);
        if (p && p->counters().transactions_applied - applied_before > 500 &&
            lagging_at < p->last_committed())
            covered[8] = true;
        sim.restart(lagging);
        ++t.faults.restarts;
        // Writes go on while it syncs.
        for (std::uint64_t i = combination_draw.between(3, 12); i > 0 && storm_batch(); --i) {}
    };
    while (sim.now() < end_of_faults) {
        sim.run_for(draw.between(2'000, 60'000));
        harvest();
        write_storm();
        maybe_transfer();
        maybe_reconfigure();
        const std::uint64_t crashes_before = t.faults.crashes;
        const std::uint64_t burst = draw.between(0, 3);
        for (std::uint64_t i = 0; i < burst; ++i) propose_somewhere();
        if (draw.chance(0.3)) client_request();
        if (variant.lease_reads) {
            if (lease_draw.chance(0.3)) lease_request();
            if (lease_draw.chance(0.02)) clocks.inject(sim, lease_draw, t.faults);
        }
        if (draw.chance(0.08)) faults.inject(sim, draw, t.faults);
        if (variant.kills) {
            const std::uint64_t power_losses = t.faults.kill_power_losses_unsynced;
            kills.step(sim, kill_draw, t.faults);
            if (t.faults.kill_power_losses_unsynced > power_losses) covered[9] = true;
        }
        count_crashes_in_reconfig(crashes_before);
        if (variant.extended_faults && draw.chance(0.05)) faults.inject_extended(sim, draw, t.faults);
        if (draw.chance(0.015)) {
            // A learner's next NEWLEADER handling crashes at one of its four points.
            const auto id = static_cast<peer_id>(1 + draw.below(sim.nodes().size()));
            const auto point = static_cast<newleader_point>(draw.below(newleader_point_count));
            sim.crash_at(id, variant.crash_point.value_or(point));
        }
        if (variant.extended_faults && draw.chance(0.03)) {
            // One of the other crash points, at one replica or at whichever gets there first.
            // The moments of a TRUNC or SNAP sync are rare (few seeds sync that way): they
            // get a good share of the arms, each for whichever replica gets there.
            static constexpr std::array rare{crash_point::truncate_issued,
                                             crash_point::truncate_durable,
                                             crash_point::snapshot_install_issued,
                                             crash_point::snapshot_installed};
            static constexpr std::array common{
                crash_point::accepted_epoch_issued, crash_point::accepted_epoch_durable,
                crash_point::ackepoch_received,     crash_point::current_epoch_durable,
                crash_point::proposal_appended,     crash_point::proposal_ack_received,
                crash_point::commit_sent};
            if (draw.chance(0.4)) {
                sim.crash_at(0, rare[draw.below(rare.size())]);
            } else {
                const auto id = draw.chance(0.5)
                                    ? 0
                                    : static_cast<peer_id>(1 + draw.below(sim.nodes().size()));
                sim.crash_at(id, common[draw.below(common.size())]);
            }
        }
        if (variant.stop_at_first_violation && !invariants.ok()) break;  // it fired: done
    }
    sim.disarm();
    for (std::size_t p = 0; p < newleader_point_count; ++p)
        t.newleader_crashes[p] += sim.crashes_at(static_cast<newleader_point>(p));
    for (std::size_t p = 0; p < crash_point_count; ++p)
        t.point_crashes[p] += sim.crashes_at(static_cast<crash_point>(p));
    t.frames_delayed += sim.network().stats().frames_delayed;
    t.frames_broken += sim.network().stats().frame_faults_fired - sim.network().stats().frames_delayed;
    for (const auto& n : sim.nodes()) {
        const auto& fired = n.log->fault_stats();
        for (std::size_t k = 0; k < storage_op_kind_count; ++k) {
            t.storage_terminal_fired += fired.terminal[k];
            t.storage_transient_fired += fired.transient[k];
            t.storage_slowed += fired.slowed[k];
        }
    }

    // A negative test that already fired skips recovery: a broken variant's later steps may
    // trip the core's own assertions on the state it corrupted.
    const bool fired_early = variant.stop_at_first_violation && !invariants.ok();
    faults.heal(sim);
    // A replica whose disk failed is restarted on the healed disk, as an operator would —
    // now, and whenever one fails later (a failed completion issued before the heal).
    auto restart_failed = [&] {
        if (fired_early) return;
        for (const auto& n : sim.nodes())
            if (n.peer && n.peer->failed()) {
                sim.crash(n.id);
                sim.restart(n.id);
                ++t.faults.failed_restarts;
            }
    };
    restart_failed();
    for (const auto& n : sim.nodes())
        if (!n.peer && !fired_early) sim.restart(n.id);
    sim_time bound = recovery_bound(o, variant.extended_faults ? disk_hang_max : 0);
    // Lease reads: a replica waits out its promise before it votes (after the heal, after a
    // restart), and the slowest clock runs 10 % late.
    if (variant.lease_reads) bound += bound / 8 + 2 * o.peer.read_lease_ticks * o.tick_us;
    // A SNAP streams in chunks, a window of them per round trip (the combination sweep's
    // chunks are 64-512 bytes, one to three in flight): the largest image a replica holds
    // now, twice (one more election restarts a sync), on top of the rounds above. Not only
    // the images in the logs: a leader that compacts after the heal sends the image of
    // everything it commits by then — its machine's now, and what its log holds beyond it,
    // counted twice (a machine may keep more per transaction than the transaction: results,
    // sessions). Seed 13011 of the combination sweep: no log held a snapshot at the heal,
    // and a SNAP of 7,721 transactions committed after it, in 65-byte chunks, outran the
    // bound.
    std::size_t largest_image = 0;
    for (const auto& n : sim.nodes()) {
        if (const auto s = n.log->snapshot()) largest_image = std::max(largest_image, s->state.size());
        if (!n.peer || !n.machine) continue;
        std::size_t logged_after = 0;
        for (zxid after = n.peer->last_applied();;) {
            auto chunk = n.log->read(after, 4096);
            if (!chunk || chunk.value().empty()) break;
            for (const auto& record : chunk.value()) logged_after += record.txn.size();
            after = chunk.value().back().id;
        }
        largest_image = std::max(largest_image, n.machine->snapshot().size() + 2 * logged_after);
    }
    const auto windows = static_cast<sim_time>(
        largest_image / o.peer.snapshot_chunk_bytes / o.peer.snapshot_chunks_in_flight + 1);
    bound += 2 * windows * (2 * o.network.delay_max + o.disk.sync_latency_max);
    t.bound = std::max(t.bound, bound);
    const sim_time start = sim.now();
    auto everyone_established = [&] {
        restart_failed();
        const peer_id leader = established_leader(sim);
        if (leader == 0) return false;
        for (const auto& n : sim.nodes()) {
            if (n.peer && n.peer->status().removed) continue;  // a reconfiguration removed it (§9)
            if (!n.peer || !n.peer->established() || n.peer->current_vote().leader != leader)
                return false;
        }
        return true;
    };
    // Everyone established with one leader, then a proposal there applied everywhere. The
    // leader may yet step down (it catches up on time that passed while it was paused) and
    // its proposal be truncated by the next one: then propose again, within the same bound.
    auto applied_everywhere = [&](zxid z) {
        for (const auto& n : sim.nodes()) {
            if (n.peer && n.peer->status().removed) continue;
            if (!n.peer || n.peer->last_applied() < z) return false;
            const auto& applied = n.machine->applied();
            const bool found = std::any_of(applied.rbegin(), applied.rend(),
                                           [&](const auto& a) { return a.id == z; });
            if (!found && n.machine->restored_at() < z) return false;
        }
        return true;
    };
    bool live = false;
    while (!fired_early && !live && sim.run_until(everyone_established, start + bound)) {
        const peer_id leader = established_leader(sim);
        const std::string final_text = txn_of("final");
        auto proposed = observer.propose(leader, as_bytes(final_text));
        if (!proposed) {
            if (everyone_established()) sim.run_for(o.tick_us);  // make progress regardless
            continue;
        }
        const zxid final_txn = proposed.value();
        const bool settled = sim.run_until(
            [&] {
                restart_failed();
                const auto* p = sim.peer_of(leader);
                const bool still_leads = p != nullptr && p->established() &&
                                         zab::testing::internals(*p).leading &&
                                         zab::testing::internals(*p).leading->epoch == final_txn.epoch();
                return applied_everywhere(final_txn) || !still_leads;
            },
            start + bound);
        if (!settled) break;
        live = applied_everywhere(final_txn);
    }
    harvest();
    // §9: once every replica applied the final write, they all agree on the configuration,
    // and none that a committed configuration removed still takes part.
    std::string config_report;
    if (live && variant.reconfigurations) {
        // A reconfiguration the leader made after the final write (a learner's promotion)
        // may still be on its way: let every replica apply what the leader committed.
        const zxid committed = sim.peer_of(established_leader(sim))->last_committed();
        sim.run_until(
            [&] {
                for (const auto& n : sim.nodes())
                    if (n.peer && !n.peer->status().removed && n.peer->last_applied() < committed)
                        return false;
                return true;
            },
            sim.now() + 2 * o.peer.sync_limit_ticks * o.tick_us);
        const auto* leader = sim.peer_of(established_leader(sim));
        const configuration& agreed = leader->configuration_in_force();
        for (const auto& n : sim.nodes()) {
            if (!n.peer) continue;
            const configuration& mine = n.peer->configuration_in_force();
            if (n.peer->status().removed) {
                if (agreed.contains(n.id))
                    config_report += fmt::format("config: replica {} stopped as removed, but "
                                                 "configuration {} names it\n", n.id, agreed.version());
                continue;
            }
            if (mine.version() != agreed.version() || mine.members() != agreed.members())
                config_report += fmt::format("config: replica {} has configuration {}, the "
                                             "leader {}\n", n.id, mine.version(), agreed.version());
        }
    }
    // Clients go away: everything in flight resolves; then the promises are checked.
    for (const auto& n : sim.nodes()) sim.stop_clients(n.id);
    {
        using sequence = std::decay_t<decltype(sim.nodes().front().machine->applied())>;
        std::vector<sequence> sequences;
        for (const auto& n : sim.nodes())
            if (n.machine) sequences.push_back(n.machine->applied());
        clients.finish(sequences);
    }
    t.client_writes += clients.writes();
    t.writes_ok += clients.write_successes();
    t.writes_refused += clients.definite_failures();
    t.writes_unknown += clients.unknown();
    t.client_syncs += clients.syncs();
    t.syncs_ok += clients.sync_successes();
    protocol_seed_result r;
    if (!unexplained_failures.empty()) {
        r.report += unexplained_failures;
        r.ok = false;
    }
    if (!config_report.empty()) {
        r.report += config_report;
        r.ok = false;
    }
    for (const auto& f : clients.failures()) {
        r.report += fmt::format("client: {}\n", f);
        r.ok = false;
    }
    for (const auto& v : invariants.violations()) r.fired.insert(v.what);
    if (!invariants.ok()) {
        r.report = invariants.report();
        r.ok = false;
    }
    for (const auto& f : elections.failures()) {
        r.report += fmt::format("election: {}\n", f);
        r.ok = false;
    }
    if (!live && variant.check_liveness) {
        r.report += fmt::format("liveness: not recovered within {} us\n", bound);
        for (const auto& n : sim.nodes())
            if (n.peer)
                r.report += fmt::format(
                    "  peer {}: {} {} leader {} epochs {}/{} applied {} logged {}{}{} next "
                    "deadline {} (tick {}){}\n",
                    n.id, n.peer->state(), n.peer->current_phase(), n.peer->current_vote().leader,
                    n.peer->durable_epochs().accepted, n.peer->durable_epochs().current,
                    n.peer->last_applied(), n.peer->last_logged(),
                    n.peer->failed() ? " FAILED" : "", n.paused ? " PAUSED" : "",
                    n.peer->next_deadline().value_or(0), n.peer->now_tick(),
                    describe_membership(*n.peer));
        r.ok = false;
    } else if (live) {
        t.worst_recovery = std::max(t.worst_recovery, sim.now() - start);
    }
    for (std::size_t i = 0; i < covered.size(); ++i) t.coverage[i] += covered[i] ? 1 : 0;
    t.events += sim.steps();
    t.elections += elections.decisions_checked();
    t.proposals += observer.proposals();
    t.invariant_checks += invariants.checks();
    r.hash = sim.trace_hash_value();
    return r;
}

}  // namespace zab::test
