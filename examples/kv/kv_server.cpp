// kv_server — one replica of the replicated key-value map per process, answering clients in
// the Redis protocol (RESP2), so that redis-cli and redis-benchmark work against it.
//
// Usage:
//   kv_server --id N --peers 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003
//             --client-port P (--data DIR | --memory) [--client-host 127.0.0.1]
//             [--tick-ms 50] [--cluster-id 27510] [--log-level warn]
//             [--snapshot-every 100000] [--snapshot-every-bytes 67108864] [--join | --new-member]
//             [--max-clients 10000] [--timeout 0] [--max-input-bytes 536870912]
//             [--output-soft-limit 8388608] [--output-hard-limit 268435456]
//             [--max-output-bytes 536870912]
//             [--client-addresses 1=127.0.0.1:6381,2=127.0.0.1:6382,3=127.0.0.1:6383]
//             [--leader-wait-ms 3000]
//             [--peer-tls-cert F --peer-tls-key F --peer-tls-ca F] [--tls-min-version 1.3]
//             [--tls-cert F --tls-key F [--tls-ca-cert F] [--tls-auth-clients yes|no|optional]]
//             [--requirepass P | --requirepass-file F]
//             [--admin-user NAME (--admin-pass P | --admin-pass-file F)] [--lease-reads]
//             [--metrics-port P [--metrics-host HOST]] [--sentinel-name zab]
//
// Redis clients' Sentinel support (kv_sentinel.hpp): every replica answers SENTINEL
// GET-MASTER-ADDR-BY-NAME, MASTERS, MASTER, REPLICAS (SLAVES), SENTINELS, MYID and CKQUORUM
// for one master named --sentinel-name (default `zab`): the established leader at its client
// address (--client-addresses / ZRECONFIG ... CLIENT), none during an election. List the
// replicas' client addresses as a client's sentinels and the name as its master. A replica
// publishes Sentinel's events to SUBSCRIBE / PSUBSCRIBE clients as it sees the leader go and
// come: +sdown and +odown (`master <name> <ip> <port>`) when its leader is lost, -sdown and
// -odown when the same one is back, +switch-master (`<name> <old ip> <old port> <new ip>
// <new port>`) when another leads. ROLE answers Redis's master / slave shapes.
//
// INFO follows Redis's format (every line `key:value`, sub-fields `k=v` separated by commas,
// no comma, colon or space in a value): a zxid prints as `epoch-counter` (`1-1490`), an address
// as separate host and port fields (an IPv6 host keeps its colons, as Redis prints it), a
// reason as one word. `role` is Redis's (master on the leader, slave elsewhere); zab's role is
// `replica_role` (leading, following, observing, looking). INFO section... prints only the
// sections named (server, clients, replication, sentinel, cluster, keyspace, stats, security,
// zab for every "Zab ..." section, or one of those by its title in lower case with `_`
// for spaces: zab_counters); INFO, INFO default, all or everything print every section.
// INFO DIGEST: the state's digest (to compare replicas).
//
// CONFIG GET pattern...: this server's settings under Redis's names (maxmemory, save,
// appendonly, appendfsync, databases, maxclients, timeout, port, bind, dir, ...), matched as
// Redis matches them (glob, case-insensitive). CLIENT LIST / INFO / KILL: Redis's formats
// (kv_clients.hpp).
//
// Metrics (docs/operating.md, "Metrics"): --metrics-port serves HTTP on
// --metrics-host (default: --client-host): GET /metrics in the Prometheus text format
// (zab's counters, gauges, histograms and events: zab/runtime/metrics_exposition.hpp), GET
// /health 200 "ok" while the replica is established (leading with a quorum, or following a
// leader that sent UPTODATE) and its disk is not stalled, else 503 with the reason; anything
// else 404, a malformed or oversized request 400 and closed (kv_metrics_http.hpp). INFO shows
// the same figures in its "# Zab ..." sections.
//
// --lease-reads: SYNC / ZSYNC and the reads of a READMODE linearizable connection use lease
//   syncs (docs/protocol.md §7.1): the leader answers them without a quorum round while it
//   holds its read lease (promise = sync_limit, 10 % drift bound). Every replica must be
//   started with it: it is also the promise that keeps a replica out of elections for a
//   while after it last heard from its leader. INFO: lease_syncs_served, lease_sync_fallbacks.
//
// Security (docs/security.md; the flags: examples/kv/README.md, "TLS and passwords"):
// --peer-tls-*: mutual TLS between the replicas (zab::asio::tls_security: the cluster CA,
//   this replica's certificate naming zab://member/<id>, its key). Without them, plaintext.
//   Both run on one node type: kv_peer_security.hpp.
// --tls-cert/--tls-key: the client port speaks TLS only (Redis's tls-port); a plaintext
//   client is closed once its bytes fail the handshake (counted in INFO). --tls-ca-cert and
//   --tls-auth-clients (default yes when a CA is given, as Redis): client certificates
//   required, optional (checked if sent) or not asked for. A handshake not finished within
//   5 s is closed; at most 256 are in progress at once (the next connection is closed).
// --tls-min-version 1.2|1.3 (default 1.3): for both ports.
// --requirepass / --admin-user: the users of kv_auth.hpp. The -file forms read the password
//   from a file (its first line), so that it is not in `ps`; a password given on the command
//   line is overwritten in the process's argv once read. Passwords are never logged.
// SIGHUP reloads the credentials: the peer and client certificates and keys (for connections
//   made afterwards; a reload that fails keeps the old ones) and the password files (for
//   connections opened afterwards).
//
// Finding the leader: --client-addresses lists every member's client (RESP) address; they go
// into the configuration (member::client_address), and ZRECONFIG's CLIENT host:port gives a
// new member's. INFO then reports them in `member_<id>:...,client_host=H,client_port=P` lines
// and `leader_client_host` / `leader_client_port`, -NOQUORUM names the last known leader's client address, and a
// connection that sent CLIENT REDIRECT ON gets `-REDIRECT host:port` for a write on a
// replica that is not the leader (without the flag only this replica's own address is known).
// --leader-wait-ms N: a write or ZSYNC that finds no established leader (an election is
// running) waits up to N ms for one before it fails -NOQUORUM (node_options::leader_wait;
// only refusals that left the write unproposed are retried). 0: fail at once. The default is
// node_options::leader_wait's (3000 ms).
//
// Expiry: only the leader's clock moves expiry. While it leads, a replica checks every 10 ms
// whether a key's expiry has passed by its wall clock and then proposes a TICK stamped with
// it (one at a time); applying the TICK advances the map's clock and removes the keys due,
// on every replica alike, and until then every replica answers the key as present whatever
// its own clock says (kv_store.hpp). A write is stamped with the wall clock of the
// replica that proposes it, the base of the relative expiries it sets (EX, PX, EXPIRE).
//
// --snapshot-every N: every N applied writes the map's snapshot replaces the log's records
// up to it (zab's options::snapshot_every; file_log keeps a checkpoint and removes the
// segments it covers), so the data directory and the restart time stay bounded. 0: never.
// --snapshot-every-bytes N: the same, every N bytes of applied writes (a cap on the log kept
// beyond the snapshot); whichever comes first. 0: never. Both default to zab's options
// (100000 writes, 67108864 bytes).
//
// Client limits (one client must not take the process's memory or starve the others):
// --max-clients N: connections beyond N are refused with "-ERR max number of clients
//   reached" (Redis's maxclients). At the descriptor limit (EMFILE/ENFILE) the acceptor
//   waits 100 ms before it tries again, so it never spins.
// --timeout S: a connection idle for S seconds (nothing read, nothing written, no write or
//   sync waiting at the cluster) is closed, as Redis's timeout. 0 (the default): never.
// --max-input-bytes N: client input buffered over all connections (unfinished commands,
//   commands queued); beyond it the connection holding most is closed with an error, as
//   Redis's maxmemory-clients evicts. Must be at least 32 MiB (one largest write fits).
// --output-soft-limit N: a connection whose unsent replies reach N stops reading and
//   executing until its client reads them; --output-hard-limit N: beyond N it is closed.
//   A GET/MGET reply above 64 MiB is refused ("ERR reply too large") before it is built.
// --max-output-bytes N: replies held over all connections (built, not yet read by their
//   clients; output_budget.hpp). A reply that would pass it first closes the connections
//   holding most (each holding at least what the asking one would), as Redis's
//   maxmemory-clients evicts; if it still does not fit it is refused ("ERR reply refused:
//   ..."; a write's reply: the write was applied, its reply not sent). Must be at least
//   128 MiB (two of the largest replies).
// Writes: the replica proposes at most 992 at once (zab's bound on what one replica forwards
//   to the leader, 1,000, less room for ZRECONFIG), shared by its connections in turn
//   (write_pool.hpp): a connection that finds none free stops reading until it is its turn,
//   so a deep pipeline waits instead of -BUSY and a bystander is never refused for another
//   client's load. Each connection proposes at most 256 at once.
//
// --join: this replica's data directory was wiped or replaced, in a cluster that already
// has data (ZOOKEEPER-261). Until a leader has synced it, it votes for nobody and follows
// as an observer, so it cannot help elect a replica that lacks writes it acknowledged
// before; then it votes again. Harmless once synced. Never on a cluster's first start.
//
// --new-member: this replica is not a member yet; it joins a running group (docs/protocol.md
// §9) and waits to be added by ZRECONFIG (kv_reconfig.hpp). --peers lists the members and
// this replica's own peer address; its --id must be above every other id in --peers (the
// higher id of each pair dials the lower, and the members do not know it yet). It follows the
// leader without a vote (as --join) until the change that adds it commits; from then on its
// data directory holds the configuration: restart it as a member (without the flag, --peers
// listing the members).
// The members learn its address from the configuration (ZRECONFIG ... host:port).
//
// Membership: ZRECONFIG (an admin command; kv_reconfig.hpp) adds and removes members;
// INFO's "# Cluster" section shows config_version, members (id:role:address), reconfig_pending
// and removed. A removed replica keeps answering INFO and reads; its writes get -REMOVED.
//
// --on-corruption refuse|resync: what a data directory whose log fails its checks (not a
// torn tail) does at start. refuse (the default): exit 1 naming the file and byte offset,
// the directory untouched. resync: its files move to DATA/damaged-<n>/, the replica comes
// up empty and, as with --join, votes for nobody until a leader has synced it.
//
// One io_context run by the main thread drives the zab node, its peer transport and every
// client connection; a two-thread pool is the node's disk executor (file logs), so fsyncs
// never stall the clients, and a compaction's snapshot (kv_store.hpp, "Snapshots") is
// written on one thread while flushes go on on the other. Commands and their replies:
// kv_requests.hpp; per-connection ordering (pipelining, read-your-writes, READMODE
// linearizable): resp_session.hpp.
//
// Writes are proposed on this replica (a follower forwards them to the leader); the reply is
// the outcome this replica's state machine computed when it applied the write, delivered
// with the write's completion (docs/protocol.md §6.6). SIGINT/SIGTERM stop the node gracefully
// and exit 0. Exit status 2: bad command line; 1: cannot open the data or bind a port.
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "kv/kv_auth.hpp"
#include "kv/kv_clients.hpp"
#include "kv/kv_metrics.hpp"
#include "kv/kv_metrics_http.hpp"
#include "kv/kv_peer_security.hpp"
#include "kv/kv_requests.hpp"
#include "kv/kv_sentinel.hpp"
#include "kv/kv_state_machine.hpp"
#include "kv/output_budget.hpp"
#include "kv/resp_session.hpp"
#include "kv/write_pool.hpp"
#include "zab/core/version.hpp"
#include "zab/runtime/metrics_exposition.hpp"
#include "zab/runtime/metrics_registry.hpp"
#include "zab/runtime/node.hpp"
#include "zab/storage/file_log.hpp"
#include "zab/storage/memory_log.hpp"

namespace {

using boost::asio::ip::tcp;
using zab::peer_id;

// --- limits ----------------------------------------------------------------------------------

/// The largest encoded write. zab carries a transaction in one frame (codec_limits: 64 MiB
/// payload) and file_log stores it in one record (max_record_bytes, raised below to hold
/// it); a transaction above either would break replication, so it is refused up front with
/// "value too large". 16 MiB leaves room for a 10 MB value and keeps a follower's send queue
/// (64 MiB) able to hold a few of them.
constexpr std::size_t max_txn_bytes = std::size_t{16} << 20;
static_assert(max_txn_bytes + 4096 < zab::codec_limits{}.max_payload_bytes);

/// What one client may send in one argument / one command: above the write limit (so that a
/// too-large value gets the clear error rather than a protocol error) but far below Redis's
/// 512 MiB, so that a few connections cannot take the memory of the process.
constexpr std::size_t max_bulk_bytes = std::size_t{64} << 20;
constexpr std::size_t max_command_bytes = std::size_t{128} << 20;

static_assert(zab::kv::max_reconfig_members == zab::max_members);

/// The largest GET/MGET reply: above it the read is refused before its reply is built.
constexpr std::size_t max_reply_bytes = std::size_t{64} << 20;

/// One buffer serves every connection's reads (a connection waits for readability, then
/// reads what is there): an idle connection holds no read buffer.
constexpr std::size_t read_chunk_bytes = 64 << 10;

/// How long the acceptor waits when the process is out of descriptors.
constexpr std::chrono::milliseconds accept_retry_delay{100};

/// A client's TLS handshake must finish within this (as the peer transport's
/// handshake_timeout), and at most this many are in progress at once: a client that opens
/// connections and never finishes them holds neither memory nor CPU for long.
constexpr std::chrono::seconds client_handshake_timeout{5};
constexpr std::size_t max_pending_client_handshakes = 256;

/// A TLS connection reads into a buffer of its own (a TLS record holds at most 16 KiB).
constexpr std::size_t tls_read_chunk_bytes = 16 << 10;

// --- command line ----------------------------------------------------------------------------

struct server_args {
    peer_id id = 0;
    std::map<peer_id, zab::asio::tcp_endpoint> peers;
    std::string client_host = "127.0.0.1";
    std::uint16_t client_port = 0;
    std::string data;
    bool memory = false;
    std::uint32_t tick_ms = 50;
    std::uint64_t cluster_id = 27510;
    zab::log_level log_level = zab::log_level::warn;
    std::uint64_t snapshot_every = zab::options{}.snapshot_every;              // 100'000
    std::uint64_t snapshot_every_bytes = zab::options{}.snapshot_every_bytes;  // 64 MiB
    bool join = false;  ///< options::non_voter_until_synced (ZOOKEEPER-261)
    bool new_member = false;  ///< --new-member: not in the configuration it starts with (§9)
    bool resync_on_corruption = false;  ///< --on-corruption resync (file_log corruption_policy)
    bool lease_reads = false;  ///< --lease-reads: options::read_lease_ticks, syncs by lease
    std::uint64_t max_clients = 10'000;
    std::uint64_t timeout_s = 0;  ///< idle timeout; 0: none
    std::uint64_t max_input_bytes = std::uint64_t{512} << 20;
    std::uint64_t output_soft_limit = std::uint64_t{8} << 20;
    std::uint64_t output_hard_limit = std::uint64_t{256} << 20;
    std::uint64_t max_output_bytes = std::uint64_t{512} << 20;  ///< over all connections
    std::map<peer_id, std::string> client_addresses;  ///< --client-addresses: id → host:port
    /// --leader-wait-ms: how long a write or ZSYNC waits for a leader (node_options::leader_wait).
    std::uint64_t leader_wait_ms = static_cast<std::uint64_t>(zab::asio::node_options{}.leader_wait.count());
    // --peer-tls-*: mutual TLS between replicas (all three, or none: plaintext).
    std::string peer_tls_cert, peer_tls_key, peer_tls_ca;
    zab::asio::tls_version tls_min_version = zab::asio::tls_version::tls1_3;
    // --tls-*: the client port speaks TLS.
    std::string tls_cert, tls_key, tls_ca_cert;
    enum class client_auth : std::uint8_t { no, yes, optional };
    std::optional<client_auth> tls_auth_clients;  ///< default: yes with a CA, else no
    // --requirepass / --admin-*: the users (kv_auth.hpp); a -file form is read at start and
    // on SIGHUP.
    std::optional<std::string> requirepass;
    std::string requirepass_file;
    std::string admin_user;
    std::optional<std::string> admin_pass;
    std::string admin_pass_file;
    // --metrics-port: the HTTP metrics and health port (kv_metrics_http.hpp); none without it.
    std::optional<std::uint16_t> metrics_port;
    std::optional<std::string> metrics_host;  ///< default: client_host
    std::string sentinel_name = "zab";  ///< --sentinel-name: the master name (kv_sentinel.hpp)

    bool peer_tls() const { return !peer_tls_cert.empty(); }
    bool client_tls() const { return !tls_cert.empty(); }
    zab::asio::tls_options peer_tls_options() const {
        return {peer_tls_ca, peer_tls_cert, peer_tls_key, tls_min_version};
    }
};

constexpr std::string_view usage_text =
    "usage: kv_server --id N --peers ID=HOST:PORT,... --client-port P (--data DIR | --memory)\n"
    "                 [--client-host 127.0.0.1] [--tick-ms 50] [--cluster-id 27510]\n"
    "                 [--log-level trace|debug|info|warn|error] [--snapshot-every 100000]\n"
    "                 [--snapshot-every-bytes 67108864] [--join | --new-member] [--max-clients 10000]\n"
    "                 [--timeout 0] [--max-input-bytes 536870912]\n"
    "                 [--output-soft-limit 8388608] [--output-hard-limit 268435456]\n"
    "                 [--max-output-bytes 536870912]\n"
    "                 [--on-corruption refuse|resync] [--client-addresses ID=HOST:PORT,...]\n"
    "                 [--leader-wait-ms 3000]\n"
    "                 [--peer-tls-cert F --peer-tls-key F --peer-tls-ca F]\n"
    "                 [--tls-min-version 1.2|1.3] [--tls-cert F --tls-key F [--tls-ca-cert F]\n"
    "                 [--tls-auth-clients yes|no|optional]]\n"
    "                 [--requirepass P | --requirepass-file F]\n"
    "                 [--admin-user NAME (--admin-pass P | --admin-pass-file F)] [--lease-reads]\n"
    "                 [--metrics-port P [--metrics-host HOST]] [--sentinel-name zab]\n"
    "example: kv_server --id 1 --peers 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003 \\\n"
    "                   --client-port 6381 --data build/cluster/replica-1/data\n";

std::optional<std::uint64_t> parse_number(std::string_view text, std::uint64_t max) {
    const auto value = zab::kv::parse_uint64(text);
    if (!value || *value > max) return std::nullopt;
    return value;
}

/// "1=127.0.0.1:7001,2=..." → id → endpoint; an error text on failure.
std::optional<std::string> parse_peers(std::string_view text,
                                       std::map<peer_id, zab::asio::tcp_endpoint>& peers) {
    while (!text.empty()) {
        const std::size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        const std::size_t equals = item.find('=');
        const std::size_t colon = item.rfind(':');
        if (equals == std::string_view::npos || colon == std::string_view::npos || colon < equals)
            return fmt::format("--peers: '{}' is not ID=HOST:PORT", item);
        const auto id = parse_number(item.substr(0, equals), UINT32_MAX);
        const auto port = parse_number(item.substr(colon + 1), 65535);
        std::string host{item.substr(equals + 1, colon - equals - 1)};
        if (host.size() > 2 && host.front() == '[' && host.back() == ']')
            host = host.substr(1, host.size() - 2);  // [::1]:7001
        if (!id || *id == 0 || !port || *port == 0 || host.empty())
            return fmt::format("--peers: '{}' needs an id >= 1, a host and a port 1..65535",
                               item);
        if (!peers.emplace(*id, zab::asio::tcp_endpoint{host, static_cast<std::uint16_t>(*port)})
                 .second)
            return fmt::format("--peers: id {} appears twice", *id);
    }
    return std::nullopt;
}

std::optional<zab::log_level> parse_log_level(std::string_view text) {
    if (text == "trace") return zab::log_level::trace;
    if (text == "debug") return zab::log_level::debug;
    if (text == "info") return zab::log_level::info;
    if (text == "warn") return zab::log_level::warn;
    if (text == "error") return zab::log_level::error;
    return std::nullopt;
}

/// The parsed command line, or an error text (printed with the usage, exit status 2).
std::variant<server_args, std::string> parse_args(int argc, char** argv) {
    server_args a;
    bool have_port = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--memory") {
            a.memory = true;
            continue;
        }
        if (flag == "--join") {
            a.join = true;
            continue;
        }
        if (flag == "--lease-reads") {
            a.lease_reads = true;
            continue;
        }
        if (flag == "--new-member") {
            a.new_member = true;
            a.join = true;  // it follows without a vote until a reconfiguration adds it
            continue;
        }
        if (flag == "-h" || flag == "--help") return std::string{};
        static constexpr std::array<std::string_view, 36> valued{"--client-addresses",
            "--sentinel-name",
            "--id",           "--peers",           "--client-port",       "--client-host",
            "--data",         "--tick-ms",         "--snapshot-every",    "--snapshot-every-bytes",
            "--cluster-id",   "--log-level",       "--max-clients",       "--timeout",
            "--max-input-bytes", "--output-soft-limit", "--output-hard-limit", "--on-corruption",
            "--peer-tls-cert", "--peer-tls-key",   "--peer-tls-ca",       "--tls-min-version",
            "--tls-cert",     "--tls-key",         "--tls-ca-cert",       "--tls-auth-clients",
            "--requirepass",  "--requirepass-file", "--admin-user",       "--admin-pass",
            "--admin-pass-file", "--leader-wait-ms", "--metrics-port", "--metrics-host",
            "--max-output-bytes"};
        if (std::find(valued.begin(), valued.end(), flag) == valued.end())
            return fmt::format("unknown option '{}'", flag);
        if (i + 1 >= argc) return fmt::format("{} needs a value", flag);
        const std::string_view value = argv[++i];
        if (flag == "--id") {
            const auto id = parse_number(value, UINT32_MAX);
            if (!id || *id == 0) return fmt::format("--id: '{}' is not a replica id >= 1", value);
            a.id = *id;
        } else if (flag == "--peers") {
            if (auto problem = parse_peers(value, a.peers)) return *problem;
        } else if (flag == "--client-addresses") {
            std::map<peer_id, zab::asio::tcp_endpoint> parsed;
            if (auto problem = parse_peers(value, parsed))
                return "--client-addresses" + problem->substr(std::string_view{"--peers"}.size());
            for (const auto& [id, endpoint] : parsed)
                a.client_addresses[id] = fmt::format("{}:{}", endpoint.host, endpoint.port);
        } else if (flag == "--leader-wait-ms") {
            const auto wait = parse_number(value, 3'600'000);
            if (!wait) return fmt::format("--leader-wait-ms: '{}' is not 0..3600000", value);
            a.leader_wait_ms = *wait;
        } else if (flag == "--client-port") {
            const auto port = parse_number(value, 65535);
            if (!port) return fmt::format("--client-port: '{}' is not a port 0..65535", value);
            a.client_port = static_cast<std::uint16_t>(*port);
            have_port = true;
        } else if (flag == "--client-host") {
            a.client_host = value;
        } else if (flag == "--metrics-port") {
            const auto port = parse_number(value, 65535);
            if (!port) return fmt::format("--metrics-port: '{}' is not a port 0..65535", value);
            a.metrics_port = static_cast<std::uint16_t>(*port);
        } else if (flag == "--sentinel-name") {
            if (value.empty() || value.size() > 128 ||
                std::any_of(value.begin(), value.end(), [](char c) { return c < '!' || c > '~'; }))
                return fmt::format("--sentinel-name: '{}' is not a name (1 to 128 printable "
                                   "characters, no spaces)",
                                   value);
            a.sentinel_name = value;
        } else if (flag == "--metrics-host") {
            a.metrics_host = std::string{value};
        } else if (flag == "--data") {
            a.data = value;
        } else if (flag == "--tick-ms") {
            const auto tick = parse_number(value, 60'000);
            if (!tick || *tick == 0) return fmt::format("--tick-ms: '{}' is not 1..60000", value);
            a.tick_ms = static_cast<std::uint32_t>(*tick);
        } else if (flag == "--snapshot-every") {
            const auto every = parse_number(value, UINT64_MAX);
            if (!every) return fmt::format("--snapshot-every: '{}' is not a number", value);
            a.snapshot_every = *every;
        } else if (flag == "--snapshot-every-bytes") {
            const auto every = parse_number(value, UINT64_MAX);
            if (!every) return fmt::format("--snapshot-every-bytes: '{}' is not a number", value);
            a.snapshot_every_bytes = *every;
        } else if (flag == "--cluster-id") {
            const auto id = parse_number(value, UINT64_MAX);
            if (!id) return fmt::format("--cluster-id: '{}' is not a number", value);
            a.cluster_id = *id;
        } else if (flag == "--max-clients") {
            const auto n = parse_number(value, 1'000'000);
            if (!n || *n == 0) return fmt::format("--max-clients: '{}' is not 1..1000000", value);
            a.max_clients = *n;
        } else if (flag == "--timeout") {
            const auto n = parse_number(value, 100'000'000);
            if (!n) return fmt::format("--timeout: '{}' is not a number of seconds", value);
            a.timeout_s = *n;
        } else if (flag == "--max-input-bytes" || flag == "--output-soft-limit" ||
                   flag == "--output-hard-limit" || flag == "--max-output-bytes") {
            const auto n = parse_number(value, UINT64_MAX);
            if (!n) return fmt::format("{}: '{}' is not a number of bytes", flag, value);
            (flag == "--max-input-bytes"     ? a.max_input_bytes
             : flag == "--output-soft-limit" ? a.output_soft_limit
             : flag == "--output-hard-limit" ? a.output_hard_limit
                                             : a.max_output_bytes) = *n;
        } else if (flag == "--on-corruption") {
            if (value != "refuse" && value != "resync")
                return fmt::format("--on-corruption: '{}' is not refuse or resync", value);
            a.resync_on_corruption = value == "resync";
        } else if (flag == "--peer-tls-cert" || flag == "--peer-tls-key" ||
                   flag == "--peer-tls-ca" || flag == "--tls-cert" || flag == "--tls-key" ||
                   flag == "--tls-ca-cert" || flag == "--requirepass-file" ||
                   flag == "--admin-pass-file") {
            if (value.empty()) return fmt::format("{}: the file name is empty", flag);
            (flag == "--peer-tls-cert"      ? a.peer_tls_cert
             : flag == "--peer-tls-key"     ? a.peer_tls_key
             : flag == "--peer-tls-ca"      ? a.peer_tls_ca
             : flag == "--tls-cert"         ? a.tls_cert
             : flag == "--tls-key"          ? a.tls_key
             : flag == "--tls-ca-cert"      ? a.tls_ca_cert
             : flag == "--requirepass-file" ? a.requirepass_file
                                            : a.admin_pass_file) = value;
        } else if (flag == "--tls-min-version") {
            if (value != "1.2" && value != "1.3")
                return fmt::format("--tls-min-version: '{}' is not 1.2 or 1.3", value);
            a.tls_min_version =
                value == "1.2" ? zab::asio::tls_version::tls1_2 : zab::asio::tls_version::tls1_3;
        } else if (flag == "--tls-auth-clients") {
            using ca = server_args::client_auth;
            if (value != "yes" && value != "no" && value != "optional")
                return fmt::format("--tls-auth-clients: '{}' is not yes, no or optional", value);
            a.tls_auth_clients = value == "yes" ? ca::yes : value == "no" ? ca::no : ca::optional;
        } else if (flag == "--requirepass" || flag == "--admin-pass") {
            if (value.empty()) return fmt::format("{}: the password is empty", flag);
            (flag == "--requirepass" ? a.requirepass : a.admin_pass) = std::string{value};
            // Out of `ps` from now on (the kernel shows argv's memory).
            std::memset(argv[i], '*', value.size());
        } else if (flag == "--admin-user") {
            if (value.empty() || value == zab::kv::user_table::default_name ||
                value.find_first_of(" \t\r\n") != std::string_view::npos)
                return fmt::format("--admin-user: '{}' is not a user name (not empty, not "
                                   "'default', no spaces)",
                                   value);
            a.admin_user = value;
        } else if (flag == "--log-level") {
            const auto level = parse_log_level(value);
            if (!level) return fmt::format("--log-level: '{}' is not a level", value);
            a.log_level = *level;
        } else {
            return fmt::format("unknown option '{}'", flag);
        }
    }
    if (a.id == 0) return std::string{"--id is required"};
    if (a.peers.empty()) return std::string{"--peers is required"};
    if (!a.peers.contains(a.id)) return fmt::format("--peers must list this replica ({})", a.id);
    if (a.new_member) {
        if (a.peers.size() < 2)
            return std::string{"--new-member: --peers must list the members, and this replica"};
        const peer_id highest = std::prev(a.peers.end())->first;
        if (highest != a.id)
            return fmt::format("--new-member: --id {} must be above every other id in --peers "
                               "(the members dial only lower ids, and do not know this replica "
                               "yet): use {} or above",
                               a.id, highest + 1);
    }
    if (!have_port) return std::string{"--client-port is required"};
    if (a.metrics_host && !a.metrics_port) return std::string{"--metrics-host needs --metrics-port"};
    for (const auto& [id, address] : a.client_addresses)
        if (!a.peers.contains(id))
            return fmt::format("--client-addresses names {}, which --peers does not list", id);
    if (!a.client_addresses.contains(a.id))
        a.client_addresses[a.id] = fmt::format("{}:{}", a.client_host, a.client_port);
    if (a.data.empty() && !a.memory) return std::string{"--data DIR (or --memory) is required"};
    if (!a.data.empty() && a.memory) return std::string{"--data and --memory exclude each other"};
    if (a.max_input_bytes < 2 * max_txn_bytes)
        return fmt::format("--max-input-bytes must be at least {} (two of the largest writes)",
                           2 * max_txn_bytes);
    if (a.output_soft_limit == 0) return std::string{"--output-soft-limit must be at least 1"};
    if (a.max_output_bytes < 2 * max_reply_bytes)
        return fmt::format("--max-output-bytes must be at least {} (two of the largest replies)",
                           2 * max_reply_bytes);
    const int peer_tls_given =
        !a.peer_tls_cert.empty() + !a.peer_tls_key.empty() + !a.peer_tls_ca.empty();
    if (peer_tls_given != 0 && peer_tls_given != 3)
        return std::string{"--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together"};
    if (a.tls_cert.empty() != a.tls_key.empty())
        return std::string{"--tls-cert and --tls-key go together"};
    if (!a.client_tls() && (!a.tls_ca_cert.empty() || a.tls_auth_clients))
        return std::string{"--tls-ca-cert and --tls-auth-clients need --tls-cert and --tls-key"};
    if (!a.tls_auth_clients)
        a.tls_auth_clients = a.tls_ca_cert.empty() ? server_args::client_auth::no
                                                   : server_args::client_auth::yes;
    if (*a.tls_auth_clients != server_args::client_auth::no && a.tls_ca_cert.empty())
        return std::string{"--tls-auth-clients yes|optional needs --tls-ca-cert"};
    if (a.requirepass && !a.requirepass_file.empty())
        return std::string{"--requirepass and --requirepass-file exclude each other"};
    if (a.admin_pass && !a.admin_pass_file.empty())
        return std::string{"--admin-pass and --admin-pass-file exclude each other"};
    const bool admin_password = a.admin_pass || !a.admin_pass_file.empty();
    if (a.admin_user.empty() == admin_password)
        return std::string{"--admin-user and --admin-pass (or --admin-pass-file) go together"};
    if (a.output_hard_limit < a.output_soft_limit + max_reply_bytes)
        return fmt::format("--output-hard-limit must be at least --output-soft-limit + {} "
                           "(the largest reply)",
                           max_reply_bytes);
    return a;
}

// --- credentials -----------------------------------------------------------------------------

/// The first line of a password file (without its line end) into `password`; an error text
/// (naming the file, never its content) on failure.
std::optional<std::string> read_password_file(const std::string& path, std::string& password) {
    std::ifstream in{path, std::ios::binary};
    if (!in) return fmt::format("cannot read the password file {}", path);
    std::getline(in, password);
    if (!password.empty() && password.back() == '\r') password.pop_back();
    if (password.empty()) return fmt::format("the password file {} has an empty first line", path);
    return std::nullopt;
}

/// The users of the command line (kv_auth.hpp), the password files read now; an error text.
std::variant<std::shared_ptr<const zab::kv::user_table>, std::string> load_users(
    const server_args& a) {
    auto users = std::make_shared<zab::kv::user_table>();
    users->default_password = a.requirepass;
    if (!a.requirepass_file.empty()) {
        std::string password;
        if (auto problem = read_password_file(a.requirepass_file, password)) return *problem;
        users->default_password = std::move(password);
    }
    users->admin_name = a.admin_user;
    if (a.admin_pass) users->admin_password = *a.admin_pass;
    if (!a.admin_pass_file.empty()) {
        if (auto problem = read_password_file(a.admin_pass_file, users->admin_password))
            return *problem;
    }
    return std::shared_ptr<const zab::kv::user_table>{std::move(users)};
}

/// The client port's TLS context (--tls-*): this server's certificate and key, and the CA
/// client certificates are checked against; an error text on failure.
std::variant<std::shared_ptr<boost::asio::ssl::context>, std::string> make_client_tls_context(
    const server_args& a) {
    namespace ssl = boost::asio::ssl;
    auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
    boost::system::error_code ec;
    context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                             ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                             ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                         ec);
    if (ec) return fmt::format("client TLS options: {}", ec.message());
    if (SSL_CTX_set_min_proto_version(context->native_handle(),
                                      a.tls_min_version == zab::asio::tls_version::tls1_2
                                          ? TLS1_2_VERSION
                                          : TLS1_3_VERSION) != 1)
        return std::string{"client TLS: cannot set the minimum TLS version"};
    context->use_certificate_chain_file(a.tls_cert, ec);
    if (ec) return fmt::format("--tls-cert {}: {}", a.tls_cert, ec.message());
    context->use_private_key_file(a.tls_key, ssl::context::pem, ec);
    if (ec) return fmt::format("--tls-key {}: {}", a.tls_key, ec.message());
    if (SSL_CTX_check_private_key(context->native_handle()) != 1)
        return fmt::format("--tls-key {} does not match --tls-cert {}", a.tls_key, a.tls_cert);
    using ca = server_args::client_auth;
    if (!a.tls_ca_cert.empty()) {
        context->load_verify_file(a.tls_ca_cert, ec);
        if (ec) return fmt::format("--tls-ca-cert {}: {}", a.tls_ca_cert, ec.message());
    }
    const auto mode = *a.tls_auth_clients == ca::yes
                          ? ssl::verify_peer | ssl::verify_fail_if_no_peer_cert
                      : *a.tls_auth_clients == ca::optional ? ssl::verify_peer
                                                            : ssl::verify_none;
    context->set_verify_mode(mode, ec);
    if (ec) return fmt::format("client TLS verify mode: {}", ec.message());
    return context;
}

// --- the server ------------------------------------------------------------------------------

/// What INFO reports beside the node's status.
struct server_counters {
    std::uint64_t connections_accepted = 0;
    std::uint64_t connected_clients = 0;
    std::uint64_t rejected_connections = 0;  ///< beyond --max-clients
    std::uint64_t evicted_clients = 0;       ///< closed for --max-input-bytes / output hard limit
    std::uint64_t timed_out_clients = 0;     ///< closed by --timeout
    std::uint64_t client_input_bytes = 0;    ///< buffered input over all connections
    std::uint64_t replies_refused = 0;       ///< --max-output-bytes: refused, not evicted
    std::uint64_t writes_proposed = 0;
    std::uint64_t writes_failed = 0;  ///< completed with an error (not a refused outcome)
    std::uint64_t outcomes_unknown = 0;
    std::uint64_t reads = 0;
    std::uint64_t syncs = 0;
    std::uint64_t syncs_failed = 0;
    std::uint64_t ticks_proposed = 0;  ///< TICKs proposed (expired keys due, as leader)
    std::uint64_t auth_failures = 0;   ///< AUTH / HELLO AUTH refused
    std::uint64_t tls_handshakes_pending = 0;
    std::uint64_t tls_handshake_failures = 0;  ///< not TLS (a plaintext client), bad certificate
    std::uint64_t tls_handshake_timeouts = 0;  ///< not finished within 5 s
    std::uint64_t tls_handshakes_refused = 0;  ///< beyond the pending handshakes' bound
    std::uint64_t credential_reloads = 0;      ///< SIGHUPs that reloaded everything
    std::uint64_t credential_reload_failures = 0;
};

/// Milliseconds since the Unix epoch by this machine's clock: what writes and (as leader)
/// TICKs are stamped with, and what TTL and PTTL count the time left from.
std::uint64_t wall_clock_ms() {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
    return ms > 0 ? static_cast<std::uint64_t>(ms) : 1;
}

/// zab's bound on the writes one replica forwards to the leader at once
/// (options::max_forwarded_per_learner), named in -BUSY.
const std::size_t forwarded_bound = zab::options{}.max_forwarded_per_learner;

/// The writes this replica's connections propose at once (write_pool.hpp): below
/// forwarded_bound by room for what is proposed outside the pool (ZRECONFIG, one at a time).
constexpr std::size_t write_pool_headroom = 8;
const std::size_t write_pool_slots = forwarded_bound - write_pool_headroom;

/// A write's reply at most this large is never refused for --max-output-bytes (a reply
/// replaced by the refusal's text would not be smaller).
constexpr std::size_t unrefused_reply_bytes = 256;

std::string address_of(const std::optional<zab::asio::tcp_endpoint>& endpoint) {
    if (!endpoint) return {};
    return zab::asio::to_string(*endpoint);
}

template <typename Node>
class server;

/// One client connection: a socket and a resp_session, whose Backend it is.
template <typename Node>
class connection : public std::enable_shared_from_this<connection<Node>> {
public:
    using clock = std::chrono::steady_clock;

    /// `tls`: the client port's TLS context (null: plaintext); the connection keeps it.
    connection(server<Node>& owner, tcp::socket socket, std::uint64_t id,
               std::shared_ptr<boost::asio::ssl::context> tls)
        : owner_{owner},
          socket_{std::move(socket)},
          id_{id},
          session_{*this, options(owner, id)},
          last_active_{clock::now()},
          connected_at_{last_active_},
          last_read_{last_active_},
          tls_context_{std::move(tls)} {
        if (tls_context_) tls_.emplace(socket_, *tls_context_);
    }

    void start() {
        if (tls_) return handshake();
        boost::system::error_code ignored;
        socket_.non_blocking(true, ignored);
        pump();
    }

    /// Closes the socket; completions still in flight find the session and are dropped.
    void close() {
        if (!open_) return;
        open_ = false;
        handshake_over();
        boost::system::error_code ignored;
        socket_.shutdown(tcp::socket::shutdown_both, ignored);
        socket_.close(ignored);
        owner_.forget(id_, input_counted_);
        input_counted_ = 0;
    }

    /// The write pool granted this connection a slot: start the write that waited for it.
    void resume() {
        if (!open_) return;
        guarded([&] { session_.resume(); });
        pump();
    }

    /// What this connection holds of --max-output-bytes, reported to the server: the
    /// session's unsent replies.
    void report_output() { owner_.output_budget().set(id_, session_.unsent_bytes()); }

    /// Closes with a last error reply, best effort (the client may not be reading): sent
    /// without blocking, and only between replies (not into the middle of one being written).
    /// A blocking send would stop the server until this client reads, and the clients closed
    /// this way are the ones that do not read. Over TLS the connection just closes.
    void close_with_error(std::string_view text) {
        if (!tls_ && !writing_) {
            std::string out;
            zab::kv::resp::write_error(out, text);
            boost::system::error_code ignored;
            socket_.non_blocking(true, ignored);
            if (!ignored) socket_.send(boost::asio::buffer(out), 0, ignored);
        }
        close();
    }

    /// Runs `step` (the session's work on this connection's input or completions), and
    /// closes this connection if it runs out of memory: whatever a client asks, the server
    /// does not die of it (--max-output-bytes bounds what it holds; this is the backstop).
    template <typename Step>
    void guarded(Step&& step) {
        try {
            step();
        } catch (const std::bad_alloc&) {
            ++owner_.counters().evicted_clients;
            zab::log(zab::log_level::error,
                     "kv_server: client {} closed: out of memory serving it ({} bytes of "
                     "unread replies held for all clients)",
                     id_, owner_.output_budget().held());
            close_with_error("ERR out of memory serving this connection; closing");
        }
    }

    /// CLIENT KILL: closed at once; the asking connection itself once its reply is sent.
    void kill(bool self) {
        if (!self) return close();
        close_after_reply_ = true;  // the pump after this command's reply closes it
    }

    /// A Sentinel event (kv_sentinel.hpp) for a subscribed client.
    void publish(std::string_view channel, std::string_view message) {
        if (!open_ || !session_.subscribed()) return;
        guarded([&] { session_.publish(channel, message); });
        pump();
    }

    /// This connection as CLIENT LIST shows it (kv_clients.hpp).
    zab::kv::client_description describe() {
        zab::kv::client_description c;
        session_.describe(c);
        describe_connection(c);
        return c;
    }

    /// The socket's part of CLIENT LIST's fields (resp_session fills the rest).
    void describe_connection(zab::kv::client_description& c) {
        c.addr = remote();
        boost::system::error_code error;
        const auto local = socket_.local_endpoint(error);
        if (!error) c.laddr = fmt::format("{}:{}", local.address().to_string(), local.port());
        c.fd = open_ ? static_cast<std::int64_t>(socket_.native_handle()) : -1;
        const auto now = clock::now();
        c.age_s = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::seconds>(now - connected_at_).count());
        c.idle_s = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::seconds>(now - last_read_).count());
        c.closing = c.closing || close_after_reply_;
    }

    /// Idle: nothing read or written since `since`, and nothing waiting at the cluster.
    bool idle_since(clock::time_point since) const {
        return last_active_ <= since && !session_.awaiting_cluster();
    }
    std::size_t input_bytes() const { return input_counted_; }

    // --- resp_session's Backend ---------------------------------------------------------------

    /// A slot of the server's write pool for the next write (write_pool.hpp); false: this
    /// connection is in line, and `resume()` is called when it is its turn.
    bool acquire_write() {
        if (owner_.write_pool().acquire(id_)) return true;
        // Nothing else may hold this connection while it waits (no read, maybe no write or
        // proposal in flight): the server holds it until its turn.
        owner_.hold_until_granted(id_, this->shared_from_this());
        return false;
    }

    void propose(std::uint64_t ticket, std::vector<std::byte> txn) {
        ++owner_.counters().writes_proposed;
        owner_.node().async_propose(
            std::move(txn),
            [self = this->shared_from_this(), ticket](boost::system::error_code error,
                                                      zab::asio::reply r) {
                self->owner_.write_slot_returned();  // zab no longer counts it
                std::string reply = self->owner_.write_reply(error, r);
                if (!self->open_) return;
                if (const std::size_t size = reply.size();
                    size > unrefused_reply_bytes && !self->room_for(size)) {
                    reply.clear();
                    zab::kv::resp::write_error(
                        reply, fmt::format("ERR the write was applied, but its reply ({} bytes) "
                                           "is not sent: replies held for all clients would "
                                           "pass --max-output-bytes ({})",
                                           size, self->owner_.args().max_output_bytes));
                }
                self->guarded([&] { self->session_.write_done(ticket, std::move(reply)); });
                self->pump();
            });
    }

    void sync(std::uint64_t ticket) {
        ++owner_.counters().syncs;
        auto done = [self = this->shared_from_this(), ticket](boost::system::error_code error,
                                                              zab::asio::reply r) {
            std::optional<std::string> refused;
            if (error) {
                ++self->owner_.counters().syncs_failed;
                refused = zab::kv::error_reply(error, r.leader, self->owner_.leader_client_address(r));
            }
            self->guarded([&] { self->session_.sync_done(ticket, std::move(refused)); });
            self->pump();
        };
        if (owner_.args().lease_reads) owner_.node().async_lease_sync(std::move(done));
        else owner_.node().async_sync(std::move(done));
    }

    void transfer(std::uint64_t ticket, std::uint64_t target) {
        owner_.node().async_transfer_leadership(
            target, [self = this->shared_from_this(), ticket](boost::system::error_code error,
                                                              zab::asio::reply r) {
                std::optional<std::string> refused;
                if (error)
                    refused = zab::kv::error_reply(error, r.leader, self->owner_.leader_client_address(r));
                self->session_.sync_done(ticket, std::move(refused));
                self->pump();
            });
    }

    /// ZRECONFIG: planned against the configuration in force here (ADD / REMOVE need the
    /// members' addresses: the configuration's, else --peers), then proposed through the node.
    void reconfigure(std::uint64_t ticket, zab::kv::reconfig_spec spec) {
        const std::string who = remote();
        auto planned = zab::kv::plan_reconfig(owner_.node().status().config,
                                              owner_.peer_addresses(), std::move(spec));
        if (auto* problem = std::get_if<std::string>(&planned)) {
            std::string reply;
            zab::kv::resp::write_error(reply, *problem);
            // Never completed from inside the call (resp_session's contract).
            boost::asio::post(socket_.get_executor(), [self = this->shared_from_this(), ticket,
                                                       reply = std::move(reply)]() mutable {
                self->session_.reconfig_done(ticket, std::move(reply));
                self->pump();
            });
            return;
        }
        auto plan = std::get<zab::kv::planned_reconfig>(std::move(planned));
        zab::reconfig_request request{std::move(plan.members), plan.expected_version};
        std::string members;
        for (const auto& m : request.members)
            members += fmt::format("{}{}:{}:{}", members.empty() ? "" : ",", m.id,
                                   zab::kv::role_of(m), m.address);
        zab::log(zab::log_level::warn, "kv_server {}: ZRECONFIG from client {} ({}): members {}{}",
                 owner_.args().id, id_, who, members,
                 request.expected_version
                     ? fmt::format(", replacing version {}", *request.expected_version)
                     : std::string{});
        owner_.node().async_reconfigure(
            std::move(request), [self = this->shared_from_this(), ticket, members](
                                    boost::system::error_code error, zab::asio::reply r) {
                zab::log(zab::log_level::warn, "kv_server {}: ZRECONFIG to {}: {}", self->owner_.args().id, members,
                         error ? error.message() : fmt::format("committed as version {}", r.id.value()));
                self->session_.reconfig_done(
                    ticket, zab::kv::reconfig_reply(error, r.id.value(), r.leader,
                                                    self->owner_.leader_client_address(r)));
                self->pump();
            });
    }

    std::string read(const zab::kv::resp::command& args, bool resp3) {
        ++owner_.counters().reads;
        const std::string name = zab::kv::detail::upper(args[0]);
        if (name == "INFO") {
            std::string out;
            const bool digest = args.size() == 2 && zab::kv::detail::upper(args[1]) == "DIGEST";
            zab::kv::resp::write_bulk_string(out, digest ? owner_.digest() : owner_.info(args));
            return out;
        }
        // About the group and this server: kv_sentinel.hpp, kv_requests.hpp, kv_clients.hpp.
        if (name == "SENTINEL") return zab::kv::sentinel_reply(args, owner_.sentinel_view(), resp3);
        if (name == "ROLE") return owner_.role();
        if (name == "CONFIG") return zab::kv::config_reply(args, owner_.config_parameters(), resp3);
        if (name == "CLIENT") return owner_.client_command(args, id_);
        std::string reply = zab::kv::execute_read(owner_.node().machine(), args,
                                                  max_reply_bytes, wall_clock_ms());
        if (room_for(reply.size())) return reply;
        std::string refused;
        zab::kv::resp::write_error(
            refused, fmt::format("ERR reply refused: its {} bytes would take the replies held "
                                 "for all clients past --max-output-bytes ({}); read the replies "
                                 "sent, or ask for less",
                                 reply.size(), owner_.args().max_output_bytes));
        return refused;
    }

    std::uint64_t now_ms() { return wall_clock_ms(); }

    std::uint64_t version_of(std::string_view key) {
        return owner_.node().machine().version_of(key);
    }

    std::optional<std::string> redirect() { return owner_.redirect_target(); }

    /// A refused AUTH: counted and logged (the user name cut, never the password).
    void auth_failed() {
        ++owner_.counters().auth_failures;
        zab::log(zab::log_level::info, "kv_server: client {} ({}): authentication refused", id_,
                 remote());
    }

private:
    static zab::kv::session_options options(server<Node>& owner, std::uint64_t id) {
        const server_args& args = owner.args();
        zab::kv::session_options o;
        o.users = owner.users();
        o.client_id = id;
        o.max_txn_bytes = max_txn_bytes;
        o.parser_limits.max_bulk_bytes = max_bulk_bytes;
        o.parser_limits.max_command_bytes = max_command_bytes;
        o.output_soft_bytes = static_cast<std::size_t>(args.output_soft_limit);
        o.output_hard_bytes = static_cast<std::size_t>(args.output_hard_limit);
        return o;
    }

    /// Room under --max-output-bytes for a reply of `bytes` (output_budget.hpp: the
    /// connections holding most may be closed for it); false, counted: refuse it.
    bool room_for(std::size_t bytes) {
        report_output();
        if (owner_.make_output_room(id_, bytes)) return true;
        ++owner_.counters().replies_refused;
        return false;
    }

    std::string remote() const {
        boost::system::error_code error;
        const auto endpoint = socket_.remote_endpoint(error);
        return error ? std::string{"?"}
                     : fmt::format("{}:{}", endpoint.address().to_string(), endpoint.port());
    }

    /// The TLS handshake, under a deadline and counted among the pending ones until over.
    void handshake() {
        handshaking_ = true;
        ++owner_.counters().tls_handshakes_pending;
        handshake_timer_.emplace(socket_.get_executor());
        handshake_timer_->expires_after(client_handshake_timeout);
        handshake_timer_->async_wait([self = this->shared_from_this()](
                                         boost::system::error_code e) {
            if (e || !self->handshaking_) return;
            ++self->owner_.counters().tls_handshake_timeouts;
            zab::log(zab::log_level::info,
                     "kv_server: client {} ({}): TLS handshake not finished within {} s; closed",
                     self->id_, self->remote(), client_handshake_timeout.count());
            self->close();
        });
        tls_->async_handshake(
            boost::asio::ssl::stream_base::server,
            [self = this->shared_from_this()](boost::system::error_code error) {
                if (!self->open_) return;
                self->handshake_over();
                if (error) {
                    // A plaintext client (its first bytes are no TLS record), an old TLS
                    // version, a missing or untrusted client certificate.
                    ++self->owner_.counters().tls_handshake_failures;
                    zab::log(zab::log_level::info,
                             "kv_server: client {} ({}): TLS handshake failed: {}; closed",
                             self->id_, self->remote(), error.message());
                    return self->close();
                }
                self->last_active_ = clock::now();
                self->pump();
            });
    }

    void handshake_over() {
        if (!handshaking_) return;
        handshaking_ = false;
        --owner_.counters().tls_handshakes_pending;
        if (handshake_timer_) handshake_timer_->cancel();
    }

    /// After anything changed: write what is ready, close when finished, read when there is
    /// room. The only place that decides what the socket does next.
    void pump() {
        if (!open_ || handshaking_) return;
        if (session_.output_overflow()) {
            ++owner_.counters().evicted_clients;
            zab::log(zab::log_level::warn, "kv_server: client {} closed: {} bytes of unread replies",
                     id_, session_.unsent_bytes());
            return close();
        }
        report_output();
        if (!writing_ && session_.has_output()) schedule_write();
        // Closing (QUIT, protocol error) or the client's EOF: once every reply is out. Killed
        // by itself (CLIENT KILL ... SKIPME no): once its reply is out, whatever follows.
        const bool finished = !writing_ && !session_.has_output() &&
                              ((session_.idle() && (session_.closing() || eof_)) ||
                               (close_after_reply_ && !write_posted_));
        if (finished) return close();
        const std::size_t input = session_.buffered_input_bytes();
        if (input != input_counted_) {
            const std::size_t before = std::exchange(input_counted_, input);
            owner_.input_changed(before, input);  // may close connections, this one too
            if (!open_) return;
        }
        if (!reading_ && !eof_ && session_.wants_input()) receive();
    }

    /// Waits until the socket is readable, then reads what is there into the server's one
    /// read buffer and hands it to the session at once.
    void receive() {
        reading_ = true;
        if (tls_) return receive_tls();
        socket_.async_wait(tcp::socket::wait_read, [self = this->shared_from_this()](
                                                       boost::system::error_code error) {
            self->reading_ = false;
            if (!self->open_) return;
            if (error) return self->close();
            auto& buffer = self->owner_.read_buffer();
            const std::size_t n = self->socket_.read_some(boost::asio::buffer(buffer), error);
            if (error == boost::asio::error::would_block || error == boost::asio::error::try_again) {
                // Spurious readiness: wait again.
            } else if (error) {
                // EOF: the client sent everything (e.g. a pipe through nc); answer it all
                // before closing. Any other error: the client is gone.
                if (error != boost::asio::error::eof) return self->close();
                self->eof_ = true;
            } else {
                self->last_active_ = self->last_read_ = clock::now();
                self->guarded([&] { self->session_.feed(std::string_view{buffer.data(), n}); });
            }
            self->pump();
        });
    }

    /// Over TLS: what the stream decrypts goes into the connection's own buffer (the stream
    /// may hold decrypted bytes the socket's readiness does not show).
    void receive_tls() {
        if (tls_read_buffer_.empty()) tls_read_buffer_.resize(tls_read_chunk_bytes);
        auto received = [self = this->shared_from_this()](boost::system::error_code error,
                                                          std::size_t n) {
            self->reading_ = false;
            if (!self->open_) return;
            if (error == boost::asio::error::eof ||
                error == boost::asio::ssl::error::stream_truncated) {
                self->eof_ = true;  // answer what was sent, then close
            } else if (error) {
                return self->close();
            } else {
                self->last_active_ = self->last_read_ = clock::now();
                self->guarded([&] {
                    self->session_.feed(std::string_view{self->tls_read_buffer_.data(), n});
                });
            }
            self->pump();
        };
        tls_->async_read_some(boost::asio::buffer(tls_read_buffer_), std::move(received));
    }

    /// The write is posted rather than started at once: the completions of one commit
    /// arrive as one handler each, and every reply they release before the posted write runs
    /// then goes out in the same system call.
    void schedule_write() {
        if (write_posted_) return;
        write_posted_ = true;
        boost::asio::post(socket_.get_executor(), [self = this->shared_from_this()] {
            self->write_posted_ = false;
            if (!self->open_) return;
            if (!self->writing_ && self->session_.has_output()) {
                self->write_buffer_ = self->session_.take_output();
                self->written_ = 0;
                self->write_some();
            }
            self->pump();
        });
    }

    /// Writes the rest of write_buffer_ (a pipeline's replies gathered), one part at a time:
    /// each part written counts as activity and lets the session go on below its bound.
    void write_some() {
        writing_ = true;
        const auto buffer =
            boost::asio::buffer(write_buffer_.data() + written_, write_buffer_.size() - written_);
        auto written = [self = this->shared_from_this()](boost::system::error_code error,
                                                         std::size_t n) {
            self->writing_ = false;
            if (!self->open_) return;
            if (error && error != boost::asio::error::would_block &&
                error != boost::asio::error::try_again)
                return self->close();
            self->written_ += n;
            if (n > 0) self->last_active_ = clock::now();
            if (self->written_ < self->write_buffer_.size()) {
                self->write_some();
            } else {
                self->write_buffer_ = {};
            }
            self->session_.output_written(n);  // may release more output: pump() sends it
            self->pump();
        };
        if (tls_) {
            tls_->async_write_some(buffer, std::move(written));
        } else {
            socket_.async_write_some(buffer, std::move(written));
        }
    }

    server<Node>& owner_;
    tcp::socket socket_;
    std::uint64_t id_;
    zab::kv::resp_session<connection> session_;
    std::string write_buffer_;
    std::size_t written_ = 0;       ///< of write_buffer_
    std::size_t input_counted_ = 0;  ///< this connection's share of the server's input total
    clock::time_point last_active_;
    clock::time_point connected_at_;  ///< CLIENT LIST's age
    clock::time_point last_read_;     ///< CLIENT LIST's idle
    bool close_after_reply_ = false;  ///< CLIENT KILL of itself
    bool open_ = true;
    bool reading_ = false;
    bool writing_ = false;
    bool write_posted_ = false;
    bool eof_ = false;
    // TLS (--tls-cert): the context it was made with (a reload does not touch it), the stream
    // over socket_, its read buffer, the handshake's deadline.
    std::shared_ptr<boost::asio::ssl::context> tls_context_;
    std::optional<boost::asio::ssl::stream<tcp::socket&>> tls_;
    std::vector<char> tls_read_buffer_;
    std::optional<boost::asio::steady_timer> handshake_timer_;
    bool handshaking_ = false;
};

/// The listener, the node, and the connections.
template <typename Node>
class server {
public:
    /// `registry`: the node's metrics sink (node_options::metrics), shown by INFO and
    /// --metrics-port.
    server(boost::asio::io_context& io, Node& node, const server_args& args,
           const zab::metrics_registry& registry)
        : io_{io},
          node_{node},
          args_{args},
          registry_{registry},
          acceptor_{io},
          signals_{io, SIGINT, SIGTERM},
          reload_signal_{io, SIGHUP},
          accept_retry_{io},
          idle_sweep_{io},
          expiry_timer_{io},
          read_buffer_(read_chunk_bytes),
          write_pool_{write_pool_slots},
          output_budget_{static_cast<std::size_t>(args.max_output_bytes)} {}

    /// Binds the client port and starts accepting; an error text on failure.
    std::optional<std::string> start() {
        auto users = load_users(args_);
        if (auto* problem = std::get_if<std::string>(&users)) return *problem;
        users_ = std::get<0>(std::move(users));
        if (args_.client_tls()) {
            auto context = make_client_tls_context(args_);
            if (auto* problem = std::get_if<std::string>(&context)) return *problem;
            client_tls_ = std::get<0>(std::move(context));
        }
        boost::system::error_code error;
        const auto address = boost::asio::ip::make_address(args_.client_host, error);
        if (error) return fmt::format("--client-host '{}': {}", args_.client_host, error.message());
        const tcp::endpoint endpoint{address, args_.client_port};
        acceptor_.open(endpoint.protocol(), error);
        if (!error) acceptor_.set_option(tcp::acceptor::reuse_address(true), error);
        if (!error) acceptor_.bind(endpoint, error);
        if (!error) acceptor_.listen(tcp::socket::max_listen_connections, error);
        if (error)
            return fmt::format("cannot listen on {}:{}: {}", args_.client_host, args_.client_port,
                               error.message());
        if (args_.metrics_port) {
            metrics_http_.emplace(io_, [this](std::string_view method, std::string_view target) {
                return metrics_answer(method, target);
            });
            if (auto problem = metrics_http_->start(args_.metrics_host.value_or(args_.client_host),
                                                    *args_.metrics_port))
                return problem;
        }
        signals_.async_wait([this](boost::system::error_code e, int) {
            if (!e) shutdown();
        });
        await_reload();
        accept();
        if (args_.timeout_s > 0) sweep_idle();
        expire_due();
        return std::nullopt;
    }

    Node& node() { return node_; }
    const server_args& args() const { return args_; }
    /// The metrics port's bound port (0: none).
    std::uint16_t metrics_port() const { return metrics_http_ ? metrics_http_->local_port() : 0; }

    /// --metrics-port's answer to one request (kv_metrics.hpp's routes).
    zab::kv::http_answer metrics_answer(std::string_view method, std::string_view target) const {
        return zab::kv::route_metrics_request(
            method, target,
            [this] {
                zab::prometheus_text text;
                zab::write_node_metrics(text, node_, &registry_);
                return text.text();
            },
            [this] {
                const auto* peer = node_.protocol_peer();
                return peer ? zab::kv::health_problem(peer->status()) : std::string{"not started"};
            });
    }

    /// Every member's peer address this replica knows, as "host:port": --peers, then what
    /// the configuration in force carries (ZRECONFIG ADD / REMOVE keep them in the new one).
    std::map<peer_id, std::string> peer_addresses() const {
        std::map<peer_id, std::string> known;
        for (const auto& [id, endpoint] : args_.peers) known[id] = zab::asio::to_string(endpoint);
        const zab::asio::node_status status = node_.status();
        for (const auto& m : status.config.members())
            if (const auto address = node_.address_of(m.id)) known[m.id] = zab::asio::to_string(*address);
        return known;
    }
    /// The users new connections get (replaced by a reload).
    const std::shared_ptr<const zab::kv::user_table>& users() const { return users_; }

    /// CLIENT REDIRECT: the leader's client address when this replica is not the leader and
    /// knows it; nullopt when it leads (or knows no leader: the write is then proposed here
    /// and fails or waits as usual).
    std::optional<std::string> redirect_target() const {
        const zab::asio::node_status s = node_.status();
        if (!s.established || s.leader == args_.id) return std::nullopt;
        std::string address = client_address_of(s.leader);
        if (address.empty()) return std::nullopt;
        return address;
    }

    /// Member `id`'s client address: the configuration's (ZRECONFIG ... CLIENT host:port),
    /// else --client-addresses; empty when neither says.
    std::string client_address_of(peer_id id) const {
        if (std::string address = node_.client_address_of(id); !address.empty()) return address;
        const auto it = args_.client_addresses.find(id);
        return it == args_.client_addresses.end() ? std::string{} : it->second;
    }

    /// The client address of the leader a failed operation names (for -NOQUORUM), if known.
    std::string leader_client_address(const zab::asio::reply& r) const {
        if (!r.leader_client_address.empty()) return r.leader_client_address;
        return r.leader == 0 ? std::string{} : client_address_of(r.leader);
    }
    server_counters& counters() { return counters_; }
    /// The one read buffer (connections read into it and hand the bytes over at once).
    std::vector<char>& read_buffer() { return read_buffer_; }

    /// A connection closed; `input_bytes` is what it still counted of the input total.
    /// Its unused write slots go to the next connections in line.
    void forget(std::uint64_t id, std::size_t input_bytes) {
        if (connections_.erase(id) > 0) --counters_.connected_clients;
        counters_.client_input_bytes -= input_bytes;
        output_budget_.forget(id);
        // Released once this handler is over: `forget` runs inside the connection's close().
        if (auto held = take_held(id)) boost::asio::post(io_, [held] {});
        for (const std::uint64_t next : write_pool_.forget(id)) wake(next);
    }

    zab::kv::write_pool& write_pool() { return write_pool_; }

    /// Connection `id` is in line for a write slot: held (nothing else may be) until
    /// granted one or closed.
    void hold_until_granted(std::uint64_t id, std::shared_ptr<connection<Node>> c) {
        slot_waiters_.try_emplace(id, std::move(c));
    }

    /// Connection `id` was granted a write slot: it resumes once this handler is over (never
    /// from inside another connection's call, which may be closing connections).
    void wake(std::uint64_t id) {
        std::shared_ptr<connection<Node>> c = take_held(id);
        if (!c) {
            const auto it = connections_.find(id);
            if (it != connections_.end()) c = it->second.lock();
        }
        if (c) boost::asio::post(io_, [c] { c->resume(); });
    }
    zab::kv::output_budget& output_budget() { return output_budget_; }

    std::shared_ptr<connection<Node>> take_held(std::uint64_t id) {
        const auto it = slot_waiters_.find(id);
        if (it == slot_waiters_.end()) return nullptr;
        auto c = std::move(it->second);
        slot_waiters_.erase(it);
        return c;
    }

    /// A write proposed with a pool slot completed: the slot goes to the next in line.
    void write_slot_returned() {
        if (const auto next = write_pool_.release()) wake(*next);
    }

    /// Room for `bytes` more replies of connection `id` under --max-output-bytes, closing
    /// the connections that hold most first (output_budget.hpp); false: refuse the reply.
    bool make_output_room(std::uint64_t id, std::size_t bytes) {
        return output_budget_.make_room(id, bytes, [this](std::uint64_t victim) {
            const auto it = connections_.find(victim);
            auto c = it == connections_.end() ? nullptr : it->second.lock();
            if (!c) return;
            ++counters_.evicted_clients;
            zab::log(zab::log_level::warn,
                     "kv_server: closing client {} holding {} bytes of unread replies ({} over "
                     "all clients, --max-output-bytes {})",
                     victim, output_budget_.held_by(victim), output_budget_.held(),
                     args_.max_output_bytes);
            c->close_with_error(
                "ERR client output limit reached (--max-output-bytes over all clients): this "
                "connection held the most unread replies; closing");
        });
    }

    /// A connection's buffered input went from `before` to `after` bytes. Past
    /// --max-input-bytes over all connections, the connections holding most are closed
    /// until the total fits (Redis's maxmemory-clients: the clients using most are evicted).
    void input_changed(std::size_t before, std::size_t after) {
        counters_.client_input_bytes = counters_.client_input_bytes - before + after;
        while (counters_.client_input_bytes > args_.max_input_bytes) {
            std::shared_ptr<connection<Node>> largest;
            for (auto& [id, weak] : connections_) {
                auto c = weak.lock();
                if (c && (!largest || c->input_bytes() > largest->input_bytes())) largest = c;
            }
            if (!largest || largest->input_bytes() == 0) break;
            ++counters_.evicted_clients;
            zab::log(zab::log_level::warn,
                     "kv_server: closing a client holding {} bytes of input ({} over all "
                     "clients, --max-input-bytes {})",
                     largest->input_bytes(), counters_.client_input_bytes, args_.max_input_bytes);
            largest->close_with_error(
                "ERR client input limit reached (--max-input-bytes over all clients); closing");
        }
    }

    /// The reply to a completed write: its outcome, or the error.
    std::string write_reply(boost::system::error_code error, const zab::asio::reply& r) {
        if (error) {
            ++counters_.writes_failed;
            return zab::kv::error_reply(error, r.leader, leader_client_address(r),
                                        forwarded_bound, write_pool_slots);
        }
        // What apply computed on this replica, delivered with the completion (§6.6), unless
        // the write reached this replica inside a snapshot (applied, its outcome unknown).
        if (!r.response_unknown)
            if (auto outcome = zab::kv::outcome_of_response(r.response.view()))
                return zab::kv::outcome_reply(*outcome);
        ++counters_.outcomes_unknown;
        std::string out;
        zab::kv::resp::write_error(out, zab::kv::error_outcome_unknown);
        return out;
    }

    /// INFO DIGEST: the state machine's digest and the zxid it was taken at, to compare
    /// replicas (equal states at the same zxid have equal digests). Encodes the whole state:
    /// O(keys), so plain INFO leaves it out.
    std::string digest() const {
        const auto& m = node_.machine();
        return fmt::format("# Digest\r\ndigest:{:08x}\r\ndigest_applied:{}\r\n"
                           "digest_applied_raw:{}\r\nkeys:{}\r\n",
                           m.digest(), m.last_applied(), m.last_applied().value(), m.size());
    }

    /// Member `id`'s run_id (INFO run_id, SENTINEL's runid; kv_sentinel.hpp).
    std::string runid_of(peer_id id) const { return zab::kv::sentinel_runid(args_.cluster_id, id); }

    /// The leader clients should write to: established, not this replica removed, and (on a
    /// follower) still connected to it, so that a killed leader stops being named at once.
    peer_id master_of(const zab::asio::node_status& s) const {
        if (!s.established || s.leader == 0 || s.removed) return 0;
        if (s.leader == args_.id) return s.leader;
        const auto link = node_.transport().peer_info(s.leader);
        return link && link->connected ? s.leader : 0;
    }

    /// The group as Redis Sentinel shows it (kv_sentinel.hpp), from this replica's view.
    zab::kv::sentinel_view sentinel_view() const {
        const zab::asio::node_status s = node_.status();
        zab::kv::sentinel_view v;
        v.name = args_.sentinel_name;
        v.myid = runid_of(args_.id);
        v.epoch = s.epoch;
        v.quorum = s.config.voters().size() / 2 + 1;
        const peer_id master = master_of(s);
        for (const auto& m : s.config.members()) {
            auto address = zab::kv::split_host_port(client_address_of(m.id));
            if (!address) continue;  // no client address known: clients could not reach it
            zab::kv::sentinel_node n;
            n.id = m.id;
            n.host = std::move(address->first);
            n.port = address->second;
            n.runid = runid_of(m.id);
            const auto link = node_.transport().peer_info(m.id);
            n.reachable = m.id == args_.id || (link && link->connected);
            n.observer = zab::kv::role_of(m) != "voter";
            if (m.id == args_.id) n.offset = s.last_applied.value();
            for (const auto& f : s.followers)
                if (f.id == m.id) {
                    n.offset = f.last_acked.value();
                    n.reachable = n.reachable && f.serving;
                }
            if (m.id == master) {
                v.master = n;
            } else {
                v.replicas.push_back(n);
            }
            if (m.id != args_.id) v.sentinels.push_back(std::move(n));
        }
        if (v.master == std::nullopt) v.replicas.clear();  // no master: nothing of it to list
        return v;
    }

    /// ROLE (kv_sentinel.hpp's role_reply).
    std::string role() const {
        const zab::asio::node_status s = node_.status();
        return zab::kv::role_reply(master_of(s) == args_.id, sentinel_view(),
                                   s.last_applied.value());
    }

    /// What CONFIG GET shows: this server's settings under Redis's names, truthfully (what
    /// kv_server does not have, such as maxmemory, is 0 / none as Redis says "no limit").
    std::vector<zab::kv::config_parameter> config_parameters() const {
        const std::string soft = std::to_string(args_.output_soft_limit);
        const std::string hard = std::to_string(args_.output_hard_limit);
        const bool durable = !args_.memory;
        return {
            {"bind", args_.client_host},
            {"port", std::to_string(args_.client_tls() ? 0 : args_.client_port)},
            {"tls-port", std::to_string(args_.client_tls() ? args_.client_port : 0)},
            {"databases", "1"},
            {"maxclients", std::to_string(args_.max_clients)},
            {"timeout", std::to_string(args_.timeout_s)},
            // The map is bounded by nothing but the machine: no maxmemory, no eviction (a
            // write past the memory fails the process, as a Redis without maxmemory).
            {"maxmemory", "0"},
            {"maxmemory-policy", "noeviction"},
            {"maxmemory-clients", std::to_string(args_.max_input_bytes)},
            // Durability: every write is in the replicas' logs, fsynced before it is
            // acknowledged (--data); no RDB save points; compaction writes snapshots.
            {"save", ""},
            {"appendonly", durable ? "yes" : "no"},
            {"appendfsync", durable ? "always" : "no"},
            {"dir", durable ? args_.data : std::string{}},
            {"proto-max-bulk-len", std::to_string(max_bulk_bytes)},
            {"client-query-buffer-limit", std::to_string(max_command_bytes)},
            {"client-output-buffer-limit",
             fmt::format("normal {} {} 0 slave {} {} 0 pubsub {} {} 0", hard, soft, hard, soft, hard,
                         soft)},
            {"replica-read-only", "no"},  // a follower forwards writes to the leader
            {"cluster-enabled", "no"},
            {"lazyfree-lazy-user-flush", "no"},
        };
    }

    /// CLIENT LIST / CLIENT KILL over every connection (kv_clients.hpp); `self` asks.
    std::string client_command(const zab::kv::resp::command& args, std::uint64_t self) {
        std::string out;
        const bool kill = zab::kv::detail::iequals(args[1], "KILL");
        auto parsed = zab::kv::parse_client_filter(args, kill);
        if (auto* problem = std::get_if<std::string>(&parsed)) {
            zab::kv::resp::write_error(out, *problem);
            return out;
        }
        const auto& filter = std::get<zab::kv::client_filter>(parsed);
        std::vector<std::pair<std::shared_ptr<connection<Node>>, bool>> matched;
        std::string lines;
        for (auto& [id, weak] : connections_) {
            auto c = weak.lock();
            if (!c) continue;
            const zab::kv::client_description d = c->describe();
            if (!zab::kv::client_matches(filter, d, self)) continue;
            if (kill) {
                matched.emplace_back(std::move(c), id == self);
            } else {
                lines += zab::kv::client_line(d) + "\n";
            }
        }
        if (!kill) {
            zab::kv::resp::write_bulk_string(out, lines);
            return out;
        }
        for (auto& [c, is_self] : matched) {
            zab::log(zab::log_level::info, "kv_server {}: client {} killed by CLIENT KILL from client {}",
                     args_.id, c->describe().id, self);
            if (is_self) {
                c->kill(true);
            } else {
                // After this command (never from inside the asking connection's call).
                boost::asio::post(io_, [c] { c->kill(false); });
            }
        }
        if (filter.old_form) {
            if (matched.empty()) {
                zab::kv::resp::write_error(out, "ERR No such client");
            } else {
                zab::kv::resp::write_simple_string(out, "OK");
            }
        } else {
            zab::kv::resp::write_integer(out, static_cast<std::int64_t>(matched.size()));
        }
        return out;
    }

    /// Sentinel's events for SUBSCRIBE / PSUBSCRIBE clients, as this replica sees its leader
    /// go and come (the file comment); checked every 10 ms.
    void announce_master() {
        const zab::asio::node_status s = node_.status();
        const peer_id master = master_of(s);
        const std::string now = master == 0 ? std::string{} : client_address_of(master);
        const auto host_port = [](const std::string& address) {
            const auto split = zab::kv::split_host_port(address);
            return split ? fmt::format("{} {}", split->first, split->second) : std::string{"? 0"};
        };
        const std::string& name = args_.sentinel_name;
        std::vector<std::pair<std::string, std::string>> events;
        if (now.empty()) {
            if (!announced_master_.empty() && !master_down_) {
                const std::string what = "master " + name + " " + host_port(announced_master_);
                events = {{"+sdown", what}, {"+odown", what + " #quorum 1/1"}};
                master_down_ = true;
            }
        } else if (announced_master_.empty()) {
            announced_master_ = now;
        } else if (now != announced_master_) {
            events = {{"+switch-master",
                       name + " " + host_port(announced_master_) + " " + host_port(now)}};
            announced_master_ = now;
            master_down_ = false;
        } else if (master_down_) {
            const std::string what = "master " + name + " " + host_port(now);
            events = {{"-sdown", what}, {"-odown", what}};
            master_down_ = false;
        }
        if (events.empty()) return;
        std::vector<std::shared_ptr<connection<Node>>> open;
        for (auto& [id, weak] : connections_)
            if (auto c = weak.lock()) open.push_back(std::move(c));
        for (const auto& [channel, message] : events) {
            zab::log(zab::log_level::info, "kv_server {}: {} {}", args_.id, channel, message);
            for (auto& c : open) c->publish(channel, message);
        }
    }

    /// INFO [section ...]: `key:value` lines, in Redis's format (the file comment).
    std::string info(const zab::kv::resp::command& args) const {
        std::string text = info_text();
        if (args.size() < 2) return text;
        std::vector<std::string> wanted;
        for (std::size_t i = 1; i < args.size(); ++i) {
            const std::string name = zab::kv::detail::lower(args[i]);
            if (name == "all" || name == "everything" || name == "default") return text;
            wanted.push_back(name);
        }
        // Keep the sections whose title (lower case, `_` for spaces) is named, or that start
        // with "zab" when "zab" is.
        std::string out;
        bool keep = false;
        std::size_t at = 0;
        while (at < text.size()) {
            std::size_t eol = text.find("\r\n", at);
            eol = eol == std::string::npos ? text.size() : eol + 2;
            const std::string_view line{text.data() + at, eol - at};
            if (line.starts_with("# ")) {
                std::string title = zab::kv::detail::lower(line.substr(2, line.size() - 4));
                std::replace(title.begin(), title.end(), ' ', '_');
                keep = std::find(wanted.begin(), wanted.end(), title) != wanted.end() ||
                       (title.starts_with("zab_") &&
                        std::find(wanted.begin(), wanted.end(), "zab") != wanted.end());
            }
            if (keep) out += line;
            at = eol;
        }
        return out;
    }

    /// Every INFO section.
    std::string info_text() const {
        const zab::asio::node_status s = node_.status();
        std::string out = "# Server\r\n";
        // A value never holds a comma, a colon or a space (Redis's format: clients split on
        // them): a free text (an error's message, a reason) becomes one word.
        const auto word = [](std::string_view text) {
            std::string w;
            for (const char c : text) {
                const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                   (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
                                   c == '/';
                if (plain) w += c;
                else if (!w.empty() && w.back() != '_') w += '_';
            }
            while (!w.empty() && w.back() == '_') w.pop_back();
            return w;
        };
        // An IPv6 host keeps its colons (as Redis prints it); anything else is one word.
        const auto host = [&word](std::string_view h) {
            return h.find(':') != std::string_view::npos ? std::string{h} : word(h);
        };
        const auto zxid_text = [](zab::zxid z) { return fmt::format("{}-{}", z.epoch(), z.counter()); };
        auto line = [&out](std::string_view key, const auto& value) {
            out += fmt::format("{}:{}\r\n", key, value);
        };
        // host and port fields of "host:port" (empty and 0 when unknown).
        const auto address_lines = [&](std::string_view prefix, std::string_view address) {
            const auto split = zab::kv::split_host_port(address);
            line(fmt::format("{}_host", prefix), split ? host(split->first) : std::string{});
            line(fmt::format("{}_port", prefix), split ? split->second : 0);
        };
        line("redis_version", "7.2.0");  // what HELLO answers: the commands clients may use
        line("redis_mode", "standalone");
        line("server_name", "kv_server");
        line("zab_version", zab::version_text);
        if (const auto* peer = node_.protocol_peer()) {
            // docs/protocol.md §0.2: what this replica speaks, and what it speaks with its
            // leader (0x0 unless it follows one).
            const auto versions = peer->status();
            line("zab_protocol", fmt::format("{:#x}", versions.protocol));
            line("zab_leader_protocol", fmt::format("{:#x}", versions.leader_protocol));
        }
        line("process_id", static_cast<long>(::getpid()));
        line("run_id", runid_of(args_.id));
        line("tcp_port", args_.client_port);
        line("uptime_in_seconds", std::chrono::duration_cast<std::chrono::seconds>(
                                      std::chrono::steady_clock::now() - started_)
                                      .count());
        out += "# Clients\r\n";
        line("connected_clients", counters_.connected_clients);
        line("maxclients", args_.max_clients);
        line("blocked_clients", 0);

        // Redis's replication fields first (clients read role, master_host, master_port,
        // master_link_status), then zab's.
        out += "# Replication\r\n";
        const peer_id master = master_of(s);
        const bool leading = master == args_.id;
        line("role", leading ? "master" : "slave");
        if (leading) {
            std::size_t index = 0;
            std::string slaves;
            for (const auto& f : s.followers) {
                const auto split = zab::kv::split_host_port(client_address_of(f.id));
                if (!split) continue;
                slaves += fmt::format("slave{}:ip={},port={},state={},offset={},lag={}\r\n", index++,
                                      host(split->first), split->second,
                                      f.serving ? "online" : "send_bulk", f.last_acked.value(),
                                      f.lag);
            }
            line("connected_slaves", index);
            out += slaves;
        } else {
            address_lines("master", master == 0 ? std::string{} : client_address_of(master));
            line("master_link_status", master == 0 ? "down" : "up");
            line("master_sync_in_progress", s.established || master == 0 ? 0 : 1);
            line("slave_read_only", 0);  // a follower forwards writes to the leader
            line("connected_slaves", 0);
        }
        line("master_repl_offset", s.last_applied.value());
        line("replica_id", args_.id);
        line("replica_role", zab::kv::detail::lower(fmt::format("{}", s.role)));
        line("established", s.established ? 1 : 0);
        line("epoch", s.epoch);
        line("leader", s.leader);
        const bool known_leader = s.established && s.leader != 0;
        address_lines("leader_peer",
                      s.leader == 0 ? std::string{} : address_of(node_.address_of(s.leader)));
        // Finding the leader: its client address (--client-addresses; member_<id> below).
        address_lines("leader_client", known_leader ? client_address_of(s.leader) : std::string{});
        line("last_zxid", zxid_text(s.last_logged));
        line("last_zxid_raw", s.last_logged.value());
        line("last_committed", zxid_text(s.last_committed));
        line("last_applied", zxid_text(s.last_applied));
        line("last_applied_raw", s.last_applied.value());
        line("storage", args_.memory ? "memory" : "file");
        line("storage_failure", s.failure ? word(s.failure.message()) : std::string{"none"});
        // How this replica last synced with a leader (DIFF, TRUNC or SNAP), from its UPTODATE.
        if (const auto& y = s.last_sync)
            out += fmt::format("last_sync:method={},leader={},epoch={},records={},bytes={},"
                               "snapshot_bytes={},synced_to={},ticks={}\r\n",
                               zab::kv::detail::lower(zab::to_string(y->how)), y->leader, y->epoch,
                               y->records, y->bytes, y->snapshot_bytes, zxid_text(y->synced_to),
                               y->ticks);
        else
            line("last_sync", "none");
        line("followers", s.followers.size());
        for (const auto& f : s.followers)
            out += fmt::format("follower_{}:serving={},lag={},last_acked={}\r\n", f.id,
                               f.serving ? 1 : 0, f.lag, zxid_text(f.last_acked));
        // A different member list or a second process with a member's id (issue 15 defect 9);
        // the detail is in the log.
        line("member_conflicts", s.conflicts.size());
        for (const auto& c : s.conflicts)
            out += fmt::format("member_conflict_{}:reason={},side={},times={}\r\n", c.peer,
                               c.reason == zab::asio::refusal_reason::duplicate_id
                                   ? "duplicate_id"
                                   : "different_membership",
                               c.refused_us ? "refused_us" : "refused_by_us", c.times);

        // Sentinel (kv_sentinel.hpp): the master name this replica answers for.
        out += "# Sentinel\r\n";
        line("sentinel_masters", master == 0 ? 0 : 1);
        if (master != 0) {
            const auto v = sentinel_view();
            const auto split = zab::kv::split_host_port(client_address_of(master));
            out += fmt::format("master0:name={},status=ok,ip={},port={},slaves={},sentinels={}\r\n",
                               word(args_.sentinel_name), split ? host(split->first) : "",
                               split ? split->second : 0, v.replicas.size(), v.sentinels.size() + 1);
        }

        // Membership (docs/protocol.md §9; ZRECONFIG, kv_reconfig.hpp).
        out += "# Cluster\r\n";
        line("config_version", s.config.version());
        line("config_version_zxid", zxid_text(zab::zxid::from_value(s.config.version())));
        line("member_count", s.config.members().size());
        line("voters", s.config.voters().size());
        for (const auto& m : s.config.members()) {
            const std::string peer =
                !m.address.empty() ? m.address : address_of(node_.address_of(m.id));
            const auto p = zab::kv::split_host_port(peer);
            const auto c = zab::kv::split_host_port(client_address_of(m.id));
            out += fmt::format("member_{}:type={},peer_host={},peer_port={},client_host={},"
                               "client_port={}\r\n",
                               m.id, zab::kv::role_of(m), p ? host(p->first) : "", p ? p->second : 0,
                               c ? host(c->first) : "", c ? c->second : 0);
        }
        line("reconfig_pending", s.reconfig_pending ? 1 : 0);
        line("removed", s.removed ? 1 : 0);
        line("joining", !s.removed && !s.config.contains(args_.id) ? 1 : 0);
        out += "# Keyspace\r\n";
        const auto& machine = node_.machine();
        if (machine.size() > 0)
            out += fmt::format("db0:keys={},expires={},avg_ttl=0\r\n", machine.size(),
                               machine.expiring_size());
        line("keys", machine.size());
        line("clock_ms", machine.now_ms());
        line("ticks_proposed", counters_.ticks_proposed);
        out += "# Stats\r\n";
        line("connections_accepted", counters_.connections_accepted);
        line("total_connections_received", counters_.connections_accepted);
        line("rejected_connections", counters_.rejected_connections);
        line("evicted_clients", counters_.evicted_clients);
        line("timed_out_clients", counters_.timed_out_clients);
        line("client_input_bytes", counters_.client_input_bytes);
        line("client_output_bytes", output_budget_.held());
        line("max_output_bytes", args_.max_output_bytes);
        line("output_evicted_clients", output_budget_.evicted());
        line("replies_refused", counters_.replies_refused);
        line("write_slots_in_use", write_pool_.in_use());
        line("write_slots", write_pool_.capacity());
        line("connections_waiting_for_write_slots", write_pool_.waiting());
        line("writes_proposed", counters_.writes_proposed);
        line("writes_failed", counters_.writes_failed);
        line("outcomes_unknown", counters_.outcomes_unknown);
        line("reads", counters_.reads);
        line("syncs", counters_.syncs);
        line("syncs_failed", counters_.syncs_failed);
        if (const auto* p = node_.protocol_peer()) {  // §7.1, at the leader
            line("lease_syncs_served", p->counters().lease_syncs_served);
            line("lease_sync_fallbacks", p->counters().lease_sync_fallbacks);
        }
        out += "# Security\r\n";
        line("client_tls", args_.client_tls() ? 1 : 0);
        line("peer_tls", args_.peer_tls() ? 1 : 0);
        line("requirepass", users_ && users_->auth_required() ? 1 : 0);
        line("auth_failures", counters_.auth_failures);
        line("tls_handshakes_pending", counters_.tls_handshakes_pending);
        line("tls_handshake_failures", counters_.tls_handshake_failures);
        line("tls_handshake_timeouts", counters_.tls_handshake_timeouts);
        line("tls_handshakes_refused", counters_.tls_handshakes_refused);
        line("credential_reloads", counters_.credential_reloads);
        line("credential_reload_failures", counters_.credential_reload_failures);
        if (const auto* tls = node_.transport().security().tls()) {
            const auto& rejected = node_.transport().counters().rejected;
            line("peer_tls_reloads", tls->reloads());
            line("peer_refused_tls_untrusted", rejected.refused_tls_untrusted);
            line("peer_refused_tls_wrong_identity", rejected.refused_tls_wrong_identity);
            line("peer_refused_tls_handshake", rejected.refused_tls_handshake);
        }
        if (const auto* peer = node_.protocol_peer()) {
            const auto& c = peer->counters();
            line("elections_started", c.elections_started);
            line("transactions_applied", c.transactions_applied);
            line("proposals", c.proposals);
            line("commits", c.commits);
            line("requests_forwarded", c.requests_forwarded);
            line("forwarded_batches", c.forwarded_batches);
            line("syncs_diff", c.syncs_diff);
            line("syncs_trunc", c.syncs_trunc);
            line("syncs_snap", c.syncs_snap);
            const std::string problem = zab::kv::health_problem(peer->status());
            line("health", problem.empty() ? std::string{"ok"} : word(problem));
        }
        // zab's figures, as --metrics-port shows them (docs/operating.md, "Metrics").
        zab::kv::info_writer zab_figures{out};
        zab::write_node_metrics(zab_figures, node_, &registry_);
        zab_figures.finish();
        return out;
    }

private:
    void accept() {
        acceptor_.async_accept([this](boost::system::error_code error, tcp::socket socket) {
            if (stopping_ || error == boost::asio::error::operation_aborted) return;
            if (!error) {
                if (out_of_descriptors_) {
                    out_of_descriptors_ = false;
                    zab::log(zab::log_level::warn, "kv_server {}: accepting clients again",
                             args_.id);
                }
                admit(std::move(socket));
            } else if (error == boost::asio::error::no_descriptors ||
                       error == boost::system::errc::too_many_files_open_in_system ||
                       error == boost::asio::error::no_buffer_space ||
                       error == boost::asio::error::no_memory) {
                // The connection stays in the listen queue; accepting again at once would
                // fail again at once (a busy loop). Wait, then retry: once descriptors are
                // free it is accepted.
                if (!out_of_descriptors_) {
                    out_of_descriptors_ = true;
                    zab::log(zab::log_level::warn,
                             "kv_server {}: cannot accept a client ({}); retrying every {} ms",
                             args_.id, error.message(), accept_retry_delay.count());
                }
                accept_retry_.expires_after(accept_retry_delay);
                accept_retry_.async_wait([this](boost::system::error_code e) {
                    if (!e && !stopping_) accept();
                });
                return;
            }
            // Other accept errors (a connection reset before accept) concern that client.
            accept();
        });
    }

    /// A new client: served, or refused beyond --max-clients with Redis's error (over TLS,
    /// closed: the error would not be TLS), or beyond the pending TLS handshakes' bound.
    void admit(tcp::socket socket) {
        boost::system::error_code ignored;
        if (connections_.size() >= args_.max_clients) {
            ++counters_.rejected_connections;
            static constexpr std::string_view refusal = "-ERR max number of clients reached\r\n";
            socket.non_blocking(true, ignored);
            if (!client_tls_)
                socket.send(boost::asio::buffer(refusal.data(), refusal.size()), 0, ignored);
            socket.close(ignored);
            return;
        }
        if (client_tls_ && counters_.tls_handshakes_pending >= max_pending_client_handshakes) {
            if (counters_.tls_handshakes_refused++ % 1000 == 0)
                zab::log(zab::log_level::warn,
                         "kv_server {}: {} TLS handshakes in progress: refusing new clients "
                         "until some finish ({} refused so far)",
                         args_.id, max_pending_client_handshakes, counters_.tls_handshakes_refused);
            socket.close(ignored);
            return;
        }
        socket.set_option(tcp::no_delay(true), ignored);
        const std::uint64_t id = ++last_connection_id_;
        auto c = std::make_shared<connection<Node>>(*this, std::move(socket), id, client_tls_);
        connections_.emplace(id, c);
        ++counters_.connections_accepted;
        ++counters_.connected_clients;
        c->start();
    }

    /// --timeout: once a second, closes the connections idle for that long.
    void sweep_idle() {
        idle_sweep_.expires_after(std::chrono::seconds{1});
        idle_sweep_.async_wait([this](boost::system::error_code e) {
            if (e || stopping_) return;
            const auto since = connection<Node>::clock::now() - std::chrono::seconds{args_.timeout_s};
            std::vector<std::shared_ptr<connection<Node>>> idle;
            for (auto& [id, weak] : connections_)
                if (auto c = weak.lock(); c && c->idle_since(since)) idle.push_back(std::move(c));
            for (auto& c : idle) {
                ++counters_.timed_out_clients;
                c->close();
            }
            sweep_idle();
        });
    }

    /// Every 10 ms: while leading, a TICK once a key's expiry has passed by this clock (one
    /// at a time, so at most one per commit and per 10 ms), so that expired keys are removed
    /// by a replicated transaction. The only way a key expires: a key stays readable until
    /// then, so this bounds how late after its deadline it goes.
    void expire_due() {
        expiry_timer_.expires_after(std::chrono::milliseconds{10});
        expiry_timer_.async_wait([this](boost::system::error_code e) {
            if (e || stopping_) return;
            announce_master();
            // A key's expiry, or a TAGGED client's session's (kv_options::session_expiry_ms).
            auto due = node_.machine().next_expiry();
            if (const auto session = node_.machine().next_session_expiry())
                due = due ? std::min(*due, *session) : *session;
            if (tick_in_flight_ || !due || *due > wall_clock_ms()) return expire_due();
            const zab::asio::node_status s = node_.status();
            if (s.established && s.leader == args_.id) {
                auto txn = zab::kv::encode(
                    zab::kv::command{zab::kv::tick_op{}, {}, wall_clock_ms()});
                if (txn) {
                    tick_in_flight_ = true;
                    ++counters_.ticks_proposed;
                    node_.async_propose(std::move(txn).value(),
                                        [this](boost::system::error_code, zab::asio::reply) {
                                            tick_in_flight_ = false;
                                        });
                }
            }
            expire_due();
        });
    }

    /// SIGHUP: reloads the credentials (the file comment); what fails keeps the old ones.
    void await_reload() {
        reload_signal_.async_wait([this](boost::system::error_code e, int) {
            if (e || stopping_) return;
            reload();
            await_reload();
        });
    }

    void reload() {
        bool ok = true;
        if (args_.peer_tls()) {
            if (!node_.transport().reload_credentials(args_.peer_tls_options())) ok = false;
        }
        if (args_.client_tls()) {
            auto context = make_client_tls_context(args_);
            if (auto* problem = std::get_if<std::string>(&context)) {
                zab::log(zab::log_level::error, "kv_server {}: client TLS not reloaded: {}",
                         args_.id, *problem);
                ok = false;
            } else {
                client_tls_ = std::get<0>(std::move(context));
            }
        }
        auto users = load_users(args_);
        if (auto* problem = std::get_if<std::string>(&users)) {
            zab::log(zab::log_level::error, "kv_server {}: passwords not reloaded: {}", args_.id,
                     *problem);
            ok = false;
        } else {
            users_ = std::get<0>(std::move(users));
        }
        ++(ok ? counters_.credential_reloads : counters_.credential_reload_failures);
        zab::log(ok ? zab::log_level::warn : zab::log_level::error,
                 "kv_server {}: SIGHUP: credentials reloaded{} (new connections use them)",
                 args_.id, ok ? "" : " in part: see the errors above");
    }

    /// SIGINT/SIGTERM: stop taking clients, stop the node (its in-flight operations
    /// complete), close every connection. io_context::run then returns when all is done.
    void shutdown() {
        if (stopping_) return;
        stopping_ = true;
        zab::log(zab::log_level::warn, "kv_server {}: stopping", args_.id);
        boost::system::error_code ignored;
        acceptor_.close(ignored);
        reload_signal_.cancel(ignored);
        accept_retry_.cancel();
        idle_sweep_.cancel();
        expiry_timer_.cancel();
        if (metrics_http_) metrics_http_->stop();
        node_.stop();
        auto open = connections_;  // close() erases from connections_
        for (auto& [id, weak] : open)
            if (auto c = weak.lock()) c->close();
    }

    boost::asio::io_context& io_;
    Node& node_;
    const server_args& args_;
    const zab::metrics_registry& registry_;
    std::optional<zab::kv::metrics_http_server> metrics_http_;  ///< --metrics-port
    tcp::acceptor acceptor_;
    boost::asio::signal_set signals_;
    boost::asio::signal_set reload_signal_;
    boost::asio::steady_timer accept_retry_;
    boost::asio::steady_timer idle_sweep_;
    boost::asio::steady_timer expiry_timer_;
    bool tick_in_flight_ = false;
    std::vector<char> read_buffer_;
    std::map<std::uint64_t, std::weak_ptr<connection<Node>>> connections_;
    zab::kv::write_pool write_pool_;        ///< the writes proposed at once, shared in turn
    /// The connections in line for a write slot, held until granted (write_pool_).
    std::map<std::uint64_t, std::shared_ptr<connection<Node>>> slot_waiters_;
    zab::kv::output_budget output_budget_;  ///< --max-output-bytes over all connections
    std::uint64_t last_connection_id_ = 0;
    server_counters counters_;
    bool stopping_ = false;
    bool out_of_descriptors_ = false;
    std::shared_ptr<const zab::kv::user_table> users_;
    std::shared_ptr<boost::asio::ssl::context> client_tls_;  ///< null: plaintext clients
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    // announce_master: the leader's client address last announced, and whether it was lost.
    std::string announced_master_;
    bool master_down_ = false;
};

zab::asio::node_options node_options_for(const server_args& args) {
    zab::asio::node_options o;
    // The group as this replica starts with it: every --peers entry, or, for a new member, the
    // others (its data directory holds the real one once a reconfiguration added it).
    std::vector<zab::member> members;
    for (const auto& [id, endpoint] : args.peers) {
        if (args.new_member && id == args.id) continue;
        zab::member m{id, zab::learner_type::participant};
        // Carried so that a not_leader reply names the leader's client address
        // (member::client_address); a reconfiguration's members bring their own.
        if (const auto client = args.client_addresses.find(id); client != args.client_addresses.end())
            m.client_address = client->second;
        members.push_back(std::move(m));
    }
    o.config = zab::configuration::make(std::move(members)).value();
    o.leader_wait = std::chrono::milliseconds{args.leader_wait_ms};
    o.tick = std::chrono::milliseconds{args.tick_ms};
    o.cluster_id = args.cluster_id;  // once: the peer and the transport take it
    o.peer.snapshot_every = args.snapshot_every;
    o.peer.non_voter_until_synced = args.join;
    o.peer.snapshot_every_bytes = args.snapshot_every_bytes;
    if (args.lease_reads) o.peer.read_lease_ticks = o.peer.sync_limit_ticks;  // §7.1
    // The session options are replicated behaviour: a replica started with others refuses
    // to follow (and is refused), instead of answering a retry differently (§4.2).
    o.peer.agreed_fingerprint = zab::session_fingerprint(zab::kv::kv_options{}.sessions());
    // The largest write is refused by the session before it is proposed; zab refuses
    // anything larger too (definitely), and every replica's log holds one (see below).
    o.peer.max_txn_bytes = static_cast<std::uint32_t>(max_txn_bytes);
    o.transport.self = args.id;
    o.transport.peers = args.peers;
    // A restarted replica should rejoin quickly: cap the dial back-off at half a second.
    o.transport.reconnect_max = std::chrono::milliseconds{500};
    return o;
}

template <typename Log>
int serve(const server_args& args, Log& log) {
    // One node type, plaintext or mutual TLS between replicas (kv_peer_security.hpp).
    using node_type = zab::asio::node<Log, zab::kv::kv_state_machine, zab::default_policies,
                                      zab::asio::basic_transport<zab::kv::peer_security>>;
    boost::asio::io_context io;
    // Two threads: a flush job and a snapshot being written (one of each at most) never
    // wait for each other.
    boost::asio::thread_pool disk{2};
    zab::kv::kv_state_machine machine{zab::kv::kv_options{}};
    // zab's distributions and events (INFO, --metrics-port); before the node, which reports to it.
    zab::metrics_registry registry;
    int status = 0;
    {
        // A memory_log's flush job has no disk work: handing it to the disk thread would
        // only cost two thread wake-ups per flush, so it runs on the node's executor.
        std::optional<boost::asio::any_io_executor> disk_executor;
        if constexpr (!std::is_same_v<Log, zab::memory_log>) disk_executor = disk.get_executor();
        zab::asio::node_options options = node_options_for(args);
        options.metrics = &registry;
        node_type node{io.get_executor(), std::move(options), log, machine,
                       std::move(disk_executor),
                       args.peer_tls() ? zab::kv::peer_security{args.peer_tls_options()}
                                       : zab::kv::peer_security{}};
        if (auto started = node.start(); !started) {
            fmt::print(stderr, "kv_server: replica {} cannot start: {}\n", args.id,
                       started.error().message());
            return 1;
        }
        server<node_type> srv{io, node, args, registry};
        if (auto problem = srv.start()) {
            fmt::print(stderr, "kv_server: {}\n", *problem);
            node.stop();
            return 1;
        }
        fmt::print("kv_server: replica {} serving RESP{} on {}:{} (peer port {}{}, {} log{}{})\n",
                   args.id, args.client_tls() ? " over TLS" : "", args.client_host,
                   args.client_port, node.transport().local_port(),
                   args.peer_tls() ? ", mutual TLS" : "", args.memory ? "memory" : "file",
                   srv.users()->auth_required() ? ", password required" : "",
                   args.metrics_port ? fmt::format(", metrics on port {}", srv.metrics_port())
                                     : std::string{});
        std::fflush(stdout);
        io.run();
        node.stop();
    }
    disk.join();
    fmt::print("kv_server: replica {} stopped\n", args.id);
    return status;
}

int open_and_serve(const server_args& args) {
    if (args.memory) {
        zab::memory_log log;
        return serve(args, log);
    }
    std::error_code ignored;
    const std::filesystem::path directory{args.data};
    if (directory.has_parent_path())
        std::filesystem::create_directories(directory.parent_path(), ignored);
    zab::file_log_options fo;
    fo.on_corruption =
        args.resync_on_corruption ? zab::corruption_policy::resync : zab::corruption_policy::refuse;
    fo.directory = args.data;
    fo.cluster_id = args.cluster_id;
    fo.replica_id = args.id;
    // One record must hold the largest write (max_txn_bytes), and a commit window must hold
    // one record (file_log_options::problem).
    fo.max_record_bytes = static_cast<std::uint32_t>(max_txn_bytes + 4096);
    fo.group_commit_window_bytes = 2 * fo.max_record_bytes;
    std::string why;
    auto opened = zab::file_log::open(fo, &why);
    if (!opened) {
        fmt::print(stderr, "kv_server: cannot open the data directory {}: {}\n", args.data, why);
        return 1;
    }
    zab::file_log log = std::move(opened).value();
    if (const auto snapshot = log.snapshot()) {
        // A checkpoint from an older kv_server: say so, rather than "unsupported version".
        const auto version = zab::kv::snapshot_image_version(snapshot->state.view());
        if (version && *version != zab::kv::snapshot_version &&
            *version != zab::kv::snapshot_version_strings) {
            fmt::print(stderr, "kv_server: cannot restore {}: {}\n", args.data,
                       zab::kv::snapshot_version_problem(*version));
            return 1;
        }
    }
    if (log.resynced_after_corruption()) {
        // Its history is gone: it must not vote on what it no longer holds (ZOOKEEPER-261).
        fmt::print(stderr, "kv_server: {}; joining as a non-voter until a leader syncs it\n",
                   why.empty() ? std::string{"the data directory was resynced after corruption"}
                               : why);
        server_args joining = args;
        joining.join = true;
        return serve(joining, log);
    }
    return serve(args, log);
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = parse_args(argc, argv);
    if (auto* problem = std::get_if<std::string>(&parsed)) {
        if (!problem->empty()) fmt::print(stderr, "kv_server: {}\n", *problem);
        fmt::print(stderr, "{}", usage_text);
        return problem->empty() ? 0 : 2;
    }
    const server_args& args = std::get<server_args>(parsed);
    zab::set_log_level(args.log_level);
    // A client that disconnects while we write must not kill the process.
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return open_and_serve(args);
    } catch (const std::exception& e) {
        // Nothing is meant to throw; if Boost.Asio does (e.g. out of descriptors), say so.
        fmt::print(stderr, "kv_server: fatal: {}\n", e.what());
        return 1;
    }
}
