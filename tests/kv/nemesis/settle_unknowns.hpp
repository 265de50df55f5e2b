// tests/kv/nemesis/settle_unknowns.hpp — MULTI/EXEC blocks of unknown outcome settled from
// the committed log, before the linearizability check.
//
// A block whose EXEC got no answer may take effect anywhere after its call, or never: to the
// checker it is a branch at every point of the rest of the history, and a long run with a
// hundred of them (one per leader kill, about) made the search hold gigabytes. The committed
// log says what happened to each: every block writes a value of its own (client id and
// sequence) to its first key, so the log, replayed (history_check.hpp), shows whether the
// block applied and at which transaction.
//
// Only where the log can tell: when it starts at a snapshot (a compaction, or a sync by
// SNAP), a block absent from what follows may have applied before it. A block called after
// an acknowledged block that the replay saw applied after the snapshot is after the snapshot
// too, if it applied at all (one client's blocks apply in its order, and that block returned
// before this one was called). Such a block is then applied — it gets the replies its
// commands gave at that transaction and a return at the end of the history — or it never
// was, and it leaves the history. The others stay unknown.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "group_model.hpp"
#include "history_check.hpp"

namespace zab::kv::nemesis {

/// What settle_unknown_blocks did.
struct settled_blocks {
    std::size_t applied = 0;      ///< found in the log: now of known outcome
    std::size_t not_applied = 0;  ///< absent from the log: removed from the history
    std::size_t left = 0;         ///< called before the log can tell: still unknown
};

namespace detail {

/// The replay's entry of `value` stored in `key`: its position (transactions applied after
/// the snapshot, if any), or nullopt if it never was.
inline std::optional<std::uint64_t> stored_at(const replay& replayed, const std::string& key,
                                              const std::string& value) {
    const auto positions = replayed.value_positions.find(key);
    if (positions == replayed.value_positions.end()) return std::nullopt;
    const auto at = positions->second.find(value);
    if (at == positions->second.end()) return std::nullopt;
    return replayed.values.at(key).at(at->second).first;
}

/// `key`'s value right after transaction `position` (nullopt inside: absent), if the replay
/// has an entry there (outer nullopt: the key did not change at that transaction).
inline std::optional<std::optional<std::string>> value_after(const replay& replayed, const std::string& key,
                                              std::uint64_t position) {
    const auto values = replayed.values.find(key);
    if (values == replayed.values.end()) return std::nullopt;
    for (auto it = values->second.rbegin(); it != values->second.rend(); ++it)
        if (it->first == position) return it->second;
    return std::nullopt;
}

}  // namespace detail

/// Settles the unknown-outcome blocks of `history` (kinds multi and watch_cas) from
/// `replayed`, the committed log replayed from its start (`from_snapshot` false) or from its
/// snapshot (true).
inline settled_blocks settle_unknown_blocks(std::vector<zab::testing::operation<group_model>>& history,
                                            const replay& replayed, bool from_snapshot) {
    using kind = group_model::kind;
    using time = zab::testing::history_time;
    const auto is_block = [](const auto& op) {
        return (op.input.what == kind::multi || op.input.what == kind::watch_cas) &&
               !op.input.writes.empty() && op.input.writes.front().value.has_value();
    };
    const auto applied_at = [&](const auto& op) {
        const auto& first = op.input.writes.front();
        return detail::stored_at(replayed, first.key, *first.value);
    };
    // From when on an applied block must be in the log after its start.
    time known_from =
        from_snapshot ? std::numeric_limits<time>::max() : std::numeric_limits<time>::min();
    time end = 0;
    for (const auto& op : history) end = std::max(end, op.return_time.value_or(op.call_time));
    if (from_snapshot) {
        for (const auto& op : history) {
            if (!is_block(op) || !op.output || !op.output->succeeded) continue;
            const auto at = applied_at(op);
            if (at && *at > 0) known_from = std::min(known_from, *op.return_time);
        }
    }
    settled_blocks out;
    std::vector<zab::testing::operation<group_model>> kept;
    kept.reserve(history.size());
    for (auto& op : history) {
        if (op.outcome_known() || !is_block(op)) {
            kept.push_back(std::move(op));
            continue;
        }
        if (op.call_time <= known_from) {
            ++out.left;
            kept.push_back(std::move(op));
            continue;
        }
        const auto at = applied_at(op);
        if (!at) {
            ++out.not_applied;  // it never took effect: nothing to linearize
            continue;
        }
        // Applied at transaction *at: the replies its commands gave there.
        std::vector<std::string> replies;
        bool complete = *at > 0;
        for (const auto& q : op.input.writes) {
            if (q.value) {
                replies.emplace_back("OK");
                continue;
            }
            const auto counted = detail::value_after(replayed, q.key, *at);
            if (!counted || !*counted) {
                complete = false;
                break;
            }
            replies.push_back(**counted);
        }
        if (!complete) {
            ++out.left;
            kept.push_back(std::move(op));
            continue;
        }
        ++out.applied;
        op.output = group_model::exec_returned(std::move(replies));
        op.return_time = end + 1;
        kept.push_back(std::move(op));
    }
    history = std::move(kept);
    return out;
}

}  // namespace zab::kv::nemesis
