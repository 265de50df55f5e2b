// examples/kv/kv_requests.hpp — what kv_server does with one RESP command, decided without
// I/O: each command becomes a `request` (an immediate reply, a replicated write, a local
// read, a SYNC, a READMODE change, or QUIT), and the texts of every reply are built here so
// that they can be unit-tested without sockets or Boost.Asio.
//
// Commands (case-insensitive names, binary-safe arguments):
//   PING [msg]  ECHO msg  GET k  SET k v  DEL k  INCR k  EXISTS k...  MGET k...
//   CAS k expected new      :1 when k held `expected` and now holds `new`, :0 otherwise
//   CAS.ABSENT k new        the same, where "expected" is "k is absent" (create-if-absent)
//   TAGGED client-id seq <SET|DEL|INCR|CAS|CAS.ABSENT ...>   exactly-once retry (kv_command.hpp)
//   INFO [section]  (INFO DIGEST: the state's digest and zxid, to compare replicas)
//   SYNC  ZSYNC  READMODE local|linearizable  COMMAND ...  CONFIG GET p  QUIT
//
// ZSYNC is SYNC under another name: redis-cli intercepts a command named SYNC (it starts a
// Redis replication stream instead of sending it as a command), so from redis-cli use ZSYNC.
//
// CAS.ABSENT is a separate command rather than a marker inside CAS (like `CAS k NX new`)
// so that every byte string, "NX" included, can be an expected value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "kv_command.hpp"
#include "kv_outcome.hpp"
#include "kv_state_machine.hpp"
#include "resp_parser.hpp"
#include "resp_writer.hpp"
#include "zab/core/error.hpp"

namespace zab::kv {

/// How a connection's reads are served (READMODE).
enum class read_mode : std::uint8_t {
    local,         ///< from this replica's state: sequentially consistent
    linearizable,  ///< each GET/MGET/EXISTS waits for a SYNC first
};

namespace request {

/// A reply known at once (PING, errors, COMMAND, ...).
struct immediate {
    std::string reply;  ///< RESP bytes
};
/// A replicated write: `txn` is the encoded kv::command.
struct write {
    std::vector<std::byte> txn;
};
/// A local read (GET, MGET, EXISTS, INFO). `syncable`: a linearizable connection syncs first
/// (INFO is about this replica, so never).
struct read {
    resp::command args;
    bool syncable = true;
};
/// SYNC: +OK once the node's async_sync completed.
struct sync {};
/// READMODE: changes the connection's mode for the commands after it; replies +OK.
struct set_read_mode {
    read_mode mode = read_mode::local;
};
/// QUIT: +OK, then the connection closes.
struct quit {};

}  // namespace request

using request_variant = std::variant<request::immediate, request::write, request::read,
                                     request::sync, request::set_read_mode, request::quit>;

namespace detail {

inline std::string upper(std::string_view s) {
    std::string out{s};
    for (char& c : out)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return out;
}

inline std::string lower(std::string_view s) {
    std::string out{s};
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

inline request::immediate error(std::string_view text) {
    request::immediate r;
    resp::write_error(r.reply, text);
    return r;
}

inline request::immediate simple(std::string_view text) {
    request::immediate r;
    resp::write_simple_string(r.reply, text);
    return r;
}

/// Redis's wording (redis/src/server.c, processCommand).
inline request::immediate wrong_arity(std::string_view name) {
    return error("ERR wrong number of arguments for '" + lower(name) + "' command");
}

/// Redis's wording, arguments quoted and cut as Redis cuts them (128 bytes each).
inline request::immediate unknown_command(const resp::command& args) {
    std::string text = "ERR unknown command '" + args[0].substr(0, 128) +
                       "', with args beginning with: ";
    for (std::size_t i = 1; i < args.size() && text.size() < 512; ++i)
        text += "'" + args[i].substr(0, 128) + "' ";
    return error(text);
}

/// An unsigned decimal (TAGGED's client id and sequence).
inline std::optional<std::uint64_t> parse_uint64(std::string_view text) {
    if (text.empty() || text.size() > 20) return std::nullopt;
    std::uint64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    return value;
}

/// The write of `c`, or the clear error when its encoding exceeds `max_txn_bytes` (zab's
/// log record / frame limit: a larger transaction must never reach the core).
inline request_variant make_write(const command& c, std::size_t max_txn_bytes) {
    auto encoded = encode(c);
    const std::size_t overhead = key_of(c).size() + 64;  // bounds the encoding's other fields
    const std::size_t limit = max_txn_bytes > overhead ? max_txn_bytes - overhead : 0;
    // encode() fails only above kv::max_string_bytes, which is far above any frame limit.
    if (!encoded || encoded.value().size() > max_txn_bytes)
        return error("ERR value too large (limit " + std::to_string(limit) + " bytes)");
    return request::write{std::move(encoded).value()};
}

/// The operation of a write command (`args` starts at its name), or the error reply.
inline std::variant<operation, request::immediate> parse_write(const resp::command& args) {
    const std::string name = upper(args[0]);
    const std::size_t n = args.size();
    if (name == "SET") {
        if (n < 3) return wrong_arity(args[0]);
        if (n > 3) return error("ERR syntax error (SET options are not supported here)");
        return operation{set_op{args[1], args[2]}};
    }
    if (name == "DEL") {
        if (n < 2) return wrong_arity(args[0]);
        if (n > 2) return error("ERR DEL takes exactly one key here");
        return operation{del_op{args[1]}};
    }
    if (name == "INCR") {
        if (n != 2) return wrong_arity(args[0]);
        return operation{incr_op{args[1]}};
    }
    if (name == "CAS") {
        if (n != 4) return wrong_arity(args[0]);
        return operation{cas_op{args[1], args[2], args[3]}};
    }
    if (name == "CAS.ABSENT") {
        if (n != 3) return wrong_arity(args[0]);
        return operation{cas_op{args[1], std::nullopt, args[2]}};
    }
    return unknown_command(args);
}

inline bool is_write_name(std::string_view upper_name) {
    return upper_name == "SET" || upper_name == "DEL" || upper_name == "INCR" ||
           upper_name == "CAS" || upper_name == "CAS.ABSENT";
}

inline request_variant tagged(const resp::command& args, std::size_t max_txn_bytes) {
    if (args.size() < 4) return wrong_arity(args[0]);
    const auto client_id = parse_uint64(args[1]);
    const auto sequence = parse_uint64(args[2]);
    if (!client_id || !sequence)
        return error("ERR TAGGED client id and sequence must be unsigned 64-bit integers");
    const resp::command inner(args.begin() + 3, args.end());
    if (!is_write_name(upper(inner[0])))
        return error("ERR TAGGED takes SET, DEL, INCR, CAS or CAS.ABSENT");
    auto parsed = parse_write(inner);
    if (auto* refused = std::get_if<request::immediate>(&parsed)) return std::move(*refused);
    command c{std::get<operation>(std::move(parsed)), request_tag{*client_id, *sequence}};
    return make_write(c, max_txn_bytes);
}

/// CONFIG GET: what redis-benchmark asks at start ("save", "appendonly"), as a flat array
/// of name/value pairs; any other parameter is unknown (an empty array, as Redis answers).
inline request_variant config(const resp::command& args) {
    if (args.size() < 2) return wrong_arity(args[0]);
    if (upper(args[1]) != "GET") return error("ERR CONFIG supports only GET here");
    if (args.size() != 3) return wrong_arity("config|get");
    request::immediate r;
    const std::string parameter = lower(args[2]);
    if (parameter == "save" || parameter == "appendonly") {
        resp::write_array_header(r.reply, 2);
        resp::write_bulk_string(r.reply, parameter);
        resp::write_bulk_string(r.reply, parameter == "save" ? "" : "no");
    } else {
        resp::write_array_header(r.reply, 0);
    }
    return r;
}

}  // namespace detail

/// What to do with `args` (non-empty: the parser never yields an empty command).
/// `max_txn_bytes` bounds an encoded write (see kv_server.cpp for how it is chosen).
inline request_variant classify(const resp::command& args, std::size_t max_txn_bytes) {
    using namespace detail;
    const std::string name = upper(args[0]);
    const std::size_t n = args.size();
    if (is_write_name(name)) {
        auto parsed = parse_write(args);
        if (auto* refused = std::get_if<request::immediate>(&parsed)) return std::move(*refused);
        return make_write(command{std::get<operation>(std::move(parsed)), {}}, max_txn_bytes);
    }
    if (name == "GET") {
        if (n != 2) return wrong_arity(args[0]);
        return request::read{args, true};
    }
    if (name == "MGET" || name == "EXISTS") {
        if (n < 2) return wrong_arity(args[0]);
        return request::read{args, true};
    }
    if (name == "INFO") return request::read{args, false};
    if (name == "PING") {
        if (n > 2) return wrong_arity(args[0]);
        if (n == 1) return simple("PONG");
        request::immediate r;
        resp::write_bulk_string(r.reply, args[1]);
        return r;
    }
    if (name == "ECHO") {
        if (n != 2) return wrong_arity(args[0]);
        request::immediate r;
        resp::write_bulk_string(r.reply, args[1]);
        return r;
    }
    if (name == "SYNC" || name == "ZSYNC") {
        if (n != 1) return wrong_arity(args[0]);
        return request::sync{};
    }
    if (name == "READMODE") {
        if (n != 2) return wrong_arity(args[0]);
        const std::string mode = upper(args[1]);
        if (mode == "LOCAL") return request::set_read_mode{read_mode::local};
        if (mode == "LINEARIZABLE") return request::set_read_mode{read_mode::linearizable};
        return error("ERR READMODE takes LOCAL or LINEARIZABLE");
    }
    if (name == "TAGGED") return tagged(args, max_txn_bytes);
    if (name == "COMMAND") {
        // redis-cli and redis-benchmark ask for the command table at start: an empty one
        // makes them fall back to their built-in knowledge.
        request::immediate r;
        resp::write_array_header(r.reply, 0);
        return r;
    }
    if (name == "CONFIG") return config(args);
    if (name == "QUIT") return request::quit{};
    return unknown_command(args);
}

/// The bytes `write_bulk_string` takes for a value of `size` bytes (or `$-1\r\n` for none).
inline std::size_t bulk_reply_bytes(std::optional<std::size_t> size) {
    if (!size) return 5;
    return 1 + std::to_string(*size).size() + 2 + *size + 2;
}

/// The reply to a local read (GET, MGET, EXISTS) from `machine`'s current state. A GET or
/// MGET whose reply would exceed `max_reply_bytes` is refused with an error before anything
/// is built (a 20 KB MGET naming a large value thousands of times would otherwise take
/// gigabytes).
inline std::string execute_read(const kv_state_machine& machine, const resp::command& args,
                                std::size_t max_reply_bytes = std::size_t{64} << 20) {
    std::string out;
    const std::string name = detail::upper(args[0]);
    if (name == "GET" || name == "MGET") {
        const bool many = name == "MGET";
        std::size_t total = many ? 1 + std::to_string(args.size() - 1).size() + 2 : 0;
        for (std::size_t i = 1; i < args.size() && total <= max_reply_bytes; ++i) {
            const std::string* value = machine.value_of(args[i]);
            total += bulk_reply_bytes(value ? std::optional<std::size_t>{value->size()}
                                            : std::nullopt);
        }
        if (total > max_reply_bytes) {
            resp::write_error(out, "ERR reply too large: more than " +
                                       std::to_string(max_reply_bytes) + " bytes; " +
                                       (many ? "ask for fewer keys" : "the value is too large"));
            return out;
        }
        out.reserve(total);
        if (many) resp::write_array_header(out, args.size() - 1);
        for (std::size_t i = 1; i < args.size(); ++i) {
            if (const std::string* value = machine.value_of(args[i])) {
                resp::write_bulk_string(out, *value);
            } else {
                resp::write_null_bulk(out);
            }
        }
    } else if (name == "EXISTS") {
        std::int64_t count = 0;  // Redis counts a key named twice twice
        for (std::size_t i = 1; i < args.size(); ++i) count += machine.exists(args[i]) ? 1 : 0;
        resp::write_integer(out, count);
    } else {
        resp::write_error(out, "ERR not a read command");
    }
    return out;
}

/// MULTI/EXEC are not implemented. A client library pipelines MULTI, its commands and EXEC
/// together (ioredis, node-redis): refusing only MULTI and EXEC would run the commands in
/// between, a transaction partly applied. So a connection's MULTI opens a refused block:
/// every command up to EXEC or DISCARD is refused too (QUIT still closes). One per
/// connection, fed every command in order.
class multi_refusal {
public:
    /// The refusal of `args` when it opens, belongs to or closes a refused block, else
    /// nullopt (classify it as usual).
    std::optional<request::immediate> screen(const resp::command& args) {
        const std::string name = detail::upper(args[0]);
        if (!open_) {
            if (name != "MULTI" || args.size() != 1) return std::nullopt;
            open_ = true;
            return detail::error(
                "ERR MULTI is not supported here; the commands up to EXEC or DISCARD are "
                "refused");
        }
        if (name == "QUIT") return std::nullopt;
        if (name == "EXEC" || name == "DISCARD") {
            open_ = false;
            if (name == "DISCARD") return detail::simple("OK");
            return detail::error("EXECABORT Transaction discarded: MULTI is not supported here");
        }
        return detail::error("ERR command refused: inside a refused MULTI block (until EXEC or "
                             "DISCARD)");
    }
    /// True between a refused MULTI and its EXEC or DISCARD.
    bool open() const noexcept { return open_; }

private:
    bool open_ = false;
};

/// The reply to an applied write, from its outcome (kv_outcome.hpp).
inline std::string outcome_reply(const outcome& o) {
    std::string out;
    switch (o.kind) {
        case outcome_kind::ok: resp::write_simple_string(out, "OK"); break;
        case outcome_kind::integer: resp::write_integer(out, o.integer); break;
        case outcome_kind::cas_matched: resp::write_integer(out, 1); break;
        case outcome_kind::cas_mismatched: resp::write_integer(out, 0); break;
        case outcome_kind::error: resp::write_error(out, o.error); break;
    }
    return out;
}

/// The reply to a write applied here whose outcome this replica no longer has (it arrived
/// inside a snapshot, or fell out of the recent outcomes).
inline constexpr std::string_view error_outcome_unknown =
    "UNKNOWN the write may or may not have been applied; retry with TAGGED to be safe";

/// The RESP error for a failed node operation. `leader` / `leader_address` ("host:port", or
/// empty) are what the node knows of the leader, for `not_leader`.
inline std::string error_reply(std::error_code error, std::uint64_t leader,
                               std::string_view leader_address) {
    std::string text;
    if (error.category() != zab::error_category()) {
        text = "ERR " + error.message();
    } else {
        switch (static_cast<errc>(error.value())) {
            case errc::not_leader:
                text = "NOQUORUM no leader is established (last known leader: ";
                if (leader == 0) {
                    text += "none)";
                } else {
                    text += std::to_string(leader);
                    if (!leader_address.empty()) text += " at " + std::string{leader_address};
                    text += ")";
                }
                break;
            case errc::backpressure:
                text = "BUSY too many operations outstanding at this replica; retry later";
                break;
            case errc::outcome_unknown: text = error_outcome_unknown; break;
            case errc::shutting_down: text = "SHUTDOWN this replica is shutting down"; break;
            case errc::storage_failed:
                text = "IOERR this replica's storage failed; it serves no more writes";
                break;
            case errc::zxid_exhausted:
                text = "TRYAGAIN the epoch's zxid counter is used up; a new election follows";
                break;
            default: text = "ERR " + error.message(); break;
        }
    }
    std::string out;
    resp::write_error(out, text);
    return out;
}

}  // namespace zab::kv
