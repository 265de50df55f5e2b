// zab_protocol_sweep — seeded fault sweep of the whole protocol: election, discovery,
// synchronization and broadcast, with proposals at the leader throughout.
//
//   zab_protocol_sweep [--seeds N] [--first S] [--trace] [--verbose]
//
// Each seed draws a cluster (3 or 5 voters, sometimes an observer), a network, a disk and a
// fault mix (sweep_faults.hpp), plus crashes aimed at learners inside their NEWLEADER
// handling. Every PROPOSAL, ACK, COMMIT and promise is fed to the §10 invariant checker as it
// happens (protocol_observer.hpp). Then the faults stop, crashed replicas restart, and within
// a bound computed from the options a leader must be established with every replica and a
// new proposal applied everywhere. One summary line; a failing seed prints its replay command.
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "sweep_faults.hpp"
#include "sweep_main.hpp"
#include "zab/testing/election_checker.hpp"
#include "zab/testing/protocol_observer.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

struct totals {
    zab::test::fault_counts faults;
    std::uint64_t runs = 0, events = 0, elections = 0, diffs = 0, truncs = 0, snaps = 0,
                  newleader_crashes = 0, proposals = 0, commits = 0, determinism_checks = 0,
                  failures = 0, invariant_checks = 0;
    sim_time worst_recovery = 0, bound = 0;
};

/// After the faults: reconnects, an election (with a possible init_limit wait for a learner
/// that chose a leader who did not lead), discovery and sync within init_limit, and a commit.
sim_time recovery_bound(const cluster_options& o) {
    const sim_time round = o.network.reconnect_delay_max + o.network.disconnect_detect_delay +
                           20 * o.network.delay_max +
                           (3 * o.peer.finalize_wait_ticks +
                            2 * o.peer.notification_timeout_min_ticks + 4) *
                               o.tick_us;
    const sim_time disk = 8 * static_cast<sim_time>(o.disk.sync_latency_max * o.disk.slow_factor);
    return 3 * (round + o.peer.init_limit_ticks * o.tick_us) + 2 * o.peer.sync_limit_ticks * o.tick_us + disk;
}

peer_id established_leader(sim_type& sim) {
    for (const auto& n : sim.nodes())
        if (n.peer && n.peer->state() == peer_state::leading && n.peer->established()) return n.id;
    return 0;
}

zab::test::seed_result run_seed(std::uint64_t seed, totals& t, bool trace) {
    prng draw{seed ^ 0x70c01ull};
    cluster_options o;
    o.seed = seed;
    o.voters = draw.chance(0.5) ? 3 : 5;
    o.observers = draw.chance(0.3) ? 1 : 0;
    o.peer.init_limit_ticks = 20;
    o.peer.sync_limit_ticks = 10;
    o.network.delay_min = draw.between(50, 500);
    o.network.delay_max = o.network.delay_min + draw.between(0, 10'000);
    o.network.reconnect_delay_max = draw.between(o.network.reconnect_delay_min, 100'000);
    o.disk.sync_latency_max = draw.between(o.disk.sync_latency_min, 20'000);
    if (draw.chance(0.2)) o.disk.slow_factor = 10.0;  // a slow disk
    sim_type sim{o};
    invariant_checker invariants;
    protocol_observer<sim_type> observer{sim, invariants};
    election_checker<sim_type> elections{sim};
    if (trace) sim.set_trace([](std::string_view line) { fmt::print("{}\n", line); });
    // Per replica and incarnation, the counters last seen (they restart with the peer).
    std::vector<peer_counters> last_counters(sim.nodes().size() + 1);
    std::vector<std::uint64_t> last_incarnation(sim.nodes().size() + 1);
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
            t.commits += c.commits - last_counters[n.id].commits;
            last_counters[n.id] = c;
        }
    };
    sim.start();

    const sim_time end_of_faults = sim.now() + draw.between(3'000'000, 15'000'000);
    zab::test::fault_mix faults{draw};
    std::uint64_t proposal_number = 0;
    auto propose_somewhere = [&] {
        if (const peer_id leader = established_leader(sim))
            (void)observer.propose(leader, as_bytes(fmt::format("s{}-p{}", seed, ++proposal_number)));
    };
    while (sim.now() < end_of_faults) {
        sim.run_for(draw.between(2'000, 60'000));
        harvest();
        const std::uint64_t burst = draw.between(0, 3);
        for (std::uint64_t i = 0; i < burst; ++i) propose_somewhere();
        if (draw.chance(0.08)) faults.inject(sim, draw, t.faults);
        if (draw.chance(0.05)) {
            // A learner inside its NEWLEADER handling: history appended, durable, epoch
            // written, or ACK sent — whichever it is at now.
            for (const auto& n : sim.nodes())
                if (n.peer && n.peer->context().learning &&
                    n.peer->context().learning->at == learner_state::stage::awaiting_uptodate) {
                    sim.crash(n.id);
                    ++t.newleader_crashes;
                    break;
                }
        }
    }

    faults.heal(sim);
    for (const auto& n : sim.nodes())
        if (!n.peer) sim.restart(n.id);
    const sim_time bound = recovery_bound(o);
    t.bound = std::max(t.bound, bound);
    const sim_time start = sim.now();
    auto everyone_established = [&] {
        const peer_id leader = established_leader(sim);
        if (leader == 0) return false;
        for (const auto& n : sim.nodes())
            if (!n.peer || !n.peer->established() || n.peer->current_vote().leader != leader)
                return false;
        return true;
    };
    bool live = sim.run_until(everyone_established, start + bound);
    std::optional<zxid> final_txn;
    if (live) {
        auto proposed = observer.propose(established_leader(sim), as_bytes("final"));
        live = proposed.has_value();
        if (live) {
            final_txn = proposed.value();
            live = sim.run_until(
                [&] {
                    for (const auto& n : sim.nodes())
                        if (!n.peer || n.peer->last_applied() < *final_txn) return false;
                    return true;
                },
                start + bound);
        }
    }
    harvest();
    zab::test::seed_result r;
    if (!invariants.ok()) {
        fmt::print(stderr, "seed {}: invariants:\n{}", seed, invariants.report());
        r.ok = false;
    }
    for (const auto& f : elections.failures()) {
        fmt::print(stderr, "seed {}: election: {}\n", seed, f);
        r.ok = false;
    }
    if (!live) {
        fmt::print(stderr, "seed {}: liveness: not recovered within {} us\n", seed, bound);
        for (const auto& n : sim.nodes())
            if (n.peer)
                fmt::print(stderr, "  peer {}: {} {} leader {} epochs {}/{} applied {} logged {}\n",
                           n.id, n.peer->state(), n.peer->current_phase(),
                           n.peer->current_vote().leader, n.peer->durable_epochs().accepted,
                           n.peer->durable_epochs().current, n.peer->last_applied(),
                           n.peer->last_logged());
        for (const auto& n : sim.nodes())
            if (n.peer && n.peer->context().learning)
                fmt::print(stderr, "  peer {}: stage {} known committed {} unapplied {}\n", n.id,
                           static_cast<int>(n.peer->context().learning->at),
                           n.peer->context().learning->known_committed,
                           n.peer->context().learning->unapplied.size());
        r.ok = false;
    } else {
        t.worst_recovery = std::max(t.worst_recovery, sim.now() - start);
    }
    t.events += sim.steps();
    t.elections += elections.decisions_checked();
    t.proposals += observer.proposals();
    t.invariant_checks += invariants.checks();
    r.hash = sim.trace_hash_value();
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    const auto args = zab::test::parse_sweep_args(argc, argv, 500);
    if (!args) return 2;
    const std::uint64_t first = args->first, seeds = args->seeds;
    totals t;
    const std::uint64_t combined = zab::test::run_sweep(*args, argv[0], t, run_seed);
    const auto& f = t.faults;
    fmt::print(
        "protocol sweep: seeds {}..{} ({} runs), {} events; faults: {} connection breaks, {} "
        "partitions, {} one-way blocks, {} heals, {} crashes ({} inside NEWLEADER handling), {} "
        "restarts, {} pauses; {} elections; syncs: {} DIFF, {} TRUNC, {} SNAP; {} proposals, {} "
        "commits; {} invariant checks; recovery: worst {} us, bound {} us; {} determinism "
        "re-runs; trace hash {:016x}; {} failures\n",
        first, first + seeds - 1, t.runs, t.events, f.breaks, f.partitions, f.one_way, f.heals,
        f.crashes + t.newleader_crashes, t.newleader_crashes, f.restarts, f.pauses, t.elections,
        t.diffs, t.truncs, t.snaps, t.proposals, t.commits, t.invariant_checks, t.worst_recovery,
        t.bound, t.determinism_checks, combined, t.failures);
    const bool trivial = seeds >= 50 && (f.breaks == 0 || f.partitions == 0 || f.crashes == 0 ||
                                         t.newleader_crashes == 0 || t.diffs == 0 ||
                                         t.truncs == 0 || t.snaps == 0 || t.commits == 0);
    if (trivial) fmt::print(stderr, "sweep exercised too little: some count above is zero\n");
    return (t.failures == 0 && !trivial) ? 0 : 1;
}
