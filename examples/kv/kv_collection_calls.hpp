// examples/kv/kv_collection_calls.hpp — the hash, list, set and sorted-set commands, run on
// one key's collection (kv_collection.hpp) as Redis runs them (redis/src/t_hash.c, t_list.c,
// t_set.c, t_zset.c), replies in RESP2 as Redis writes them.
//
// kv_store.hpp finds the key, answers WRONGTYPE for a key of another type, hands these an
// empty collection for an absent key, and stores or removes the key afterwards (a collection
// left empty is removed). `check` is part of check_call (kv_calls.hpp): what it refuses never
// reaches the log; what passes runs on every replica alike.
//
// SPOP's choice. A write is applied from the log on every replica, so a "random" pick must
// be a function of the transaction: the members popped are those at positions drawn from a
// generator seeded with the transaction's zxid (splitmix64), in the set's order. Deciding at
// the leader and replicating the members would need the leader's view of the set when it
// proposes, which a command queued behind other writes does not have; the zxid is the one
// input every replica shares. A pick walks the set from its nearer end: O(size).
//
// Costs: LINDEX, LPUSH/RPUSH/LPOP/RPOP O(1) per element; LRANGE O(start + count); ZRANK and
// ZRANGE by index O(rank) (the sorted set is an ordered tree without ranks).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ascii.hpp"
#include "decimal.hpp"
#include "kv_collection.hpp"
#include "resp_writer.hpp"

namespace zab::kv::collections {

namespace text {
inline constexpr std::string_view wrong_type =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr std::string_view not_integer = "ERR value is not an integer or out of range";
inline constexpr std::string_view not_float = "ERR value is not a valid float";
inline constexpr std::string_view not_positive = "ERR value is out of range, must be positive";
inline constexpr std::string_view hash_not_integer = "ERR hash value is not an integer";
inline constexpr std::string_view overflow = "ERR increment or decrement would overflow";
inline constexpr std::string_view nan_score = "ERR resulting score is not a number (NaN)";
inline constexpr std::string_view min_max = "ERR min or max is not a float";
inline constexpr std::string_view syntax = "ERR syntax error";
inline std::string full(std::size_t size) {
    return "ERR collection full: at most " + std::to_string(max_collection_elements) +
           " elements per key (it holds " + std::to_string(size) + ")";
}
inline std::string element_too_large() {
    return "ERR element too large: at most " + std::to_string(max_element_bytes) +
           " bytes per field, value, item or member";
}
}  // namespace text

/// The type a collection command works on, or nullopt for any other command.
inline std::optional<value_type> family_of(std::string_view name) {
    if (name.size() < 2) return std::nullopt;
    static constexpr std::string_view hash[] = {"hset", "hmset", "hget", "hmget", "hgetall",
                                                "hdel", "hincrby", "hlen", "hexists"};
    static constexpr std::string_view list[] = {"lpush", "rpush", "lpop", "rpop", "lrange",
                                                "llen", "lindex", "ltrim", "lrem"};
    static constexpr std::string_view set[] = {"sadd", "srem", "spop", "smembers", "sismember",
                                               "scard"};
    static constexpr std::string_view zset[] = {"zadd", "zrem", "zscore", "zincrby", "zrange",
                                                "zrangebyscore", "zrank", "zpopmin", "zcard"};
    const auto in = [name](const auto& names) {
        return std::find(std::begin(names), std::end(names), name) != std::end(names);
    };
    if (in(hash)) return value_type::hash;
    if (in(list)) return value_type::list;
    if (in(set)) return value_type::set;
    if (in(zset)) return value_type::zset;
    return std::nullopt;
}

// --- numbers ------------------------------------------------------------------------------

/// A score as Redis reads one (strtod over the whole text; "inf", "+inf", "-inf" allowed,
/// NaN not).
inline std::optional<double> parse_score(const std::string& s) {
    if (s.empty() || s.size() > 256 || std::isspace(static_cast<unsigned char>(s.front())))
        return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || std::isnan(v)) return std::nullopt;
    return v;
}

/// A score as Redis 7.2 writes one: the shortest text that reads back as the same double
/// ("1.5", "3", "1e+20"), "inf" and "-inf".
inline std::string format_score(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buffer[64];
    const auto r = std::to_chars(buffer, buffer + sizeof buffer, v);
    return std::string{buffer, r.ptr};
}

/// A score range bound: `[value` (inclusive) or `(value` (exclusive).
struct score_bound {
    double value = 0;
    bool exclusive = false;
};
inline std::optional<score_bound> parse_bound(const std::string& s) {
    score_bound b;
    if (!s.empty() && s.front() == '(') {
        b.exclusive = true;
        const auto v = parse_score(s.substr(1));
        if (!v) return std::nullopt;
        b.value = *v;
    } else {
        const auto v = parse_score(s);
        if (!v) return std::nullopt;
        b.value = *v;
    }
    return b;
}
inline bool above_min(double v, const score_bound& min) {
    return min.exclusive ? v > min.value : v >= min.value;
}
inline bool below_max(double v, const score_bound& max) {
    return max.exclusive ? v < max.value : v <= max.value;
}

/// Redis's index range over `size` elements: [first, last], or nullopt if empty.
inline std::optional<std::pair<std::size_t, std::size_t>> index_range(std::int64_t start,
                                                                      std::int64_t stop,
                                                                      std::size_t size) {
    const auto n = static_cast<std::int64_t>(size);
    if (start < 0) start = std::max<std::int64_t>(start + n, 0);
    if (stop < 0) stop += n;
    if (start > stop || start >= n) return std::nullopt;
    stop = std::min(stop, n - 1);
    return std::pair{static_cast<std::size_t>(start), static_cast<std::size_t>(stop)};
}

// --- options ------------------------------------------------------------------------------

struct zadd_options {
    bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = false;
    std::size_t first_pair = 2;  ///< the argument the score/member pairs start at
};

inline std::variant<zadd_options, std::string> parse_zadd(const std::vector<std::string>& a) {
    zadd_options o;
    std::size_t i = 2;
    for (; i < a.size(); ++i) {
        const std::string opt = detail::upper(a[i]);
        if (opt == "NX") o.nx = true;
        else if (opt == "XX") o.xx = true;
        else if (opt == "GT") o.gt = true;
        else if (opt == "LT") o.lt = true;
        else if (opt == "CH") o.ch = true;
        else if (opt == "INCR") o.incr = true;
        else break;
    }
    o.first_pair = i;
    const std::size_t rest = a.size() - i;
    if (rest == 0 || rest % 2 != 0) return std::string{text::syntax};
    if (o.nx && o.xx) return std::string{"ERR XX and NX options at the same time are not compatible"};
    if ((o.gt && o.nx) || (o.lt && o.nx) || (o.gt && o.lt))
        return std::string{"ERR GT, LT, and/or NX options at the same time are not compatible"};
    if (o.incr && rest != 2)
        return std::string{"ERR INCR option supports a single increment-element pair"};
    for (std::size_t j = i; j < a.size(); j += 2)
        if (!parse_score(a[j])) return std::string{text::not_float};
    return o;
}

/// ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES], and
/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count].
struct zrange_options {
    bool by_score = false, rev = false, with_scores = false;
    std::int64_t start = 0, stop = 0;  ///< by index
    score_bound min, max;              ///< by score
    std::int64_t offset = 0, count = -1;
};

inline std::variant<zrange_options, std::string> parse_zrange(const std::vector<std::string>& a) {
    zrange_options o;
    const bool by_score_command = detail::lower(a[0]) == "zrangebyscore";
    o.by_score = by_score_command;
    bool limit = false;
    for (std::size_t i = 4; i < a.size(); ++i) {
        const std::string opt = detail::upper(a[i]);
        if (opt == "WITHSCORES") {
            o.with_scores = true;
        } else if (opt == "BYSCORE" && !by_score_command) {
            o.by_score = true;
        } else if (opt == "REV" && !by_score_command) {
            o.rev = true;
        } else if (opt == "LIMIT" && i + 2 < a.size()) {
            const auto offset = parse_int64(a[i + 1]);
            const auto count = parse_int64(a[i + 2]);
            if (!offset || !count) return std::string{text::not_integer};
            o.offset = *offset;
            o.count = *count;
            limit = true;
            i += 2;
        } else if (opt == "BYLEX" && !by_score_command) {
            return std::string{"ERR BYLEX is not supported by this server"};
        } else {
            return std::string{text::syntax};
        }
    }
    if (limit && !o.by_score)
        return std::string{
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or "
            "BYLEX"};
    if (o.by_score) {
        // ZRANGE ... BYSCORE REV takes max then min.
        const auto first = parse_bound(a[2]), second = parse_bound(a[3]);
        if (!first || !second) return std::string{text::min_max};
        o.min = o.rev ? *second : *first;
        o.max = o.rev ? *first : *second;
    } else {
        const auto start = parse_int64(a[2]), stop = parse_int64(a[3]);
        if (!start || !stop) return std::string{text::not_integer};
        o.start = *start;
        o.stop = *stop;
    }
    return o;
}

/// The optional count of LPOP/RPOP/SPOP/ZPOPMIN (argument 2): nullopt if absent, or the
/// error text.
inline std::variant<std::optional<std::size_t>, std::string> parse_pop_count(
    const std::vector<std::string>& a) {
    if (a.size() < 3) return std::optional<std::size_t>{};
    const auto n = parse_int64(a[2]);
    if (!n) return std::string{text::not_integer};
    if (*n < 0) return std::string{text::not_positive};
    return std::optional<std::size_t>{static_cast<std::size_t>(*n)};
}

/// Why collection command `a` (arity already checked) cannot run, or nullopt.
inline std::optional<std::string> check(std::string_view name, const std::vector<std::string>& a) {
    for (std::size_t i = 2; i < a.size(); ++i)
        if (a[i].size() > max_element_bytes) return text::element_too_large();
    if ((name == "hset" || name == "hmset") && a.size() % 2 != 0)
        return "ERR wrong number of arguments for '" + std::string{name} + "' command";
    if (name == "hincrby" && !parse_int64(a[3])) return std::string{text::not_integer};
    if ((name == "lrange" || name == "ltrim") && (!parse_int64(a[2]) || !parse_int64(a[3])))
        return std::string{text::not_integer};
    if ((name == "lindex" || name == "lrem") && !parse_int64(a[2]))
        return std::string{text::not_integer};
    if (name == "lpop" || name == "rpop" || name == "spop" || name == "zpopmin") {
        if (a.size() > 3) {
            if (name == "zpopmin") return std::string{text::syntax};
            return "ERR wrong number of arguments for '" + std::string{name} + "' command";
        }
        auto count = parse_pop_count(a);
        if (auto* error = std::get_if<std::string>(&count)) return *error;
    }
    if (name == "zadd") {
        auto o = parse_zadd(a);
        if (auto* error = std::get_if<std::string>(&o)) return *error;
    }
    if (name == "zincrby" && !parse_score(a[2])) return std::string{text::not_float};
    if (name == "zrange" || name == "zrangebyscore") {
        auto o = parse_zrange(a);
        if (auto* error = std::get_if<std::string>(&o)) return *error;
    }
    if (name == "zrank" && a.size() > 3 && (a.size() > 4 || !detail::iequals(a[3], "WITHSCORE")))
        return std::string{text::syntax};
    return std::nullopt;
}

// --- writes -------------------------------------------------------------------------------

namespace detail_calls {

/// splitmix64: the generator of SPOP's picks.
inline std::uint64_t next_random(std::uint64_t& state) noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <class Set>
auto nth(Set& s, std::size_t i) {
    if (i <= s.size() / 2) return std::next(s.begin(), static_cast<std::ptrdiff_t>(i));
    return std::prev(s.end(), static_cast<std::ptrdiff_t>(s.size() - i));
}

inline void write_scored(std::string& out, const std::string& member, double score,
                         bool with_score) {
    resp::write_bulk_string(out, member);
    if (with_score) resp::write_bulk_string(out, format_score(score));
}

}  // namespace detail_calls

/// Runs write command `a` (lower-case `name`, checked by `check`) on `c`, the key's
/// collection of the command's type (empty if the key is absent), its reply appended to
/// `out`. `seed`: the transaction's zxid (SPOP's picks). Returns whether `c` changed.
inline bool write(std::string& out, std::string_view name, const std::vector<std::string>& a,
                  collection& c, std::uint64_t seed) {
    const std::size_t size = size_of(c);
    const auto integer = [&out](std::size_t v) {
        resp::write_integer(out, static_cast<std::int64_t>(v));
    };
    // Refuses a command that would take the collection past the bound: nothing applied.
    const auto would_overflow = [&](std::size_t added) {
        if (added <= max_collection_elements - std::min(size, max_collection_elements)) return false;
        resp::write_error(out, text::full(size));
        return true;
    };
    if (auto* h = std::get_if<hash_value>(&c)) {
        if (name == "hset" || name == "hmset") {
            std::size_t added = 0;
            for (std::size_t i = 2; i < a.size(); i += 2) added += h->count(a[i]) ? 0 : 1;
            if (would_overflow(added)) return false;
            added = 0;
            for (std::size_t i = 2; i < a.size(); i += 2) {
                const auto [it, inserted] = h->insert_or_assign(a[i], a[i + 1]);
                added += inserted ? 1 : 0;
            }
            if (name == "hmset") resp::write_simple_string(out, "OK");
            else integer(added);
            return true;
        }
        if (name == "hdel") {
            std::size_t removed = 0;
            for (std::size_t i = 2; i < a.size(); ++i) removed += h->erase(a[i]);
            integer(removed);
            return removed != 0;
        }
        if (name == "hincrby") {
            const std::int64_t by = *parse_int64(a[3]);
            std::int64_t current = 0;
            const auto it = h->find(a[2]);
            if (it != h->end()) {
                const auto parsed = parse_int64(it->second);
                if (!parsed) return resp::write_error(out, text::hash_not_integer), false;
                current = *parsed;
            } else if (would_overflow(1)) {
                return false;
            }
            if ((by > 0 && current > std::numeric_limits<std::int64_t>::max() - by) ||
                (by < 0 && current < std::numeric_limits<std::int64_t>::min() - by))
                return resp::write_error(out, text::overflow), false;
            (*h)[a[2]] = format_int64(current + by);
            resp::write_integer(out, current + by);
            return true;
        }
    } else if (auto* l = std::get_if<list_value>(&c)) {
        if (name == "lpush" || name == "rpush") {
            if (would_overflow(a.size() - 2)) return false;
            for (std::size_t i = 2; i < a.size(); ++i) {
                if (name == "lpush") l->push_front(a[i]);
                else l->push_back(a[i]);
            }
            integer(l->size());
            return true;
        }
        if (name == "lpop" || name == "rpop") {
            const auto count = std::get<std::optional<std::size_t>>(parse_pop_count(a));
            const bool left = name == "lpop";
            const auto pop = [&] {
                std::string item = std::move(left ? l->front() : l->back());
                if (left) l->pop_front();
                else l->pop_back();
                return item;
            };
            if (!count) {
                if (l->empty()) return resp::write_null_bulk(out), false;
                resp::write_bulk_string(out, pop());
                return true;
            }
            if (l->empty()) return resp::write_null_array(out), false;
            const std::size_t n = std::min(*count, l->size());
            resp::write_array_header(out, n);
            for (std::size_t i = 0; i < n; ++i) resp::write_bulk_string(out, pop());
            return n != 0;
        }
        if (name == "ltrim") {
            const auto range = index_range(*parse_int64(a[2]), *parse_int64(a[3]), l->size());
            resp::write_simple_string(out, "OK");
            if (!range) {
                const bool changed = !l->empty();
                l->clear();
                return changed;
            }
            const std::size_t before = l->size();
            l->erase(l->begin() + static_cast<std::ptrdiff_t>(range->second + 1), l->end());
            l->erase(l->begin(), l->begin() + static_cast<std::ptrdiff_t>(range->first));
            return l->size() != before;
        }
        if (name == "lrem") {
            const std::int64_t count = *parse_int64(a[2]);
            const std::string& element = a[3];
            std::size_t removed = 0;
            // |count| of the first (count > 0) or last (count < 0) equal items, or all (0).
            const std::uint64_t limit =
                count == 0 ? std::numeric_limits<std::uint64_t>::max()
                           : (count > 0 ? static_cast<std::uint64_t>(count)
                                        : 0 - static_cast<std::uint64_t>(count));
            if (count >= 0) {
                for (auto it = l->begin(); it != l->end() && removed < limit;) {
                    if (*it == element) { it = l->erase(it); ++removed; }
                    else ++it;
                }
            } else {
                for (auto i = l->size(); i > 0 && removed < limit; --i) {
                    if ((*l)[i - 1] == element) {
                        l->erase(l->begin() + static_cast<std::ptrdiff_t>(i - 1));
                        ++removed;
                    }
                }
            }
            integer(removed);
            return removed != 0;
        }
    } else if (auto* s = std::get_if<set_value>(&c)) {
        if (name == "sadd") {
            std::size_t added = 0;
            for (std::size_t i = 2; i < a.size(); ++i) added += s->count(a[i]) ? 0 : 1;
            if (would_overflow(added)) return false;
            added = 0;
            for (std::size_t i = 2; i < a.size(); ++i) added += s->insert(a[i]).second ? 1 : 0;
            integer(added);
            return added != 0;
        }
        if (name == "srem") {
            std::size_t removed = 0;
            for (std::size_t i = 2; i < a.size(); ++i) removed += s->erase(a[i]);
            integer(removed);
            return removed != 0;
        }
        if (name == "spop") {
            const auto count = std::get<std::optional<std::size_t>>(parse_pop_count(a));
            std::uint64_t state = seed;
            const auto pop = [&] {
                const auto it = detail_calls::nth(*s, detail_calls::next_random(state) % s->size());
                std::string member = *it;
                s->erase(it);
                return member;
            };
            if (!count) {
                if (s->empty()) return resp::write_null_bulk(out), false;
                resp::write_bulk_string(out, pop());
                return true;
            }
            const std::size_t n = std::min(*count, s->size());
            resp::write_array_header(out, n);
            for (std::size_t i = 0; i < n; ++i) resp::write_bulk_string(out, pop());
            return n != 0;
        }
    } else if (auto* z = std::get_if<zset_value>(&c)) {
        if (name == "zadd") {
            const auto o = std::get<zadd_options>(parse_zadd(a));
            std::size_t absent = 0;
            for (std::size_t i = o.first_pair + 1; i < a.size(); i += 2)
                absent += z->scores.count(a[i]) ? 0 : 1;
            if (!o.xx && would_overflow(absent)) return false;
            std::size_t added = 0, updated = 0;
            std::optional<double> incr_result;
            for (std::size_t i = o.first_pair; i < a.size(); i += 2) {
                double score = *parse_score(a[i]);
                const std::string& member = a[i + 1];
                const auto it = z->scores.find(member);
                if (it == z->scores.end()) {
                    if (o.xx) continue;
                    z->put(member, score);
                    ++added;
                    incr_result = score;
                    continue;
                }
                if (o.nx) continue;
                if (o.incr) {
                    score += it->second;
                    if (std::isnan(score)) return resp::write_error(out, text::nan_score), false;
                }
                if ((o.gt && !(score > it->second)) || (o.lt && !(score < it->second))) continue;
                incr_result = score;
                if (score != it->second) {
                    z->put(member, score);
                    ++updated;
                }
            }
            if (o.incr) {
                if (incr_result) resp::write_bulk_string(out, format_score(*incr_result));
                else resp::write_null_bulk(out);
            } else {
                integer(o.ch ? added + updated : added);
            }
            return added + updated != 0;
        }
        if (name == "zincrby") {
            const auto it = z->scores.find(a[3]);
            if (it == z->scores.end() && would_overflow(1)) return false;
            const double score = *parse_score(a[2]) + (it == z->scores.end() ? 0 : it->second);
            if (std::isnan(score)) return resp::write_error(out, text::nan_score), false;
            z->put(a[3], score);
            resp::write_bulk_string(out, format_score(score));
            return true;
        }
        if (name == "zrem") {
            std::size_t removed = 0;
            for (std::size_t i = 2; i < a.size(); ++i) removed += z->remove(a[i]) ? 1 : 0;
            integer(removed);
            return removed != 0;
        }
        if (name == "zpopmin") {
            const auto count = std::get<std::optional<std::size_t>>(parse_pop_count(a));
            const std::size_t n = std::min(count.value_or(1), z->size());
            resp::write_array_header(out, 2 * n);
            for (std::size_t i = 0; i < n; ++i) {
                const auto [score, member] = *z->order.begin();
                detail_calls::write_scored(out, member, score, true);
                z->remove(member);
            }
            return n != 0;
        }
    }
    resp::write_error(out, "ERR not a write command");
    return false;
}

// --- reads --------------------------------------------------------------------------------

/// Runs read command `a` (lower-case `name`, checked by `check`) on `c`, its reply appended
/// to `out`. A reply that grows past `max_reply_bytes` is replaced by an error as soon as it
/// does: no more than that is ever built.
inline void read(std::string& out, std::string_view name, const std::vector<std::string>& a,
                 const collection& c, std::size_t max_reply_bytes) {
    const std::size_t start = out.size();
    const auto integer = [&out](std::size_t v) {
        resp::write_integer(out, static_cast<std::int64_t>(v));
    };
    const auto bulk_or_null = [&out](const std::string* v) {
        if (v) resp::write_bulk_string(out, *v);
        else resp::write_null_bulk(out);
    };
    const auto too_large_error = [&] {
        out.resize(start);
        resp::write_error(out, "ERR reply too large: more than " +
                                   std::to_string(max_reply_bytes) +
                                   " bytes; ask for a smaller range");
    };
    // True (and the reply replaced by the error) once the reply is too large.
    const auto too_large = [&] {
        if (out.size() - start <= max_reply_bytes) return false;
        too_large_error();
        return true;
    };
    if (const auto* h = std::get_if<hash_value>(&c)) {
        const auto field = [h](const std::string& f) -> const std::string* {
            const auto it = h->find(f);
            return it == h->end() ? nullptr : &it->second;
        };
        if (name == "hget") return bulk_or_null(field(a[2]));
        if (name == "hexists") return integer(field(a[2]) ? 1 : 0);
        if (name == "hlen") return integer(h->size());
        if (name == "hmget") {
            resp::write_array_header(out, a.size() - 2);
            for (std::size_t i = 2; i < a.size(); ++i) {
                bulk_or_null(field(a[i]));
                if (too_large()) return;
            }
            return;
        }
        if (name == "hgetall") {
            resp::write_array_header(out, 2 * h->size());
            for (const auto& [f, v] : *h) {
                resp::write_bulk_string(out, f);
                resp::write_bulk_string(out, v);
                if (too_large()) return;
            }
            return;
        }
    } else if (const auto* l = std::get_if<list_value>(&c)) {
        if (name == "llen") return integer(l->size());
        if (name == "lindex") {
            std::int64_t i = *parse_int64(a[2]);
            const auto n = static_cast<std::int64_t>(l->size());
            if (i < 0) i += n;
            return bulk_or_null(i >= 0 && i < n ? &(*l)[static_cast<std::size_t>(i)] : nullptr);
        }
        if (name == "lrange") {
            const auto range = index_range(*parse_int64(a[2]), *parse_int64(a[3]), l->size());
            if (!range) return resp::write_array_header(out, 0);
            resp::write_array_header(out, range->second - range->first + 1);
            for (std::size_t i = range->first; i <= range->second; ++i) {
                resp::write_bulk_string(out, (*l)[i]);
                if (too_large()) return;
            }
            return;
        }
    } else if (const auto* s = std::get_if<set_value>(&c)) {
        if (name == "scard") return integer(s->size());
        if (name == "sismember") return integer(s->count(a[2]));
        if (name == "smembers") {
            resp::write_array_header(out, s->size());
            for (const auto& member : *s) {
                resp::write_bulk_string(out, member);
                if (too_large()) return;
            }
            return;
        }
    } else if (const auto* z = std::get_if<zset_value>(&c)) {
        if (name == "zcard") return integer(z->size());
        if (name == "zscore") {
            const auto it = z->scores.find(a[2]);
            if (it == z->scores.end()) return resp::write_null_bulk(out);
            return resp::write_bulk_string(out, format_score(it->second));
        }
        if (name == "zrank") {
            const bool with_score = a.size() > 3;
            const auto it = z->scores.find(a[2]);
            if (it == z->scores.end()) {
                if (with_score) return resp::write_null_array(out);
                return resp::write_null_bulk(out);
            }
            const auto rank = std::distance(z->order.begin(), z->order.find({it->second, it->first}));
            if (!with_score) return resp::write_integer(out, rank);
            resp::write_array_header(out, 2);
            resp::write_integer(out, rank);
            return resp::write_bulk_string(out, format_score(it->second));
        }
        if (name == "zrange" || name == "zrangebyscore") {
            const auto o = std::get<zrange_options>(parse_zrange(a));
            std::vector<const std::pair<double, std::string>*> picked;
            std::size_t bytes = 0;
            const auto take = [&](const std::pair<double, std::string>& e) {
                picked.push_back(&e);
                bytes += e.second.size() + 48;
                return bytes <= max_reply_bytes;
            };
            if (!o.by_score) {
                const auto range = index_range(o.start, o.stop, z->size());
                if (range) {
                    if (!o.rev) {
                        auto it = detail_calls::nth(z->order, range->first);
                        for (std::size_t i = range->first; i <= range->second; ++i, ++it)
                            if (!take(*it)) break;
                    } else {
                        auto it = std::prev(z->order.end(), static_cast<std::ptrdiff_t>(range->first + 1));
                        for (std::size_t i = range->first; i <= range->second; ++i) {
                            if (!take(*it)) break;
                            if (it != z->order.begin()) --it;
                        }
                    }
                }
            } else if (o.offset >= 0) {
                std::int64_t skip = o.offset, left = o.count;
                const auto visit = [&](const std::pair<double, std::string>& e) {
                    if (skip > 0) { --skip; return true; }
                    if (left == 0) return false;
                    if (left > 0) --left;
                    return take(e);
                };
                if (!o.rev) {
                    for (auto it = z->order.lower_bound({o.min.value, std::string{}});
                         it != z->order.end() && below_max(it->first, o.max); ++it)
                        if (above_min(it->first, o.min) && !visit(*it)) break;
                } else {
                    for (auto it = z->order.rbegin();
                         it != z->order.rend() && above_min(it->first, o.min); ++it)
                        if (below_max(it->first, o.max) && !visit(*it)) break;
                }
            }
            if (bytes > max_reply_bytes) return too_large_error();
            resp::write_array_header(out, o.with_scores ? 2 * picked.size() : picked.size());
            for (const auto* e : picked) detail_calls::write_scored(out, e->second, e->first, o.with_scores);
            return;
        }
    }
    resp::write_error(out, "ERR not a read command");
}

}  // namespace zab::kv::collections
