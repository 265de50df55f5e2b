// tests/protocol/sweep_main.hpp — what every seeded sweep program shares: its command line,
// the loop over seeds, the determinism re-runs and the replay hint.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zab/core/logging.hpp"
#include "zab/testing/trace_hash.hpp"

namespace zab::test {

/// `[--seeds N] [--first S] [--trace] [--verbose] [--snapshot-every N] [--snapshot-chunk N]
/// [--classic-faults] [--no-transfers] [--no-reconfig] [--no-kills] [--lease-reads]
/// [--batches] [--combination] [--machine NAME] [--seed-list S,S,...]`
struct sweep_args {
    std::uint64_t seeds = 0;
    std::uint64_t first = 1;
    /// The seeds to run instead of `first`..`first + seeds` (--seed-list: the seeds a long
    /// sweep once failed on, replayed together as a regression test).
    std::vector<std::uint64_t> seed_list;
    bool trace = false;
    bool verbose = false;
    /// options::snapshot_every for every peer (0: the default, no compaction); the protocol
    /// sweep only.
    std::uint64_t snapshot_every = 0;
    /// options::snapshot_chunk_bytes for every peer (0: the default); the protocol sweep only.
    std::uint32_t snapshot_chunk = 0;
    /// Only the faults the sweep drew before the extended ones; the protocol sweep only.
    bool classic_faults = false;
    /// No leadership transfers among the faults (the sweep as it was before them: a seed
    /// found then replays as it failed); the protocol sweep only.
    bool no_transfers = false;
    /// No reconfigurations among the faults and no joiners (the sweep as it was before them:
    /// a seed found then replays as it failed); the protocol sweep only.
    bool no_reconfig = false;
    /// No kill-then-power-loss among the faults (kill_faults: the sweep as it was before
    /// them, so a seed found then replays as it failed); the protocol sweep only.
    bool no_kills = false;
    /// Lease reads (docs/protocol.md §7.1) on every peer, lease syncs among the client
    /// requests, and clocks that run at different rates and jump, within the drift bound;
    /// the protocol sweep only.
    bool lease_reads = false;
    /// Client writes often submitted several at once (peer::submit_batch: PROPOSALS
    /// batches), some leaders with a batch limit small enough to split them; the protocol
    /// sweep only.
    bool batches = false;
    /// The state machine every replica runs (protocol_sweep_machines.hpp: "recording", the
    /// default; a combination of optional concepts such as "plain" or "system+deferred";
    /// "session(...)" around one; "kv", the example's; "each": one per seed in turn); the
    /// protocol sweep only.
    std::string machine = "recording";
    /// The combination sweep (sweep_variant::combination) with coverage minimums; the
    /// protocol sweep only.
    bool combination = false;
};

/// Parses the command line; prints the usage and returns nothing on a bad argument.
inline std::optional<sweep_args> parse_sweep_args(int argc, char** argv,
                                                  std::uint64_t default_seeds) {
    sweep_args a;
    a.seeds = default_seeds;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--seeds" && i + 1 < argc) a.seeds = std::strtoull(argv[++i], nullptr, 10);
        else if (arg == "--first" && i + 1 < argc) a.first = std::strtoull(argv[++i], nullptr, 10);
        else if (arg == "--trace") a.trace = true;
        else if (arg == "--verbose") a.verbose = true;
        else if (arg == "--classic-faults") a.classic_faults = true;
        else if (arg == "--no-transfers") a.no_transfers = true;
        else if (arg == "--no-reconfig") a.no_reconfig = true;
        else if (arg == "--no-kills") a.no_kills = true;
        else if (arg == "--lease-reads") a.lease_reads = true;
        else if (arg == "--batches") a.batches = true;
        else if (arg == "--combination") a.combination = true;
        else if (arg == "--machine" && i + 1 < argc) a.machine = argv[++i];
        else if (arg == "--seed-list" && i + 1 < argc) {
            for (const char* p = argv[++i]; *p != '\0';) {
                char* end = nullptr;
                a.seed_list.push_back(std::strtoull(p, &end, 10));
                if (end == p) return std::nullopt;
                p = *end == ',' ? end + 1 : end;
            }
        }
        else if (arg == "--snapshot-every" && i + 1 < argc)
            a.snapshot_every = std::strtoull(argv[++i], nullptr, 10);
        else if (arg == "--snapshot-chunk" && i + 1 < argc)
            a.snapshot_chunk = static_cast<std::uint32_t>(std::strtoul(argv[++i], nullptr, 10));
        else {
            fmt::print(stderr,
                       "usage: {} [--seeds N] [--first S] [--trace] [--verbose] "
                       "[--snapshot-every N] [--snapshot-chunk N] [--classic-faults] [--no-transfers] "
                       "[--no-reconfig] [--no-kills] [--lease-reads] [--batches] [--combination] "
                       "[--machine NAME] [--seed-list S,S,...]\n",
                       argv[0]);
            return std::nullopt;
        }
    }
    if (!a.seed_list.empty()) a.seeds = a.seed_list.size();
    set_log_level(a.verbose ? log_level::info : log_level::off);
    return a;
}

/// The seeds a sweep ran, for its summary line: "F..L", or the --seed-list.
inline std::string describe_seeds(const sweep_args& a) {
    if (a.seed_list.empty()) return fmt::format("{}..{}", a.first, a.first + a.seeds - 1);
    return fmt::format("{}", fmt::join(a.seed_list, ","));
}

/// One seed's outcome: whether every check held, and its trace hash.
struct seed_result {
    bool ok = true;
    std::uint64_t hash = 0;
};

/// Runs `run_seed(seed, totals, trace)` for every seed. Every tenth passing seed runs again
/// and must give the same trace hash (determinism). A failing seed prints its replay
/// command. `totals` needs `runs`, `determinism_checks` and `failures` counters. Returns the
/// hash of all the seeds' hashes.
template <typename Totals, typename RunSeed>
std::uint64_t run_sweep(const sweep_args& a, const char* program, Totals& totals,
                        RunSeed run_seed) {
    testing::trace_hash combined;
    std::vector<std::uint64_t> seeds = a.seed_list;
    if (seeds.empty())
        for (std::uint64_t seed = a.first; seed < a.first + a.seeds; ++seed) seeds.push_back(seed);
    for (const std::uint64_t seed : seeds) {
        ++totals.runs;
        seed_result r = run_seed(seed, totals, a.trace);
        if (r.ok && seed % 10 == 0) {
            Totals scratch;
            const seed_result again = run_seed(seed, scratch, false);
            ++totals.determinism_checks;
            if (again.hash != r.hash) {
                fmt::print(stderr, "seed {}: not deterministic: hash {:016x} then {:016x}\n",
                           seed, r.hash, again.hash);
                r.ok = false;
            }
        }
        combined.add(r.hash);
        if (!r.ok) {
            ++totals.failures;
            fmt::print(stderr, "replay: {} --first {} --seeds 1 --trace{}{}{}{}{}{}{}{}{}{}\n", program, seed,
                       a.snapshot_every == 0
                           ? std::string{}
                           : fmt::format(" --snapshot-every {}", a.snapshot_every),
                       a.snapshot_chunk == 0
                           ? std::string{}
                           : fmt::format(" --snapshot-chunk {}", a.snapshot_chunk),
                       a.classic_faults ? " --classic-faults" : "",
                       a.no_transfers ? " --no-transfers" : "",
                       a.no_reconfig ? " --no-reconfig" : "", a.no_kills ? " --no-kills" : "",
                       a.lease_reads ? " --lease-reads" : "", a.batches ? " --batches" : "",
                       a.combination ? " --combination" : "",
                       a.machine == "recording" ? std::string{}
                                                : fmt::format(" --machine '{}'", a.machine));
        }
    }
    return combined.value();
}

}  // namespace zab::test
