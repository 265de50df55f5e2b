// tests/kv/nemesis/group_model.hpp — the sequential model the nemesis test checks its history
// against: the key-value map in groups of keys, with MULTI/EXEC blocks and expiring keys.
//
// Each key belongs to one group (the workload names it in every operation); an operation
// touches the keys of one group only, so the checker (zab/testing/linearizability.hpp)
// checks each group on its own, and a MULTI/EXEC block or an MGET over several keys of a
// group is ONE operation taking effect at one instant on all of them: a block half visible
// (one key's write seen, the other's not, by one MGET or by reads ordered around it) has no
// linearization.
//
//   get(k) / mget(k...)        the values read (nullopt: absent)
//   put(k, v)                  SET k v, with or without PX (the expiry is its own op, below)
//   cas(k, expected, desired)  CAS: stores desired iff k holds expected; answers whether.
//                              SET k v NX is the CAS expecting k absent (set_if_absent)
//   multi(writes)              MULTI; SET k v | INCR k ...; EXEC: the writes in order,
//                              answered the array of their replies ("OK", or INCR's value)
//   watch_cas(k, seen, writes) WATCH k; GET k -> seen; MULTI; writes; EXEC. Answered the
//                              array: k still held `seen` when the block applied (a watched
//                              key unchanged since WATCH holds what the GET after it read), so
//                              the writes apply. Answered nil: a watched key changed, and the
//                              block had no effect at all (no constraint on the state either:
//                              the change may have come before the GET).
//   expire(k, v)               the removal of v by its expiry: k becomes absent if it still
//                              holds v (values are unique, so "v" names one SET PX).
//
// Expiry, as kv_server promises it (kv_state_machine.hpp): the deadline is the TTL plus the
// command's time, the later of the map's clock and the proposing replica's clock stamped in
// the transaction, so it is no earlier than the SET's call plus the TTL (one machine's
// clock here). The removal is a transaction of its own, the TICK the leader proposes once
// its clock passed the deadline, and it takes effect at the TICK's position in the order,
// for every read and write alike: no reader's clock hides a key before it. So a read after
// the deadline may still see the value for a while. The workload therefore adds, for every
// SET PX (plain, NX, or in a WATCHed block) that may have applied, an expire(k, v) called
// at the SET's call + TTL (less a small clock margin) whose outcome is unknown: it takes
// effect at one instant after that, or never within the history. What stays checked: no
// read answers nil for v's key before v's earliest deadline; once a read saw v gone, no
// later read sees v again (the expiry took effect, once, and nothing writes v again); a
// value overwritten is never read again; a watched CAS, a SET NX or a block never applies
// on a value that a read already saw expire, and a SET NX never fails on a key a read
// already saw gone (unless written since).
//
// Collections: a list key and a set key each form a group of their own (one key), and the
// workload never writes them with a string command, so a WRONGTYPE answer is a bug (the
// client reports it; no operation here models it). Every element pushed and every member
// added is unique (the client id and sequence number are in it), except that a SADD may
// re-add, and a SREM remove, a member the client read before; so an element read names the
// one RPUSH that stored it.
//
//   rpush(k, v)                RPUSH k v, answered the list's new length
//   lpop(k)                    LPOP k: the first element, or nil on an empty (absent) list
//   lrange(k) / llen(k)        LRANGE k 0 -1 (the whole list, in order) / LLEN k
//   sadd(k, m) / srem(k, m)    SADD k m / SREM k m, answered 1 if it changed the set, else 0
//   smembers(k) / scard(k)     SMEMBERS k (sorted here: a set's reply order is no promise)
//   sismember(k, m)              / SCARD k / SISMEMBER k m
//
// An empty collection is an absent key, as in Redis (the last LPOP or SREM removes it). A
// RPUSH of unknown outcome applies at most once per state (the relaxed search would push
// its element without end otherwise; its value is unique, so the state records it as a
// block's, below); SADD and SREM are idempotent and LPOP only shrinks the list, so their
// repetitions reach finitely many states. The workload bounds each collection to a few
// elements, which keeps the states small.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zab/testing/linearizability.hpp"

namespace zab::kv::nemesis {

struct group_model {
    enum class kind {
        get, mget, put, cas, multi, watch_cas, expire,
        rpush, lpop, lrange, llen, sadd, srem, smembers, scard, sismember
    };

    /// A command queued in a MULTI block: SET key value, or INCR key (value nullopt).
    struct queued {
        std::string key;
        std::optional<std::string> value;
        bool operator==(const queued&) const = default;
    };

    struct input {
        kind what = kind::get;
        std::string group;               ///< the partition
        std::vector<std::string> keys;   ///< mget: many; the others: one (multi: none)
        std::string value;               ///< put, expire, rpush, sadd, srem, sismember; cas's
                                         ///< desired value
        std::optional<std::string> expected;  ///< cas; watch_cas: what the GET saw
        std::vector<queued> writes;      ///< multi, watch_cas
        bool operator==(const input&) const = default;
    };

    struct output {
        std::vector<std::optional<std::string>> values;  ///< get, mget
        bool succeeded = true;  ///< cas; watch_cas (false: EXEC answered nil)
        std::vector<std::string> replies;  ///< multi, watch_cas: "OK" or the integer, in order
        std::vector<std::string> elements;  ///< lrange (in order), smembers (sorted)
        std::int64_t number = 0;  ///< rpush, llen, sadd, srem, scard, sismember: the integer
    };

    /// The present keys of the group and their values, sorted by key; the collections
    /// present (a list in order, a set sorted), sorted by key; and the blocks and RPUSHes of
    /// unknown outcome that applied (named by their first value, unique), sorted. The
    /// checker's relaxed search lets an operation of unknown outcome take effect repeatedly:
    /// a block's INCR would count without end, so an unknown block applies once per state
    /// (in the exact search it is linearized once anyway).
    struct state {
        std::vector<std::pair<std::string, std::string>> values;
        std::vector<std::pair<std::string, std::vector<std::string>>> collections;
        std::vector<std::string> unknown_blocks;
        bool operator==(const state&) const = default;
    };

    // --- building operations --------------------------------------------------------------

    static input get(std::string group, std::string key) {
        return {kind::get, std::move(group), {std::move(key)}, {}, {}, {}};
    }
    static input mget(std::string group, std::vector<std::string> keys) {
        return {kind::mget, std::move(group), std::move(keys), {}, {}, {}};
    }
    static input put(std::string group, std::string key, std::string value) {
        return {kind::put, std::move(group), {std::move(key)}, std::move(value), {}, {}};
    }
    static input cas(std::string group, std::string key, std::string expected,
                     std::string desired) {
        return {kind::cas, std::move(group), {std::move(key)}, std::move(desired),
                std::move(expected), {}};
    }
    static input multi(std::string group, std::vector<queued> writes) {
        return {kind::multi, std::move(group), {}, {}, {}, std::move(writes)};
    }
    static input watch_cas(std::string group, std::string key, std::optional<std::string> seen,
                           std::vector<queued> writes) {
        return {kind::watch_cas, std::move(group), {std::move(key)}, {}, std::move(seen),
                std::move(writes)};
    }
    /// SET key value NX: the CAS expecting `key` absent (answered cas_returned: set or not).
    static input set_if_absent(std::string group, std::string key, std::string value) {
        return {kind::cas, std::move(group), {std::move(key)}, std::move(value), std::nullopt,
                {}};
    }
    static input expire(std::string group, std::string key, std::string value) {
        return {kind::expire, std::move(group), {std::move(key)}, std::move(value), {}, {}};
    }
    static input rpush(std::string key, std::string value) { return one(kind::rpush, key, value); }
    static input lpop(std::string key) { return one(kind::lpop, key, {}); }
    static input lrange(std::string key) { return one(kind::lrange, key, {}); }
    static input llen(std::string key) { return one(kind::llen, key, {}); }
    static input sadd(std::string key, std::string member) { return one(kind::sadd, key, member); }
    static input srem(std::string key, std::string member) { return one(kind::srem, key, member); }
    static input smembers(std::string key) { return one(kind::smembers, key, {}); }
    static input scard(std::string key) { return one(kind::scard, key, {}); }
    static input sismember(std::string key, std::string member) {
        return one(kind::sismember, key, member);
    }

    static output read_returned(std::vector<std::optional<std::string>> values) {
        return {std::move(values), true, {}, {}, 0};
    }
    static output write_returned() { return {}; }
    static output cas_returned(bool succeeded) { return {{}, succeeded, {}, {}, 0}; }
    static output exec_returned(std::vector<std::string> replies) {
        return {{}, true, std::move(replies), {}, 0};
    }
    static output exec_aborted() { return {{}, false, {}, {}, 0}; }
    /// RPUSH, LLEN, SADD, SREM, SCARD, SISMEMBER: the integer answered.
    static output integer_returned(std::int64_t n) { return {{}, true, {}, {}, n}; }
    /// LPOP: the element, or nil.
    static output popped(std::optional<std::string> element) {
        return {{std::move(element)}, true, {}, {}, 0};
    }
    /// LRANGE (in the list's order), SMEMBERS (any order: sorted here).
    static output elements_returned(std::vector<std::string> elements) {
        return {{}, true, {}, std::move(elements), 0};
    }
    static output members_returned(std::vector<std::string> members) {
        std::sort(members.begin(), members.end());
        return elements_returned(std::move(members));
    }

    // --- the model -------------------------------------------------------------------------

    static state init() { return {}; }

    static const std::string& partition_key(const input& in) { return in.group; }

    static std::optional<std::string> value_of(const state& s, const std::string& key) {
        const auto it = find(s.values, key);
        if (it == s.values.end() || it->first != key) return std::nullopt;
        return it->second;
    }

    static std::optional<state> step(const state& current, const input& in,
                                     const std::optional<output>& out) {
        switch (in.what) {
            case kind::get:
            case kind::mget: {
                if (!out) return current;
                if (out->values.size() != in.keys.size()) return std::nullopt;
                for (std::size_t i = 0; i < in.keys.size(); ++i)
                    if (value_of(current, in.keys[i]) != out->values[i]) return std::nullopt;
                return current;
            }
            case kind::put: {
                state next = current;
                store(next, in.keys.at(0), in.value);
                return next;
            }
            case kind::cas: {
                const bool matches = value_of(current, in.keys.at(0)) == in.expected;
                if (out && out->succeeded != matches) return std::nullopt;
                if (!matches) return current;
                state next = current;
                store(next, in.keys.at(0), in.value);
                return next;
            }
            case kind::watch_cas:
                if (out && !out->succeeded) return current;  // aborted: no effect
                if (value_of(current, in.keys.at(0)) != in.expected) {
                    // Applied, the watched key held what the GET saw: impossible here. Of
                    // unknown outcome: it did not apply (aborted, or never arrived).
                    if (out) return std::nullopt;
                    return current;
                }
                [[fallthrough]];
            case kind::multi: {
                state next = current;
                if (!out && !in.writes.empty() && in.writes.front().value) {
                    auto& once = next.unknown_blocks;
                    const auto at = std::lower_bound(once.begin(), once.end(),
                                                     *in.writes.front().value);
                    if (at != once.end() && *at == *in.writes.front().value) return current;
                    once.insert(at, *in.writes.front().value);
                }
                std::vector<std::string> replies;
                for (const queued& q : in.writes) {
                    if (q.value) {
                        store(next, q.key, *q.value);
                        replies.emplace_back("OK");
                        continue;
                    }
                    const auto before = value_of(next, q.key);
                    std::int64_t n = 0;
                    if (before) {
                        const auto [end, ec] =
                            std::from_chars(before->data(), before->data() + before->size(), n);
                        if (ec != std::errc{} || end != before->data() + before->size() ||
                            n == std::numeric_limits<std::int64_t>::max()) {
                            replies.emplace_back("ERR");  // INCR refused; the others apply
                            continue;
                        }
                    }
                    store(next, q.key, std::to_string(n + 1));
                    replies.push_back(std::to_string(n + 1));
                }
                if (out && out->replies != replies) return std::nullopt;
                return next;
            }
            case kind::expire: {
                if (value_of(current, in.keys.at(0)) != in.value) return current;
                state next = current;
                next.values.erase(find(next.values, in.keys.at(0)));
                return next;
            }
            case kind::rpush: {
                state next = current;
                if (!out) {  // applies once per state (see the file comment)
                    auto& once = next.unknown_blocks;
                    const auto at = std::lower_bound(once.begin(), once.end(), in.value);
                    if (at != once.end() && *at == in.value) return current;
                    once.insert(at, in.value);
                }
                std::vector<std::string> items = elements_of(next, in.keys.at(0));
                items.push_back(in.value);
                if (out && out->number != static_cast<std::int64_t>(items.size()))
                    return std::nullopt;
                store_collection(next, in.keys.at(0), std::move(items));
                return next;
            }
            case kind::lpop: {
                std::vector<std::string> items = elements_of(current, in.keys.at(0));
                std::optional<std::string> first;
                if (!items.empty()) first = items.front();
                if (out && (out->values.size() != 1 || out->values[0] != first))
                    return std::nullopt;
                if (items.empty()) return current;
                items.erase(items.begin());
                state next = current;
                store_collection(next, in.keys.at(0), std::move(items));
                return next;
            }
            case kind::sadd:
            case kind::srem: {
                std::vector<std::string> members = elements_of(current, in.keys.at(0));
                const auto at = std::lower_bound(members.begin(), members.end(), in.value);
                const bool present = at != members.end() && *at == in.value;
                const bool changes = present == (in.what == kind::srem);
                if (out && out->number != (changes ? 1 : 0)) return std::nullopt;
                if (!changes) return current;
                if (present) members.erase(at);
                else members.insert(at, in.value);
                state next = current;
                store_collection(next, in.keys.at(0), std::move(members));
                return next;
            }
            case kind::lrange:
            case kind::smembers:
                if (out && out->elements != elements_of(current, in.keys.at(0)))
                    return std::nullopt;
                return current;
            case kind::llen:
            case kind::scard:
                if (out && out->number != static_cast<std::int64_t>(
                                              elements_of(current, in.keys.at(0)).size()))
                    return std::nullopt;
                return current;
            case kind::sismember: {
                const auto members = elements_of(current, in.keys.at(0));
                const bool present = std::binary_search(members.begin(), members.end(), in.value);
                if (out && out->number != (present ? 1 : 0)) return std::nullopt;
                return current;
            }
        }
        return std::nullopt;
    }

    /// The elements of the collection `key` (a list in order, a set sorted); empty if absent.
    static std::vector<std::string> elements_of(const state& s, const std::string& key) {
        const auto it = find(s.collections, key);
        if (it == s.collections.end() || it->first != key) return {};
        return it->second;
    }

    static std::size_t hash(const state& s) {
        std::size_t h = 0x5bd1e995;
        for (const auto& [k, v] : s.values) {
            h = h * 31 + std::hash<std::string>{}(k);
            h = h * 31 + std::hash<std::string>{}(v);
        }
        for (const auto& [k, items] : s.collections) {
            h = h * 31 + std::hash<std::string>{}(k);
            for (const auto& item : items) h = h * 31 + std::hash<std::string>{}(item);
            h = h * 31 + items.size();
        }
        for (const auto& b : s.unknown_blocks) h = h * 31 + std::hash<std::string>{}(b);
        return h;
    }

    static std::string describe_state(const state& s) {
        std::string text = "{";
        for (const auto& [k, v] : s.values)
            text += fmt::format("{}{}=\"{}\"", text.size() > 1 ? ", " : "", k, v);
        for (const auto& [k, items] : s.collections)
            text +=
                fmt::format("{}{}=[{}]", text.size() > 1 ? ", " : "", k, fmt::join(items, ", "));
        return text + "}";
    }

    static std::string describe_operation(const input& in, const std::optional<output>& out) {
        const auto shown = [](const std::optional<std::string>& v) {
            return v ? fmt::format("\"{}\"", *v) : std::string{"nil"};
        };
        const auto block = [&] {
            std::string text;
            for (const queued& q : in.writes)
                text += q.value ? fmt::format("; SET {} \"{}\"", q.key, *q.value)
                                : fmt::format("; INCR {}", q.key);
            return text;
        };
        const auto replies = [&] {
            if (!out) return std::string{" -> ?"};
            if (!out->succeeded) return std::string{" -> nil (aborted)"};
            return fmt::format(" -> [{}]", fmt::join(out->replies, ", "));
        };
        switch (in.what) {
            case kind::get:
            case kind::mget: {
                std::string values = "?";
                if (out) {
                    values.clear();
                    for (const auto& v : out->values)
                        values += (values.empty() ? "" : ", ") + shown(v);
                }
                return fmt::format("{}({}) -> {}", in.what == kind::get ? "get" : "mget",
                                   fmt::join(in.keys, ", "), values);
            }
            case kind::put:
                return fmt::format("put({}, \"{}\"){}", in.keys.at(0), in.value, out ? "" : " -> ?");
            case kind::cas:
                return fmt::format("cas({}, {}, \"{}\") -> {}", in.keys.at(0), shown(in.expected),
                                   in.value, out ? (out->succeeded ? "true" : "false") : "?");
            case kind::multi: return fmt::format("MULTI{}; EXEC{}", block(), replies());
            case kind::watch_cas:
                return fmt::format("WATCH {}; GET -> {}; MULTI{}; EXEC{}", in.keys.at(0),
                                   shown(in.expected), block(), replies());
            case kind::expire:
                return fmt::format("expiry of {} = \"{}\"", in.keys.at(0), in.value);
            case kind::rpush:
            case kind::sadd:
            case kind::srem:
            case kind::sismember:
            case kind::llen:
            case kind::scard: {
                const char* name = in.what == kind::rpush  ? "RPUSH"
                                   : in.what == kind::sadd ? "SADD"
                                   : in.what == kind::srem ? "SREM"
                                   : in.what == kind::llen ? "LLEN"
                                   : in.what == kind::scard ? "SCARD"
                                                            : "SISMEMBER";
                const std::string member = in.value.empty() ? "" : fmt::format(" \"{}\"", in.value);
                return fmt::format("{} {}{} -> {}", name, in.keys.at(0), member,
                                   out ? std::to_string(out->number) : std::string{"?"});
            }
            case kind::lpop:
                return fmt::format("LPOP {} -> {}", in.keys.at(0),
                                   !out ? std::string{"?"}
                                        : out->values.empty() ? std::string{"(none)"}
                                                              : shown(out->values[0]));
            case kind::lrange:
            case kind::smembers:
                return fmt::format("{} {} -> {}", in.what == kind::lrange ? "LRANGE" : "SMEMBERS",
                                   in.keys.at(0),
                                   out ? fmt::format("[{}]", fmt::join(out->elements, ", "))
                                       : std::string{"?"});
        }
        return "?";
    }

private:
    template <typename Entries>  // entries, const or not
    static auto find(Entries& e, const std::string& key) -> decltype(e.begin()) {
        return std::lower_bound(e.begin(), e.end(), key, [](const auto& entry, const std::string& k) {
            return entry.first < k;
        });
    }
    static void store(state& s, const std::string& key, const std::string& value) {
        const auto it = find(s.values, key);
        if (it != s.values.end() && it->first == key) it->second = value;
        else s.values.emplace(it, key, value);
    }
    /// Sets the collection `key` to `items`; empty: the key is removed, as Redis does.
    static void store_collection(state& s, const std::string& key, std::vector<std::string> items) {
        const auto it = find(s.collections, key);
        const bool present = it != s.collections.end() && it->first == key;
        if (items.empty()) {
            if (present) s.collections.erase(it);
        } else if (present) {
            it->second = std::move(items);
        } else {
            s.collections.emplace(it, key, std::move(items));
        }
    }
    /// An operation on one key that is its own group (the collections).
    static input one(kind what, const std::string& key, std::string value) {
        return {what, key, {key}, std::move(value), {}, {}};
    }
};

static_assert(zab::testing::partitioned_model<group_model>);

/// Removes from `history` the expiries that can have no effect: expire(k, v) when some
/// known-outcome write of k (a put, or a CAS that succeeded) was called after the SET of v
/// returned and returned before the expiry's call, so that k no longer holds v in any
/// linearization by then (values are unique). Each expiry is an operation of unknown
/// outcome, which the search pays for; most expiring values are overwritten before their
/// TTL runs out. The verdict is unchanged. Returns how many were removed.
inline std::size_t drop_moot_expiries(std::vector<zab::testing::operation<group_model>>& history) {
    using kind = group_model::kind;
    using time = zab::testing::history_time;
    // Per key: its known-outcome writes as (call, return), sorted by call, with the least
    // return of each suffix; and when each value's SET returned.
    struct key_writes {
        std::vector<std::pair<time, time>> writes;
        std::vector<time> least_return_after;
        std::map<std::string, time> set_returned;
    };
    std::map<std::string, key_writes> by_key;
    for (const auto& op : history) {
        const auto& in = op.input;
        if (!op.return_time || in.keys.size() != 1) continue;
        const bool writes = in.what == kind::put || (in.what == kind::cas && op.output->succeeded);
        if (!writes) continue;
        auto& k = by_key[in.keys[0]];
        k.writes.emplace_back(op.call_time, *op.return_time);
        k.set_returned[in.value] = *op.return_time;
    }
    for (auto& [key, k] : by_key) {
        std::sort(k.writes.begin(), k.writes.end());
        k.least_return_after.resize(k.writes.size());
        time least = std::numeric_limits<time>::max();
        for (std::size_t i = k.writes.size(); i-- > 0;)
            k.least_return_after[i] = least = std::min(least, k.writes[i].second);
    }
    const auto moot = [&](const zab::testing::operation<group_model>& op) {
        if (op.input.what != kind::expire) return false;
        const auto k = by_key.find(op.input.keys.at(0));
        if (k == by_key.end()) return false;
        const auto set = k->second.set_returned.find(op.input.value);
        if (set == k->second.set_returned.end()) return false;  // its SET's outcome unknown
        const auto& w = k->second.writes;
        const auto after = std::upper_bound(
            w.begin(), w.end(), std::pair{set->second, std::numeric_limits<time>::max()});
        return after != w.end() &&
               k->second.least_return_after[static_cast<std::size_t>(after - w.begin())] <
                   op.call_time;
    };
    const std::size_t before = history.size();
    std::erase_if(history, moot);
    return before - history.size();
}

}  // namespace zab::kv::nemesis
