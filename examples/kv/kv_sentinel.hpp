// examples/kv/kv_sentinel.hpp — the Redis Sentinel commands every kv_server replica answers,
// so that a Redis client's own Sentinel support (redis-py's `Sentinel`, ioredis's
// `sentinels` option, node-redis's `createSentinel`) finds the leader and follows a
// failover with its defaults. Built without I/O from a `sentinel_view`, the group as this
// replica sees it (kv_server fills it from the node's status and the transport).
//
// The group is one "master" named by --sentinel-name (default `zab`): its master is the
// established leader, given at its client (RESP) address; its replicas are the other
// members with a client address (observers too); its sentinels are the other members again
// (every replica answers as a sentinel, so a client may list any of them as sentinels).
//
//   SENTINEL GET-MASTER-ADDR-BY-NAME name   [ip, port], or a null array (no master known)
//   SENTINEL MASTERS                        [[field, value, ...]] (empty: no master known)
//   SENTINEL MASTER name                    [field, value, ...]
//   SENTINEL SLAVES|REPLICAS name           [[field, value, ...], ...]
//   SENTINEL SENTINELS name                 [[field, value, ...], ...]
//   SENTINEL MYID | CKQUORUM name | HELP
//
// While no leader is established (an election, or this replica cut off from the leader),
// no master is known: Sentinel's answers for a name it does not monitor (a null array, an
// empty MASTERS, "-ERR No such master with that name"). Each client then asks its next
// sentinel and, with none answering a master, retries from the first (redis-py raises
// MasterNotFoundError, a ConnectionError; ioredis waits sentinelRetryStrategy; node-redis
// observes again after 1 s): none connects to a replica that cannot take writes, and none
// stays on a dead leader's address. A member this replica has no link to is flagged
// `s_down,disconnected`, which all three skip. Reply shapes and field names are Redis
// Sentinel 7's (src/sentinel.c, addReplySentinelRedisInstance).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv_calls.hpp"
#include "resp_parser.hpp"
#include "resp_writer.hpp"

namespace zab::kv {

/// One member as Sentinel shows it: a Redis instance (the master or a replica) or a sentinel.
struct sentinel_node {
    std::uint64_t id = 0;        ///< zab's replica id
    std::string host;            ///< its client host
    std::uint16_t port = 0;      ///< its client (RESP) port, never the peer port
    std::string runid;           ///< INFO run_id of that replica (sentinel_runid)
    bool reachable = true;       ///< false: flagged s_down,disconnected
    bool observer = false;       ///< a non-voting member (a replica all the same)
    std::uint64_t offset = 0;    ///< replication offset: the last zxid it acknowledged, raw
};

/// The group as one replica sees it.
struct sentinel_view {
    std::string name = "zab";               ///< the master name (--sentinel-name)
    std::optional<sentinel_node> master;    ///< the established leader; none: no master known
    std::vector<sentinel_node> replicas;    ///< the other members with a client address
    std::vector<sentinel_node> sentinels;   ///< every member but this one, as sentinels
    std::string myid;                       ///< this replica's run_id
    std::uint64_t epoch = 0;                ///< config-epoch: zab's current epoch
    std::size_t quorum = 1;                 ///< a majority of the voters
};

/// A replica's 40-hex run_id (Redis's length), the same on every replica for member `id` of
/// group `cluster_id`, so that SENTINEL's runid of a member equals that member's INFO
/// run_id. Stable across restarts: a replica keeps its log, unlike a Redis that reloads.
inline std::string sentinel_runid(std::uint64_t cluster_id, std::uint64_t id) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out(40, '0');
    // "2ab" marks it as zab's, then the cluster id and the replica id, each in hex.
    out[0] = '2'; out[1] = 'a'; out[2] = 'b';
    for (int i = 0; i < 16; ++i) out[8 + static_cast<std::size_t>(i)] = hex[(cluster_id >> (60 - 4 * i)) & 15];
    for (int i = 0; i < 16; ++i) out[24 + static_cast<std::size_t>(i)] = hex[(id >> (60 - 4 * i)) & 15];
    return out;
}

/// "host:port" (an IPv6 host in brackets) split; nullopt when it is not one.
inline std::optional<std::pair<std::string, std::uint16_t>> split_host_port(std::string_view address) {
    const std::size_t colon = address.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::string host{address.substr(0, colon)};
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const auto port = parse_uint64(address.substr(colon + 1));
    if (!port || *port == 0 || *port > 65535 || host.empty()) return std::nullopt;
    return std::pair{std::move(host), static_cast<std::uint16_t>(*port)};
}

namespace detail {

/// An instance's fields: a flat field/value array in RESP2, a map in RESP3 (as Sentinel
/// answers each protocol), counted as it is built.
class instance_fields {
public:
    explicit instance_fields(bool resp3) : resp3_{resp3} {}
    void add(std::string_view name, std::string_view value) {
        resp::write_bulk_string(body_, name);
        resp::write_bulk_string(body_, value);
        count_ += 2;
    }
    void add(std::string_view name, std::uint64_t value) { add(name, std::to_string(value)); }
    void write_to(std::string& out) const {
        if (resp3_) {
            out += "%" + std::to_string(count_ / 2) + "\r\n";
        } else {
            resp::write_array_header(out, count_);
        }
        out += body_;
    }

private:
    bool resp3_;
    std::string body_;
    std::size_t count_ = 0;
};

/// The link fields every instance has, after name/ip/port/runid/flags (Sentinel's order).
/// kv_server does not ping: the figures of a link just confirmed.
inline void link_fields(instance_fields& f) {
    f.add("link-pending-commands", std::uint64_t{0});
    f.add("link-refcount", std::uint64_t{1});
    f.add("last-ping-sent", std::uint64_t{0});
    f.add("last-ok-ping-reply", std::uint64_t{0});
    f.add("last-ping-reply", std::uint64_t{0});
    f.add("down-after-milliseconds", std::uint64_t{0});
}

inline void write_master(std::string& out, const sentinel_view& v, bool resp3) {
    const sentinel_node& m = *v.master;
    instance_fields f{resp3};
    f.add("name", v.name);
    f.add("ip", m.host);
    f.add("port", std::uint64_t{m.port});
    f.add("runid", m.runid);
    f.add("flags", "master");
    link_fields(f);
    f.add("info-refresh", std::uint64_t{0});
    f.add("role-reported", "master");
    f.add("role-reported-time", std::uint64_t{0});
    f.add("config-epoch", v.epoch);
    std::uint64_t slaves = 0;
    for (const auto& r : v.replicas) slaves += r.reachable ? 1 : 0;
    f.add("num-slaves", slaves);
    f.add("num-other-sentinels", std::uint64_t{v.sentinels.size()});
    f.add("quorum", std::uint64_t{v.quorum});
    f.add("failover-timeout", std::uint64_t{0});
    f.add("parallel-syncs", std::uint64_t{1});
    f.write_to(out);
}

inline void write_replica(std::string& out, const sentinel_view& v, const sentinel_node& r,
                          bool resp3) {
    instance_fields f{resp3};
    f.add("name", r.host + ":" + std::to_string(r.port));
    f.add("ip", r.host);
    f.add("port", std::uint64_t{r.port});
    f.add("runid", r.runid);
    f.add("flags", r.reachable ? "slave" : "slave,s_down,disconnected");
    link_fields(f);
    f.add("info-refresh", std::uint64_t{0});
    f.add("role-reported", "slave");
    f.add("role-reported-time", std::uint64_t{0});
    f.add("master-link-down-time", std::uint64_t{0});
    f.add("master-link-status", r.reachable ? "ok" : "err");
    f.add("master-host", v.master->host);
    f.add("master-port", std::uint64_t{v.master->port});
    // An observer never becomes the leader: priority 0, as a Redis replica that must never
    // be promoted.
    f.add("slave-priority", std::uint64_t{r.observer ? 0u : 100u});
    f.add("slave-repl-offset", r.offset);
    f.add("replica-announced", std::uint64_t{1});
    f.write_to(out);
}

inline void write_sentinel(std::string& out, const sentinel_node& s, bool resp3) {
    instance_fields f{resp3};
    f.add("name", s.runid);
    f.add("ip", s.host);
    f.add("port", std::uint64_t{s.port});
    f.add("runid", s.runid);
    f.add("flags", s.reachable ? "sentinel" : "sentinel,s_down,disconnected");
    link_fields(f);
    f.add("last-hello-message", std::uint64_t{0});
    f.add("voted-leader", "?");
    f.add("voted-leader-epoch", std::uint64_t{0});
    f.write_to(out);
}

}  // namespace detail

/// The reply to `SENTINEL ...` (`args[0]` is SENTINEL) from the group as `v` shows it; in
/// RESP3's shapes (an instance a map) for a connection that sent HELLO 3.
inline std::string sentinel_reply(const resp::command& args, const sentinel_view& v,
                                  bool resp3 = false) {
    std::string out;
    const auto error = [&out](std::string_view text) {
        resp::write_error(out, text);
        return out;
    };
    if (args.size() < 2) return error(text::wrong_arity(args[0]));
    const std::string sub = detail::upper(args[1]);
    const bool named = args.size() == 3;
    const bool known = named && v.master && args[2] == v.name;
    constexpr std::string_view no_such = "ERR No such master with that name";
    if (sub == "GET-MASTER-ADDR-BY-NAME" && named) {
        if (!known) {
            resp::write_null_array(out);
        } else {
            resp::write_array_header(out, 2);
            resp::write_bulk_string(out, v.master->host);
            resp::write_bulk_string(out, std::to_string(v.master->port));
        }
    } else if (sub == "MASTERS" && args.size() == 2) {
        resp::write_array_header(out, v.master ? 1 : 0);
        if (v.master) detail::write_master(out, v, resp3);
    } else if (sub == "MASTER" && named) {
        if (!known) return error(no_such);
        detail::write_master(out, v, resp3);
    } else if ((sub == "SLAVES" || sub == "REPLICAS") && named) {
        if (!known) return error(no_such);
        resp::write_array_header(out, v.replicas.size());
        for (const auto& r : v.replicas) detail::write_replica(out, v, r, resp3);
    } else if (sub == "SENTINELS" && named) {
        if (!known) return error(no_such);
        resp::write_array_header(out, v.sentinels.size());
        for (const auto& s : v.sentinels) detail::write_sentinel(out, s, resp3);
    } else if (sub == "MYID" && args.size() == 2) {
        resp::write_bulk_string(out, v.myid);
    } else if (sub == "CKQUORUM" && named) {
        if (!known) return error(no_such);
        std::size_t usable = 1;  // this one
        for (const auto& s : v.sentinels) usable += s.reachable ? 1 : 0;
        if (usable < v.quorum)
            return error("NOQUORUM " + std::to_string(usable) + " usable Sentinels. Not enough "
                         "available Sentinels to reach the specified quorum for this master");
        resp::write_simple_string(out, "OK " + std::to_string(usable) +
                                           " usable Sentinels. Quorum and failover "
                                           "authorization can be reached");
    } else if (sub == "HELP" && args.size() == 2) {
        static constexpr std::string_view help[] = {
            "SENTINEL <subcommand> (kv_server answers these; the master is the zab leader):",
            "GET-MASTER-ADDR-BY-NAME <name>", "MASTERS", "MASTER <name>",
            "REPLICAS <name> (or SLAVES)", "SENTINELS <name>", "MYID", "CKQUORUM <name>"};
        resp::write_array_header(out, std::size(help));
        for (const auto line : help) resp::write_simple_string(out, line);
    } else {
        return error("ERR unknown subcommand or wrong number of arguments for '" +
                     args[1].substr(0, 128) + "'. Try SENTINEL HELP.");
    }
    return out;
}

/// ROLE's reply, Redis's shapes: on the leader `master <offset> [[ip port offset] ...]` (its
/// replicas that are reachable); elsewhere `slave <leader ip> <leader port> <state>
/// <offset>`, the state `connected` while it follows an established leader, `connect` while
/// it looks for one (ip `?` and port 0 when no leader is known).
inline std::string role_reply(bool leading, const sentinel_view& v, std::uint64_t offset) {
    std::string out;
    if (leading) {
        resp::write_array_header(out, 3);
        resp::write_bulk_string(out, "master");
        resp::write_integer(out, static_cast<std::int64_t>(offset));
        std::size_t reachable = 0;
        for (const auto& r : v.replicas) reachable += r.reachable ? 1 : 0;
        resp::write_array_header(out, reachable);
        for (const auto& r : v.replicas) {
            if (!r.reachable) continue;
            resp::write_array_header(out, 3);
            resp::write_bulk_string(out, r.host);
            resp::write_bulk_string(out, std::to_string(r.port));
            resp::write_bulk_string(out, std::to_string(r.offset));
        }
        return out;
    }
    resp::write_array_header(out, 5);
    resp::write_bulk_string(out, "slave");
    resp::write_bulk_string(out, v.master ? v.master->host : std::string{"?"});
    resp::write_integer(out, v.master ? v.master->port : 0);
    resp::write_bulk_string(out, v.master ? "connected" : "connect");
    resp::write_integer(out, static_cast<std::int64_t>(offset));
    return out;
}

}  // namespace zab::kv
