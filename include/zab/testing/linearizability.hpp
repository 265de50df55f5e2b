// zab/testing/linearizability.hpp — checks that a history of client operations is
// linearizable with respect to a sequential model.
//
// A history is what clients saw: each operation was called at some time and returned at a
// later one with some output, or its outcome stayed unknown (`errc::outcome_unknown`, a
// crashed client). It is linearizable when every operation can be given one instant between
// its call and its return at which it took effect, such that the outputs are those of the
// model applied sequentially in the order of those instants (Herlihy & Wing, 1990).
//
// The search is Wing & Gong's, in the form of Lowe ("Testing for linearizability", 2017) and
// Porcupine: the calls and returns of the history form a linked list ordered by time; the
// search linearizes one of the operations whose call comes before the first return still in
// the list, removes its call and return, and goes on; when it reaches a return it cannot
// pass it backtracks. Every configuration reached (the set of operations linearized, and the
// model state) is memoised, so no configuration is explored twice.
//
// Operations on different keys never interact, so a model may partition the history (by key)
// and each part is checked on its own: the history is linearizable iff every part is
// (P-compositionality, Horn & Kroening 2015; locality, Herlihy & Wing §3.3).
//
// An operation with unknown outcome may have taken effect at any instant after its call, or
// never: its return is at +infinity, its output is unconstrained (the model is asked to step
// with no output), and the search succeeds once every operation with a known outcome is
// linearized, so the unknown ones it did not need are dropped. Such operations never block,
// so the search tries them last, prunes configurations that used more of them than an
// equivalent one already explored, and first runs a cheaper relaxed search in which they may
// take effect repeatedly (its failures are proofs; see `detail::partition_search`).
//
// Calls and returns at the same instant count as concurrent (a call sorts before a return of
// the same time): a clock too coarse to order them can never produce a false alarm.
//
// The search is exponential in the worst case. It runs under a budget (steps, memoised
// configurations, optionally wall-clock time); exhausting it gives the verdict `gave_up`,
// which is a failure: a pass is only ever reported when it was proven.
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/core/assert.hpp"
#include "zab/core/error.hpp"
#include "zab/testing/random.hpp"

namespace zab::testing {

/// A point on the history's clock: any monotonic integer unit (the simulator's virtual µs).
using history_time = std::int64_t;

/// One client operation. `return_time` is empty when the client never learned the outcome:
/// the operation is then open to the end of the history and `output` must be empty too.
/// With a known outcome `output` is required and `call_time <= *return_time`.
template <typename Model>
struct operation {
    std::uint64_t client = 0;
    history_time call_time = 0;
    std::optional<history_time> return_time;
    typename Model::input input{};
    std::optional<typename Model::output> output;

    bool outcome_known() const noexcept { return return_time.has_value(); }
};

/// A sequential specification the checker can test a history against.
///
/// - `Model::input`, `Model::output`: what an operation was asked and what it answered.
/// - `Model::state`: the state of the sequential object. Copyable and equality-comparable:
///   the search memoises states and backtracks to earlier ones.
/// - `Model::init()`: the state before the first operation.
/// - `Model::step(state, input, output)`: the state after the operation, or nullopt when the
///   output is impossible from `state`. `output` is nullopt for an operation whose outcome is
///   unknown: the model must then accept it (any output was possible) and return the state
///   after it took effect. The state after an operation must depend only on the state and
///   the input (a deterministic object), which both models of linearizability_models.hpp are.
/// - `Model::hash(state)`: a hash consistent with `==` on states (memoisation).
/// - `Model::describe_operation(input, output)`, `Model::describe_state(state)`: short text
///   for the report (output nullopt: unknown outcome).
template <typename Model>
concept linearizability_model =
    std::copyable<typename Model::state> && std::equality_comparable<typename Model::state> &&
    std::copyable<typename Model::input> && std::copyable<typename Model::output> &&
    requires(const typename Model::state& state, const typename Model::input& input,
             const std::optional<typename Model::output>& output) {
        { Model::init() } -> std::convertible_to<typename Model::state>;
        { Model::step(state, input, output) } -> std::same_as<std::optional<typename Model::state>>;
        { Model::hash(state) } -> std::convertible_to<std::size_t>;
        { Model::describe_operation(input, output) } -> std::convertible_to<std::string>;
        { Model::describe_state(state) } -> std::convertible_to<std::string>;
    };

/// A model whose operations each touch one part of the state, named by
/// `Model::partition_key(input)` (totally ordered, formattable with fmt). Operations with
/// different keys never interact: each key's operations are checked on their own, and the
/// model's state then describes one key only (`step` never sees two keys in one search).
template <typename Model>
concept partitioned_model =
    linearizability_model<Model> && requires(const typename Model::input& input) {
        { Model::partition_key(input) } -> std::totally_ordered;
        requires fmt::is_formattable<
            std::remove_cvref_t<decltype(Model::partition_key(input))>>::value;
    };

/// The budget of one check. Any limit reached makes the verdict `gave_up`.
struct linearizability_options {
    /// Search steps (one list entry examined) over the whole check, all partitions together.
    /// A step takes 0.1–0.2 µs in an optimised build: the default is a few seconds.
    std::uint64_t max_steps = 20'000'000;
    /// Memoised configurations held for one partition. Freed when the partition is done.
    std::size_t max_configurations = 2'000'000;
    /// The memory bound of one partition's memo: each configuration costs about
    /// `operations / 8 + sizeof(state) + 64` bytes (the state's own heap not counted), so in
    /// a long history (tens of thousands of operations in one partition) this bound, not
    /// `max_configurations`, is the one reached.
    std::size_t max_memo_bytes = std::size_t{1} << 30;
    /// Wall-clock limit of the whole check; zero for none. Makes the verdict depend on the
    /// machine, so seeded sweeps should rely on `max_steps` instead.
    std::chrono::milliseconds time_limit{0};
    /// How many operations of the failing partition the explanation lists, at most.
    std::size_t explain_operations_max = 40;
};

enum class linearizability_verdict {
    linearizable,      ///< proven: every partition has a linearization
    not_linearizable,  ///< proven: some partition has none
    gave_up,           ///< a limit was reached before either was proven (a failure)
};

constexpr std::string_view to_string(linearizability_verdict verdict) noexcept {
    switch (verdict) {
        case linearizability_verdict::linearizable: return "linearizable";
        case linearizability_verdict::not_linearizable: return "not linearizable";
        case linearizability_verdict::gave_up: return "gave up";
    }
    return "?";
}

/// What a check found and how much it checked.
struct linearizability_report {
    linearizability_verdict verdict = linearizability_verdict::linearizable;
    std::size_t operations = 0;        ///< in the history
    std::size_t unknown_outcomes = 0;  ///< operations whose outcome was unknown
    std::size_t partitions = 0;        ///< parts of the history (1 unless the model partitions)
    std::size_t partitions_checked = 0;  ///< partitions whose search finished, either way
    /// Most operations open at one instant in the whole history, and in one partition (what
    /// the search faces), counting those of known outcome: the others stay open to the end
    /// (`unknown_outcomes` counts them).
    std::size_t max_concurrency = 0;
    std::size_t max_partition_concurrency = 0;
    std::uint64_t steps = 0;           ///< search steps, all partitions
    std::uint64_t configurations = 0;  ///< memoised configurations, summed over partitions
    /// Empty when linearizable. Otherwise, for the smallest failing partition: its operations,
    /// the longest linearizable prefix found and why nothing can follow it; or which limit
    /// was reached where.
    std::string explanation;

    /// True only for a proven pass: `gave_up` is a failure.
    bool ok() const noexcept { return verdict == linearizability_verdict::linearizable; }

    /// One line: the verdict and the counts.
    std::string summary() const {
        return fmt::format(
            "{}: {} operations ({} unknown outcomes) in {} partitions, max concurrency {} ({} "
            "in one partition), {} steps, {} configurations",
            to_string(verdict), operations, unknown_outcomes, partitions, max_concurrency,
            max_partition_concurrency, steps, configurations);
    }
};

namespace detail {

/// The order of a history's calls and returns: by time, calls before returns at the same
/// instant, unknown returns last. Entries are (operation index, is call).
template <typename Model>
std::vector<std::pair<std::size_t, bool>> history_events(
    const std::vector<const operation<Model>*>& ops) {
    using key = std::tuple<bool, history_time, bool, std::size_t>;  // (at infinity, t, return, op)
    std::vector<key> keys;
    keys.reserve(ops.size() * 2);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        keys.emplace_back(false, ops[i]->call_time, false, i);
        keys.emplace_back(!ops[i]->return_time, ops[i]->return_time.value_or(0), true, i);
    }
    std::sort(keys.begin(), keys.end());
    std::vector<std::pair<std::size_t, bool>> events;
    events.reserve(keys.size());
    for (const auto& [infinite, time, is_return, op] : keys) events.emplace_back(op, !is_return);
    return events;
}

/// Most operations of known outcome open at once.
template <typename Model>
std::size_t max_open(const std::vector<const operation<Model>*>& ops) {
    std::vector<const operation<Model>*> known;
    for (const auto* op : ops)
        if (op->outcome_known()) known.push_back(op);
    std::size_t open = 0, most = 0;
    for (const auto& [op, is_call] : history_events(known)) {
        open = is_call ? open + 1 : open - 1;
        most = std::max(most, open);
    }
    return most;
}

/// The shared budget of one check.
struct search_budget {
    std::uint64_t steps_used = 0;
    std::uint64_t max_steps = 0;
    std::size_t max_configurations = 0;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::size_t max_memo_bytes = 0;

    /// The memo limit reached by `configurations` holding `bytes`, as a gave-up reason.
    std::string memo_limit(std::size_t configurations, std::size_t bytes) const {
        if (configurations > max_configurations)
            return fmt::format("{} memoised configurations", max_configurations);
        return fmt::format("{:.1f} MiB of memoised configurations ({} of them, {} bytes)",
                           static_cast<double>(max_memo_bytes) / (1 << 20), configurations,
                           bytes);
    }
};

/// How one partition's search ended.
struct partition_outcome {
    linearizability_verdict verdict = linearizability_verdict::linearizable;
    std::string limit;          ///< for gave_up: which limit
    bool budget_spent = false;  ///< the check-wide budget (steps, time) is gone
    std::uint64_t steps = 0;
    std::uint64_t configurations = 0;
    /// The dead end that got furthest: the prefix (operation indices, in linearization order)
    /// whose blocking return is the latest, the longest of those.
    std::vector<std::size_t> longest_prefix;
    std::size_t longest_prefix_rank = 0;  ///< its blocking return's place in the time order
    std::size_t deepest = 0;              ///< most operations linearized at once
};

/// Lowe's just-in-time linearization search over one partition.
///
/// Operations with a known outcome sit in a linked list of calls and returns in time order;
/// those of unknown outcome (whose return is at infinity, so never blocks) sit in a second
/// list of calls. At each configuration the search tries the known calls before the first
/// return left, then the unknown calls before that return, linearizing the first that the
/// model accepts and that reaches no memoised configuration; when none does, it backtracks.
///
/// The memo is keyed by (known operations linearized, state) and keeps, for each key, the
/// sets of unknown-outcome operations it was reached with. A configuration reached with a
/// superset of one of them is pruned: it is dominated, because anything that can follow it
/// can follow the smaller one (the unknown operations left out stay available to the end and
/// never block a return). Equal configurations are the special case of equal sets. Without
/// this, every subset of the unknown operations would be explored on a failing history.
///
/// In `relaxed` mode an unknown-outcome operation may take effect any number of times after
/// its call. That admits more than the history allows, so only its "not linearizable" is a
/// proof; but it needs no set of unknown operations in its memo and fails fast where the
/// exact search, on a failing history with many unknown outcomes, backtracks through every
/// minimal set of them.
template <linearizability_model Model>
class partition_search {
public:
    using state_type = typename Model::state;

    partition_search(const std::vector<const operation<Model>*>& ops, bool relaxed)
        : ops_{ops}, relaxed_{relaxed} {
        const auto events = history_events(ops);
        slot_.resize(ops.size());
        std::vector<std::size_t> call_at(ops.size()), return_at(ops.size());
        entries_.push_back({});  // the head sentinel of the known list
        unknowns_.push_back({});  // the head sentinel of the unknown list
        for (std::size_t rank = 0; rank < events.size(); ++rank) {
            const auto [op, is_call] = events[rank];
            if (!ops[op]->outcome_known()) {
                if (!is_call) continue;
                slot_[op] = unknowns_.size() - 1;
                twin_.push_back(earlier_twin(op));
                unknowns_.push_back({op, true, rank, 0, unknowns_.size() - 1, none});
                unknowns_[unknowns_.size() - 2].next = unknowns_.size() - 1;
                continue;
            }
            if (is_call) slot_[op] = known_count_++;
            (is_call ? call_at : return_at)[op] = entries_.size();
            entries_.push_back({op, is_call, rank, 0, entries_.size() - 1, none});
            entries_[entries_.size() - 2].next = entries_.size() - 1;
        }
        for (std::size_t op = 0; op < ops.size(); ++op) {
            if (!ops[op]->outcome_known()) continue;
            entries_[call_at[op]].match = return_at[op];
            entries_[return_at[op]].match = call_at[op];
        }
        known_left_ = known_count_;
        known_bits_.assign((known_count_ + 63) / 64, 0);
        unknown_bits_.assign((unknowns_.size() - 1 + 63) / 64, 0);
        // Zobrist keys: the hash of a set of known operations is the xor of its members' keys.
        std::uint64_t seed = 0x6c696e6561726973u;
        for (std::size_t i = 0; i < known_count_; ++i) known_keys_.push_back(splitmix64_next(seed));
    }

    partition_outcome run(search_budget& budget) {
        partition_outcome out;
        state_ = Model::init();
        bool in_known_list = true;       // which list `at` walks
        std::size_t at = entries_[0].next;
        std::size_t blocking_rank = 0;   // the first return left, while walking unknown calls
        while (known_left_ > 0) {
            if (const auto limit = spend(budget, out)) return gave_up(out, *limit);
            if (in_known_list) {
                ZAB_ASSERT(at != none, "a known operation's return is always still in the list");
                const entry& e = entries_[at];
                if (e.is_call) {
                    if (auto pushed = try_linearize(at, true, 0, budget)) {
                        if (!*pushed)
                            return gave_up(out, budget.memo_limit(configurations_, memo_bytes_));
                        at = entries_[0].next;
                    } else {
                        at = e.next;
                    }
                    continue;
                }
                // No known call before this return fits: try the unknown calls before it.
                blocking_rank = e.rank;
                in_known_list = false;
                at = unknowns_[0].next;
                continue;
            }
            if (at != none && unknowns_[at].rank < blocking_rank) {
                if (twin_waits(at)) {
                    at = unknowns_[at].next;
                    continue;
                }
                if (auto pushed = try_linearize(at, false, blocking_rank, budget)) {
                    if (!*pushed)
                        return gave_up(out, budget.memo_limit(configurations_, memo_bytes_));
                    in_known_list = true;
                    at = entries_[0].next;
                } else {
                    at = unknowns_[at].next;
                }
                continue;
            }
            // Nothing can go next from here: undo the last operation and try its successor.
            if (calls_.empty()) {
                out.verdict = linearizability_verdict::not_linearizable;
                out.configurations = configurations_;
                return out;
            }
            remember_prefix(out, blocking_rank);
            frame f = std::move(calls_.back());
            calls_.pop_back();
            state_ = std::move(f.before);
            known_hash_ = f.known_hash_before;
            in_known_list = f.known;
            blocking_rank = f.blocking_rank;
            undo(f.at, f.known);
            at = (f.known ? entries_ : unknowns_)[f.at].next;
        }
        out.configurations = configurations_;
        return out;
    }

private:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    using bits = std::vector<std::uint64_t>;

    /// A call or return in one of the two lists (dancing links).
    struct entry {
        std::size_t op = 0;
        bool is_call = false;
        std::size_t rank = 0;   ///< position in the time order of all calls and returns
        std::size_t match = 0;  ///< the other entry of the same operation (known list only)
        std::size_t prev = 0;
        std::size_t next = none;
    };
    /// A linearized operation: where it is, and what to restore when it is undone.
    struct frame {
        std::size_t at;
        bool known;
        state_type before;
        std::uint64_t known_hash_before;
        std::size_t blocking_rank;
    };
    /// The memo key: the known operations linearized, and the state after them.
    struct memo_key {
        bits known;
        state_type state;
        std::size_t hash;
        bool operator==(const memo_key& other) const {
            return hash == other.hash && known == other.known && state == other.state;
        }
    };
    struct memo_hash {
        std::size_t operator()(const memo_key& key) const noexcept { return key.hash; }
    };

    /// The latest unknown-outcome operation called before `op` with an equal input, if the
    /// model's inputs can be compared (none otherwise). Such twins are interchangeable: both
    /// stay available to the end, so the search only ever linearizes the earliest one left
    /// of each set of twins (the linearized ones are always the first of their set).
    std::size_t earlier_twin(std::size_t op) const {
        if constexpr (std::equality_comparable<typename Model::input>) {
            for (std::size_t u = unknowns_.size() - 1; u > 0; --u)
                if (ops_[unknowns_[u].op]->input == ops_[op]->input) return u;
        }
        return none;
    }
    /// True when an earlier twin of the unknown operation at `at` is not linearized yet
    /// (relaxed: when it has one, since that one can take effect again).
    bool twin_waits(std::size_t at) const {
        const std::size_t twin = twin_[slot_[unknowns_[at].op]];
        return twin != none && ((unknown_bits_[slot_[unknowns_[twin].op] / 64] >>
                                (slot_[unknowns_[twin].op] % 64)) & 1) == 0;
    }

    static void flip(bits& set, std::size_t i) { set[i / 64] ^= std::uint64_t{1} << (i % 64); }
    static bool subset(const bits& small, const bits& large) {
        for (std::size_t w = 0; w < small.size(); ++w)
            if ((small[w] & ~large[w]) != 0) return false;
        return true;
    }

    /// Linearizes the operation at `at` if the model accepts it and the configuration it
    /// reaches is not dominated by a memoised one. nullopt: not linearized; false: the memo
    /// is full; true: linearized (pushed on the stack, taken out of its list).
    std::optional<bool> try_linearize(std::size_t at, bool known, std::size_t blocking_rank,
                                      const search_budget& budget) {
        const std::size_t op = (known ? entries_ : unknowns_)[at].op;
        std::optional<state_type> after = Model::step(state_, ops_[op]->input, ops_[op]->output);
        if (!after) return std::nullopt;
        const bool consumed = known || !relaxed_;
        if (consumed) flip(known ? known_bits_ : unknown_bits_, slot_[op]);
        const std::uint64_t next_hash = known ? known_hash_ ^ known_keys_[slot_[op]] : known_hash_;
        std::uint64_t mixed = next_hash ^ (static_cast<std::uint64_t>(Model::hash(*after)) *
                                           0x9e3779b97f4a7c15u);
        const std::size_t hash = static_cast<std::size_t>(splitmix64_next(mixed));
        auto [found, inserted] = memo_.try_emplace(memo_key{known_bits_, *after, hash});
        auto& reached_with = found->second;
        const std::size_t set_bytes = unknown_bits_.size() * sizeof(std::uint64_t) + 40;
        if (inserted) {
            memo_bytes_ += known_bits_.size() * sizeof(std::uint64_t) + sizeof(state_type) + 96;
        } else {
            for (const bits& earlier : reached_with) {
                if (subset(earlier, unknown_bits_)) {
                    if (consumed) flip(known ? known_bits_ : unknown_bits_, slot_[op]);
                    return std::nullopt;
                }
            }
            // Keep the sets minimal: the new one dominates any superset of it.
            const auto before = reached_with.size();
            std::erase_if(reached_with, [&](const bits& b) { return subset(unknown_bits_, b); });
            configurations_ -= before - reached_with.size();
            memo_bytes_ -= (before - reached_with.size()) * set_bytes;
        }
        reached_with.push_back(unknown_bits_);
        memo_bytes_ += set_bytes;
        if (++configurations_ > budget.max_configurations || memo_bytes_ > budget.max_memo_bytes)
            return false;
        calls_.push_back({at, known, std::move(state_), known_hash_, blocking_rank});
        state_ = std::move(*after);
        known_hash_ = next_hash;
        if (known) {
            --known_left_;
            unlink(entries_, at);
            unlink(entries_, entries_[at].match);
        } else if (!relaxed_) {
            unlink(unknowns_, at);
        }
        return true;
    }

    /// Undoes `try_linearize` of the operation at `at`; LIFO, as dancing links require.
    void undo(std::size_t at, bool known) {
        if (!known && relaxed_) return;
        const std::size_t op = (known ? entries_ : unknowns_)[at].op;
        flip(known ? known_bits_ : unknown_bits_, slot_[op]);
        if (known) {
            ++known_left_;
            relink(entries_, entries_[at].match);
            relink(entries_, at);
        } else {
            relink(unknowns_, at);
        }
    }

    static void unlink(std::vector<entry>& list, std::size_t at) {
        const entry& e = list[at];
        list[e.prev].next = e.next;
        if (e.next != none) list[e.next].prev = e.prev;
    }
    static void relink(std::vector<entry>& list, std::size_t at) {
        const entry& e = list[at];
        list[e.prev].next = at;
        if (e.next != none) list[e.next].prev = at;
    }

    /// Counts one step; names the limit reached, if any.
    std::optional<std::string> spend(search_budget& budget, partition_outcome& out) {
        if (budget.steps_used >= budget.max_steps) {
            out.budget_spent = true;
            return fmt::format("{} search steps", budget.max_steps);
        }
        ++out.steps;
        ++budget.steps_used;
        if (budget.deadline && budget.steps_used % 1024 == 0 &&
            std::chrono::steady_clock::now() > *budget.deadline) {
            out.budget_spent = true;
            return std::string{"the time limit"};
        }
        return std::nullopt;
    }

    void remember_prefix(partition_outcome& out, std::size_t blocking_rank) const {
        out.deepest = std::max(out.deepest, calls_.size());
        if (std::pair{blocking_rank, calls_.size()} <=
            std::pair{out.longest_prefix_rank, out.longest_prefix.size()})
            return;
        out.longest_prefix_rank = blocking_rank;
        out.longest_prefix.clear();
        for (const frame& f : calls_)
            out.longest_prefix.push_back((f.known ? entries_ : unknowns_)[f.at].op);
    }

    partition_outcome& gave_up(partition_outcome& out, std::string limit) {
        out.verdict = linearizability_verdict::gave_up;
        out.limit = std::move(limit);
        out.configurations = configurations_;
        out.deepest = std::max(out.deepest, calls_.size());
        return out;
    }

    const std::vector<const operation<Model>*>& ops_;
    bool relaxed_;
    std::vector<std::size_t> slot_;  ///< per operation: its bit in known_bits_ or unknown_bits_
    std::vector<entry> entries_;     ///< the known list; [0] is its head
    std::vector<entry> unknowns_;    ///< the unknown list (calls only); [0] is its head
    std::vector<std::size_t> twin_;  ///< per unknown slot: its earlier twin in unknowns_
    std::size_t known_count_ = 0;
    std::size_t known_left_ = 0;     ///< known operations not yet linearized
    std::vector<std::uint64_t> known_keys_;
    bits known_bits_;
    bits unknown_bits_;
    state_type state_{};
    std::uint64_t known_hash_ = 0;
    std::vector<frame> calls_;
    std::unordered_map<memo_key, std::vector<bits>, memo_hash> memo_;
    std::size_t configurations_ = 0;  ///< sets held by the memo
    std::size_t memo_bytes_ = 0;      ///< what the memo holds, about (max_memo_bytes)
};

/// Searches one partition: first relaxed when it has unknown outcomes (a failure there is a
/// proof, and comes fast), then exactly. Steps and configurations are those of both.
template <linearizability_model Model>
partition_outcome search_partition(const std::vector<const operation<Model>*>& ops,
                                   search_budget& budget) {
    const bool any_unknown = std::any_of(ops.begin(), ops.end(),
                                         [](const auto* op) { return !op->outcome_known(); });
    if (!any_unknown) return partition_search<Model>{ops, false}.run(budget);
    partition_outcome relaxed = partition_search<Model>{ops, true}.run(budget);
    if (relaxed.verdict != linearizability_verdict::linearizable) return relaxed;
    partition_outcome exact = partition_search<Model>{ops, false}.run(budget);
    exact.steps += relaxed.steps;
    exact.configurations += relaxed.configurations;
    return exact;
}

/// One line for an operation of the history.
template <linearizability_model Model>
std::string describe(std::size_t index, const operation<Model>& op) {
    const std::string returned =
        op.return_time ? fmt::format("{}]", *op.return_time) : std::string{"∞)"};
    return fmt::format("#{} client {} [{}, {} {}", index, op.client, op.call_time, returned,
                       Model::describe_operation(op.input, op.output));
}

/// Why a partition has no linearization: its operations, the longest linearizable prefix the
/// search found, and for each operation that could come next, why it cannot.
template <linearizability_model Model>
std::string explain_failure(const std::vector<const operation<Model>*>& ops,
                            const std::vector<std::size_t>& indices,
                            const std::vector<std::size_t>& prefix, std::size_t shown_max) {
    std::string text;
    std::vector<std::size_t> by_call(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) by_call[i] = i;
    std::stable_sort(by_call.begin(), by_call.end(), [&](std::size_t a, std::size_t b) {
        return ops[a]->call_time < ops[b]->call_time;
    });
    if (ops.size() <= shown_max) {
        text += "operations, by call time:\n";
        for (std::size_t i : by_call) text += "  " + describe(indices[i], *ops[i]) + "\n";
    }
    const auto count_known = [&](const std::vector<std::size_t>& some) {
        return static_cast<std::size_t>(std::count_if(
            some.begin(), some.end(), [&](std::size_t i) { return ops[i]->outcome_known(); }));
    };
    const std::size_t known = count_known(by_call);
    const std::size_t known_in_prefix = count_known(prefix);
    text += fmt::format("longest linearizable prefix (of those that got furthest in time): {} "
                        "operations ({} with known outcome):\n",
                        prefix.size(), known_in_prefix);
    std::vector<bool> in_prefix(ops.size(), false);
    bool repeats = false;
    for (std::size_t i : prefix) {
        repeats = repeats || in_prefix[i];
        in_prefix[i] = true;
    }
    if (repeats) {
        text += "  (found by the relaxed search, where an operation of unknown outcome may take "
                "effect more than once: it proves that no linearization exists)\n";
    }
    typename Model::state state = Model::init();
    const std::size_t skipped = prefix.size() > shown_max ? prefix.size() - shown_max : 0;
    if (skipped > 0) text += fmt::format("  ({} earlier operations not shown)\n", skipped);
    for (std::size_t n = 0; n < prefix.size(); ++n) {
        const auto& op = *ops[prefix[n]];
        auto after = Model::step(state, op.input, op.output);
        ZAB_ASSERT(after.has_value(), "the prefix was linearized by the search");
        state = std::move(*after);
        if (n >= skipped) {
            text += fmt::format("  {}  -> state {}\n", describe(indices[prefix[n]], op),
                                Model::describe_state(state));
        }
    }
    // What could come next: every call before the first return left in the history.
    text += fmt::format("then, with {} of {} known-outcome operations left, none of these can "
                        "take effect next:\n", known - known_in_prefix, known);
    for (const auto& [op_index, is_call] : history_events(ops)) {
        if (in_prefix[op_index]) continue;
        const auto& op = *ops[op_index];
        if (!is_call) {
            text += fmt::format("  and #{} must have taken effect by its return at {}\n",
                                indices[op_index], op.return_time.value_or(0));
            break;
        }
        const auto after = Model::step(state, op.input, op.output);
        text += "  " + describe(indices[op_index], op) +
                (after ? fmt::format(": possible (-> {}) but no linearization continues",
                                     Model::describe_state(*after))
                       : fmt::format(": impossible from state {}", Model::describe_state(state))) +
                "\n";
    }
    return text;
}

}  // namespace detail

/// Checks `history` against `Model`. Returns `errc::invalid_argument` when the history is
/// malformed (a return before its call; a known outcome without an output; an output for an
/// unknown outcome). Otherwise the report's `ok()` is true only when a linearization of
/// every partition was found; `gave_up` (a limit of `options`) is not a pass.
template <linearizability_model Model>
result<linearizability_report> check_linearizability(
    const std::vector<operation<Model>>& history, const linearizability_options& options = {}) {
    linearizability_report report;
    report.operations = history.size();
    for (const auto& op : history) {
        if (op.return_time.has_value() != op.output.has_value()) return errc::invalid_argument;
        if (op.return_time && *op.return_time < op.call_time) return errc::invalid_argument;
        if (!op.outcome_known()) ++report.unknown_outcomes;
    }
    {
        std::vector<const operation<Model>*> all;
        for (const auto& op : history) all.push_back(&op);
        report.max_concurrency = detail::max_open(all);
    }

    // The parts, as (label, indices into history), in key order (deterministic reports).
    std::vector<std::pair<std::string, std::vector<std::size_t>>> parts;
    if constexpr (partitioned_model<Model>) {
        using key_type = std::remove_cvref_t<decltype(Model::partition_key(history.front().input))>;
        std::map<key_type, std::vector<std::size_t>> by_key;
        for (std::size_t i = 0; i < history.size(); ++i)
            by_key[Model::partition_key(history[i].input)].push_back(i);
        for (auto& [key, indices] : by_key)
            parts.emplace_back(fmt::format("key {}", key), std::move(indices));
    } else if (!history.empty()) {
        std::vector<std::size_t> indices(history.size());
        for (std::size_t i = 0; i < history.size(); ++i) indices[i] = i;
        parts.emplace_back("the whole history", std::move(indices));
    }
    report.partitions = parts.size();

    detail::search_budget budget{0, options.max_steps, options.max_configurations, std::nullopt,
                                 options.max_memo_bytes};
    if (options.time_limit.count() > 0)
        budget.deadline = std::chrono::steady_clock::now() + options.time_limit;

    std::optional<std::size_t> failed;  // the smallest failing part
    std::optional<std::pair<std::size_t, detail::partition_outcome>> gave_up;  // the first
    for (std::size_t p = 0; p < parts.size(); ++p) {
        std::vector<const operation<Model>*> ops;
        for (std::size_t i : parts[p].second) ops.push_back(&history[i]);
        detail::partition_outcome out = detail::search_partition(ops, budget);
        report.steps += out.steps;
        report.configurations += out.configurations;
        report.max_partition_concurrency = std::max(
            report.max_partition_concurrency, detail::max_open(ops));
        if (out.verdict == linearizability_verdict::gave_up) {
            if (!gave_up) gave_up.emplace(p, out);
            if (out.budget_spent) break;
            continue;
        }
        ++report.partitions_checked;
        if (out.verdict == linearizability_verdict::linearizable) continue;
        if (failed && parts[*failed].second.size() <= ops.size()) continue;
        failed = p;
        report.explanation = fmt::format(
            "{} ({} operations) is not linearizable\n{}", parts[p].first, ops.size(),
            detail::explain_failure(ops, parts[p].second, out.longest_prefix,
                                    options.explain_operations_max));
    }
    if (failed) {
        report.verdict = linearizability_verdict::not_linearizable;
    } else if (gave_up) {
        const auto& [p, out] = *gave_up;
        report.verdict = linearizability_verdict::gave_up;
        report.explanation = fmt::format(
            "gave up on {} ({} operations) after reaching the limit of {}, with {} of its "
            "operations linearized at most; {} of {} partitions were checked completely",
            parts[p].first, parts[p].second.size(), out.limit, out.deepest,
            report.partitions_checked, report.partitions);
    }
    return report;
}

}  // namespace zab::testing
