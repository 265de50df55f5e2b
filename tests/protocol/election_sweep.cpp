// zab_election_sweep — seeded fault sweep of Fast Leader Election on the simulator.
//
//   zab_election_sweep [--seeds N] [--first S] [--trace] [--verbose]
//
// Each seed draws a cluster (3 or 5 voters, sometimes an observer), a network and a fault
// mix, runs the real peers through connection loss, delays, partitions (symmetric and
// one-way), slow links and one-way stalls, links broken at the next frame of some message
// kind and frames of some kind delayed (fault_set::network), crashes, restarts and pauses,
// and checks every election decision after every
// event (election_checker.hpp). Then the faults stop, every replica restarts (an
// all-LOOKING start) and all must decide the same leader within a bound computed from the
// options. One summary line at the end; a failing seed prints the command that replays it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sweep_faults.hpp"
#include "sweep_main.hpp"
#include "zab/testing/election_checker.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

struct totals {
    std::uint64_t runs = 0, events = 0, breaks = 0, partitions = 0, one_way = 0, heals = 0,
                  crashes = 0, restarts = 0, pauses = 0, link_delays = 0, stalls = 0,
                  frame_breaks = 0, frames_broken = 0, frame_delays = 0, frames_delayed = 0,
                  decisions = 0, by_looking = 0,
                  by_joining = 0, determinism_checks = 0, failures = 0;
    sim_time worst_convergence = 0;
    sim_time bound = 0;
    std::uint64_t hash = 0;
};

/// How long an all-LOOKING start may take once the network is whole: connections come up
/// (reconnect delay), votes cross a few times (message delays), the finalize wait runs and
/// is restarted by late votes, and ticks are coarse.
sim_time convergence_bound(const cluster_options& o) {
    // A learner that chose a leader who then followed someone else (FLE is not unanimous)
    // waits out init_limit before it looks again, and then needs a second round.
    const sim_time round = o.network.reconnect_delay_max + o.network.disconnect_detect_delay +
                           20 * o.network.delay_max +
                           (3 * o.peer.finalize_wait_ticks +
                            2 * o.peer.notification_timeout_min_ticks + 4) *
                               o.tick_us;
    return 2 * round + o.peer.init_limit_ticks * o.tick_us;
}

zab::test::seed_result run_seed(std::uint64_t seed, totals& t, bool trace) {
    prng draw{seed ^ 0x5eed5eed5eedull};
    cluster_options o;
    o.seed = seed;
    o.voters = draw.chance(0.5) ? 3 : 5;
    o.peer.init_limit_ticks = 20;  // 2 s: discovery is bounded (§4)
    o.peer.sync_limit_ticks = 10;
    o.observers = draw.chance(0.3) ? 1 : 0;
    o.network.delay_min = draw.between(50, 500);
    o.network.delay_max = o.network.delay_min + draw.between(0, 20'000);
    o.network.reconnect_delay_max = draw.between(o.network.reconnect_delay_min, 200'000);
    sim_type sim{o};
    election_checker<sim_type> checker{sim};
    if (trace) sim.set_trace([](std::string_view line) { fmt::print("{}\n", line); });
    sim.start();

    const std::size_t members = o.voters + o.observers;
    const sim_time end_of_faults = sim.now() + draw.between(2'000'000, 20'000'000);
    zab::test::fault_mix faults{draw, zab::test::fault_set::network};
    zab::test::fault_counts counts;
    while (sim.now() < end_of_faults) {
        sim.run_for(draw.between(20'000, 1'500'000));
        faults.inject(sim, draw, counts);
        if (draw.chance(0.5)) faults.inject_extended(sim, draw, counts);
    }
    t.breaks += counts.breaks;
    t.partitions += counts.partitions;
    t.one_way += counts.one_way;
    t.heals += counts.heals;
    t.crashes += counts.crashes;
    t.restarts += counts.restarts;
    t.pauses += counts.pauses;
    t.link_delays += counts.link_delays;
    t.stalls += counts.stalls;
    t.frame_breaks += counts.frame_breaks;
    t.frame_delays += counts.frame_delays;
    const auto& net = sim.network().stats();
    t.frames_delayed += net.frames_delayed;
    t.frames_broken += net.frame_faults_fired - net.frames_delayed;

    // Faults stop: the network heals, and every replica restarts into LOOKING.
    faults.heal(sim);
    for (peer_id id = 1; id <= members; ++id) {
        sim.crash(id);
        sim.restart(id);
    }
    const sim_time bound = convergence_bound(o);
    t.bound = std::max(t.bound, bound);
    const sim_time start = sim.now();
    const bool live = sim.run_until([&] { return checker.all_decided_same_leader(); },
                                    start + bound);
    zab::test::seed_result r;
    for (const auto& f : checker.failures()) {
        fmt::print(stderr, "seed {}: safety: {}\n", seed, f);
        r.ok = false;
    }
    if (!live) {
        fmt::print(stderr, "seed {}: liveness: no common leader within {} us of the restart\n",
                   seed, bound);
        for (const auto& n : sim.nodes())
            if (n.peer)
                fmt::print(stderr, "  peer {}: {} {} vote {} epochs {}/{} established {}\n", n.id,
                           n.peer->state(), n.peer->current_phase(), n.peer->current_vote(),
                           n.peer->durable_epochs().accepted, n.peer->durable_epochs().current,
                           n.peer->established());
        r.ok = false;
    } else {
        t.worst_convergence = std::max(t.worst_convergence, sim.now() - start);
    }
    t.events += sim.steps();
    t.decisions += checker.decisions_checked();
    t.by_looking += checker.decided_by_looking_quorum();
    t.by_joining += checker.decided_by_joining();
    r.hash = sim.trace_hash_value();
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    const auto args = zab::test::parse_sweep_args(argc, argv, 2000);
    if (!args) return 2;
    const std::uint64_t seeds = args->seeds;
    totals t;
    const std::uint64_t combined = zab::test::run_sweep(*args, argv[0], t, run_seed);
    fmt::print(
        "election sweep: seeds {} ({} runs), {} events; faults: {} connection breaks, {} "
        "partitions, {} one-way blocks, {} heals, {} crashes, {} restarts, {} pauses, {} slow "
        "links, {} one-way stalls, {} frame breaks armed ({} fired), {} frame delays armed ({} "
        "frames delayed); {} decisions checked ({} by LOOKING quorum, {} by joining); liveness: worst {} us, bound "
        "{} us; {} determinism re-runs; trace hash {:016x}; {} failures\n",
        describe_seeds(*args), t.runs, t.events, t.breaks, t.partitions, t.one_way, t.heals,
        t.crashes, t.restarts, t.pauses, t.link_delays, t.stalls, t.frame_breaks,
        t.frames_broken, t.frame_delays, t.frames_delayed, t.decisions, t.by_looking, t.by_joining,
        t.worst_convergence, t.bound, t.determinism_checks, combined, t.failures);
    // A sweep that injected no faults of some kind proves nothing about that kind.
    const bool trivial = seeds >= 50 && (t.breaks == 0 || t.partitions == 0 || t.one_way == 0 ||
                                         t.crashes == 0 || t.restarts == 0 || t.pauses == 0 ||
                                         t.link_delays == 0 || t.stalls == 0 ||
                                         t.frames_broken == 0 || t.frames_delayed == 0 ||
                                         t.by_joining == 0 || t.by_looking == 0);
    if (trivial) fmt::print(stderr, "sweep injected too few faults of some kind\n");
    return (t.failures == 0 && !trivial) ? 0 : 1;
}
