// zab/net/tcp_transport_options.hpp — what `zab::asio::tcp_transport` is configured with,
// what it reports to (the handler), and what it counts.
//
// No Boost.Asio here: a driver or a configuration loader can use these types without it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/error.hpp"
#include "zab/core/types.hpp"
#include "zab/net/endpoint.hpp"
#include "zab/net/handshake.hpp"

namespace zab::asio {

/// What the transport knows a peer id as (`tcp_transport::peer_info`).
enum class peer_kind : std::uint8_t {
    member,   ///< in the member list (options.peers, then update_members): dialed if lower
    joiner,   ///< not a member: it connected to us (a replica joining, docs/protocol.md §9)
    retired,  ///< a member no longer: never dialed again, its connections still accepted
};

constexpr std::string_view to_string(peer_kind kind) noexcept {
    switch (kind) {
        case peer_kind::member: return "member";
        case peer_kind::joiner: return "joiner";
        case peer_kind::retired: return "retired";
    }
    return "?";
}

/// One peer as the transport sees it.
struct transport_peer {
    peer_kind kind = peer_kind::member;
    tcp_endpoint address;    ///< where it is dialed (an empty host: unknown)
    bool dialed_by_us = false;  ///< its id is below ours (and it is a member with an address)
    bool connected = false;     ///< it has an established connection
};

/// Options of `tcp_transport`, checked by `problem()` / `validate()` (and by `start()`).
struct tcp_transport_options {
    /// This replica's id: a key of `peers`, not 0 (reserved, see config.hpp).
    peer_id self = 0;

    /// The group's identity, exchanged in the handshake: a replica of another group is
    /// refused. Use the peer's `options::group_id`.
    std::uint64_t cluster_id = 0;

    /// Every member of the group, this replica included; self's entry is where to listen
    /// (port 0: any free port, see `tcp_transport::local_port()`). The higher id of each pair
    /// dials the lower one, so the endpoints of higher ids are never dialed from here. The
    /// list changes with `tcp_transport::update_members` (reconfiguration, §9).
    std::map<peer_id, tcp_endpoint> peers;

    /// The member list this replica was started with, as the handshake compares it
    /// (handshake.hpp): `configuration::version()` and `configuration::digest()`. A member at
    /// the same version with another digest is refused, on both sides, with a reason. The
    /// node sets both from its configuration; a digest left at 0 is computed from the ids in
    /// `peers`, every one counted a voter.
    std::uint64_t config_version = 0;
    std::uint64_t config_digest = 0;

    /// The largest whole frame (header and payload) accepted from a peer, checked from the
    /// header before anything is allocated for the payload. The default accepts exactly what
    /// the codec's default limits accept.
    std::size_t max_frame_size = frame_header_size + codec_limits{}.max_payload_bytes;

    /// Bound on the bytes queued for one connection (frames being written included). A send
    /// that would exceed it closes that connection instead (the peer resynchronises after
    /// reconnecting): never blocks, never grows without bound. Keep it above the largest
    /// frame the peer sends (a SNAP): a frame that cannot fit closes the connection each time.
    std::size_t max_queued_bytes_per_peer = 64u << 20;

    /// Queued frames are gathered into one write of up to this many bytes.
    std::size_t max_gather_bytes = 1u << 20;

    /// A connection that has not completed its handshake (TCP connect included, when dialing)
    /// within this time is closed.
    std::chrono::milliseconds handshake_timeout{5000};

    /// Reconnection back-off bounds (backoff.hpp): the dialer retries forever while started.
    std::chrono::milliseconds reconnect_min{50};
    std::chrono::milliseconds reconnect_max{2000};

    /// At most this many inbound connections may be in their handshake at once; beyond that a
    /// new connection is closed as soon as it is accepted (a flood cannot exhaust memory or
    /// descriptors, and the real peers, already connected, are not disturbed).
    std::size_t max_pending_handshakes = 64;

    /// At most this many of those may come from one source address (a host that floods the
    /// port cannot take every slot from the members). Counted in `too_many_pending` too.
    std::size_t max_pending_handshakes_per_address = 16;

    /// A member whose connection is closed for bad frames (after its handshake: it is
    /// authenticated, and misbehaving) is forgiven `misbehaviour_burst` times per source
    /// address; after that its handshakes from that address are refused (`quarantined`), and
    /// if this replica dials it, it is not dialed, for a delay that doubles with each further
    /// drop, from `quarantine_min` to `quarantine_max` (with jitter, as backoff.hpp). Per
    /// address, so that over plaintext someone claiming the member's id elsewhere cannot get
    /// the real one quarantined. An address that behaves for `quarantine_max` starts afresh.
    unsigned misbehaviour_burst = 8;
    std::chrono::milliseconds quarantine_min{1000};
    std::chrono::milliseconds quarantine_max{60000};

    /// The lower id of a pair never dials while the higher one does; but a member that does
    /// not count us a member any more — a reconfiguration removed us while we were down
    /// (docs/protocol.md §9) — never dials us either, and without a connection we would never
    /// hear of our removal. So a member above our id that has had no connection to us for
    /// this long is *probed*: dialed by us, once per `probe_after` until connected. A peer
    /// that counts us a member answers that it dials us (a refusal saying so, not a
    /// contradiction) and dials at once; one that retired us accepts, and its core tells ours
    /// that we were removed. Also what brings back a pair whose dialer is in a long back-off.
    std::chrono::milliseconds probe_after{5000};

    /// A replica whose id is not a member (not in `peers`, nor added by `update_members`)
    /// may connect: it is joining the group (docs/protocol.md §9; the core lets it follow
    /// without a vote). At most this many distinct such ids have a connection (or a handshake
    /// past its hello) at once; the next is refused (`too_many_joiners`, logged). 0 refuses
    /// every id that is not a member. With TLS its certificate must name the id it claims.
    std::size_t max_joiners = 16;

    /// Empty if the options are usable, else the first problem found, naming the field.
    std::string problem() const {
        if (self == 0) return "self must not be 0 (peer id 0 is reserved)";
        if (!peers.contains(self)) return fmt::format("peers must contain self ({})", self);
        if (peers.contains(0)) return "peers must not contain peer id 0 (reserved)";
        for (const auto& [id, endpoint] : peers) {
            if (endpoint.host.empty()) return fmt::format("peers[{}].host must not be empty", id);
            if (id < self && endpoint.port == 0)
                return fmt::format("peers[{}].port must not be 0: this replica dials it", id);
        }
        if (max_frame_size < frame_header_size)
            return fmt::format("max_frame_size must be at least {}", frame_header_size);
        if (max_queued_bytes_per_peer == 0) return "max_queued_bytes_per_peer must not be 0";
        if (max_gather_bytes == 0) return "max_gather_bytes must not be 0";
        if (handshake_timeout <= std::chrono::milliseconds::zero())
            return "handshake_timeout must be positive";
        if (reconnect_min <= std::chrono::milliseconds::zero())
            return "reconnect_min must be positive";
        if (reconnect_max < reconnect_min) return "reconnect_max must not be below reconnect_min";
        if (max_pending_handshakes == 0) return "max_pending_handshakes must be at least 1";
        if (max_pending_handshakes_per_address == 0)
            return "max_pending_handshakes_per_address must be at least 1";
        if (quarantine_min <= std::chrono::milliseconds::zero())
            return "quarantine_min must be positive";
        if (quarantine_max < quarantine_min) return "quarantine_max must not be below quarantine_min";
        if (probe_after <= std::chrono::milliseconds::zero()) return "probe_after must be positive";
        return {};
    }

    result<void> validate() const {
        if (!problem().empty()) {
            return make_error_code(errc::invalid_options);
        }
        return success();
    }
};

/// What the transport reports, as the `zab::transport` concept describes (concepts.hpp). All
/// three run on the transport's executor, never from inside `send()` or `close()`, and never
/// after `stop()` returned. An empty function ignores the event. A handler may call any member
/// of the transport, `stop()` and destroying it included.
struct transport_handler {
    /// A connection to `peer` completed its handshake both ways. It is now the peer's current
    /// connection: `send` to it is delivered, in order.
    std::function<void(peer_id peer, connection_id connection)> on_connected;

    /// Exactly once for each `on_connected` (unless `stop()` came first): the connection is
    /// gone and anything in flight on it is lost. Comes before the `on_connected` of the
    /// peer's next connection.
    std::function<void(peer_id peer, connection_id connection)> on_disconnected;

    /// One whole frame (header and payload, header validated, payload not decoded) from
    /// `peer` on `connection`, in the order sent. Never after that connection's
    /// `on_disconnected`.
    std::function<void(peer_id peer, connection_id connection, const shared_bytes& frame)>
        on_receive;
};

/// Why handshakes failed, counted (and logged) per reason.
struct handshake_rejections {
    std::uint64_t bad_magic = 0;         ///< not a zab hello (random bytes, a frame, HTTP…)
    std::uint64_t bad_version = 0;       ///< a handshake version this build does not speak
    std::uint64_t malformed = 0;         ///< unknown message kind, reserved bits set
    std::uint64_t wrong_cluster = 0;     ///< a replica of another group
    std::uint64_t unknown_peer = 0;      ///< our own id
    std::uint64_t too_many_joiners = 0;  ///< not a member, and max_joiners others are connected
    std::uint64_t unexpected_peer = 0;   ///< a member, but not the one the message is for
    /// A member that this replica dials dialed it (a probe): answered "I dial you", and dialed
    std::uint64_t wrong_direction = 0;
    std::uint64_t timeout = 0;           ///< not finished within handshake_timeout
    std::uint64_t too_many_pending = 0;  ///< closed at once: max_pending_handshakes reached
    /// Of those, closed because max_pending_handshakes_per_address was reached.
    std::uint64_t too_many_pending_from_address = 0;
    std::uint64_t quarantined = 0;       ///< a member quarantined for bad frames (see options)
    std::uint64_t closed_by_remote = 0;  ///< the other end closed (or failed) mid-handshake
    /// Members that contradict this one (answered with a refusal, see `member_conflict`):
    std::uint64_t different_membership = 0;  ///< same configuration version, other members
    std::uint64_t duplicate_id = 0;  ///< a second live process with a member's id
    std::uint64_t refused_by_peer = 0;  ///< a member refused us (our conflicts say why)
    /// Refused by the stream's credentials (tls_security.hpp; never with plaintext):
    std::uint64_t refused_tls_no_certificate = 0;  ///< the peer presented no certificate
    std::uint64_t refused_tls_untrusted = 0;    ///< not signed by the cluster CA (or invalid)
    std::uint64_t refused_tls_expired = 0;      ///< expired, or not valid yet
    std::uint64_t refused_tls_wrong_identity = 0;  ///< does not name the member id claimed
    std::uint64_t refused_tls_handshake = 0;    ///< any other TLS failure (not TLS, a version)
};

/// Why a handshake failed: the counter that moves and the reason logged.
struct handshake_refusal {
    std::uint64_t handshake_rejections::*counter = nullptr;
    std::string reason;
};

/// A member that contradicts this replica, as the handshakes found it: the latest finding
/// per (peer, reason), kept while the transport lives (a duplicate process does not go away
/// by being refused). Read with `tcp_transport::conflicts()`; the node's status carries them.
struct member_conflict {
    peer_id peer = 0;
    refusal_reason reason = refusal_reason::none;
    bool refused_us = false;  ///< that member refused us (else we refused it)
    std::string detail;       ///< the log line's explanation, addresses included
    std::uint64_t times = 0;  ///< handshakes refused for this reason so far
    std::chrono::steady_clock::time_point last;  ///< when the latest one was
};

/// What the transport did since it was constructed. Read with `tcp_transport::counters()`.
struct transport_counters {
    std::uint64_t connections_accepted = 0;     ///< inbound TCP connections accepted
    std::uint64_t connections_dialed = 0;       ///< outbound TCP connections established
    std::uint64_t dial_failures = 0;            ///< outbound connects refused, failed, timed out
    std::uint64_t connections_established = 0;  ///< handshakes completed (`on_connected`)
    std::uint64_t connections_lost = 0;         ///< `on_disconnected` reported
    handshake_rejections rejected;
    std::uint64_t frames_sent = 0;
    std::uint64_t bytes_sent = 0;               ///< frame bytes written
    std::uint64_t frames_received = 0;
    std::uint64_t bytes_received = 0;           ///< frame bytes read (partial frames included)
    std::uint64_t malformed_frames = 0;         ///< a frame header that is not a zab header
    std::uint64_t oversized_frames = 0;         ///< a frame above max_frame_size
    std::uint64_t queue_overflows = 0;          ///< connections closed by a full send queue
    std::uint64_t replaced_connections = 0;     ///< closed because the peer connected again
    std::uint64_t quarantines = 0;              ///< quarantines begun (bad frames, see options)
    std::uint64_t stale_sends_dropped = 0;      ///< sends naming a connection no longer current
    std::uint64_t joiners_admitted = 0;  ///< ids that are not members let in (first handshake)
    std::uint64_t resolve_failures = 0;  ///< a learned member's host name did not resolve
    /// Dials of a member above our id, silent for probe_after (see the options): attempts,
    /// and those it answered "I dial you" (it counts us a member, and dials now).
    std::uint64_t probes = 0;
    std::uint64_t probes_dialed_back = 0;
};

}  // namespace zab::asio
