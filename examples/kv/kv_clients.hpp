// examples/kv/kv_clients.hpp — CLIENT INFO, CLIENT LIST and CLIENT KILL in Redis's formats,
// without I/O: a connection is described by a `client_description` (the session fills what
// it keeps, the server the socket's part), printed as Redis 7.2 prints a client
// (networking.c, catClientInfoString), and CLIENT KILL's filters are parsed and matched here.
//
//   CLIENT INFO                      this connection's line
//   CLIENT LIST [TYPE normal|pubsub|master|replica] [ID id ...]   one line per connection
//   CLIENT KILL ip:port              the old form: +OK, or -ERR No such client
//   CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port] [USER u] [TYPE t] [MAXAGE s]
//               [SKIPME yes|no]      the connections matching every filter: their count
//
// A killed connection is closed at once (its replies not yet sent are dropped, as Redis
// does); one that kills itself (SKIPME no) gets its reply first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "kv_calls.hpp"
#include "resp_parser.hpp"

namespace zab::kv {

/// One connection as CLIENT LIST shows it.
struct client_description {
    std::uint64_t id = 0;
    std::string addr;          ///< the client's ip:port
    std::string laddr;         ///< this server's ip:port the client connected to
    std::int64_t fd = -1;
    std::string name;          ///< CLIENT SETNAME
    std::uint64_t age_s = 0;   ///< since it connected
    std::uint64_t idle_s = 0;  ///< since its last command
    bool pubsub = false;       ///< subscribed (flags P)
    bool multi = false;        ///< inside MULTI (flags x)
    bool closing = false;      ///< closes once its replies are sent (flags c)
    std::size_t subscriptions = 0, pattern_subscriptions = 0;
    std::int64_t multi_commands = -1;  ///< commands queued in MULTI, -1 outside
    std::size_t query_buffer = 0;      ///< input held (unfinished and queued commands)
    std::size_t output_bytes = 0;      ///< replies built, not yet sent
    std::string last_command;          ///< lower case, `client|list` for a subcommand
    std::string user = "default";
    int resp = 2;
    std::string lib_name, lib_ver;     ///< CLIENT SETINFO
};

/// The line of `c` (without a line end), in Redis 7.2's field order. A name never has
/// spaces (CLIENT SETNAME refuses them), so the line splits on spaces.
inline std::string client_line(const client_description& c) {
    std::string flags;
    if (c.pubsub) flags += 'P';
    if (c.multi) flags += 'x';
    if (c.closing) flags += 'c';
    if (flags.empty()) flags = "N";
    return fmt::format(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db=0 sub={} psub={} "
        "ssub=0 multi={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl={} oll=0 "
        "omem={} tot-mem={} events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}",
        c.id, c.addr, c.laddr, c.fd, c.name, c.age_s, c.idle_s, flags, c.subscriptions,
        c.pattern_subscriptions, c.multi_commands, c.query_buffer, c.output_bytes,
        c.output_bytes, c.query_buffer + c.output_bytes,
        c.last_command.empty() ? "NULL" : c.last_command, c.user, c.resp, c.lib_name, c.lib_ver);
}

/// CLIENT LIST's and CLIENT KILL's filters (every one given must match).
struct client_filter {
    std::vector<std::uint64_t> ids;    ///< ID (LIST: several)
    std::optional<std::string> addr, laddr, user;
    std::optional<std::string> type;   ///< normal | pubsub | master | replica (slave)
    std::optional<std::uint64_t> max_age_s;  ///< MAXAGE: connected at least this long
    bool skip_me = false;              ///< KILL: never the asking connection (SKIPME yes, the default)
    bool old_form = false;             ///< CLIENT KILL ip:port
};

/// True if `c` passes `f` (`self`: the asking connection's id).
inline bool client_matches(const client_filter& f, const client_description& c, std::uint64_t self) {
    if (!f.ids.empty() && std::find(f.ids.begin(), f.ids.end(), c.id) == f.ids.end()) return false;
    if (f.addr && *f.addr != c.addr) return false;
    if (f.laddr && *f.laddr != c.laddr) return false;
    if (f.user && *f.user != c.user) return false;
    // kv_server has no Redis replicas or masters connected as clients: all are normal, or
    // pubsub while subscribed.
    if (f.type && *f.type != (c.pubsub ? "pubsub" : "normal")) return false;
    if (f.max_age_s && c.age_s < *f.max_age_s) return false;
    if (f.skip_me && !f.old_form && c.id == self) return false;
    return true;
}

/// CLIENT LIST's (`kill` false) or CLIENT KILL's filters from `args` (CLIENT LIST|KILL ...),
/// or the error reply's text (Redis's wording).
inline std::variant<client_filter, std::string> parse_client_filter(const resp::command& args,
                                                                    bool kill) {
    client_filter f;
    f.skip_me = kill;  // LIST lists the asking connection too
    constexpr std::string_view syntax = "ERR syntax error";
    if (kill && args.size() == 3) {  // the old form: CLIENT KILL ip:port
        f.addr = args[2];
        f.old_form = true;
        return f;
    }
    if (kill && args.size() < 3) return text::wrong_arity("client|kill");
    for (std::size_t i = 2; i < args.size(); ++i) {
        const std::string option = detail::upper(args[i]);
        if (i + 1 >= args.size()) return std::string{syntax};
        const std::string& value = args[i + 1];
        if (option == "ID") {
            // LIST takes several ids, KILL one.
            std::size_t j = i + 1;
            do {
                const auto id = parse_uint64(args[j]);
                if (!id || *id == 0)
                    return std::string{kill ? "ERR client-id should be greater than 0"
                                            : "ERR Invalid client ID"};
                f.ids.push_back(*id);
                ++j;
            } while (!kill && j < args.size() && parse_uint64(args[j]));
            i = j - 1;
            continue;
        }
        if (option == "TYPE") {
            std::string type = detail::lower(value);
            if (type == "slave") type = "replica";
            if (type != "normal" && type != "pubsub" && type != "master" && type != "replica")
                return "ERR Unknown client type '" + value.substr(0, 128) + "'";
            f.type = type;
        } else if (kill && option == "ADDR") {
            f.addr = value;
        } else if (kill && option == "LADDR") {
            f.laddr = value;
        } else if (kill && option == "USER") {
            f.user = value;
        } else if (kill && option == "SKIPME") {
            const std::string yes = detail::lower(value);
            if (yes != "yes" && yes != "no") return std::string{syntax};
            f.skip_me = yes == "yes";
        } else if (kill && option == "MAXAGE") {
            const auto age = parse_uint64(value);
            if (!age) return std::string{text::not_integer};
            f.max_age_s = *age;
        } else {
            return std::string{syntax};
        }
        ++i;
    }
    return f;
}

}  // namespace zab::kv
