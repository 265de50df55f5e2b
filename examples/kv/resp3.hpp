// examples/kv/resp3.hpp — a reply in RESP3's types for a client that said HELLO 3.
//
// kv_server builds every reply in RESP2. RESP3 gives some replies their own types, decided by
// the command (a map for HGETALL, a set for SMEMBERS, a double for a score): resp3_shape_of
// names the shape from the command as it was received, and to_resp3 rewrites the RESP2 reply
// into it, as redis-server 7 answers (checked byte for byte against it by
// tests/kv/redis_diff_test.sh). Inside MULTI each of EXEC's elements takes its own command's
// shape. Nothing here does I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ascii.hpp"
#include "resp_parser.hpp"
#include "resp_writer.hpp"

namespace zab::kv::resp {

/// What RESP3 makes of a command's RESP2 reply (besides the nulls, which become `_` always).
enum class resp3_shape : std::uint8_t {
    same,             ///< nothing else changes
    map,              ///< a flat array of pairs becomes a map (HGETALL)
    set,              ///< an array becomes a set (SMEMBERS, SPOP with a count)
    score,            ///< a bulk string becomes a double (ZSCORE, ZINCRBY, ZADD INCR)
    scored_pairs,     ///< [m1, s1, m2, s2] becomes [[m1, s1], [m2, s2]], scores doubles
                      ///< (ZRANGE… WITHSCORES, ZPOPMIN with a count)
    odd_scores,       ///< every second element becomes a double (ZPOPMIN, ZRANK WITHSCORE)
};

namespace detail {

inline bool has_option(const command& args, std::string_view option) {
    for (std::size_t i = 2; i < args.size(); ++i)
        if (zab::kv::detail::iequals(args[i], option)) return true;
    return false;
}

/// The header line of the value at `in[at]`: its type and its count or length (-1: null);
/// false if it is not a complete line with a number.
inline bool read_header(std::string_view in, std::size_t at, char& type, std::int64_t& n,
                        std::size_t& next) {
    const auto header = header_at(in, at);
    if (!header) return false;
    type = header->type;
    next = header->next;
    if (header->head == "-1") {
        n = -1;
        return true;
    }
    const auto count = header_count(header->head);
    if (!count || header->head.empty()) return false;
    n = static_cast<std::int64_t>(*count);
    return true;
}

/// The bulk string at `in[at]` as a RESP3 double (a null as `_`); false if it is not one.
inline bool copy_as_double(std::string_view in, std::size_t& at, std::string& out) {
    char type = 0;
    std::int64_t n = 0;
    std::size_t next = 0;
    if (!read_header(in, at, type, n, next) || type != '$') return false;
    if (n < 0) {
        out.append("_\r\n");
        at = next;
        return true;
    }
    const auto length = static_cast<std::size_t>(n);
    if (in.size() - next < length + 2) return false;
    out.push_back(',');
    out.append(in.substr(next, length));
    out.append("\r\n");
    at = next + length + 2;
    return true;
}

/// The value at `in[at]` in `shape`; false (and `out` unspecified) if it is not a complete
/// value of the form the shape expects. Errors and nulls keep their RESP3 forms whatever the
/// shape.
inline bool copy_shaped(std::string_view in, std::size_t& at, std::string& out,
                        resp3_shape shape) {
    char type = 0;
    std::int64_t n = 0;
    std::size_t next = 0;
    if (shape == resp3_shape::same || !read_header(in, at, type, n, next) || n < 0 ||
        (type != '*' && type != '$'))
        return copy_as_resp3(in, at, out, 0);
    if (shape == resp3_shape::score) return copy_as_double(in, at, out);
    if (type != '*') return copy_as_resp3(in, at, out, 0);
    const auto count = static_cast<std::size_t>(n);
    switch (shape) {
        case resp3_shape::map:
        case resp3_shape::scored_pairs:
            if (count % 2 != 0) return false;
            out.push_back(shape == resp3_shape::map ? '%' : '*');
            out.append(std::to_string(count / 2));
            break;
        case resp3_shape::set:
            out.push_back('~');
            out.append(std::to_string(count));
            break;
        default:
            out.append(in.substr(at, next - at - 2));
            break;
    }
    out.append("\r\n");
    at = next;
    for (std::size_t i = 0; i < count; ++i) {
        if (shape == resp3_shape::scored_pairs && i % 2 == 0) out.append("*2\r\n");
        const bool score =
            (shape == resp3_shape::scored_pairs || shape == resp3_shape::odd_scores) && i % 2 == 1;
        if (!(score ? copy_as_double(in, at, out) : copy_as_resp3(in, at, out, 1))) return false;
    }
    return true;
}

}  // namespace detail

/// The RESP3 shape of `args`'s reply (a command as received, any case).
inline resp3_shape resp3_shape_of(const command& args) {
    if (args.empty()) return resp3_shape::same;
    const std::string_view name = args[0];
    const auto is = [name](std::string_view n) { return zab::kv::detail::iequals(name, n); };
    if (is("hgetall")) return resp3_shape::map;
    if (is("smembers")) return resp3_shape::set;
    if (is("spop")) return args.size() > 2 ? resp3_shape::set : resp3_shape::same;
    if (is("zscore") || is("zincrby")) return resp3_shape::score;
    if (is("zadd")) return detail::has_option(args, "INCR") ? resp3_shape::score : resp3_shape::same;
    if (is("zrange") || is("zrangebyscore"))
        return detail::has_option(args, "WITHSCORES") ? resp3_shape::scored_pairs
                                                      : resp3_shape::same;
    if (is("zpopmin")) return args.size() > 2 ? resp3_shape::scored_pairs : resp3_shape::odd_scores;
    if (is("zrank"))
        return detail::has_option(args, "WITHSCORE") ? resp3_shape::odd_scores : resp3_shape::same;
    return resp3_shape::same;
}

/// `reply` (one whole RESP2 value, or several for shape `same`) in RESP3 for a command of
/// `shape`. Input that is not of that form is returned with only its nulls changed.
inline std::string to_resp3(std::string_view reply, resp3_shape shape) {
    if (shape == resp3_shape::same) return to_resp3(reply);
    std::string out;
    out.reserve(reply.size() + 16);
    std::size_t at = 0;
    if (!detail::copy_shaped(reply, at, out, shape) || at != reply.size()) return to_resp3(reply);
    return out;
}

/// EXEC's `reply` in RESP3: its element i in `shapes[i]` (the queued commands' shapes). A null
/// (an aborted WATCH), an error or an array of another length is converted as shape `same`.
inline std::string exec_to_resp3(std::string_view reply, std::span<const resp3_shape> shapes) {
    char type = 0;
    std::int64_t n = 0;
    std::size_t next = 0;
    if (!detail::read_header(reply, 0, type, n, next) || type != '*' ||
        n != static_cast<std::int64_t>(shapes.size()))
        return to_resp3(reply);
    std::string out{reply.substr(0, next)};
    std::size_t at = next;
    for (const resp3_shape shape : shapes)
        if (!detail::copy_shaped(reply, at, out, shape)) return to_resp3(reply);
    if (at != reply.size()) return to_resp3(reply);
    return out;
}

}  // namespace zab::kv::resp
