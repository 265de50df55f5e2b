// examples/kv/kv_calls.hpp — the Redis commands kv_server knows: one table (name, arity,
// kind, key positions) that serves COMMAND, the arity check and the MULTI queue; the syntax
// of each command's options, checked the same way when the command is read (kv_requests.hpp)
// and when a replica applies it (kv_store.hpp); and the helpers the commands share
// (Redis's glob patterns, its long-double form for INCRBYFLOAT).
//
// A command is `write` (replicated: it becomes a transaction), `read` (executed on the
// replica's state; inside MULTI it is part of the transaction) or `connection` (handled by
// the session: HELLO, CLIENT, MULTI, ...). Names are case-insensitive.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ascii.hpp"
#include "decimal.hpp"
#include "kv_collection_calls.hpp"
#include "kv_outcome.hpp"

namespace zab::kv {

enum class call_kind : std::uint8_t { write, read, connection };

/// One row of the command table, as Redis's COMMAND describes a command.
struct command_info {
    std::string_view name;  ///< lower case
    int arity;              ///< Redis's convention: n exactly n arguments (name included), -n at least n
    call_kind kind;
    int first_key, last_key, step;  ///< key positions (last -1: to the end); 0 0 0: none
    /// An admin command (it changes the cluster, not the data: ZTRANSFER, ZRECONFIG): once
    /// kv_server has an admin user, only that user may run it (kv_auth.hpp); others get
    /// -NOPERM.
    bool admin = false;
};

// clang-format off
inline constexpr std::array<command_info, 98> command_table{{
    {"set", -3, call_kind::write, 1, 1, 1},        {"setnx", 3, call_kind::write, 1, 1, 1},
    {"setex", 4, call_kind::write, 1, 1, 1},       {"psetex", 4, call_kind::write, 1, 1, 1},
    {"getset", 3, call_kind::write, 1, 1, 1},      {"getdel", 2, call_kind::write, 1, 1, 1},
    {"mset", -3, call_kind::write, 1, -1, 2},      {"msetnx", -3, call_kind::write, 1, -1, 2},
    {"del", -2, call_kind::write, 1, -1, 1},       {"unlink", -2, call_kind::write, 1, -1, 1},
    {"incr", 2, call_kind::write, 1, 1, 1},        {"decr", 2, call_kind::write, 1, 1, 1},
    {"incrby", 3, call_kind::write, 1, 1, 1},      {"decrby", 3, call_kind::write, 1, 1, 1},
    {"incrbyfloat", 3, call_kind::write, 1, 1, 1}, {"append", 3, call_kind::write, 1, 1, 1},
    {"expire", -3, call_kind::write, 1, 1, 1},     {"pexpire", -3, call_kind::write, 1, 1, 1},
    {"expireat", -3, call_kind::write, 1, 1, 1},   {"pexpireat", -3, call_kind::write, 1, 1, 1},
    {"persist", 2, call_kind::write, 1, 1, 1},     {"flushdb", -1, call_kind::write, 0, 0, 0},
    {"flushall", -1, call_kind::write, 0, 0, 0},   {"cas", 4, call_kind::write, 1, 1, 1},
    {"cas.absent", 3, call_kind::write, 1, 1, 1},
    {"hset", -4, call_kind::write, 1, 1, 1},       {"hmset", -4, call_kind::write, 1, 1, 1},
    {"hdel", -3, call_kind::write, 1, 1, 1},       {"hincrby", 4, call_kind::write, 1, 1, 1},
    {"lpush", -3, call_kind::write, 1, 1, 1},      {"rpush", -3, call_kind::write, 1, 1, 1},
    {"lpop", -2, call_kind::write, 1, 1, 1},       {"rpop", -2, call_kind::write, 1, 1, 1},
    {"ltrim", 4, call_kind::write, 1, 1, 1},       {"lrem", 4, call_kind::write, 1, 1, 1},
    {"sadd", -3, call_kind::write, 1, 1, 1},       {"srem", -3, call_kind::write, 1, 1, 1},
    {"spop", -2, call_kind::write, 1, 1, 1},       {"zadd", -4, call_kind::write, 1, 1, 1},
    {"zrem", -3, call_kind::write, 1, 1, 1},       {"zincrby", 4, call_kind::write, 1, 1, 1},
    {"zpopmin", -2, call_kind::write, 1, 1, 1},
    {"get", 2, call_kind::read, 1, 1, 1},          {"mget", -2, call_kind::read, 1, -1, 1},
    {"exists", -2, call_kind::read, 1, -1, 1},     {"strlen", 2, call_kind::read, 1, 1, 1},
    {"ttl", 2, call_kind::read, 1, 1, 1},          {"pttl", 2, call_kind::read, 1, 1, 1},
    {"expiretime", 2, call_kind::read, 1, 1, 1},   {"pexpiretime", 2, call_kind::read, 1, 1, 1},
    {"type", 2, call_kind::read, 1, 1, 1},         {"keys", 2, call_kind::read, 0, 0, 0},
    {"scan", -2, call_kind::read, 0, 0, 0},        {"dbsize", 1, call_kind::read, 0, 0, 0},
    {"ping", -1, call_kind::read, 0, 0, 0},        {"echo", 2, call_kind::read, 0, 0, 0},
    {"hget", 3, call_kind::read, 1, 1, 1},         {"hmget", -3, call_kind::read, 1, 1, 1},
    {"hgetall", 2, call_kind::read, 1, 1, 1},      {"hlen", 2, call_kind::read, 1, 1, 1},
    {"hexists", 3, call_kind::read, 1, 1, 1},      {"lrange", 4, call_kind::read, 1, 1, 1},
    {"llen", 2, call_kind::read, 1, 1, 1},         {"lindex", 3, call_kind::read, 1, 1, 1},
    {"smembers", 2, call_kind::read, 1, 1, 1},     {"sismember", 3, call_kind::read, 1, 1, 1},
    {"scard", 2, call_kind::read, 1, 1, 1},        {"zscore", 3, call_kind::read, 1, 1, 1},
    {"zrange", -4, call_kind::read, 1, 1, 1},      {"zrangebyscore", -4, call_kind::read, 1, 1, 1},
    {"zrank", -3, call_kind::read, 1, 1, 1},       {"zcard", 2, call_kind::read, 1, 1, 1},
    {"hello", -1, call_kind::connection, 0, 0, 0}, {"client", -2, call_kind::connection, 0, 0, 0},
    {"select", 2, call_kind::connection, 0, 0, 0}, {"command", -1, call_kind::connection, 0, 0, 0},
    {"quit", -1, call_kind::connection, 0, 0, 0},  {"reset", 1, call_kind::connection, 0, 0, 0},
    {"multi", 1, call_kind::connection, 0, 0, 0},  {"exec", 1, call_kind::connection, 0, 0, 0},
    {"discard", 1, call_kind::connection, 0, 0, 0},{"watch", -2, call_kind::connection, 1, -1, 1},
    {"unwatch", 1, call_kind::connection, 0, 0, 0},{"info", -1, call_kind::connection, 0, 0, 0},
    {"sync", 1, call_kind::connection, 0, 0, 0},   {"zsync", 1, call_kind::connection, 0, 0, 0},
    {"ztransfer", 2, call_kind::connection, 0, 0, 0, true},
    {"zreconfig", -2, call_kind::connection, 0, 0, 0, true},
    {"readmode", 2, call_kind::connection, 0, 0, 0},{"tagged", -4, call_kind::connection, 0, 0, 0},
    {"config", -2, call_kind::connection, 0, 0, 0},{"auth", -2, call_kind::connection, 0, 0, 0},
    {"sentinel", -2, call_kind::connection, 0, 0, 0},{"role", 1, call_kind::connection, 0, 0, 0},
    {"subscribe", -2, call_kind::connection, 0, 0, 0},
    {"psubscribe", -2, call_kind::connection, 0, 0, 0},
    {"unsubscribe", -1, call_kind::connection, 0, 0, 0},
    {"punsubscribe", -1, call_kind::connection, 0, 0, 0},
}};
// clang-format on

/// Every row filled in (the array's size is the row count).
constexpr bool table_complete() {
    for (const auto& info : command_table)
        if (info.name.empty()) return false;
    return true;
}
static_assert(table_complete(), "kv: command_table's size is more than its rows");

/// The table's row for `name` (any case), or nullptr.
inline const command_info* find_command(std::string_view name) noexcept {
    for (const auto& info : command_table)
        if (detail::iequals(info.name, name)) return &info;
    return nullptr;
}

/// Redis's error texts (redis/src/server.c, t_string.c, expire.c, db.c).
namespace text {
inline constexpr std::string_view syntax = "ERR syntax error";
inline constexpr std::string_view not_integer = error_not_integer;
inline constexpr std::string_view not_float = "ERR value is not a valid float";
inline constexpr std::string_view nan_or_inf = "ERR increment would produce NaN or Infinity";
inline constexpr std::string_view invalid_cursor = "ERR invalid cursor";

inline std::string wrong_arity(std::string_view name) {
    return "ERR wrong number of arguments for '" + detail::lower(name) + "' command";
}
inline std::string invalid_expire(std::string_view name) {
    return "ERR invalid expire time in '" + detail::lower(name) + "' command";
}
/// Arguments quoted and cut as Redis cuts them (128 bytes each).
inline std::string unknown_command(const std::vector<std::string>& args) {
    std::string t = "ERR unknown command '" + args[0].substr(0, 128) +
                    "', with args beginning with: ";
    for (std::size_t i = 1; i < args.size() && t.size() < 512; ++i)
        t += "'" + args[i].substr(0, 128) + "' ";
    return t;
}
}  // namespace text

/// SET's options (SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]).
struct set_options {
    enum class expiry : std::uint8_t { none, ex, px, exat, pxat, keepttl };
    bool nx = false;
    bool xx = false;
    bool get = false;
    expiry unit = expiry::none;
    std::int64_t amount = 0;  ///< for ex/px/exat/pxat: > 0
};

/// The options of `args` from `args[from]` on, or Redis's error text.
inline std::variant<set_options, std::string> parse_set_options(
    const std::vector<std::string>& args, std::size_t from = 3) {
    set_options o;
    for (std::size_t i = from; i < args.size(); ++i) {
        const std::string opt = detail::upper(args[i]);
        const bool has_next = i + 1 < args.size();
        if (opt == "NX" && !o.xx) {
            o.nx = true;
        } else if (opt == "XX" && !o.nx) {
            o.xx = true;
        } else if (opt == "GET") {
            o.get = true;
        } else if (opt == "KEEPTTL" && o.unit == set_options::expiry::none) {
            o.unit = set_options::expiry::keepttl;
        } else if ((opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") &&
                   o.unit == set_options::expiry::none && has_next) {
            const auto n = parse_int64(args[++i]);
            if (!n) return std::string{text::not_integer};
            const bool seconds = opt == "EX" || opt == "EXAT";
            if (*n <= 0 || (seconds && *n > INT64_MAX / 1000)) return text::invalid_expire("set");
            o.unit = opt == "EX"   ? set_options::expiry::ex
                     : opt == "PX" ? set_options::expiry::px
                     : opt == "EXAT" ? set_options::expiry::exat
                                     : set_options::expiry::pxat;
            o.amount = *n;
        } else {
            return std::string{text::syntax};
        }
    }
    return o;
}

/// EXPIRE's condition (EXPIRE key n [NX|XX|GT|LT]).
enum class expire_condition : std::uint8_t { always, nx, xx, gt, lt };

inline std::variant<expire_condition, std::string> parse_expire_condition(
    const std::vector<std::string>& args) {
    expire_condition c = expire_condition::always;
    for (std::size_t i = 3; i < args.size(); ++i) {
        const std::string opt = detail::upper(args[i]);
        const expire_condition next = opt == "NX"   ? expire_condition::nx
                                      : opt == "XX" ? expire_condition::xx
                                      : opt == "GT" ? expire_condition::gt
                                      : opt == "LT" ? expire_condition::lt
                                                    : expire_condition::always;
        if (next == expire_condition::always) return "ERR Unsupported option " + args[i];
        if (c != expire_condition::always && c != next) {
            const bool nx_mixed = c == expire_condition::nx || next == expire_condition::nx;
            return std::string{nx_mixed ? "ERR NX and XX, GT or LT options at the same time "
                                          "are not compatible"
                                        : "ERR GT and LT options at the same time are not "
                                          "compatible"};
        }
        c = next;
    }
    return c;
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type].
struct scan_options {
    std::uint64_t cursor = 0;
    std::optional<std::string> match;
    std::uint64_t count = 10;
    std::optional<std::string> type;  ///< lower case
};

inline std::variant<scan_options, std::string> parse_scan(const std::vector<std::string>& args) {
    scan_options o;
    const auto cursor = parse_int64(args[1]);
    if (!cursor && args[1] != "0") {
        // Redis takes any unsigned 64-bit decimal as a cursor.
        std::uint64_t v = 0;
        if (args[1].empty() || args[1].size() > 20) return std::string{text::invalid_cursor};
        for (const char c : args[1]) {
            if (c < '0' || c > '9' || v > (UINT64_MAX - static_cast<unsigned>(c - '0')) / 10)
                return std::string{text::invalid_cursor};
            v = v * 10 + static_cast<unsigned>(c - '0');
        }
        o.cursor = v;
    } else {
        if (*cursor < 0) return std::string{text::invalid_cursor};
        o.cursor = static_cast<std::uint64_t>(*cursor);
    }
    for (std::size_t i = 2; i < args.size(); i += 2) {
        if (i + 1 >= args.size()) return std::string{text::syntax};
        const std::string opt = detail::upper(args[i]);
        if (opt == "MATCH") {
            o.match = args[i + 1];
        } else if (opt == "COUNT") {
            const auto n = parse_int64(args[i + 1]);
            if (!n) return std::string{text::not_integer};
            if (*n < 1) return std::string{text::syntax};
            o.count = static_cast<std::uint64_t>(*n);
        } else if (opt == "TYPE") {
            o.type = detail::lower(args[i + 1]);
        } else {
            return std::string{text::syntax};
        }
    }
    return o;
}

/// A long double as Redis reads one (string2ld): the whole text, no spaces, not NaN.
inline std::optional<long double> parse_long_double(const std::string& s) {
    if (s.empty() || s.size() > 5000 || s.front() == ' ' || s.front() == '\t' ||
        s.front() == '\n' || s.front() == '\r' || s.front() == '\v' || s.front() == '\f')
        return std::nullopt;
    char* end = nullptr;
    const long double v = std::strtold(s.c_str(), &end);
    if (end != s.c_str() + s.size() || std::isnan(v)) return std::nullopt;
    return v;
}

/// `v` as Redis writes INCRBYFLOAT's result (ld2string, LD_STR_HUMAN): 17 decimals, then
/// trailing zeros and a trailing point removed.
inline std::string format_long_double(long double v) {
    char buffer[5400];
    const int n = std::snprintf(buffer, sizeof buffer, "%.17Lf", v);
    std::string out{buffer, n > 0 ? static_cast<std::size_t>(n) : 0};
    if (out.find('.') != std::string::npos) {
        while (!out.empty() && out.back() == '0') out.pop_back();
        if (!out.empty() && out.back() == '.') out.pop_back();
    }
    if (out == "-0") out = "0";
    return out;
}

/// Redis's glob match (stringmatchlen): `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`.
inline bool glob_match(std::string_view pattern, std::string_view s) {
    std::size_t p = 0, i = 0;
    std::size_t star_p = std::string_view::npos, star_i = 0;
    while (i < s.size()) {
        bool matched = false;
        std::size_t next_p = p;
        if (p < pattern.size()) {
            const char c = pattern[p];
            if (c == '*') {
                star_p = p++;
                star_i = i;
                continue;
            }
            if (c == '?') {
                matched = true;
                next_p = p + 1;
            } else if (c == '[') {
                std::size_t q = p + 1;
                const bool negate = q < pattern.size() && pattern[q] == '^';
                if (negate) ++q;
                bool in = false;
                while (q < pattern.size() && pattern[q] != ']') {
                    if (pattern[q] == '\\' && q + 1 < pattern.size()) {
                        in = in || pattern[q + 1] == s[i];
                        q += 2;
                    } else if (q + 2 < pattern.size() && pattern[q + 1] == '-' &&
                               pattern[q + 2] != ']') {
                        char lo = pattern[q], hi = pattern[q + 2];
                        if (lo > hi) std::swap(lo, hi);
                        in = in || (s[i] >= lo && s[i] <= hi);
                        q += 3;
                    } else {
                        in = in || pattern[q] == s[i];
                        ++q;
                    }
                }
                matched = in != negate;
                next_p = q < pattern.size() ? q + 1 : q;
            } else if (c == '\\' && p + 1 < pattern.size()) {
                matched = pattern[p + 1] == s[i];
                next_p = p + 2;
            } else {
                matched = c == s[i];
                next_p = p + 1;
            }
        }
        if (matched) {
            p = next_p;
            ++i;
        } else if (star_p != std::string_view::npos) {
            p = star_p + 1;
            i = ++star_i;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

/// Why `args` (a read or write command, name first) cannot run, or nullopt: an unknown
/// name, the wrong arity, or options and numbers that do not parse. What a replica checks
/// again when it applies the command, so a transaction that passed here runs.
inline std::optional<std::string> check_call(const std::vector<std::string>& args) {
    const command_info* info = find_command(args[0]);
    if (info == nullptr || info->kind == call_kind::connection) return text::unknown_command(args);
    const auto n = static_cast<int>(args.size());
    if ((info->arity > 0 && n != info->arity) || (info->arity < 0 && n < -info->arity))
        return text::wrong_arity(args[0]);
    const std::string_view name = info->name;
    if ((name == "mset" || name == "msetnx") && n % 2 == 0) return text::wrong_arity(args[0]);
    if (name == "set") {
        auto parsed = parse_set_options(args);
        if (auto* error = std::get_if<std::string>(&parsed)) return *error;
    } else if (name == "setex" || name == "psetex") {
        const auto t = parse_int64(args[2]);
        if (!t) return std::string{text::not_integer};
        if (*t <= 0 || (name == "setex" && *t > INT64_MAX / 1000)) return text::invalid_expire(name);
    } else if (name == "incrby" || name == "decrby") {
        const auto by = parse_int64(args[2]);
        if (!by) return std::string{text::not_integer};
        if (name == "decrby" && *by == INT64_MIN) return std::string{"ERR decrement would overflow"};
    } else if (name == "incrbyfloat") {
        const auto by = parse_long_double(args[2]);
        if (!by || !std::isfinite(*by)) return std::string{text::not_float};
    } else if (name == "expire" || name == "pexpire" || name == "expireat" ||
               name == "pexpireat") {
        const auto t = parse_int64(args[2]);
        if (!t) return std::string{text::not_integer};
        const bool seconds = name == "expire" || name == "expireat";
        if (seconds && (*t > INT64_MAX / 1000 || *t < INT64_MIN / 1000))
            return text::invalid_expire(name);
        auto condition = parse_expire_condition(args);
        if (auto* error = std::get_if<std::string>(&condition)) return *error;
    } else if (name == "flushdb" || name == "flushall") {
        if (n > 2) return std::string{text::syntax};
        if (n == 2 && !detail::iequals(args[1], "ASYNC") && !detail::iequals(args[1], "SYNC"))
            return std::string{text::syntax};
    } else if (name == "scan") {
        auto parsed = parse_scan(args);
        if (auto* error = std::get_if<std::string>(&parsed)) return *error;
    } else if (name == "ping" && n > 2) {
        return text::wrong_arity(args[0]);
    } else if (collections::family_of(name)) {
        return collections::check(name, args);
    }
    return std::nullopt;
}

}  // namespace zab::kv
