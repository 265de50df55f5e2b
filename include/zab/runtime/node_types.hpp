// zab/runtime/node_types.hpp — what zab::asio::node takes and gives: its options, a call's
// options, a client operation's reply, the node's status. No Boost.Asio: a source that only
// configures a node or reads its status, and the compile firewall (zab/runtime/replica.hpp),
// include this instead of node.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/config.hpp"
#include "zab/core/metrics.hpp"
#include "zab/core/options.hpp"
#include "zab/core/roles.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"
#include "zab/net/endpoint.hpp"
#include "zab/net/tcp_transport_options.hpp"

namespace zab::asio {

/// Everything a node needs to know.
struct node_options {
    /// The group's identity, given once: the node passes it to the peer
    /// (`options::group_id`) and the transport (`tcp_transport_options::cluster_id`), and
    /// `start()` refuses a log of another cluster (`file_log_options::cluster_id`) or one of
    /// those fields set to something else. 0: the log's (`file_log_options::cluster_id`)
    /// when the log names one and neither field is set — the id is then given once, to the
    /// log; else the two fields as given, which must agree.
    std::uint64_t cluster_id = 0;
    /// The group's members (voters and observers) as this replica is started with them; a
    /// log that holds reconfigurations overrides it (§9). A replica not in it joins the group
    /// (options::non_voter_until_synced; its id above every member's: see the file comment).
    configuration config;
    options peer;                    ///< the core's options: timing in ticks, bounds, compaction
    tcp_transport_options transport; ///< `transport.self` is this replica; its peers' addresses
    /// How long one tick of the peer's clock lasts (every duration in `peer` counts ticks).
    std::chrono::milliseconds tick{100};
    /// Where the peer and the node report distributions and events (zab/core/metrics.hpp;
    /// a zab::metrics_registry, zab/runtime/metrics_registry.hpp, is ready-made), or nullptr:
    /// nothing is measured. It must outlive the node; it is called on the node's executor.
    metrics_sink* metrics = nullptr;
    /// `call_options::leader_wait` for the `async_propose` and `async_sync` calls that give
    /// no call_options. 0: a call without an established leader fails `not_leader` at once.
    /// Default 3 s: an election after a crash that the connections notice takes a few
    /// finalize waits and a sync (well under a second on a LAN with the default 100 ms
    /// tick), so calls made during one complete instead of failing, and a group that has
    /// lost its quorum still answers within a client's patience. Scale it with `tick`.
    std::chrono::milliseconds leader_wait{3000};
};

/// Options of one `async_propose` or `async_sync` call.
struct call_options {
    /// While this replica has no established leader (it is electing, or syncing with a new
    /// leader), or the leader it knew refused the request because it is no longer leading
    /// (`not_leader`) or hands its leadership over (`transferring`), the call waits up to
    /// this long — measured from the call, checked on the node's ticks — for a leader to be
    /// established, then goes through it. Only refusals that are definite (the request was
    /// never proposed) are retried, so a write is never proposed twice. When the wait ends
    /// without a leader: `not_leader`. 0: no waiting.
    std::chrono::milliseconds leader_wait{0};
};

/// `options.transport` with the membership the handshake compares set from `options.config`
/// (unless the caller set a digest itself).
inline tcp_transport_options transport_options_of(const node_options& options) {
    tcp_transport_options transport = options.transport;
    if (options.cluster_id != 0 && transport.cluster_id == 0) transport.cluster_id = options.cluster_id;
    if (transport.config_digest == 0) {
        transport.config_version = options.config.version();
        transport.config_digest = options.config.digest();
    }
    return transport;
}

/// What a client operation completes with, beside its error code.
struct reply {
    /// Success: the write's zxid, for a sync the zxid applied here, for a reconfiguration
    /// the new configuration's version.
    zxid id;
    peer_id leader = 0;  ///< with `not_leader`: the leader this replica knows of, 0 if none
    /// That leader's peer address, if known (its `member::address`, or transport.peers).
    std::optional<tcp_endpoint> leader_address;
    /// That leader's client address ("host:port" where the application serves clients),
    /// when the configuration carries one (`member::client_address`); empty otherwise.
    std::string leader_client_address;
    /// A write that succeeded: what the state machine's `apply` returned for it here
    /// (zab::result_machine; empty for one whose `apply` returns void).
    shared_bytes response;
    /// A write that succeeded but reached this replica inside a snapshot: `response` is
    /// unknown (the write is applied; docs/protocol.md §6.6).
    bool response_unknown = false;
};

/// One learner as the leader sees it.
struct follower_status {
    peer_id id = 0;
    learner_type type = learner_type::participant;
    bool serving = false;  ///< synced and receiving the broadcast
    zxid last_acked;       ///< the highest proposal it acknowledged (voters only)
    /// Committed transactions of the current epoch it has not acknowledged (voters), or 0.
    std::uint64_t lag = 0;
};

/// A snapshot of the node's state, for the application's status pages.
struct node_status {
    peer_state role = peer_state::looking;
    bool established = false;  ///< leading with a quorum, or following a leader (UPTODATE)
    epoch_t epoch = 0;         ///< current epoch (durable)
    peer_id leader = 0;        ///< the leader it follows or is, when established
    zxid last_logged, last_committed, last_applied;
    std::vector<follower_status> followers;  ///< when leading
    std::error_code failure;                 ///< set once storage failed (terminal)
    /// Members that contradict this one (a different member list, a duplicate id), as the
    /// transport's handshakes found them; empty in a consistent group.
    std::vector<member_conflict> conflicts;
    /// The committed configuration (§9): its version (0 until the first reconfiguration
    /// commits) and members, with the addresses the configuration carries.
    configuration config;
    bool reconfig_pending = false;  ///< a reconfiguration is logged here, not committed yet
    bool removed = false;  ///< a reconfiguration removed this replica: it stopped taking part
    /// How it last synced with a leader: DIFF, TRUNC or SNAP, records, bytes, ticks
    /// (zab/core/roles.hpp); nothing until it has followed one.
    std::optional<sync_summary> last_sync;
};

}  // namespace zab::asio
