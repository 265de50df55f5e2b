// examples/kv/kv_requests.hpp — what kv_server does with one RESP command, decided without
// I/O: each command becomes a `request` (an immediate reply, a replicated write, a local
// read, a SYNC, a READMODE change, or QUIT), and the texts of every reply are built here so
// that they can be unit-tested without sockets or Boost.Asio.
//
// Commands (case-insensitive names, binary-safe arguments): the Redis string and key commands
// of kv_calls.hpp's table (SET with its options, INCRBY, MSET, EXPIRE, TTL, KEYS, SCAN, ...),
// and kv_server's own:
//   CAS k expected new      :1 when k held `expected` and now holds `new`, :0 otherwise
//   CAS.ABSENT k new        the same, where "expected" is "k is absent" (create-if-absent)
//   TAGGED client-id seq <write command>    exactly-once retry of any write (kv_command.hpp)
//   INFO [section]  (INFO DIGEST: the state's digest and zxid, to compare replicas)
//   SYNC  ZSYNC  ZTRANSFER id|ANY  READMODE local|linearizable  COMMAND [COUNT|DOCS|INFO ...]
//   CONFIG GET pattern...  SENTINEL ... (kv_sentinel.hpp)  ROLE   (answered by the server)
//   ZRECONFIG [VERSION v] MEMBER id host:port [VOTER|OBSERVER|LEARNER] [WEIGHT w] [GROUP g] ...
//   ZRECONFIG [VERSION v] ADD id host:port [VOTER|OBSERVER|LEARNER]   ZRECONFIG REMOVE id
//       membership change (kv_reconfig.hpp): +OK <version> once committed and applied here
//   HELLO [2|3 [AUTH u p] [SETNAME n]]  SELECT 0  QUIT
// and, kept per connection by resp_session.hpp: MULTI EXEC DISCARD WATCH UNWATCH RESET
// CLIENT ID|SETNAME|GETNAME|SETINFO|REDIRECT (CLIENT LIST|INFO|KILL: the server, kv_clients.hpp),
// SUBSCRIBE / PSUBSCRIBE (the Sentinel events, kv_sentinel.hpp), AUTH [user] pass (kv_auth.hpp).
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

#include "kv_calls.hpp"
#include "kv_command.hpp"
#include "kv_outcome.hpp"
#include "kv_reconfig.hpp"
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
    /// TAGGED: the client id (resp_session lets one request per client be outstanding on a
    /// connection: zab::session_status::applied_earlier's contract, docs/protocol.md §6.7).
    std::optional<std::uint64_t> tagged_client;
};
/// A local read (GET, MGET, EXISTS, INFO). `syncable`: a linearizable connection syncs first
/// (INFO is about this replica, so never).
struct read {
    resp::command args;
    bool syncable = true;
};
/// SYNC: +OK once the node's async_sync completed. ZTRANSFER: +OK once this replica (the
/// leader) handed its leadership to `transfer_to` (0: the best voter; async_transfer_leadership).
struct sync {
    std::optional<std::uint64_t> transfer_to;
};
/// ZRECONFIG: `+OK <version>` once the membership change committed and applied here
/// (kv_reconfig.hpp; the backend plans it against the configuration in force).
struct reconfig {
    reconfig_spec spec;
};
/// READMODE: changes the connection's mode for the commands after it; replies +OK.
struct set_read_mode {
    read_mode mode = read_mode::local;
};
/// QUIT: +OK, then the connection closes.
struct quit {};

}  // namespace request

using request_variant = std::variant<request::immediate, request::write, request::read,
                                     request::sync, request::reconfig, request::set_read_mode,
                                     request::quit>;

namespace detail {

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
    return error(text::wrong_arity(name));
}

/// Redis's wording, arguments quoted and cut as Redis cuts them (128 bytes each).
inline request::immediate unknown_command(const resp::command& args) {
    return error(text::unknown_command(args));
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
    return request::write{std::move(encoded).value(), std::nullopt};
}

/// The operation of a write command (`args` starts at its name, a write of kv_calls.hpp's
/// table), or the error reply. The plain SET/DEL/INCR and CAS become their typed ops (the
/// common case, and what TAGGED takes); every other write is a CALLS of one call.
inline std::variant<operation, request::immediate> parse_write(const resp::command& args) {
    if (auto problem = check_call(args)) return error(*problem);
    const std::string name = upper(args[0]);
    const std::size_t n = args.size();
    if (name == "SET" && n == 3) return operation{set_op{args[1], args[2]}};
    if (name == "DEL" && n == 2) return operation{del_op{args[1]}};
    if (name == "INCR") return operation{incr_op{args[1]}};
    if (name == "CAS") return operation{cas_op{args[1], args[2], args[3]}};
    if (name == "CAS.ABSENT") return operation{cas_op{args[1], std::nullopt, args[2]}};
    return operation{calls_op{{args}, {}, false}};
}

inline bool is_write_name(std::string_view name) {
    const command_info* info = find_command(name);
    return info != nullptr && info->kind == call_kind::write;
}

inline request_variant tagged(const resp::command& args, std::size_t max_txn_bytes,
                              std::uint64_t stamp_ms) {
    if (args.size() < 4) return wrong_arity(args[0]);
    const auto client_id = parse_uint64(args[1]);
    const auto sequence = parse_uint64(args[2]);
    if (!client_id || !sequence)
        return error("ERR TAGGED client id and sequence must be unsigned 64-bit integers");
    const resp::command inner(args.begin() + 3, args.end());
    if (!is_write_name(inner[0]))
        return error("ERR TAGGED takes a write command (SET, INCRBY, CAS, MSET, EXPIRE, ...)");
    auto parsed = parse_write(inner);
    if (auto* refused = std::get_if<request::immediate>(&parsed)) return std::move(*refused);
    // The session table (zab::session_machine) keeps each client's last reply (replicated,
    // max_clients of them, each at most kv_options::max_outcome_bytes):
    // replies that carry a value would let it hold gigabytes.
    const std::string inner_name = upper(inner[0]);
    bool answers_value = inner_name == "GETSET" || inner_name == "GETDEL";
    if (inner_name == "SET")
        for (std::size_t i = 3; i < inner.size(); ++i) answers_value |= upper(inner[i]) == "GET";
    if (answers_value)
        return error("ERR TAGGED does not take commands that answer a value (GETSET, GETDEL, "
                     "SET ... GET)");
    command c{std::get<operation>(std::move(parsed)), request_tag{*client_id, *sequence},
              stamp_ms};
    auto made = make_write(c, max_txn_bytes);
    if (auto* w = std::get_if<request::write>(&made)) w->tagged_client = *client_id;
    return made;
}

}  // namespace detail

/// One setting CONFIG GET shows: Redis's name (lower case) and this server's value.
struct config_parameter {
    std::string name;
    std::string value;
};

/// CONFIG GET pattern [pattern ...]: every parameter of `parameters` whose name matches one
/// of the patterns (Redis's glob, case-insensitive), each once, in the table's order, as a
/// flat array of name/value pairs; none matching: an empty array, as Redis answers. CONFIG
/// SET is refused: kv_server's settings are its command-line options. `resp3`: a map.
inline std::string config_reply(const resp::command& args,
                                const std::vector<config_parameter>& parameters,
                                bool resp3 = false) {
    std::string out;
    if (args.size() < 2) {
        resp::write_error(out, text::wrong_arity(args[0]));
        return out;
    }
    const std::string sub = detail::upper(args[1]);
    if (sub == "GET") {
        if (args.size() < 3) {
            resp::write_error(out, text::wrong_arity("config|get"));
            return out;
        }
        std::vector<const config_parameter*> matched;
        for (const auto& p : parameters)
            for (std::size_t i = 2; i < args.size(); ++i)
                if (glob_match(detail::lower(args[i]), p.name)) {
                    matched.push_back(&p);
                    break;
                }
        if (resp3) {  // a map, as Redis answers RESP3
            out += "%" + std::to_string(matched.size()) + "\r\n";
        } else {
            resp::write_array_header(out, 2 * matched.size());
        }
        for (const auto* p : matched) {
            resp::write_bulk_string(out, p->name);
            resp::write_bulk_string(out, p->value);
        }
    } else if (sub == "RESETSTAT" && args.size() == 2) {
        resp::write_simple_string(out, "OK");  // nothing kept that a client may reset
    } else if (sub == "SET" || sub == "REWRITE") {
        resp::write_error(out, "ERR CONFIG " + sub + " is not supported: kv_server's settings "
                               "are its command-line options (restart the replica with others)");
    } else {
        resp::write_error(out, "ERR unknown subcommand or wrong number of arguments for '" +
                                   args[1].substr(0, 128) + "'. Try CONFIG GET.");
    }
    return out;
}

namespace detail {

/// One COMMAND entry: name, arity, flags, first key, last key, step (Redis's first six
/// fields, which is what clients read).
inline void write_command_entry(std::string& out, const command_info& info) {
    resp::write_array_header(out, 6);
    resp::write_bulk_string(out, info.name);
    resp::write_integer(out, info.arity);
    const std::string_view flag = info.kind == call_kind::write  ? "write"
                                  : info.kind == call_kind::read ? "readonly"
                                                                 : "fast";
    resp::write_array_header(out, 1);
    resp::write_simple_string(out, flag);
    resp::write_integer(out, info.first_key);
    resp::write_integer(out, info.last_key);
    resp::write_integer(out, info.step);
}

/// COMMAND (the table), COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS [name...] (no
/// docs: an empty map, as Redis answers for names it has no docs of), COMMAND LIST.
inline request_variant command_reply(const resp::command& args) {
    request::immediate r;
    if (args.size() == 1) {
        resp::write_array_header(r.reply, command_table.size());
        for (const auto& info : command_table) write_command_entry(r.reply, info);
        return r;
    }
    const std::string sub = upper(args[1]);
    if (sub == "COUNT" && args.size() == 2) {
        resp::write_integer(r.reply, static_cast<std::int64_t>(command_table.size()));
    } else if (sub == "DOCS") {
        resp::write_array_header(r.reply, 0);
    } else if (sub == "LIST" && args.size() == 2) {
        resp::write_array_header(r.reply, command_table.size());
        for (const auto& info : command_table) resp::write_bulk_string(r.reply, info.name);
    } else if (sub == "INFO") {
        resp::write_array_header(r.reply, args.size() - 2);
        for (std::size_t i = 2; i < args.size(); ++i) {
            if (const command_info* info = find_command(args[i])) {
                write_command_entry(r.reply, *info);
            } else {
                resp::write_null_array(r.reply);
            }
        }
    } else {
        return error("ERR unknown subcommand '" + args[1].substr(0, 128) +
                     "'. Try COMMAND HELP.");
    }
    return r;
}

/// SELECT: database 0 is the only one.
inline request_variant select(const resp::command& args) {
    if (args[1] == "0") return simple("OK");
    const auto n = parse_int64(args[1]);
    if (!n) return error(text::not_integer);
    return error("ERR DB index is out of range (kv_server has one keyspace: database 0 only)");
}

}  // namespace detail

/// HELLO's reply (Redis's seven fields) for protocol `proto`: a map in RESP3, the flat list
/// of names and values in RESP2.
inline std::string hello_reply(int proto, std::uint64_t client_id) {
    std::string out;
    if (proto == 3) {
        out += "%7\r\n";
    } else {
        resp::write_array_header(out, 14);
    }
    const auto field = [&out](std::string_view name) { resp::write_bulk_string(out, name); };
    field("server");
    field("redis");
    field("version");
    field("7.2.0");
    field("proto");
    resp::write_integer(out, proto);
    field("id");
    resp::write_integer(out, static_cast<std::int64_t>(client_id));
    field("mode");
    field("standalone");
    field("role");
    field("master");
    field("modules");
    resp::write_array_header(out, 0);
    return out;
}

/// What to do with `args` (non-empty: the parser never yields an empty command).
/// `max_txn_bytes` bounds an encoded write (see kv_server.cpp for how it is chosen).
/// `stamp_ms` is the proposer's clock, stamped into a write: the base of its relative
/// expiries, never the map's clock (kv_command.hpp).
inline request_variant classify(const resp::command& args, std::size_t max_txn_bytes,
                                std::uint64_t stamp_ms = 0) {
    using namespace detail;
    const std::string name = upper(args[0]);
    const std::size_t n = args.size();
    if (is_write_name(name)) {
        auto parsed = parse_write(args);
        if (auto* refused = std::get_if<request::immediate>(&parsed)) return std::move(*refused);
        return make_write(command{std::get<operation>(std::move(parsed)), {}, stamp_ms},
                          max_txn_bytes);
    }
    const command_info* info = find_command(name);
    if (info != nullptr && info->kind == call_kind::read && name != "PING" && name != "ECHO") {
        if (auto problem = check_call(args)) return error(*problem);
        return request::read{args, true};
    }
    // About this replica and its connections, answered by the server (kv_server.cpp): INFO,
    // SENTINEL (kv_sentinel.hpp), ROLE, CONFIG GET (config_reply).
    if (name == "INFO" || name == "SENTINEL" || name == "ROLE" || name == "CONFIG")
        return request::read{args, false};
    if (name == "SELECT") {
        if (n != 2) return wrong_arity(args[0]);
        return select(args);
    }
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
    if (name == "ZTRANSFER") {
        if (n != 2) return wrong_arity(args[0]);
        if (upper(args[1]) == "ANY") return request::sync{0};
        const auto id = parse_uint64(args[1]);
        if (!id || *id == 0) return error("ERR ZTRANSFER takes a replica id or ANY");
        return request::sync{*id};
    }
    if (name == "ZRECONFIG") {
        auto parsed = parse_reconfig(args);
        if (auto* problem = std::get_if<std::string>(&parsed)) return error(*problem);
        return request::reconfig{std::get<reconfig_spec>(std::move(parsed))};
    }
    if (name == "READMODE") {
        if (n != 2) return wrong_arity(args[0]);
        const std::string mode = upper(args[1]);
        if (mode == "LOCAL") return request::set_read_mode{read_mode::local};
        if (mode == "LINEARIZABLE") return request::set_read_mode{read_mode::linearizable};
        return error("ERR READMODE takes LOCAL or LINEARIZABLE");
    }
    if (name == "TAGGED") return tagged(args, max_txn_bytes, stamp_ms);
    if (name == "COMMAND") return command_reply(args);
    if (name == "QUIT") return request::quit{};
    return unknown_command(args);
}

/// The reply to a local read (GET, MGET, EXISTS, TTL, KEYS, SCAN, ...: call_kind::read)
/// from `machine`'s current state: a key is present until the TICK that removes it is
/// applied; `now_ms` (the reader's clock) only changes the time left TTL and PTTL show. A
/// reply that would exceed `max_reply_bytes` is refused with an error before
/// anything is built (a 20 KB MGET naming a large value thousands of times would otherwise
/// take gigabytes).
inline std::string execute_read(const kv_state_machine& machine, const resp::command& args,
                                std::size_t max_reply_bytes = std::size_t{64} << 20,
                                std::uint64_t now_ms = 0) {
    return machine.read_call(args, now_ms, max_reply_bytes);
}

/// The reply to an applied write, from its outcome (kv_outcome.hpp).
inline std::string outcome_reply(const outcome& o) {
    std::string out;
    switch (o.kind) {
        case outcome_kind::ok: resp::write_simple_string(out, "OK"); break;
        case outcome_kind::integer: resp::write_integer(out, o.integer); break;
        case outcome_kind::cas_matched: resp::write_integer(out, 1); break;
        case outcome_kind::cas_mismatched: resp::write_integer(out, 0); break;
        case outcome_kind::error: resp::write_error(out, o.error); break;
        case outcome_kind::reply: out = o.reply; break;
    }
    return out;
}

/// The reply to a write applied here whose outcome this replica does not have (it arrived
/// inside a snapshot: zab::asio::reply::response_unknown), and to a zab `outcome_unknown`.
inline constexpr std::string_view error_outcome_unknown =
    "UNKNOWN the write may or may not have been applied; retry with TAGGED to be safe";

/// The RESP error for a failed node operation. `leader` / `leader_address` ("host:port", or
/// empty) are what the node knows of the leader, for `not_leader`; `busy_bound` (zab's
/// options::max_forwarded_per_learner, 0: not said) and `pool_slots` (what kv_server's
/// connections propose at once, shared: write_pool.hpp) are named in the -BUSY text.
inline std::string error_reply(std::error_code error, std::uint64_t leader,
                               std::string_view leader_address, std::size_t busy_bound = 0,
                               std::size_t pool_slots = 0) {
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
                text = "BUSY too many writes outstanding at the leader from this replica";
                if (busy_bound > 0)
                    text += " (at most " + std::to_string(busy_bound) +
                            " in flight per replica; this replica's connections propose at most " +
                            std::to_string(pool_slots) + " at once between them)";
                text += "; retry later";
                break;
            case errc::outcome_unknown: text = error_outcome_unknown; break;
            case errc::shutting_down: text = "SHUTDOWN this replica is shutting down"; break;
            case errc::storage_failed:
                text = "IOERR this replica's storage failed; it serves no more writes";
                break;
            case errc::zxid_exhausted:
                text = "TRYAGAIN the epoch's zxid counter is used up; a new election follows";
                break;
            case errc::transferring:
                text = "TRYAGAIN the leader is handing its leadership over; retry shortly";
                break;
            case errc::timed_out:
                text = "TIMEOUT the target did not catch up in time; the leader takes writes again";
                break;
            // Membership change (ZRECONFIG, docs/protocol.md §9); each never took effect.
            case errc::reconfig_in_progress:
                text = "BUSY another reconfiguration is not committed yet (INFO reconfig_pending); "
                       "retry shortly";
                break;
            case errc::version_mismatch:
                text = "ERR the configuration in force is not the version this change was "
                       "computed from: another change committed first; read INFO config_version "
                       "and retry";
                break;
            case errc::new_config_no_quorum:
                text = "ERR the new configuration's voters synced with the leader are no quorum "
                       "of it: start each new replica first (kv_server --new-member ...), wait "
                       "until its INFO shows established:1, then retry";
                break;
            case errc::not_a_member:
                text = "REMOVED this replica was removed from the group by a reconfiguration; "
                       "it serves no more writes (INFO removed:1)";
                break;

            default: text = "ERR " + error.message(); break;
        }
    }
    std::string out;
    resp::write_error(out, text);
    return out;
}

/// The reply to a ZRECONFIG that completed: `+OK <version>` (the new configuration's
/// version, INFO config_version), or its error (error_reply's, and a refused configuration).
inline std::string reconfig_reply(std::error_code error, std::uint64_t version,
                                  std::uint64_t leader, std::string_view leader_address) {
    std::string out;
    if (!error) {
        resp::write_simple_string(out, "OK " + std::to_string(version));
    } else if (error == errc::invalid_argument) {
        resp::write_error(out, "ERR ZRECONFIG: not a valid configuration (the replica's log says "
                               "why)");
    } else {
        out = error_reply(error, leader, leader_address);
    }
    return out;
}

}  // namespace zab::kv
