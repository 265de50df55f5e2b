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
//
// From a prefix: `explorer_bounds::prefix` is a path every model takes in its constructor
// (after the warm-up, if any), so the search starts where it leads and every path here —
// the counterexample's too — is the part after it; appended to the prefix it replays the
// same from the initial state (the prefix's choices use the same budgets). A prefix may
// take `settle` (the fair drain until quiescent), which the search itself never offers: it
// gets past a long but uninteresting stretch (a write committed everywhere, a restarted
// replica synced again) in one step, so that the depth bound is spent where it matters.
#pragma once

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
    std::optional<counterexample> found;  ///< its paths start after bounds.prefix
    /// explorer_model::prefix_problem of bounds.prefix: nothing was searched.
    std::optional<std::string> invalid_prefix;
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
        start_ = budget_start_ = clock::now();
        explorer_result result;
        if (!options_.bounds.prefix.empty()) {
            if (const auto problem = model_type{options_.bounds}.prefix_problem()) {  // a copy
                result.invalid_prefix = *problem;
                stats_.complete = false;
                finish_stats(result);
                return result;
            }
        }
        if (options_.breadth_first) {
            breadth_first(result);
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
        if (options_.max_seconds > 0 && (stats_.states & 255) == 0 && since(budget_start_) > options_.max_seconds)
            stopped_ = true;  // the whole run's time: iterative deepening restarts start_
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
    clock::time_point budget_start_;  ///< when run() began: max_seconds counts from it
    bool stopped_ = false;
};

}  // namespace zab::testing
