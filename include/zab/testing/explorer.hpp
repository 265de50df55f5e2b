// zab/testing/explorer.hpp — a bounded, exhaustive model checker of the real zab core.
//
// What it does: explores every interleaving of the choices of explorer_model.hpp (message
// deliveries in every order FIFO connections allow, each durability operation's completion,
// ticks, crashes with both extreme crash fates, restarts, client calls, resets,
// reconfiguration, clock jumps) within a depth bound and per-kind budgets, checking after
// every step the §10 invariant checker, the client checker and that no replica stopped on
// a storage failure, and at every leaf a liveness check (the cluster healed and served
// fairly must establish a leader with a quorum and complete every client call within a
// bound of ticks).
//
// How:
//   - stateless search by replay: the core is deterministic, so a path of choices is a
//     state. The search keeps one live model; going back up the tree means building a new
//     model and replaying the path (`replays`, `replayed_steps` in the statistics);
//   - state hashing (explorer_model::hash, which says what it covers): a state seen with at
//     least as much depth left, and with a sleep set no larger, is not explored again;
//   - partial-order reduction by sleep sets (Godefroid): a delivery or a tick at one replica
//     and a delivery or a tick at another commute when neither changes a connection (their
//     steps touch disjoint peer state and only append to channels). After exploring a from
//     s, the siblings' subtrees do not take a again until a dependent choice is taken.
//     Durability completions, client calls and faults are dependent with everything
//     (the checkers read other replicas' disks when a leader commits);
//   - iterative deepening (depth 1, 2, ... up to the bound, or only the bound): the first
//     counterexample found is one of the shortest; breadth-first is an option too;
//   - a counterexample is minimised (every choice that can go while the violation stays,
//     one at a time, until none can) and reported as a path `parse_path` reads back.
#pragma once

#include <bitset>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "zab/testing/explorer_model.hpp"

namespace zab::testing {

struct explorer_options {
    explorer_bounds bounds;
    std::size_t depth = 20;             ///< the longest path explored
    bool iterative_deepening = false;   ///< depth 1, 2, ... instead of the bound at once
    std::size_t deepening_step = 1;
    bool breadth_first = false;         ///< BFS over the same choices (shortest first)
    /// Dynamic partial-order reduction (Flanagan and Godefroid, POPL 2005) instead of sleep
    /// sets and state hashing: one interleaving per class of equivalent ones.
    bool dpor = false;
    bool sleep_sets = true;             ///< partial-order reduction
    bool hashing = true;                ///< prune states already visited
    bool liveness = true;               ///< the liveness check at every leaf
    std::uint64_t liveness_ticks = 40;  ///< the bound of healed ticks
    bool minimise = true;
    std::uint64_t max_states = 0;       ///< stop after this many (0: no limit)
    double max_seconds = 0;             ///< stop after this long (0: no limit)
    /// Called with the statistics at the end of every deepening iteration.
    std::function<void(std::size_t depth, const struct explorer_stats&)> on_depth_done;
};

struct explorer_stats {
    std::uint64_t states = 0;           ///< states reached (each choice taken once counts one)
    std::uint64_t distinct = 0;         ///< distinct state hashes
    std::uint64_t pruned_visited = 0;   ///< states not expanded: seen with as much depth left
    std::uint64_t pruned_sleep = 0;     ///< choices skipped by the sleep sets
    std::uint64_t leaves = 0;
    std::uint64_t liveness_checks = 0;
    std::uint64_t replays = 0;
    std::uint64_t replayed_steps = 0;
    std::size_t max_depth = 0;          ///< the deepest path taken
    double seconds = 0;
    double replay_seconds = 0;          ///< rebuilding states by replay
    double liveness_seconds = 0;        ///< the leaves' liveness runs
    double hash_seconds = 0;
    bool complete = true;               ///< false: a limit (states, time) cut the search
    std::vector<std::uint64_t> distinct_by_depth;  ///< new distinct states first seen at depth d

    double states_per_second() const { return seconds > 0 ? static_cast<double>(states) / seconds : 0; }
};

struct counterexample {
    std::vector<choice> path;      ///< minimised
    std::vector<choice> found;     ///< as the search found it
    std::string what;              ///< the violation
    bool at_leaf_liveness = false; ///< found by the liveness run after the path
};

struct explorer_result {
    explorer_stats stats;
    std::optional<counterexample> found;
};

/// Replays `path` on a fresh model; false if some choice was not enabled.
template <typename Policies>
bool replay(explorer_model<Policies>& model, const std::vector<choice>& path) {
    for (const auto& c : path)
        if (!model.apply(c)) return false;
    return true;
}

/// The violation `path` leads to (with the leaf liveness check if `liveness`), if any.
template <typename Policies>
std::optional<std::string> violation_of(const explorer_options& o, const std::vector<choice>& path,
                                        bool liveness) {
    explorer_model<Policies> model{o.bounds};
    for (const auto& c : path) {
        if (!model.apply(c)) return std::nullopt;
        if (auto v = model.violation()) return v;
    }
    if (liveness) return model.check_liveness(o.liveness_ticks);
    return std::nullopt;
}

template <typename Policies = default_policies>
class explorer {
public:
    explicit explorer(explorer_options options) : options_{std::move(options)} {}

    explorer_result run() {
        start_ = clock::now();
        explorer_result result;
        if (options_.breadth_first) {
            breadth_first(result);
        } else if (options_.dpor) {
            auto model = std::make_unique<model_type>(options_.bounds);
            std::vector<choice> path;
            stack_.reserve(dpor_depth_max);
            dpor(model, path, result);
        } else if (options_.iterative_deepening) {
            for (std::size_t d = std::min(options_.deepening_step, options_.depth);;
                 d = std::min(d + options_.deepening_step, options_.depth)) {
                visited_.clear();
                stats_ = {};
                start_ = clock::now();
                depth_first(d, result);
                finish_stats(result);
                if (options_.on_depth_done) options_.on_depth_done(d, result.stats);
                if (result.found || stopped_ || d == options_.depth) break;
            }
        } else {
            depth_first(options_.depth, result);
        }
        finish_stats(result);
        if (result.found && options_.minimise) minimise(*result.found);
        return result;
    }

private:
    using clock = std::chrono::steady_clock;
    using model_type = explorer_model<Policies>;

    struct seen {
        std::uint32_t remaining;
        std::vector<choice> sleep;
    };
    struct sleeping {
        choice c;
    };

    static bool sleepable(const choice& c) {
        return c.what == choice::kind::deliver || c.what == choice::kind::tick;
    }
    /// The replica whose step `c` is.
    static peer_id target(const choice& c) { return c.what == choice::kind::deliver ? c.b : c.a; }

    static double since(clock::time_point t) {
        return std::chrono::duration<double>(clock::now() - t).count();
    }

    bool out_of_budget() {
        if (stopped_) return true;
        if (options_.max_states != 0 && stats_.states >= options_.max_states) stopped_ = true;
        if (options_.max_seconds > 0 && (stats_.states & 255) == 0 && since(start_) > options_.max_seconds)
            stopped_ = true;
        return stopped_;
    }

    std::unique_ptr<model_type> rebuild(const std::vector<choice>& path) {
        const auto t = clock::now();
        auto model = std::make_unique<model_type>(options_.bounds);
        ++stats_.replays;
        stats_.replayed_steps += path.size();
        const bool ok = replay(*model, path);
        ZAB_ASSERT(ok, "explorer: a path replayed differently (the model is not deterministic)");
        stats_.replay_seconds += since(t);
        return model;
    }

    /// Whether the state (hash `h`, `remaining` depth left, sleep set `sleep`) needs no
    /// exploring: seen before with as much depth left and a sleep set within this one.
    bool already_seen(std::uint64_t h, std::size_t remaining, const std::vector<choice>& sleep,
                      std::size_t depth) {
        if (!options_.hashing) return false;
        auto [it, inserted] = visited_.try_emplace(h);
        if (inserted) {
            ++stats_.distinct;
            if (stats_.distinct_by_depth.size() <= depth) stats_.distinct_by_depth.resize(depth + 1);
            ++stats_.distinct_by_depth[depth];
            it->second = {static_cast<std::uint32_t>(remaining), sleep};
            return false;
        }
        seen& s = it->second;
        const bool covered =
            s.remaining >= remaining &&
            std::all_of(s.sleep.begin(), s.sleep.end(), [&](const choice& c) {
                return std::find(sleep.begin(), sleep.end(), c) != sleep.end();
            });
        if (covered) {
            ++stats_.pruned_visited;
            return true;
        }
        s = {static_cast<std::uint32_t>(std::max<std::size_t>(remaining, s.remaining)), sleep};
        return false;
    }

    void depth_first(std::size_t depth_bound, explorer_result& result) {
        std::vector<choice> path;
        auto model = std::make_unique<model_type>(options_.bounds);
        dfs(model, path, {}, depth_bound, result);
    }

    /// `model` is at the state of `path`. On return it is at some later state (or null).
    void dfs(std::unique_ptr<model_type>& model, std::vector<choice>& path,
             std::vector<choice> sleep, std::size_t depth_bound, explorer_result& result) {
        if (result.found || out_of_budget()) return;
        stats_.max_depth = std::max(stats_.max_depth, path.size());
        if (auto v = model->violation()) {
            result.found = counterexample{path, path, *v, false};
            return;
        }
        const std::size_t remaining = depth_bound - path.size();
        const auto th = clock::now();
        const std::uint64_t h = model->hash();
        stats_.hash_seconds += since(th);
        if (already_seen(h, remaining, sleep, path.size())) return;
        std::vector<choice> choices = remaining == 0 ? std::vector<choice>{} : model->enabled();
        if (choices.empty()) {
            leaf(*model, path, result);
            return;
        }
        bool fresh = true;  // model is at `path`'s state
        std::vector<choice> done;  // siblings explored, each sleepable and non-structural
        for (const choice& c : choices) {
            if (result.found || out_of_budget()) return;
            if (options_.sleep_sets && std::find(sleep.begin(), sleep.end(), c) != sleep.end()) {
                ++stats_.pruned_sleep;
                continue;
            }
            if (!fresh) model = rebuild(path);
            fresh = false;
            const std::uint64_t structure = model->structure_changes();
            model->apply(c);
            ++stats_.states;
            const bool structural = model->structure_changes() != structure;
            std::vector<choice> child_sleep;
            if (options_.sleep_sets && sleepable(c) && !structural) {
                for (const choice& t : sleep)
                    if (target(t) != target(c)) child_sleep.push_back(t);
                for (const choice& t : done)
                    if (target(t) != target(c)) child_sleep.push_back(t);
            }
            path.push_back(c);
            dfs(model, path, std::move(child_sleep), depth_bound, result);
            path.pop_back();
            if (options_.sleep_sets && sleepable(c) && !structural) done.push_back(c);
        }
    }

    void leaf(model_type& model, const std::vector<choice>& path, explorer_result& result) {
        ++stats_.leaves;
        if (!options_.liveness) return;
        const auto t = clock::now();
        ++stats_.liveness_checks;
        auto v = model.check_liveness(options_.liveness_ticks);
        stats_.liveness_seconds += since(t);
        if (v) result.found = counterexample{path, path, *v, true};
    }

    // --- dynamic partial-order reduction ----------------------------------------------------
    //
    // Processes are the sources of choices: each channel (its deliveries, in FIFO order) and
    // each replica's local sources (its log syncs, its epoch writes, its clock, its clients).
    // A choice's identity is its process. Two steps are dependent when they run at the same
    // replica, or either is global: a fault (crash, restart, reset), a step that made or broke
    // a connection, a durability completion (the checkers read every voter's disk when a
    // leader commits, so its order against other replicas' steps is observable), a client
    // sync (the client checker's "must see" is what completed anywhere before it). A
    // delivery happens after the step that queued what it delivers.

    static constexpr std::size_t dpor_depth_max = 1024;
    using step_set = std::bitset<dpor_depth_max>;

    struct dpor_frame {
        std::vector<choice> enabled;    // at the state before this step
        std::vector<choice> backtrack;
        std::vector<choice> done;
        choice taken;
        bool global = false;
        peer_id at = 0;
        step_set before;                // the earlier steps that happen before this one
    };

    static bool global_kind(const choice& c) {
        switch (c.what) {
            case choice::kind::crash:
            case choice::kind::crash_keep:
            case choice::kind::restart:
            case choice::kind::break_link:
            case choice::kind::durable_log:
            case choice::kind::durable_epochs:
            case choice::kind::sync:
            case choice::kind::lease_sync:
            case choice::kind::reconfig:
                return true;
            default: return false;
        }
    }

    /// Whether `a` and `b` spend one budget of `explorer_bounds` (every tick counts against
    /// `ticks`, every crash of either kind against `crashes`, ...).
    static bool same_budget(const choice& a, const choice& b) {
        auto budget = [](choice::kind k) {
            switch (k) {
                case choice::kind::deliver:
                case choice::kind::durable_log:
                case choice::kind::durable_epochs: return 0;
                case choice::kind::crash_keep: return static_cast<int>(choice::kind::crash) + 1;
                default: return static_cast<int>(k) + 1;
            }
        };
        return budget(a.what) != 0 && budget(a.what) == budget(b.what);
    }

    static bool contains(const std::vector<choice>& v, const choice& c) {
        return std::find(v.begin(), v.end(), c) != v.end();
    }

    bool dependent(const dpor_frame& done_step, const choice& next) const {
        return done_step.global || global_kind(next) || done_step.at == target(next);
    }

    /// The steps of the stack (below `n`) that happen before `t`, the next step of its
    /// process: that process's earlier steps and what happens before them, and the step
    /// that queued what `t` delivers (`origin`, 1-based; 0: none) and what happens before it.
    step_set happens_before(std::size_t n, const choice& t, std::size_t origin) const {
        step_set bits;
        for (std::size_t k = 0; k < n; ++k)
            if (stack_[k].taken == t) {
                bits |= stack_[k].before;
                bits.set(k);
            }
        if (origin > 0 && origin <= n) {
            bits |= stack_[origin - 1].before;
            bits.set(origin - 1);
        }
        return bits;
    }

    /// Backtracking points for `t`, a step that can come next (or, for a summary, later) at
    /// stack height `n`: the last step it is dependent with and does not happen after gets
    /// `t` as an alternative (if `t` was enabled there), or the step leading to it.
    void add_races(std::size_t n, const choice& t, std::size_t origin) {
        const step_set hb = happens_before(n, t, origin);
        std::optional<std::size_t> race;
        for (std::size_t i = n; i-- > 0;)
            if (dependent(stack_[i], t) && !hb.test(i)) {
                race = i;
                break;
            }
        if (!race) return;
        dpor_frame& f = stack_[*race];
        std::optional<choice> pick;
        if (contains(f.enabled, t)) {
            pick = t;
        } else {
            for (const choice& q : f.enabled) {
                bool leads = false;
                for (std::size_t j = *race + 1; j < n && !leads; ++j)
                    leads = hb.test(j) && stack_[j].taken == q;
                if (leads) {
                    pick = q;
                    break;
                }
            }
        }
        if (pick) {
            if (!contains(f.backtrack, *pick)) f.backtrack.push_back(*pick);
        } else {
            for (const choice& q : f.enabled)
                if (!contains(f.backtrack, q)) f.backtrack.push_back(q);
        }
    }

    static void merge(std::vector<choice>& into, const std::vector<choice>& from) {
        for (const choice& c : from)
            if (!contains(into, c)) into.push_back(c);
    }

    /// Explores from the state of `path` (where `model` is); returns the choices taken in the
    /// subtree (its summary). With hashing, a state whose subtree was explored before is not
    /// explored again: its summary's choices are raced against the stack instead, as if they
    /// came next (stateful DPOR after Yang et al., 2008, with a conservative summary: the
    /// happens-before of a summarised step through the steps below it is not known, so it
    /// races with more than it might).
    std::vector<choice> dpor(std::unique_ptr<model_type>& model, std::vector<choice>& path,
                             explorer_result& result) {
        std::vector<choice> summary;
        if (result.found || out_of_budget()) return summary;
        const std::size_t n = path.size();
        stats_.max_depth = std::max(stats_.max_depth, n);
        if (auto v = model->violation()) {
            result.found = counterexample{path, path, *v, false};
            return summary;
        }
        std::uint64_t h = 0;
        if (options_.hashing) {
            const auto th = clock::now();
            h = model->hash();
            stats_.hash_seconds += since(th);
            if (const auto it = summaries_.find(h); it != summaries_.end()) {
                ++stats_.pruned_visited;
                for (const choice& q : it->second) add_races(n, q, 0);
                return it->second;
            }
        }
        std::vector<choice> enabled =
            n >= options_.depth || n + 1 >= dpor_depth_max ? std::vector<choice>{} : model->enabled();
        if (enabled.empty()) {
            if (n >= options_.depth) stats_.complete = false;  // the bound cut this path
            leaf(*model, path, result);
            remember(h, n, summary);
            return summary;
        }
        if (stack_.size() <= n) stack_.resize(n + 1);
        stack_[n] = dpor_frame{};
        stack_[n].enabled = enabled;
        for (const choice& t : enabled) add_races(n, t, model->origin_of(t));
        stack_[n].backtrack.push_back(enabled.front());
        bool fresh = true;
        for (;;) {
            if (result.found || out_of_budget()) return summary;
            std::optional<choice> next;
            for (const choice& c : stack_[n].backtrack)
                if (!contains(stack_[n].done, c)) {
                    next = c;
                    break;
                }
            if (!next) break;
            stack_[n].done.push_back(*next);
            // Choices that draw on one budget disable each other once it is spent (the last
            // write at replica 1 disables the write at 3), so no later state offers the
            // other for a race to be found: both orders are tried here.
            for (const choice& q : stack_[n].enabled)
                if (q != *next && same_budget(q, *next) && !contains(stack_[n].backtrack, q))
                    stack_[n].backtrack.push_back(q);
            if (!fresh) model = rebuild(path);
            fresh = false;
            const std::size_t origin = model->origin_of(*next);
            const std::uint64_t structure = model->structure_changes();
            model->apply(*next);
            ++stats_.states;
            dpor_frame& f = stack_[n];
            f.taken = *next;
            f.at = target(*next);
            f.global = global_kind(*next) || model->structure_changes() != structure;
            f.before.reset();
            for (std::size_t k = 0; k < n; ++k)
                if (f.global || dependent(stack_[k], *next)) {
                    f.before |= stack_[k].before;
                    f.before.set(k);
                }
            if (origin > 0 && origin <= n) {
                f.before |= stack_[origin - 1].before;
                f.before.set(origin - 1);
            }
            if (!contains(summary, *next)) summary.push_back(*next);
            path.push_back(*next);
            merge(summary, dpor(model, path, result));
            path.pop_back();
        }
        stats_.pruned_sleep += enabled.size() - stack_[n].done.size();
        remember(h, n, summary);
        return summary;
    }

    void remember(std::uint64_t h, std::size_t n, const std::vector<choice>& summary) {
        if (!options_.hashing) return;
        if (summaries_.emplace(h, summary).second) {
            ++stats_.distinct;
            if (stats_.distinct_by_depth.size() <= n) stats_.distinct_by_depth.resize(n + 1);
            ++stats_.distinct_by_depth[n];
        }
    }

    std::unordered_map<std::uint64_t, std::vector<choice>> summaries_;
    std::vector<dpor_frame> stack_;

    void breadth_first(explorer_result& result) {
        std::deque<std::vector<choice>> frontier;
        frontier.push_back({});
        while (!frontier.empty() && !result.found && !out_of_budget()) {
            std::vector<choice> path = std::move(frontier.front());
            frontier.pop_front();
            auto model = rebuild(path);
            stats_.max_depth = std::max(stats_.max_depth, path.size());
            const auto th = clock::now();
            const std::uint64_t h = model->hash();
            stats_.hash_seconds += since(th);
            if (already_seen(h, options_.depth - path.size(), {}, path.size())) continue;
            const auto choices =
                path.size() == options_.depth ? std::vector<choice>{} : model->enabled();
            if (choices.empty()) {
                leaf(*model, path, result);
                continue;
            }
            bool fresh = true;
            for (const choice& c : choices) {
                if (!fresh) model = rebuild(path);
                fresh = false;
                model->apply(c);
                ++stats_.states;
                path.push_back(c);
                if (auto v = model->violation()) {
                    result.found = counterexample{path, path, *v, false};
                    return;
                }
                frontier.push_back(path);
                path.pop_back();
            }
        }
        if (!frontier.empty() && !result.found) stats_.complete = false;
    }

    /// One choice at a time, each that can go while some violation remains (with the
    /// liveness run if that is how it was found).
    void minimise(counterexample& found) {
        std::vector<choice> path = found.path;
        for (bool shrunk = true; shrunk;) {
            shrunk = false;
            for (std::size_t i = path.size(); i-- > 0;) {
                std::vector<choice> shorter = path;
                shorter.erase(shorter.begin() + static_cast<std::ptrdiff_t>(i));
                if (auto v = violation_of<Policies>(options_, shorter, found.at_leaf_liveness)) {
                    path = std::move(shorter);
                    found.what = *v;
                    shrunk = true;
                }
            }
        }
        found.path = std::move(path);
    }

    void finish_stats(explorer_result& result) {
        stats_.seconds = since(start_);
        stats_.complete = stats_.complete && !stopped_;
        result.stats = stats_;
    }

    explorer_options options_;
    explorer_stats stats_;
    std::unordered_map<std::uint64_t, seen> visited_;
    clock::time_point start_;
    bool stopped_ = false;
};

}  // namespace zab::testing
