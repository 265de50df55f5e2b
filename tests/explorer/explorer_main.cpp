// zab_explorer — the exhaustive explorer (zab/testing/explorer.hpp) from the command line.
//
//   zab_explorer [bounds] [search] [--variant NAME] [--expect-violation]
//   zab_explorer [bounds] --replay "deliver 1 2; tick 3; ..." [--transcripts DIR]
//
// Bounds: --voters N (3) --joiners N (0) --depth D (20) --crashes N (1) --restarts N (1)
// --writes N (2) --syncs N (0) --lease-syncs N (0) --reconfigs N (0) --transfers N (0)
// --breaks N (0) --ticks N (8) --jumps N (0) --jump-ticks N (3) --no-crash-keep
// --from-established (start where a fair run first established a group)
// --prefix 'PATH' (take PATH first, after the warm-up if any, and search from where it leads:
// explorer_bounds::prefix; PATH may use `settle`, the fair drain until quiescent, e.g.
// --prefix 'write 3; settle; crash 1; restart 1; settle'; a step not enabled is an error)
// --lease (read leases on: read_lease_ticks 4) --init-limit N --sync-limit N
// --snapshot-every N (compaction every N applied)
// Search: depth-first with state hashing and sleep sets by default;
// --iterative (sleep sets and state hashing, deepening 1, 2, ... up to --depth; --step N)
// --bfs --no-por --no-hash
// --no-liveness --liveness-ticks N (40) --max-states N --max-seconds S --no-minimise
// Variants (tests/protocol/broken_variants.hpp): core (default), stale-ack, zk-3109,
// zk-3911, zk-4646, zk-4643, truncless, mangling, skipping, stale-accepted, eager-commit,
// eager-apply, gapped, unsynced-transfer.
// With --prefix, --replay's path is the part after the prefix; a counterexample is printed
// both ways: that part with --prefix, and the whole path from the initial state without it.
// Exit status: 0 when no violation is found — or, with --expect-violation, when one is; 2 on
// a bad command line (a prefix that does not apply included).
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "zab/testing/explorer.hpp"

#include "../protocol/broken_variants.hpp"
#include "../protocol/transcript_text.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

struct command_line {
    explorer_options options;
    std::string variant = "core";
    bool expect_violation = false;
    std::optional<std::string> replay;
    std::string transcripts;
    std::vector<std::string> bound_args;  // what the replay command repeats
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "zab_explorer: %s (see tests/explorer/explorer_main.cpp)\n", why.c_str());
    std::exit(2);
}

command_line parse(int argc, char** argv) {
    command_line cl;
    cl.options.bounds.peer = explorer_peer_options();
    auto& b = cl.options.bounds;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage("missing value after " + a);
            return argv[++i];
        };
        auto number = [&]() -> std::uint64_t { return std::stoull(value()); };
        auto bound = [&](auto& field) {
            field = static_cast<std::remove_reference_t<decltype(field)>>(number());
            cl.bound_args.push_back(a);
            cl.bound_args.push_back(argv[i]);
        };
        auto flag = [&] { cl.bound_args.push_back(a); };
        if (a == "--voters") bound(b.voters);
        else if (a == "--joiners") bound(b.joiners);
        else if (a == "--depth") cl.options.depth = number();
        else if (a == "--crashes") bound(b.crashes);
        else if (a == "--restarts") bound(b.restarts);
        else if (a == "--writes") bound(b.writes);
        else if (a == "--syncs") bound(b.syncs);
        else if (a == "--lease-syncs") bound(b.lease_syncs);
        else if (a == "--reconfigs") bound(b.reconfigs);
        else if (a == "--transfers") bound(b.transfers);
        else if (a == "--breaks") bound(b.breaks);
        else if (a == "--ticks") bound(b.ticks);
        else if (a == "--jumps") bound(b.clock_jumps);
        else if (a == "--jump-ticks") bound(b.jump_ticks);
        else if (a == "--no-crash-keep") b.crash_keep = false, flag();
        else if (a == "--from-established") b.start_established = true, flag();
        else if (a == "--prefix") {
            b.prefix = value();
            cl.bound_args.push_back(a);
            cl.bound_args.push_back(b.prefix);
        }
        else if (a == "--lease") b.peer.read_lease_ticks = 4, flag();
        else if (a == "--init-limit") bound(b.peer.init_limit_ticks);
        else if (a == "--sync-limit") bound(b.peer.sync_limit_ticks);
        else if (a == "--snapshot-every") bound(b.peer.snapshot_every);
        else if (a == "--iterative") cl.options.iterative_deepening = true;
        else if (a == "--step") cl.options.deepening_step = number();
        else if (a == "--bfs") cl.options.breadth_first = true;
        else if (a == "--no-por") cl.options.sleep_sets = false;
        else if (a == "--no-hash") cl.options.hashing = false;
        else if (a == "--no-liveness") cl.options.liveness = false, flag();
        else if (a == "--liveness-ticks") bound(cl.options.liveness_ticks);
        else if (a == "--max-states") cl.options.max_states = number();
        else if (a == "--max-seconds") cl.options.max_seconds = std::stod(value());
        else if (a == "--no-minimise") cl.options.minimise = false;
        else if (a == "--variant") cl.variant = value(), cl.bound_args.push_back(a), cl.bound_args.push_back(cl.variant);
        else if (a == "--expect-violation") cl.expect_violation = true;
        else if (a == "--replay") cl.replay = value();
        else if (a == "--transcripts") cl.transcripts = value();
        else usage("unknown option " + a);
    }
    if (auto problem = b.peer.problem(); !problem.empty()) usage("peer options: " + problem);
    return cl;
}

// --- while a path runs: what to print if the core aborts (ZAB_ASSERT) -------------------

std::string abort_note;  // the replay command of the path being explored, when known

extern "C" void on_abort(int) {
    if (!abort_note.empty()) {
        const char* text = abort_note.c_str();
        [[maybe_unused]] const auto written = ::write(2, text, std::strlen(text));
    }
    std::signal(SIGABRT, SIG_DFL);
    std::raise(SIGABRT);
}

std::string frame_text(const shared_bytes& frame) {
    auto decoded = decode(frame.view());
    return decoded ? zab::test::transcript::text(decoded.value().msg) : std::string{"<undecodable>"};
}

/// `word` as one shell word: as it is if it is plain, else in single quotes.
std::string shell_word(const std::string& word) {
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=,", c) != nullptr;
    });
    if (plain) return word;
    std::string out = "'";
    for (const char c : word) out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
    return out + "'";
}

/// The command that replays `path`: after the prefix with `--prefix` (`with_prefix`, the
/// search's paths), or from the initial state without it (`path` then includes the prefix).
std::string replay_command(const command_line& cl, const std::vector<choice>& path,
                           bool with_prefix = true) {
    std::string out = "zab_explorer";
    for (std::size_t i = 0; i < cl.bound_args.size(); ++i) {
        if (!with_prefix && cl.bound_args[i] == "--prefix") {
            ++i;  // and its value
            continue;
        }
        out += " " + shell_word(cl.bound_args[i]);
    }
    return out + " --replay " + shell_word(to_string(path));
}

/// The prefix's choices (bounds.prefix, already checked by prefix_problem) then `path`.
std::vector<choice> whole_path(const command_line& cl, const std::vector<choice>& path) {
    std::vector<choice> out = parse_path(cl.options.bounds.prefix).value_or(std::vector<choice>{});
    out.insert(out.end(), path.begin(), path.end());
    return out;
}

/// The path step by step, what each delivery carried, and the transcripts.
template <typename Policies>
void describe(const command_line& cl, const std::vector<choice>& path, bool liveness) {
    // The prefix taken here rather than by the constructor: its steps go in the transcripts.
    explorer_bounds from_start = cl.options.bounds;
    from_start.prefix.clear();
    explorer_model<Policies> model{from_start};
    model.frame_text = frame_text;
    model.record_transcripts(!cl.transcripts.empty());
    std::size_t step = 0;
    if (!cl.options.bounds.prefix.empty()) {
        for (const auto& c : whole_path(cl, {}))
            if (!model.apply(c)) {  // prefix_problem said it does: the model is not deterministic
                fmt::print("  prefix step {} NOT ENABLED\n", to_string(c));
                return;
            }
        fmt::print("  after the prefix ({}): steps counted from there\n", cl.options.bounds.prefix);
        if (auto v = model.violation()) {
            fmt::print("  violation after the prefix: {}\n", *v);
            return;
        }
    }
    for (const auto& c : path) {
        std::string what;
        if (c.what == choice::kind::deliver && !model.network().channel(c.a, c.b).empty()) {
            const auto& head = model.network().channel(c.a, c.b).front();
            what = head.what == channel_item::kind::connected      ? "connected"
                   : head.what == channel_item::kind::disconnected ? "disconnected"
                                                                   : frame_text(head.frame);
        }
        if (!model.apply(c)) {
            fmt::print("  {:3}  {}  NOT ENABLED\n", ++step, to_string(c));
            return;
        }
        fmt::print("  {:3}  {:<18} {}\n", ++step, to_string(c), what);
        if (auto v = model.violation()) {
            fmt::print("  violation after step {}: {}\n", step, *v);
            break;
        }
    }
    if (!model.violation()) fmt::print("  enabled next: {}\n", to_string(model.enabled()));
    if (liveness && !model.violation()) {
        if (auto v = model.check_liveness(cl.options.liveness_ticks))
            fmt::print("  then healed and run fairly: {}\n", *v);
        else
            fmt::print("  then healed and run fairly: live, no violation\n");
    }
    if (cl.transcripts.empty()) return;
    std::filesystem::create_directories(cl.transcripts);
    std::map<peer_id, std::ofstream> files;
    for (const auto& line : model.transcript_lines()) {
        auto [it, inserted] = files.try_emplace(line.replica);
        if (inserted) {
            const auto name = std::filesystem::path{cl.transcripts} /
                              fmt::format("explorer_{}_peer{}.txt", cl.variant, line.replica);
            it->second.open(name);
            it->second << fmt::format(
                "# Replica {} in the explorer's counterexample ({}):\n# {}\n# (a 'durable' "
                "here completed one operation; transcript_test's completes all: rewrite the\n"
                "# expected output with ZAB_TRANSCRIPT_REWRITE=1 and review it.)\n",
                line.replica, cl.variant, replay_command(cl, path));
            fmt::print("  transcript of replica {}: {}\n", line.replica, name.string());
        }
        it->second << line.text << "\n";
    }
}

void print_stats(std::string_view label, const explorer_stats& s) {
    fmt::print(
        "{}: {} states, {} distinct, depth {}, {:.0f} states/s, {:.2f} s (replay {:.2f} s in {} "
        "replays of {} steps, liveness {:.2f} s in {} runs, hashing {:.2f} s), pruned: {} seen, "
        "{} by sleep sets, {} leaves{}\n",
        label, s.states, s.distinct, s.max_depth, s.states_per_second(), s.seconds,
        s.replay_seconds, s.replays, s.replayed_steps, s.liveness_seconds, s.liveness_checks,
        s.hash_seconds, s.pruned_visited, s.pruned_sleep, s.leaves,
        s.complete ? "" : " (cut short by a limit)");
}

template <typename Policies>
int run(const command_line& cl) {
    if (!cl.options.bounds.prefix.empty())
        if (const auto problem = explorer_model<Policies>{cl.options.bounds}.prefix_problem())
            usage("--prefix: " + *problem);
    if (cl.replay) {
        const auto path = parse_path(*cl.replay);
        if (!path) usage("cannot read the path to replay");
        fmt::print("replaying {} choices{} ({})\n", path->size(),
                   cl.options.bounds.prefix.empty() ? "" : " after the prefix", cl.variant);
        describe<Policies>(cl, *path, cl.options.liveness);
        const auto v = violation_of<Policies>(cl.options, *path, cl.options.liveness);
        return v.has_value() == cl.expect_violation ? 0 : 1;
    }
    explorer_options options = cl.options;
    options.on_depth_done = [](std::size_t depth, const explorer_stats& s) {
        print_stats(fmt::format("depth {:2}", depth), s);
        std::fflush(stdout);
    };
    abort_note = fmt::format(
        "zab_explorer: the core aborted during the search; rerun with --bfs or --iterative "
        "to find the shortest path, then --replay it\n");
    explorer<Policies> search{options};
    const auto result = search.run();
    if (result.invalid_prefix) usage("--prefix: " + *result.invalid_prefix);
    print_stats("total", result.stats);
    std::string growth;
    for (std::size_t d = 0; d < result.stats.distinct_by_depth.size(); ++d)
        growth += fmt::format("{}{}", d == 0 ? "" : " ", result.stats.distinct_by_depth[d]);
    fmt::print("new distinct states by depth: {}\n", growth);
    if (!result.found) {
        fmt::print("no violation ({}, depth {})\n", cl.variant, cl.options.depth);
        return cl.expect_violation ? 1 : 0;
    }
    const auto& found = *result.found;
    fmt::print("VIOLATION ({}): {}\n", cl.variant, found.what);
    fmt::print("found at depth {}{}; minimised to {} choices:\n", found.found.size(),
               found.at_leaf_liveness ? " (by the leaf's liveness run)" : "", found.path.size());
    describe<Policies>(cl, found.path, found.at_leaf_liveness);
    if (cl.options.bounds.prefix.empty()) {
        fmt::print("replay: {}\n", replay_command(cl, found.path));
        return cl.expect_violation ? 0 : 1;
    }
    // The search's paths start after the prefix: both commands, and a check that the whole
    // path, printed and read back, leads to a violation from the initial state as well.
    const auto whole = whole_path(cl, found.path);
    fmt::print("replay (the {} choices after the prefix, with --prefix): {}\n", found.path.size(),
               replay_command(cl, found.path));
    fmt::print("replay (the whole path, {} choices from the initial state, no --prefix): {}\n",
               whole.size(), replay_command(cl, whole, false));
    explorer_options from_start = cl.options;
    from_start.bounds.prefix.clear();
    const auto reread = parse_path(to_string(whole));
    if (!reread || *reread != whole ||
        !violation_of<Policies>(from_start, *reread, found.at_leaf_liveness)) {
        fmt::print("BUG: the whole path does not replay to a violation without --prefix\n");
        return 1;
    }
    return cl.expect_violation ? 0 : 1;
}

template <typename B = zab_broadcast, typename S = zab_synchronization, typename D = zab_discovery>
using variant = policies<fast_leader_election, D, S, B>;

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGABRT, on_abort);
    zab::set_log_level(log_level::off);
    const command_line cl = parse(argc, argv);
    namespace b = zab::test::broken;
    const std::string& v = cl.variant;
    if (v == "core") return run<default_policies>(cl);
    if (v == "stale-ack") return run<variant<b::stale_ack_broadcast>>(cl);
    if (v == "zk-3109") return run<variant<zab_broadcast, zab_synchronization, b::patient_discovery>>(cl);
    if (v == "zk-3911") return run<variant<zab_broadcast, b::early_ack_synchronization>>(cl);
    if (v == "zk-4646") return run<variant<zab_broadcast, b::ack_before_history_synchronization>>(cl);
    if (v == "zk-4643") return run<variant<zab_broadcast, b::epoch_first_synchronization>>(cl);
    if (v == "truncless") return run<variant<zab_broadcast, b::truncless_synchronization>>(cl);
    if (v == "mangling") return run<variant<b::mangling_broadcast>>(cl);
    if (v == "skipping") return run<variant<b::skipping_broadcast>>(cl);
    if (v == "stale-accepted") return run<variant<zab_broadcast, b::stale_accepted_synchronization>>(cl);
    if (v == "eager-commit") return run<variant<b::eager_commit_broadcast>>(cl);
    if (v == "eager-apply") return run<variant<b::eager_apply_broadcast>>(cl);
    if (v == "gapped") return run<variant<b::gapped_broadcast>>(cl);
    if (v == "unsynced-transfer")
        return run<variant<zab_broadcast, b::unsynced_transfer_synchronization>>(cl);
    usage("unknown variant " + v);
}
