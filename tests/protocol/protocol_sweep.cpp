// zab_protocol_sweep — seeded fault sweep of the whole protocol: election, discovery,
// synchronization and broadcast, with proposals at the leader throughout.
//
//   zab_protocol_sweep [--seeds N] [--first S] [--trace] [--verbose] [--snapshot-every N]
//                      [--snapshot-chunk N] [--classic-faults] [--no-transfers]
//                      [--no-reconfig] [--no-kills] [--lease-reads] [--batches]
//
// --snapshot-every N runs every peer with options::snapshot_every = N: logs compacted while
// the faults go on, so restarts recover from snapshots and learners behind one get SNAP.
// --snapshot-chunk N streams every SNAP in chunks of N bytes (1–3 in flight by seed).
// --classic-faults draws only the faults of fault_set::classic and the NEWLEADER crash points
// (the sweep as it was before the extended faults: its seeds replay those runs).
// --lease-reads runs every peer with lease reads (docs/protocol.md §7.1): lease syncs among
// the client requests, checked like syncs (a sync sees every write completed before it),
// and clocks at different rates that change rate and jump, within the drift bound.
// --batches submits half the client writes several at once (peer::submit_batch): leaders
// propose them as PROPOSALS batches, which crashes, breaks and delays then cut.
// --no-kills leaves out kill-then-power-loss (kill_faults, sweep_faults.hpp: a replica
// killed with its page cache kept, restarted, later its power cut), which the sweep draws
// with the extended faults: a seed found before them replays as it failed.
//
// Each seed draws a cluster (3 or 5 voters, sometimes an observer), a network, a disk and a
// fault mix (sweep_faults.hpp), plus crashes aimed at each of the four points of a
// learner's NEWLEADER handling (protocol_sweep_run.hpp). Every PROPOSAL, ACK, COMMIT and promise is fed to the §10 invariant checker as it
// happens (protocol_observer.hpp). Then the faults stop, crashed replicas restart, and within
// a bound computed from the options a leader must be established with every replica and a
// new proposal applied everywhere. One summary line; a failing seed prints its replay command.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "protocol_sweep_run.hpp"
#include "sweep_main.hpp"

// Built twice: zab_protocol_sweep on sim_log, and, with ZAB_SWEEP_FILE_LOG,
// zab_protocol_sweep_file_log on sim_file_log (sweep_log.hpp).
#include "protocol_sweep_machines.hpp"
#include "sweep_log.hpp"
using zab::test::sweep_log;

namespace {

// Every machine the sweep can run, by name (protocol_sweep_machines.hpp). The sanitizer
// builds compile the recording machine only (ZAB_SWEEP_RECORDING_ONLY): they run no other.
std::vector<zab::test::machine_runner> all_machines() {
    std::vector<zab::test::machine_runner> all{
        {"recording", &zab::test::run_protocol_seed<zab::testing::recording_state_machine,
                                                    zab::default_policies, sweep_log>}};
#ifndef ZAB_SWEEP_RECORDING_ONLY
    for (auto group : {zab::test::concept_machine_runners(), zab::test::session_machine_runners(),
                       zab::test::example_machine_runners()})
        for (auto& m : group) all.push_back(std::move(m));
#endif
    return all;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace zab;
    const auto args = zab::test::parse_sweep_args(argc, argv, 500);
    if (!args) return 2;
    const std::uint64_t seeds = args->seeds;
    zab::test::protocol_totals t;
    zab::test::sweep_variant variant;
    variant.snapshot_every = args->snapshot_every;
    variant.snapshot_chunk_bytes = args->snapshot_chunk;
    variant.extended_faults = !args->classic_faults;
    variant.leadership_transfers = !args->no_transfers;
    variant.reconfigurations = !args->no_reconfig;
    variant.lease_reads = args->lease_reads;
    variant.batches = args->batches;
    variant.kills = variant.extended_faults && !args->no_kills;
    if (args->combination) {
        // Everything at once (sweep_variant::combination).
        variant.extended_faults = variant.leadership_transfers = variant.reconfigurations =
            variant.lease_reads = variant.batches = variant.combination = variant.kills = true;
    }
    const auto machines = all_machines();
    std::vector<zab::test::machine_runner> chosen;
    for (const auto& m : machines)
        if (args->machine == "each" || m.name == args->machine) chosen.push_back(m);
    if (chosen.empty()) {
        fmt::print(stderr, "unknown --machine {}; one of: each", args->machine);
        for (const auto& m : machines) fmt::print(stderr, ", {}", m.name);
        fmt::print(stderr, "\n");
        return 2;
    }
    const std::uint64_t combined = zab::test::run_sweep(
        *args, argv[0], t,
        [&variant, &chosen](std::uint64_t seed, zab::test::protocol_totals& totals, bool trace) {
            // "each": the machines in turn, by seed (a replay names the seed: the same one).
            const auto& m = chosen[seed % chosen.size()];
            auto r = m.run(seed, totals, trace, variant);
            if (!r.ok) fmt::print(stderr, "seed {} (machine {}):\n{}", seed, m.name, r.report);
            return zab::test::seed_result{r.ok, r.hash};
        });
    const auto& f = t.faults;
    const auto& at = t.newleader_crashes;
    std::string points;
    for (std::size_t p = zab::testing::newleader_point_count; p < zab::testing::crash_point_count;
         ++p)
        points += fmt::format("{}{} {}", points.empty() ? "" : ", ", t.point_crashes[p],
                              to_string(static_cast<zab::testing::crash_point>(p)));
    fmt::print(
        "protocol sweep: seeds {} ({} runs), {} events; faults: {} connection breaks, {} "
        "partitions, {} one-way blocks, {} heals, {} crashes ({} inside NEWLEADER handling: {} "
        "history appended, {} history durable, {} ACK sent, {} ACK counted), {} restarts, {} "
        "pauses; kill then power loss: {} kills ({} with un-synced data), {} restarted, {} "
        "power losses after ({} after un-synced data); {} elections; syncs: {} DIFF, {} TRUNC, {} SNAP ({} chunks); {} compactions; {} proposals, "
        "{} commits; "
        "extended faults: {} slow links, {} one-way stalls, {} frame breaks armed ({} fired), "
        "{} frame delays armed ({} frames delayed), storage: {} transient ({} fired), {} "
        "terminal ({} fired, {} failed replicas restarted), {} slow ({} hung; {} completions slowed; "
        "{} disk stalls fenced); "
        "crash points: {}; "
        "clients: {} writes ({} done, {} refused, {} unknown), {} syncs ({} done); "
        "leadership transfers: {} asked, {} handed over, {} timed out, {} handovers followed; "
        "lease reads: {} lease syncs, {} served under a lease, {} by a quorum round, {} clock "
        "rate changes, {} clock jumps; batches: {} submit_batch calls, {} PROPOSALS frames; "
        "reconfigurations: {} asked, {} committed ({} voters added, {} observers added, {} "
        "removals, {} type changes, {} replacements, {} learners added, {} reweighted), {} "
        "learners promoted, refused: {} in progress, {} stale "
        "version, {} new quorum not synced, {} other; {} unknown; {} leaders handed over on "
        "leaving, {} replicas removed, {} crashes with a change pending; {} "
        "invariant checks; recovery: worst {} us, bound {} us; {} determinism re-runs; trace "
        "hash {:016x}; {} failures\n",
        describe_seeds(*args), t.runs, t.events, f.breaks, f.partitions, f.one_way, f.heals,
        f.crashes + t.newleader_crash_total(), t.newleader_crash_total(), at[0], at[1], at[2],
        at[3], f.restarts, f.pauses, f.kills, f.kills_unsynced, f.kill_restarts,
        f.kill_power_losses, f.kill_power_losses_unsynced, t.elections, t.diffs, t.truncs, t.snaps, t.snapshot_chunks, t.compactions,
        t.proposals,
        t.commits, f.link_delays, f.stalls, f.frame_breaks, t.frames_broken, f.frame_delays,
        t.frames_delayed, f.storage_transient, t.storage_transient_fired, f.storage_terminal,
        t.storage_terminal_fired, f.failed_restarts, f.storage_slow, f.storage_hangs, t.storage_slowed, t.disk_stalls, points,
        t.client_writes, t.writes_ok, t.writes_refused, t.writes_unknown,
        t.client_syncs, t.syncs_ok, t.transfers, t.handed_over, t.transfers_timed_out,
        t.handovers_followed, t.lease_syncs, t.lease_served, t.lease_fallbacks, f.clock_rates,
        f.clock_jumps, t.batch_calls, t.proposal_batches, t.reconfigs, t.reconfigs_committed, t.reconfig_kinds[0],
        t.reconfig_kinds[1], t.reconfig_kinds[2], t.reconfig_kinds[3], t.reconfig_kinds[4],
        t.reconfig_kinds[5], t.reconfig_kinds[6], t.learners_promoted,
        t.refused_in_progress, t.refused_version, t.refused_no_quorum, t.refused_other,
        t.reconfigs_unknown, t.leaving_handoffs, t.removed_replicas, t.crashes_in_reconfig,
        t.invariant_checks, t.worst_recovery, t.bound, t.determinism_checks, combined,
        t.failures);
    bool trivial = f.breaks == 0 || f.partitions == 0 || f.one_way == 0 || f.heals == 0 ||
                   f.crashes == 0 || f.restarts == 0 || f.pauses == 0 || t.elections == 0 ||
                   t.diffs == 0 || t.truncs == 0 || t.snaps == 0 || t.proposals == 0 ||
                   t.commits == 0 || t.writes_ok == 0 || t.writes_refused == 0 ||
                   t.writes_unknown == 0 || t.syncs_ok == 0 ||
                   (args->snapshot_every > 0 && t.compactions == 0) ||
                   (args->snapshot_chunk > 0 && t.snapshot_chunks <= t.snaps);
    for (auto c : at) trivial = trivial || c == 0;
    if (variant.extended_faults) {
        trivial = trivial || f.link_delays == 0 || f.stalls == 0 || t.frames_broken == 0 ||
                  t.frames_delayed == 0 || t.storage_transient_fired == 0 ||
                  t.storage_terminal_fired == 0 || f.failed_restarts == 0 ||
                  t.storage_slowed == 0 || f.storage_hangs == 0 ||
                  (t.disk_stalls == 0 && seeds >= 300);  // a hang must meet pending writes
        // Every crash point reached; those of a TRUNC or SNAP sync (a few dozen in 2,000
        // seeds; file_log often makes a truncation durable with the re-append) from 1,000.
        using zab::testing::crash_point;
        for (std::size_t p = zab::testing::newleader_point_count;
             p < zab::testing::crash_point_count; ++p) {
            const auto point = static_cast<crash_point>(p);
            const bool rare = point == crash_point::truncate_issued ||
                              point == crash_point::truncate_durable ||
                              point == crash_point::snapshot_install_issued ||
                              point == crash_point::snapshot_installed;
            trivial = trivial || (t.point_crashes[p] == 0 && (!rare || seeds >= 1000));
        }
    }
    if (variant.kills)
        trivial = trivial || f.kills_unsynced == 0 || f.kill_power_losses_unsynced == 0;
    if (variant.leadership_transfers)
        trivial = trivial || t.handed_over == 0 || t.transfers_timed_out == 0 ||
                  t.handovers_followed == 0;
    if (variant.reconfigurations) {
        for (auto k : t.reconfig_kinds) trivial = trivial || k == 0;
        trivial = trivial || t.refused_in_progress == 0 || t.refused_version == 0 ||
                  t.refused_no_quorum == 0 || t.leaving_handoffs == 0 ||
                  t.removed_replicas == 0 || t.crashes_in_reconfig == 0 ||
                  t.learners_promoted == 0;
    }
    if (variant.batches) trivial = trivial || t.batch_calls == 0 || t.proposal_batches == 0;
    if (variant.lease_reads)
        trivial = trivial || t.lease_served == 0 || t.lease_fallbacks == 0 ||
                  f.clock_rates == 0 || f.clock_jumps == 0;
    bool uncovered = false;
    if (variant.combination) {
        // Coverage per combination: each met in at least one seed in 25 (the storm's and
        // the lagging learner's in one in 10; a stream read from the log and a fenced disk
        // stall, met in about 6 % of 2,000 seeds, in one in 50), or the sweep did not test
        // what it claims.
        std::string counts;
        for (std::size_t i = 0; i < t.coverage.size(); ++i)
            counts += fmt::format("{}{} {}", i == 0 ? "" : ", ", t.coverage[i],
                                  zab::test::coverage_names[i]);
        fmt::print("combination coverage (seeds in which each met, of {}): {}; {} write storms "
                   "({} writes); machines: {}\n",
                   seeds, counts, t.write_storms, t.storm_writes,
                   args->machine == "each" ? fmt::format("each of {}", chosen.size()) : args->machine);
        for (std::size_t i = 0; i < t.coverage.size(); ++i) {
            const std::uint64_t minimum = (i == 0 || i == 8)   ? seeds / 10
                                          : (i == 1 || i == 7) ? seeds / 50
                                                               : seeds / 25;
            if (t.coverage[i] < std::max<std::uint64_t>(minimum, 1)) {
                fmt::print(stderr, "combination sweep: \"{}\" in {} seeds, fewer than {}\n",
                           zab::test::coverage_names[i], t.coverage[i], std::max<std::uint64_t>(minimum, 1));
                uncovered = true;
            }
        }
    }
    // A handful of seeds may legitimately miss a rare event; a real sweep may not (and a
    // --seed-list replays chosen seeds, whatever they cover).
    trivial = trivial && seeds >= 50;
    uncovered = uncovered && args->seed_list.empty();
    if (trivial) fmt::print(stderr, "sweep exercised too little: some count above is zero\n");
    return (t.failures == 0 && !trivial && !uncovered) ? 0 : 1;
}
