// zab/net/tcp_transport_core.hpp — the logic behind `zab::asio::tcp_transport`.
//
// Read tcp_transport.hpp first for what the transport promises. This file is how:
//
// - Who dials. The higher id of each pair dials the lower one, which only accepts. ZooKeeper
//   keeps the connection the higher sid initiated and closes the other (docs/protocol.md §3.1);
//   here the other is never opened. One exception: a member above our id that has had no
//   connection to us for `probe_after` is *probed* — dialed by us (issue 34 defect 12: a
//   reconfiguration that removed us while we were down retired us at every member, so none
//   dials us, and we would never hear that we were removed). A member that counts us a
//   member answers with a `dial_back` refusal (counted as `wrong_direction`, no conflict)
//   and dials us at once; one that retired us accepts the connection like any retired
//   member's, and its core tells ours of the removal (§9).
// - Who is a member (docs/protocol.md §9). A slot per peer id: a *member* (options.peers,
//   then `update_members` as reconfigurations commit; its address may change: the next dial
//   goes there), a *joiner* (an id that is no member connected: a replica joining the group,
//   which is why a joiner's id must be above every member's — the members never dial it; at
//   most `max_joiners` in use at once), or *retired* (a member no longer: never dialed, its
//   connections still accepted). Members' and retired members' slots are never erased, so a
//   handler that finds a connection's peer finds its slot; a joiner's slot goes only when
//   nothing references it.
// - One connection per peer. A peer slot holds the current (established) connection and, on
//   the dialing side, the attempt in progress. An accepted connection that completes its
//   handshake for a peer that already has one replaces it: that peer restarted, or its old
//   connection is half-open and it noticed first. The old one is reported disconnected first.
// - Members that contradict each other (issue 15 defect 9). Every handshake message carries
//   the sender's configuration version and digest and a random process instance. A member at
//   our version with another digest was started with another member list: refused with a
//   refusal message, on both sides, counted, logged and kept in `conflicts()`. A peer whose
//   process instance changes replaced its old connection (a restart); if the replaced
//   instance then comes back while the new one is still connected, two live processes hold
//   that id: the returning one is refused as a duplicate (instead of the two replacing each
//   other forever), and both addresses are named.
// - Lifetime. The core is owned by the `tcp_transport` through a shared_ptr; every
//   completion handler holds a weak_ptr to it and a shared_ptr to its connection (which owns
//   the socket and the buffers the operation uses). A handler that finds the core gone or
//   stopped returns at once, so nothing is called after `stop()`, and destroying the
//   transport right after `stop()` is safe while operations are still being cancelled.
// - Re-entrancy. A user handler may call anything (send, close, stop, destroy the transport):
//   the core is kept alive by the handler that called it, and every step re-checks `stopped_`
//   and the connection's state after calling out. `send()` and `close()` never call out: a
//   disconnection they cause is posted, and delivered before that peer's next on_connected.
// - The stream. `Security` (transport_security.hpp) says what a connection's stream is and how
//   it is secured: a connection is accepted or dialed as TCP, then goes through the policy's
//   own handshake (TLS; nothing for plaintext), then zab's hello. The policy checks that the
//   stream's credentials belong to the member id the hello claims (or that we dialed) before
//   that id is used for anything: an impostor is refused before it could replace, or be taken
//   for a duplicate of, a member's connection. Everything else here is the same code for every
//   policy.
// - Hostile connections (issue 20). The handshake deadline covers the connect, the policy's
//   handshake and the hello; at most `max_pending_handshakes` inbound connections are in their
//   handshake, and at most `max_pending_handshakes_per_address` from one source address; a
//   member dropped for bad frames more than `misbehaviour_burst` times is quarantined (its
//   handshakes refused, not dialed) for a doubling delay.
// - Writes. `send()` only queues; the write is posted (one per connection at a time), so the
//   frames sent by every handler that runs before it leave in one gathered system call.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/config.hpp"
#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/types.hpp"
#include "zab/net/backoff.hpp"
#include "zab/net/handshake.hpp"
#include "zab/net/tcp_connection.hpp"
#include "zab/net/tcp_transport_options.hpp"
#include "zab/net/transport_security.hpp"

namespace zab::asio::detail {

using tcp = boost::asio::ip::tcp;

inline std::string to_string(const tcp::endpoint& endpoint) {
    const auto address = endpoint.address();
    return address.is_v6() ? fmt::format("[{}]:{}", address.to_string(), endpoint.port())
                           : fmt::format("{}:{}", address.to_string(), endpoint.port());
}

template <transport_security Security>
class transport_core : public std::enable_shared_from_this<transport_core<Security>> {
public:
    transport_core(boost::asio::any_io_executor executor, tcp_transport_options options,
                   transport_handler handler, Security security)
        : executor_{std::move(executor)},
          options_{std::move(options)},
          handler_{std::move(handler)},
          security_{std::move(security)},
          acceptor_{executor_},
          accept_retry_timer_{executor_} {
        const auto seed = static_cast<std::uint64_t>(
            std::chrono::steady_clock::now().time_since_epoch().count());
        claim_.config_version = options_.config_version;
        claim_.config_digest = options_.config_digest;
        if (claim_.config_digest == 0) claim_.config_digest = digest_of_ids(options_.peers);
        std::random_device entropy;
        claim_.instance = (std::uint64_t{entropy()} << 32 | entropy()) ^ seed;
        if (claim_.instance == 0) claim_.instance = 1;
        seed_ = seed;
        for (const auto& [id, endpoint] : options_.peers) {
            if (id != options_.self) add_slot(id, peer_kind::member, endpoint);
        }
    }

    transport_core(const transport_core&) = delete;
    transport_core& operator=(const transport_core&) = delete;

    result<void> start() {
        if (stopped_ || started_) {
            zab::log(log_level::error, "tcp_transport {}: start() called twice or after stop()",
                     options_.self);
            return make_error_code(errc::invalid_argument);
        }
        if (const auto problem = options_.problem(); !problem.empty()) {
            zab::log(log_level::error, "tcp_transport {}: invalid options: {}", options_.self,
                     problem);
            return make_error_code(errc::invalid_options);
        }
        if (auto prepared = security_.prepare(options_.self); !prepared) return prepared.error();
        for (auto& [id, slot] : peers_) {
            // options.peers' names must resolve now; one update_members gave is resolved
            // when dialed (and retried).
            const auto given = options_.peers.find(id);
            if (!slot.dials() || given == options_.peers.end() || !(given->second == slot.address))
                continue;
            auto endpoints = resolve(slot.address, false);
            if (!endpoints) return endpoints.error();
            slot.endpoints = std::move(endpoints).assume_value();
        }
        const tcp_endpoint& self = options_.peers.at(options_.self);
        auto listen_on = resolve(self, true);
        if (!listen_on) return listen_on.error();
        const tcp::endpoint where = listen_on.assume_value().front();
        boost::system::error_code ec;
        acceptor_.open(where.protocol(), ec);
        if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
        if (!ec) acceptor_.bind(where, ec);
        if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
        if (!ec) local_port_ = acceptor_.local_endpoint(ec).port();
        if (ec) {
            zab::log(log_level::error, "tcp_transport {}: cannot listen on {}: {}", options_.self,
                     to_string(where), ec.message());
            boost::system::error_code ignored;
            acceptor_.close(ignored);
            return std::error_code{ec};
        }
        started_ = true;
        zab::log(log_level::info, "tcp_transport {}: listening on {}", options_.self,
                 to_string(acceptor_.local_endpoint(ec)));
        accept_next();
        for (auto& [id, slot] : peers_) {
            if (slot.dials()) dial(id);
            schedule_probe(id, slot);
        }
        return success();
    }

    /// The member list changed (a reconfiguration, docs/protocol.md §9): `members` is every
    /// member with its address (an empty host: unknown, not dialed), self's entry ignored;
    /// `config_version` and `config_digest` are what our handshakes claim from now on
    /// (handshake.hpp; a digest of 0 is computed from the ids, as at construction). A new id
    /// gets a slot (dialed if below ours); a changed address is dialed next time (an
    /// established connection stays); an id no longer listed is retired: never dialed again,
    /// its inbound connections still accepted (a removed member that restarts must still hear
    /// from the leader that it was removed). Host names are resolved when dialed; one that
    /// does not resolve is logged and tried again with the back-off. Before or after start().
    void update_members(const std::map<peer_id, tcp_endpoint>& members,
                        std::uint64_t config_version, std::uint64_t config_digest) {
        if (stopped_) return;
        claim_.config_version = config_version;
        claim_.config_digest = config_digest != 0 ? config_digest : digest_of_ids(members);
        for (const auto& [id, where] : members) {
            if (id == options_.self || id == 0) continue;
            auto it = peers_.find(id);
            if (it == peers_.end()) {
                add_slot(id, peer_kind::member, where);
                zab::log(log_level::info, "tcp_transport {}: peer {} is a member now (at {}{})",
                         options_.self, id, where.host.empty() ? "an unknown address" : to_string(where),
                         id < options_.self ? ", dialed by us" : "");
                if (started_) {
                    dial(id);
                    schedule_probe(id, peers_.at(id));
                }
                continue;
            }
            peer_slot& slot = it->second;
            if (slot.kind != peer_kind::member) {
                zab::log(log_level::info, "tcp_transport {}: peer {} ({}) is a member now",
                         options_.self, id, to_string(slot.kind));
                slot.kind = peer_kind::member;
            }
            if (!(slot.address == where)) {
                if (!slot.address.host.empty())
                    zab::log(log_level::info, "tcp_transport {}: peer {}'s address is now {} (was "
                             "{}): the next connection goes there", options_.self, id,
                             where.host.empty() ? "unknown" : to_string(where),
                             to_string(slot.address));
                slot.address = where;
                slot.endpoints.clear();
                slot.resolve_failed = false;
            }
            if (started_ && slot.dials() && !slot.redial_scheduled) dial(id);
            if (started_) schedule_probe(id, slot);
        }
        for (auto& [id, slot] : peers_) {
            if (slot.kind != peer_kind::member || members.contains(id)) continue;
            slot.kind = peer_kind::retired;
            zab::log(log_level::info, "tcp_transport {}: peer {} is no longer a member: not "
                     "dialed again (its connections are still accepted)", options_.self, id);
            slot.redial_scheduled = false;
            slot.redial_timer.cancel();
            slot.probe_scheduled = false;
            slot.probe_timer.cancel();
            if (slot.dialing) close_connection(slot.dialing, notify::now);
        }
    }

    /// What the transport knows of `id`: member, joiner or retired, its address, whether it
    /// is dialed from here and connected; nullopt for an id it never heard of.
    std::optional<transport_peer> peer_info(peer_id id) const {
        const auto it = peers_.find(id);
        if (it == peers_.end()) return std::nullopt;
        const peer_slot& slot = it->second;
        return transport_peer{slot.kind, slot.address, slot.dials(), slot.current != nullptr};
    }

    void stop() noexcept {
        if (stopped_) return;
        stopped_ = true;
        boost::system::error_code ignored;
        acceptor_.close(ignored);
        accept_retry_timer_.cancel();
        for (auto& [id, slot] : peers_) {
            slot.redial_timer.cancel();
            slot.probe_timer.cancel();
            if (slot.current) abort_io(*slot.current);
            if (slot.dialing) abort_io(*slot.dialing);
            slot.current.reset();
            slot.dialing.reset();
            slot.owed_disconnect.reset();
        }
        for (const auto& connection : pending_) abort_io(*connection);
        pending_.clear();
        if (started_) zab::log(log_level::info, "tcp_transport {}: stopped", options_.self);
    }

    void send(peer_id to, connection_id id, const shared_bytes& frame) {
        if (stopped_) return;
        const auto it = peers_.find(to);
        if (it == peers_.end() || !it->second.current || it->second.current->id != id) {
            ++counters_.stale_sends_dropped;
            return;
        }
        const connection_ptr connection = it->second.current;
        if (!connection->queue.push(frame)) {
            ++counters_.queue_overflows;
            zab::log(log_level::warn,
                     "tcp_transport {}: send queue to peer {} is full ({} bytes queued, a frame "
                     "of {} bytes, limit {}): closing connection {}, the peer resynchronises",
                     options_.self, to, connection->queue.queued_bytes(), frame.size(),
                     options_.max_queued_bytes_per_peer, id);
            close_connection(connection, notify::later);
            return;
        }
        schedule_write(connection);
    }

    void close(peer_id to, connection_id id) {
        if (stopped_) return;
        const auto it = peers_.find(to);
        if (it == peers_.end() || !it->second.current || it->second.current->id != id) return;
        zab::log(log_level::info, "tcp_transport {}: closing connection {} to peer {}",
                 options_.self, id, to);
        close_connection(it->second.current, notify::later);
    }

    const transport_counters& counters() const noexcept { return counters_; }
    const std::vector<member_conflict>& conflicts() const noexcept { return conflicts_; }
    const membership_claim& claim() const noexcept { return claim_; }
    std::uint16_t local_port() const noexcept { return local_port_; }
    std::size_t pending_handshakes() const noexcept { return pending_.size(); }
    Security& security() noexcept { return security_; }
    const Security& security() const noexcept { return security_; }

private:
    using connection_type = basic_connection<typename Security::stream_type>;
    using connection_ptr = std::shared_ptr<connection_type>;
    using clock = std::chrono::steady_clock;

    /// One member's bad-frame drops from one address.
    struct misbehaviour {
        unsigned drops = 0;
        clock::time_point last;
        clock::time_point until;  ///< quarantined until then
        backoff penalty;
    };

    struct peer_slot {
        peer_slot(const boost::asio::any_io_executor& executor, peer_kind kind_, bool lower,
                  tcp_endpoint address_, backoff retry_, std::uint64_t penalty_seed_)
            : kind{kind_}, lower_id{lower}, address{std::move(address_)}, redial_timer{executor},
              probe_timer{executor}, retry{retry_}, penalty_seed{penalty_seed_} {}

        peer_kind kind;
        /// Its id is below ours: while a member, we dial it ("the higher id dials").
        const bool lower_id;
        tcp_endpoint address;                  ///< where to dial it (empty host: unknown)
        std::vector<tcp::endpoint> endpoints;  ///< `address` resolved (start, or the next dial)
        bool resolve_failed = false;           ///< the last resolution failed (logged once)
        connection_ptr current;                ///< established, reported with on_connected
        connection_ptr dialing;                ///< our attempt in progress (dialer only)
        std::optional<connection_id> owed_disconnect;  ///< closed by send/close, not yet reported
        boost::asio::steady_timer redial_timer;
        bool redial_scheduled = false;
        boost::asio::steady_timer probe_timer;  ///< a member above our id: when to probe it
        bool probe_scheduled = false;
        backoff retry;
        /// Accepting side: process instances whose connection a newer instance replaced, and
        /// where they connected from (the newest last, at most `max_retired`).
        std::vector<std::pair<std::uint64_t, std::string>> retired;
        /// Bad frames after the handshake (options: misbehaviour_burst, quarantine_*), per
        /// source address: over plaintext anyone can claim this member's id, and must not get
        /// the real member quarantined by misbehaving in its name from elsewhere.
        std::map<std::string, misbehaviour> misbehaving;
        std::uint64_t penalty_seed;

        /// The latest end of a quarantine of this member (any address), or the epoch.
        clock::time_point quarantined_until() const {
            clock::time_point until{};
            for (const auto& [host, record] : misbehaving) until = std::max(until, record.until);
            return until;
        }

        /// Dialed by us: a member below our id whose address is known.
        bool dials() const noexcept {
            return kind == peer_kind::member && lower_id && !address.host.empty();
        }
        /// Probed by us when silent (options::probe_after): a member above our id whose
        /// address is known.
        bool probes() const noexcept {
            return kind == peer_kind::member && !lower_id && !address.host.empty();
        }
    };
    static constexpr std::size_t max_misbehaving_addresses = 64;
    static constexpr std::size_t max_retired = 8;

    enum class notify { now, later };

    // --- Completion handlers -----------------------------------------------------------------

    /// A completion handler that calls `step(connection, results...)` on this core, unless the
    /// core is gone or stopped by then.
    template <typename... Results>
    auto guarded(connection_ptr connection,
                 void (transport_core::*step)(const connection_ptr&, Results...)) {
        return [weak = this->weak_from_this(), connection = std::move(connection),
                step](Results... results) {
            const std::shared_ptr<transport_core> core = weak.lock();
            if (!core || core->stopped_) return;
            ((*core).*step)(connection, std::move(results)...);
        };
    }

    // --- Accepting ---------------------------------------------------------------------------

    void accept_next() {
        acceptor_.async_accept(
            [weak = this->weak_from_this()](boost::system::error_code ec, tcp::socket socket) {
                const std::shared_ptr<transport_core> core = weak.lock();
                if (!core || core->stopped_) return;
                core->on_accept(ec, std::move(socket));
            });
    }

    void on_accept(boost::system::error_code ec, tcp::socket socket) {
        if (ec) {
            // Out of descriptors, or a connection reset before it was accepted: try again a
            // little later rather than spinning.
            zab::log(log_level::warn, "tcp_transport {}: accept failed: {}", options_.self,
                     ec.message());
            accept_retry_timer_.expires_after(options_.reconnect_min);
            accept_retry_timer_.async_wait([weak = this->weak_from_this()](boost::system::error_code e) {
                const std::shared_ptr<transport_core> core = weak.lock();
                if (!core || core->stopped_ || e) return;
                core->accept_next();
            });
            return;
        }
        ++counters_.connections_accepted;
        boost::system::error_code ignored;
        const tcp::endpoint endpoint = socket.remote_endpoint(ignored);
        const std::string remote = to_string(endpoint);
        std::string host = endpoint.address().to_string();
        const std::size_t from_host = pending_by_host_.contains(host) ? pending_by_host_[host] : 0;
        const bool listener_full = pending_.size() >= options_.max_pending_handshakes;
        if (listener_full || from_host >= options_.max_pending_handshakes_per_address) {
            ++counters_.rejected.too_many_pending;
            if (!listener_full) ++counters_.rejected.too_many_pending_from_address;
            // One warning per saturation, not one per connection of a flood.
            zab::log(pending_full_logged_ ? log_level::debug : log_level::warn,
                     "tcp_transport {}: refused connection from {}: {} handshakes already "
                     "pending{}",
                     options_.self, remote, listener_full ? pending_.size() : from_host,
                     listener_full ? " (max_pending_handshakes)"
                                   : " from that address (max_pending_handshakes_per_address)");
            pending_full_logged_ = true;
            socket.close(ignored);
            accept_next();
            return;
        }
        socket.set_option(tcp::no_delay(true), ignored);
        auto connection = std::make_shared<connection_type>(
            security_.make_stream(std::move(socket)), next_id_++, true, peer_id{0}, options_);
        connection->remote = remote;
        connection->remote_host = std::move(host);
        pending_.insert(connection);
        ++pending_by_host_[connection->remote_host];
        start_handshake_timer(connection);
        secure(connection);
        accept_next();
    }

    /// The stream's own handshake (TLS), if it has one, then zab's hello exchange. Both are
    /// under the handshake deadline and the caps on pending handshakes.
    void secure(const connection_ptr& connection) {
        if constexpr (Security::has_handshake) {
            security_.async_handshake(connection->stream,
                                      connection->inbound ? handshake_role::server
                                                          : handshake_role::client,
                                      guarded(connection, &transport_core::on_secured));
        } else {
            on_secured(connection, {});
        }
    }

    void on_secured(const connection_ptr& connection, boost::system::error_code ec) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) return reject(connection, security_.classify_failure(connection->stream, ec));
        if (connection->inbound) return read_hello(connection, &transport_core::on_hello);
        // Dialing: the member we dialed must be the one whose credentials answered.
        if (auto why = security_.check_peer(connection->stream, connection->peer)) {
            return reject(connection, *why);
        }
        write_hello(connection, handshake(hello_kind::hello, connection->peer),
                    &transport_core::on_hello_written);
    }

    void on_hello(const connection_ptr& connection, boost::system::error_code ec, std::size_t) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) return handshake_broken(connection, ec);
        hello_message hello;
        if (auto why = check_hello(*connection, hello_kind::hello, hello)) {
            return reject(connection, *why);
        }
        const peer_id from = hello.from;
        if (from == options_.self || from == 0) {
            return reject(connection, {&handshake_rejections::unknown_peer,
                                       fmt::format("peer id {} is our own (or 0)", from)});
        }
        if (hello.to != options_.self) {
            return reject(connection,
                          {&handshake_rejections::unexpected_peer,
                           fmt::format("peer {} meant to reach peer {}, not us", from, hello.to)});
        }
        // The stream's credentials must be that member's (TLS), before anything else is
        // decided about it: an impostor can neither replace a connection nor be taken for a
        // duplicate or a member with another member list, nor take a joiner's place.
        if (auto why = security_.check_peer(connection->stream, from)) {
            return reject(connection, *why);
        }
        // An id that is no member: a replica joining the group (§9), within max_joiners.
        if (auto why = admit_joiner(from, connection->remote)) {
            return reject(connection, *why);
        }
        if (auto why = quarantine_of(from, connection->remote_host)) {
            return reject(connection, *why);
        }
        if (const auto found = peers_.find(from);
            found != peers_.end() && found->second.kind == peer_kind::member && found->second.lower_id) {
            return dial_back(connection, from, found->second);
        }
        if (auto detail = membership_mismatch(hello)) {
            return refuse(connection, from, refusal_reason::different_membership, *detail);
        }
        if (auto detail = duplicate_of(from, hello.claim.instance, connection->remote)) {
            return refuse(connection, from, refusal_reason::duplicate_id, *detail);
        }
        connection->peer = from;
        connection->remote_instance = hello.claim.instance;
        write_hello(connection, handshake(hello_kind::welcome, from),
                    &transport_core::on_welcome_written);
    }

    void on_welcome_written(const connection_ptr& connection, boost::system::error_code ec,
                            std::size_t) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) return handshake_broken(connection, ec);
        read_hello(connection, &transport_core::on_confirm);
    }

    void on_confirm(const connection_ptr& connection, boost::system::error_code ec, std::size_t) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) return handshake_broken(connection, ec);
        hello_message confirm;
        if (auto why = check_hello(*connection, hello_kind::confirm, confirm)) {
            return reject(connection, *why);
        }
        if (confirm.from != connection->peer || confirm.to != options_.self ||
            confirm.claim.instance != connection->remote_instance) {
            return reject(connection, {&handshake_rejections::unexpected_peer,
                                       fmt::format("confirm from {} to {} after a hello from {}",
                                                   confirm.from, confirm.to, connection->peer)});
        }
        forget_pending(connection);
        const auto found = peers_.find(connection->peer);
        ZAB_ASSERT(found != peers_.end(), "tcp_transport: a handshake past its hello without a slot");
        peer_slot& slot = found->second;
        if (slot.current) {
            retire(slot, *slot.current, connection->remote_instance);
            ++counters_.replaced_connections;
            zab::log(log_level::info,
                     "tcp_transport {}: peer {} connected again from {}: connection {} replaces "
                     "connection {}",
                     options_.self, connection->peer, connection->remote, connection->id,
                     slot.current->id);
            close_connection(slot.current, notify::now);
            if (stopped_ || connection->state != connection_state::handshaking) return;
        }
        establish(connection);
    }

    // --- Dialing -----------------------------------------------------------------------------

    /// Dials `id`: a member below our id, or, with `probe`, one above it (options::probe_after).
    void dial(peer_id id, bool probe = false) {
        const auto found = peers_.find(id);
        if (found == peers_.end()) return;
        peer_slot& slot = found->second;
        if (!probe) slot.redial_scheduled = false;
        if (stopped_ || !started_ || slot.current || slot.dialing) return;
        if (!(probe ? slot.probes() : slot.dials())) return;
        if (clock::now() < slot.quarantined_until())
            return probe ? schedule_probe(id, slot) : schedule_redial(id, slot);
        if (slot.endpoints.empty()) {
            // A member learned from update_members: resolved now, and on failure tried again
            // with the back-off (logged once until it resolves).
            auto endpoints = resolve(slot.address, false, !slot.resolve_failed);
            if (!endpoints) {
                ++counters_.resolve_failures;
                slot.resolve_failed = true;
                return probe ? schedule_probe(id, slot) : schedule_redial(id, slot);
            }
            slot.resolve_failed = false;
            slot.endpoints = std::move(endpoints).assume_value();
        }
        auto connection = std::make_shared<connection_type>(
            security_.make_stream(tcp::socket{executor_}), next_id_++, false, id, options_);
        connection->remote = to_string(slot.address);
        slot.dialing = connection;
        if (probe) {
            ++counters_.probes;
            zab::log(log_level::debug, "tcp_transport {}: no connection from peer {} for {} ms: "
                     "probing it", options_.self, id, options_.probe_after.count());
        }
        start_handshake_timer(connection);
        boost::asio::async_connect(connection->stream.lowest_layer(), slot.endpoints,
                                   guarded(connection, &transport_core::on_connect));
    }

    void on_connect(const connection_ptr& connection, boost::system::error_code ec,
                    tcp::endpoint endpoint) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) {
            ++counters_.dial_failures;
            zab::log(log_level::debug, "tcp_transport {}: cannot connect to peer {} at {}: {}",
                     options_.self, connection->peer, connection->remote, ec.message());
            return close_connection(connection, notify::now);
        }
        ++counters_.connections_dialed;
        connection->tcp_connected = true;
        connection->remote = to_string(endpoint);
        boost::system::error_code ignored;
        connection->stream.lowest_layer().set_option(tcp::no_delay(true), ignored);
        secure(connection);
    }

    void on_hello_written(const connection_ptr& connection, boost::system::error_code ec,
                          std::size_t) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) return handshake_broken(connection, ec);
        read_hello(connection, &transport_core::on_welcome);
    }

    void on_welcome(const connection_ptr& connection, boost::system::error_code ec, std::size_t) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) return handshake_broken(connection, ec);
        if (auto refusal = decode_hello(connection->hello_in);
            refusal && refusal.assume_value().kind == hello_kind::refusal &&
            refusal.assume_value().from == connection->peer) {
            return refused_by(connection, refusal.assume_value());
        }
        hello_message welcome;
        if (auto why = check_hello(*connection, hello_kind::welcome, welcome)) {
            return reject(connection, *why);
        }
        if (welcome.from != connection->peer || welcome.to != options_.self) {
            return reject(connection,
                          {&handshake_rejections::unexpected_peer,
                           fmt::format("we dialed peer {} and peer {} answered, addressing peer "
                                       "{}: check the endpoints",
                                       connection->peer, welcome.from, welcome.to)});
        }
        if (auto detail = membership_mismatch(welcome)) {
            return reject(connection, {&handshake_rejections::different_membership, *detail});
        }
        connection->remote_instance = welcome.claim.instance;
        write_hello(connection, handshake(hello_kind::confirm, connection->peer),
                    &transport_core::on_confirm_written);
    }

    void on_confirm_written(const connection_ptr& connection, boost::system::error_code ec,
                            std::size_t) {
        if (connection->state != connection_state::handshaking) return;
        if (ec) return handshake_broken(connection, ec);
        if (const auto found = peers_.find(connection->peer); found != peers_.end())
            found->second.dialing.reset();
        establish(connection);
    }

    void schedule_redial(peer_id id, peer_slot& slot) {
        if (stopped_ || !started_ || slot.current || slot.dialing || slot.redial_scheduled ||
            !slot.dials())
            return;
        slot.redial_scheduled = true;
        auto delay = slot.retry.next_delay();
        const auto now = clock::now();
        if (const auto until = slot.quarantined_until(); now < until) {
            delay = std::max(delay, std::chrono::ceil<std::chrono::milliseconds>(until - now));
        }
        zab::log(log_level::debug, "tcp_transport {}: dialing peer {} again in {} ms",
                 options_.self, id, delay.count());
        slot.redial_timer.expires_after(delay);
        slot.redial_timer.async_wait([weak = this->weak_from_this(), id](boost::system::error_code ec) {
            const std::shared_ptr<transport_core> core = weak.lock();
            if (!core || core->stopped_ || ec) return;
            core->dial(id);
        });
    }

    /// A member above our id (it dials us) with no connection: probed after probe_after,
    /// and again every probe_after until a connection is established either way.
    void schedule_probe(peer_id id, peer_slot& slot) {
        if (stopped_ || !started_ || slot.current || slot.dialing || slot.probe_scheduled ||
            !slot.probes())
            return;
        slot.probe_scheduled = true;
        slot.probe_timer.expires_after(options_.probe_after);
        slot.probe_timer.async_wait([weak = this->weak_from_this(), id](boost::system::error_code ec) {
            const std::shared_ptr<transport_core> core = weak.lock();
            if (!core || core->stopped_ || ec) return;
            const auto found = core->peers_.find(id);
            if (found == core->peers_.end()) return;
            found->second.probe_scheduled = false;
            core->dial(id, true);
        });
    }

    /// A member below our id — which we dial — dialed us: it has had no connection from us
    /// for its probe_after. Not a contradiction: answered with a `dial_back` refusal, and
    /// dialed now, without waiting out the back-off (it may be a member we retired and that
    /// does not know yet: then it was never dialed, and this dial tells its core, §9).
    void dial_back(const connection_ptr& connection, peer_id from, peer_slot& slot) {
        ++counters_.rejected.wrong_direction;
        zab::log(log_level::debug, "tcp_transport {}: peer {} probed us from {}: we dial it",
                 options_.self, from, connection->remote);
        hello_message refusal = handshake(hello_kind::refusal, from);
        refusal.reason = refusal_reason::dial_back;
        write_hello(connection, refusal, &transport_core::on_refusal_written);
        if (slot.current || slot.dialing) return;
        slot.retry.reset();
        slot.redial_scheduled = false;
        slot.redial_timer.cancel();
        dial(from);
    }

    // --- The handshake, both sides -----------------------------------------------------------

    /// A handshake failure: which counter moves, and why (for the log line).
    using rejection = handshake_refusal;

    void start_handshake_timer(const connection_ptr& connection) {
        connection->handshake_timer.expires_after(options_.handshake_timeout);
        connection->handshake_timer.async_wait(
            guarded(connection, &transport_core::on_handshake_timeout));
    }

    void on_handshake_timeout(const connection_ptr& connection, boost::system::error_code ec) {
        if (ec || connection->state != connection_state::handshaking) return;
        if (!connection->inbound && !connection->tcp_connected) {
            ++counters_.dial_failures;
            zab::log(log_level::debug, "tcp_transport {}: connecting to peer {} at {} timed out",
                     options_.self, connection->peer, connection->remote);
            return close_connection(connection, notify::now);
        }
        reject(connection, {&handshake_rejections::timeout,
                            fmt::format("no handshake within {} ms",
                                        options_.handshake_timeout.count())});
    }

    template <typename Step>
    void read_hello(const connection_ptr& connection, Step step) {
        boost::asio::async_read(connection->stream, boost::asio::buffer(connection->hello_in),
                                guarded(connection, step));
    }

    template <typename Step>
    void write_hello(const connection_ptr& connection, const hello_message& message, Step step) {
        connection->hello_out = encode_hello(message);
        boost::asio::async_write(connection->stream, boost::asio::buffer(connection->hello_out),
                                 guarded(connection, step));
    }

    /// Decodes the message just read into `message` and checks what every handshake message
    /// must satisfy; the reason to refuse it, if any.
    std::optional<rejection> check_hello(const connection_type& connection, hello_kind expected,
                                         hello_message& message) const {
        const auto decoded = decode_hello(connection.hello_in);
        if (!decoded) {
            const std::error_code error = decoded.error();
            auto counter = &handshake_rejections::malformed;
            if (error == errc::bad_magic) counter = &handshake_rejections::bad_magic;
            if (error == errc::unsupported_version) counter = &handshake_rejections::bad_version;
            return rejection{counter, fmt::format("not a valid {}: {}", to_string(expected),
                                                  error.message())};
        }
        message = decoded.assume_value();
        if (message.kind != expected) {
            return rejection{&handshake_rejections::malformed,
                             fmt::format("expected a {}, got a {}", to_string(expected),
                                         to_string(message.kind))};
        }
        if (message.cluster_id != options_.cluster_id) {
            return rejection{&handshake_rejections::wrong_cluster,
                             fmt::format("cluster id {} is not ours ({})", message.cluster_id,
                                         options_.cluster_id)};
        }
        return std::nullopt;
    }

    /// Our handshake message of `kind` to `to`.
    hello_message handshake(hello_kind kind, peer_id to) const {
        return hello_message{kind, options_.cluster_id, options_.self, to, claim_,
                             refusal_reason::none};
    }

    /// Why `message`'s sender and we disagree about the members, if we do. Different versions
    /// are not a contradiction: a reconfiguration brings the older one up to date.
    std::optional<std::string> membership_mismatch(const hello_message& message) const {
        if (message.claim.config_version != claim_.config_version ||
            message.claim.config_digest == claim_.config_digest)
            return std::nullopt;
        return fmt::format(
            "peer {} was started with a different member list (configuration version {}, digest "
            "{:016x}; ours {:016x}): start every replica with the same members",
            message.from, message.claim.config_version, message.claim.config_digest,
            claim_.config_digest);
    }

    /// Why the process `instance` of `peer`, connecting from `remote`, is a second live
    /// process with that id, if it is: an instance that a newer one replaced comes back while
    /// the newer one is still connected. With no connection current, it is taken back (the
    /// newer one may have been the impostor, and is gone).
    std::optional<std::string> duplicate_of(peer_id peer, std::uint64_t instance,
                                            const std::string& remote) {
        const auto found = peers_.find(peer);
        if (found == peers_.end()) return std::nullopt;
        peer_slot& slot = found->second;
        const auto it = std::find_if(slot.retired.begin(), slot.retired.end(),
                                     [&](const auto& r) { return r.first == instance; });
        if (it == slot.retired.end()) return std::nullopt;
        if (!slot.current || slot.current->remote_instance == instance) {
            slot.retired.erase(it);
            return std::nullopt;
        }
        return fmt::format(
            "two live processes have id {}: one connected from {} (process {:016x}), the other "
            "from {} (process {:016x}, connected earlier from {}); stop one of them",
            peer, slot.current->remote, slot.current->remote_instance, remote, instance,
            it->second);
    }

    /// `replaced`, the connection of another process instance than `by`, ends: remember it.
    void retire(peer_slot& slot, const connection_type& replaced, std::uint64_t by) {
        if (replaced.remote_instance == by) return;  // the same process, a new connection
        std::erase_if(slot.retired, [&](const auto& r) { return r.first == replaced.remote_instance; });
        slot.retired.emplace_back(replaced.remote_instance, replaced.remote);
        if (slot.retired.size() > max_retired) slot.retired.erase(slot.retired.begin());
    }

    /// Records a contradiction with `peer`; true if it is new (worth a warning).
    bool note_conflict(peer_id peer, refusal_reason reason, bool refused_us,
                       const std::string& detail) {
        auto it = std::find_if(conflicts_.begin(), conflicts_.end(), [&](const member_conflict& c) {
            return c.peer == peer && c.reason == reason && c.refused_us == refused_us;
        });
        if (it == conflicts_.end()) {
            member_conflict found;
            found.peer = peer;
            found.reason = reason;
            found.refused_us = refused_us;
            it = conflicts_.insert(conflicts_.end(), std::move(found));
        }
        const bool changed = it->detail != detail;
        it->detail = detail;
        ++it->times;
        it->last = std::chrono::steady_clock::now();
        return changed || (it->times & (it->times - 1)) == 0;  // new, or the 2^n-th time
    }

    /// Refuses a member that contradicts us: a refusal message saying why, then the close.
    void refuse(const connection_ptr& connection, peer_id from, refusal_reason reason,
                const std::string& detail) {
        ++(counters_.rejected.*(reason == refusal_reason::duplicate_id
                                    ? &handshake_rejections::duplicate_id
                                    : &handshake_rejections::different_membership));
        const bool loud = note_conflict(from, reason, false, detail);
        zab::log(loud ? log_level::warn : log_level::debug,
                 "tcp_transport {}: refused {}: {}", options_.self, describe(*connection), detail);
        hello_message refusal = handshake(hello_kind::refusal, from);
        refusal.reason = reason;
        write_hello(connection, refusal, &transport_core::on_refusal_written);
    }

    void on_refusal_written(const connection_ptr& connection, boost::system::error_code,
                            std::size_t) {
        close_connection(connection, notify::now);
    }

    /// The member we dialed refused us, saying why.
    void refused_by(const connection_ptr& connection, const hello_message& refusal) {
        if (refusal.reason == refusal_reason::dial_back) {
            // Our probe reached a member that counts us a member: it dials us now.
            ++counters_.probes_dialed_back;
            zab::log(log_level::debug, "tcp_transport {}: peer {} answered our probe: it dials us",
                     options_.self, refusal.from);
            return close_connection(connection, notify::now);
        }
        ++counters_.rejected.refused_by_peer;
        const std::string detail = fmt::format(
            "peer {} refused us: {}{}", refusal.from, to_string(refusal.reason),
            refusal.reason == refusal_reason::duplicate_id
                ? fmt::format(" (another live process has our id {})", options_.self)
                : fmt::format(" (its configuration version {} digest {:016x}; ours {:016x})",
                              refusal.claim.config_version, refusal.claim.config_digest,
                              claim_.config_digest));
        const bool loud = note_conflict(refusal.from, refusal.reason, true, detail);
        zab::log(loud ? log_level::warn : log_level::debug, "tcp_transport {}: {}",
                 options_.self, detail);
        close_connection(connection, notify::now);
    }

    void reject(const connection_ptr& connection, const rejection& why) {
        ++(counters_.rejected.*why.counter);
        zab::log(log_level::warn, "tcp_transport {}: handshake failed on {}: {}", options_.self,
                 describe(*connection), why.reason);
        close_connection(connection, notify::now);
    }

    void handshake_broken(const connection_ptr& connection, boost::system::error_code ec) {
        ++counters_.rejected.closed_by_remote;
        // The usual reason is that the other side refused our hello: its log says why.
        zab::log(log_level::info,
                 "tcp_transport {}: handshake failed on {}: closed by the other end: {}",
                 options_.self, describe(*connection), ec.message());
        close_connection(connection, notify::now);
    }

    std::string describe(const connection_type& connection) const {
        return connection.inbound ? fmt::format("connection from {}", connection.remote)
                                  : fmt::format("connection to peer {} at {}", connection.peer,
                                                connection.remote);
    }

    // --- Established connections -------------------------------------------------------------

    void establish(const connection_ptr& connection) {
        connection->handshake_timer.cancel();
        const auto found = peers_.find(connection->peer);
        ZAB_ASSERT(found != peers_.end(), "tcp_transport: establishing a connection without a slot");
        peer_slot& slot = found->second;
        deliver_owed_disconnect(connection->peer);
        if (stopped_ || connection->state != connection_state::handshaking) return;
        ZAB_ASSERT(!slot.current, "tcp_transport: a peer with two established connections");
        connection->state = connection_state::established;
        slot.current = connection;
        slot.retry.reset();
        ++counters_.connections_established;
        zab::log(log_level::info, "tcp_transport {}: connection {} to peer {} ({}) established",
                 options_.self, connection->id, connection->peer, connection->remote);
        if (handler_.on_connected) handler_.on_connected(connection->peer, connection->id);
        if (stopped_ || connection->state != connection_state::established) return;
        read_frames(connection);
    }

    void read_frames(const connection_ptr& connection) {
        const std::span<std::byte> buffer = connection->reader.read_buffer();
        connection->stream.async_read_some(boost::asio::buffer(buffer.data(), buffer.size()),
                                           guarded(connection, &transport_core::on_frames_read));
    }

    void on_frames_read(const connection_ptr& connection, boost::system::error_code ec,
                        std::size_t bytes) {
        if (connection->state != connection_state::established) return;
        if (bytes > 0) {
            connection->reader.commit(bytes);
            counters_.bytes_received += bytes;
            for (;;) {
                auto next = connection->reader.next();
                if (!next) return bad_frame(connection, next.error());
                if (!next.assume_value()) break;
                ++counters_.frames_received;
                if (handler_.on_receive) {
                    handler_.on_receive(connection->peer, connection->id, *next.assume_value());
                }
                if (stopped_ || connection->state != connection_state::established) return;
            }
        }
        if (ec) {
            zab::log(log_level::info, "tcp_transport {}: connection {} to peer {} lost: {}",
                     options_.self, connection->id, connection->peer,
                     ec == boost::asio::error::eof ? std::string{"closed by the peer"}
                                                   : ec.message());
            return close_connection(connection, notify::now);
        }
        read_frames(connection);
    }

    void bad_frame(const connection_ptr& connection, std::error_code error) {
        if (error == errc::oversized) {
            ++counters_.oversized_frames;
        } else {
            ++counters_.malformed_frames;
        }
        zab::log(log_level::warn,
                 "tcp_transport {}: closing connection {} to peer {}: bad frame header: {} "
                 "(max_frame_size {})",
                 options_.self, connection->id, connection->peer, error.message(),
                 options_.max_frame_size);
        penalize(connection->peer, connection->remote_host);
        close_connection(connection, notify::now);
    }

    /// `peer`, connected from `host`, was dropped for bad frames after its handshake: past
    /// `misbehaviour_burst` such drops from that address, it is quarantined there (its
    /// handshakes from it refused; if we dial it, not dialed) for a doubling delay.
    void penalize(peer_id peer, const std::string& host) {
        const auto it = peers_.find(peer);
        if (it == peers_.end()) return;
        peer_slot& slot = it->second;
        const auto now = clock::now();
        // Forget addresses that behaved for quarantine_max, then bound what is kept.
        std::erase_if(slot.misbehaving, [&](const auto& entry) {
            return now - entry.second.last > options_.quarantine_max && now >= entry.second.until;
        });
        if (!slot.misbehaving.contains(host) &&
            slot.misbehaving.size() >= max_misbehaving_addresses) {
            const auto oldest = std::min_element(
                slot.misbehaving.begin(), slot.misbehaving.end(),
                [](const auto& a, const auto& b) { return a.second.last < b.second.last; });
            slot.misbehaving.erase(oldest);
        }
        auto [entry, fresh] = slot.misbehaving.try_emplace(
            host, misbehaviour{0, now, {},
                               backoff{options_.quarantine_min, options_.quarantine_max,
                                       slot.penalty_seed ^ std::hash<std::string>{}(host)}});
        misbehaviour& record = entry->second;
        record.last = now;
        if (++record.drops <= options_.misbehaviour_burst) return;
        const auto delay = record.penalty.next_delay();
        record.until = now + delay;
        ++counters_.quarantines;
        zab::log(log_level::warn,
                 "tcp_transport {}: peer {} sent bad frames {} times from {}: its connections "
                 "from there are refused for {} ms (quarantine)",
                 options_.self, peer, record.drops, host.empty() ? "our dial" : host,
                 delay.count());
    }

    /// Why `peer`'s handshake from `host` is refused now, if it is quarantined there.
    std::optional<rejection> quarantine_of(peer_id peer, const std::string& host) const {
        const auto found = peers_.find(peer);
        if (found == peers_.end()) return std::nullopt;
        const peer_slot& slot = found->second;
        const auto it = slot.misbehaving.find(host);
        const auto now = clock::now();
        if (it == slot.misbehaving.end() || now >= it->second.until) return std::nullopt;
        return rejection{&handshake_rejections::quarantined,
                         fmt::format("peer {} is quarantined at {} for {} ms more (bad frames)",
                                     peer, host,
                                     std::chrono::ceil<std::chrono::milliseconds>(
                                         it->second.until - now)
                                         .count())};
    }

    /// Writes what `send` queued once the handler that called it has returned, rather than
    /// at once: a step of the peer, and every other handler ready before the posted write
    /// runs, often sends many frames to the same peer (a proposal per client write, a commit
    /// per ACK), and they then leave in one gathered write instead of one system call each.
    /// A write in flight picks up what was queued meanwhile when it completes.
    void schedule_write(const connection_ptr& connection) {
        if (connection->write_posted || connection->queue.writing()) return;
        connection->write_posted = true;
        boost::asio::post(executor_, [weak = this->weak_from_this(), connection] {
            connection->write_posted = false;
            const std::shared_ptr<transport_core> core = weak.lock();
            if (!core || core->stopped_) return;
            core->write_frames(connection);
        });
    }

    void write_frames(const connection_ptr& connection) {
        if (connection->state != connection_state::established ||
            !connection->queue.ready_to_write()) {
            return;
        }
        boost::asio::async_write(connection->stream, connection->queue.begin_write(),
                                 guarded(connection, &transport_core::on_frames_written));
    }

    void on_frames_written(const connection_ptr& connection, boost::system::error_code ec,
                           std::size_t) {
        if (connection->state != connection_state::established) return;
        if (ec) {
            zab::log(log_level::info, "tcp_transport {}: connection {} to peer {} lost: {}",
                     options_.self, connection->id, connection->peer, ec.message());
            return close_connection(connection, notify::now);
        }
        const auto written = connection->queue.finish_write();
        counters_.frames_sent += written.frames;
        counters_.bytes_sent += written.bytes;
        write_frames(connection);
    }

    // --- Closing -----------------------------------------------------------------------------

    /// Closes `connection` (by value: it may be the slot's own pointer, reset below). Reports
    /// `on_disconnected` if it was established: now (from a completion handler) or later (from
    /// send/close, which must not call out). A dialer schedules its next attempt.
    void close_connection(connection_ptr connection, notify how) {
        if (connection->state == connection_state::closed) return;
        const bool was_established = connection->state == connection_state::established;
        abort_io(*connection);
        forget_pending(connection);
        const auto it = peers_.find(connection->peer);
        if (it == peers_.end()) return;  // an inbound connection that never said who it was
        peer_slot& slot = it->second;
        if (slot.dialing == connection) slot.dialing.reset();
        const bool report = was_established && slot.current == connection;
        if (report) slot.current.reset();
        schedule_redial(connection->peer, slot);  // if we dial it
        schedule_probe(connection->peer, slot);   // if it dials us
        if (!report) return;
        if (how == notify::now) {
            report_disconnected(connection->peer, connection->id);
            return;
        }
        slot.owed_disconnect = connection->id;
        boost::asio::post(executor_, [weak = this->weak_from_this(), peer = connection->peer] {
            const std::shared_ptr<transport_core> core = weak.lock();
            if (!core || core->stopped_) return;
            core->deliver_owed_disconnect(peer);
        });
    }

    void deliver_owed_disconnect(peer_id peer) {
        const auto found = peers_.find(peer);
        if (found == peers_.end()) return;
        peer_slot& slot = found->second;
        if (!slot.owed_disconnect) return;
        const connection_id id = *slot.owed_disconnect;
        slot.owed_disconnect.reset();
        report_disconnected(peer, id);
    }

    void report_disconnected(peer_id peer, connection_id id) {
        ++counters_.connections_lost;
        if (handler_.on_disconnected) handler_.on_disconnected(peer, id);
    }

    void forget_pending(const connection_ptr& connection) {
        if (pending_.erase(connection) == 0) return;
        pending_full_logged_ = false;
        const auto it = pending_by_host_.find(connection->remote_host);
        if (it != pending_by_host_.end() && --it->second == 0) pending_by_host_.erase(it);
    }

    /// Closes the socket (pending operations complete with operation_aborted) and the timer.
    /// The buffers stay with the connection until the last operation has completed.
    static void abort_io(connection_type& connection) noexcept {
        connection.state = connection_state::closed;
        boost::system::error_code ignored;
        connection.stream.lowest_layer().close(ignored);
        connection.handshake_timer.cancel();
    }

    // --- Members and joiners (docs/protocol.md §9) --------------------------------------------

    /// A slot for `id`, which has none yet.
    peer_slot& add_slot(peer_id id, peer_kind kind, const tcp_endpoint& address) {
        const std::uint64_t peer_seed = seed_ ^ (options_.self * 0x9E3779B97F4A7C15u) ^ id;
        auto [it, added] = peers_.try_emplace(
            id, executor_, kind, id < options_.self, address,
            backoff{options_.reconnect_min, options_.reconnect_max, peer_seed}, ~peer_seed);
        ZAB_ASSERT(added, "tcp_transport: a second slot for one peer id");
        return it->second;
    }

    /// The digest a member list of `ids`, every one a voter, has (what a transport claims
    /// when it is given no digest).
    template <typename Map>
    static std::uint64_t digest_of_ids(const Map& ids) {
        std::vector<member> members;
        for (const auto& [id, endpoint] : ids) members.push_back({id, {}});
        return configuration::membership_digest(members);
    }

    /// A joiner's slot is in use while it has a connection, or a handshake past its hello.
    bool joiner_in_use(peer_id id, const peer_slot& slot) const {
        if (slot.current || slot.owed_disconnect) return true;
        return std::any_of(pending_.begin(), pending_.end(),
                           [id](const connection_ptr& c) { return c->peer == id; });
    }

    /// Lets `id` in if it is a member (or was one), or as a joiner while fewer than
    /// max_joiners other joiners are in use; else the reason it is refused. A joiner gets a
    /// slot (idle joiners' slots beyond a bound are reused, so that a stream of made-up ids
    /// cannot grow the table).
    std::optional<rejection> admit_joiner(peer_id id, const std::string& remote) {
        auto it = peers_.find(id);
        if (it != peers_.end() && it->second.kind != peer_kind::joiner) return std::nullopt;
        std::size_t in_use = 0;
        for (const auto& [other, slot] : peers_)
            if (other != id && slot.kind == peer_kind::joiner && joiner_in_use(other, slot))
                ++in_use;
        if (in_use >= options_.max_joiners) {
            return rejection{&handshake_rejections::too_many_joiners,
                             fmt::format("peer {} is not a member, and {} joiners are connected "
                                         "already (max_joiners {})",
                                         id, in_use, options_.max_joiners)};
        }
        if (it != peers_.end()) return std::nullopt;
        // Joiners' slots kept: those in use, and idle ones (kept for their quarantine, or
        // until room is needed) up to a bound.
        const std::size_t kept = max_joiner_slots();
        if (forget_idle_joiners(kept) >= kept) {
            return rejection{&handshake_rejections::too_many_joiners,
                             fmt::format("peer {} is not a member, and {} joiners' records are "
                                         "kept already (quarantined ones included)",
                                         id, kept)};
        }
        add_slot(id, peer_kind::joiner, tcp_endpoint{});
        ++counters_.joiners_admitted;
        zab::log(log_level::info, "tcp_transport {}: peer {} (from {}) is not a member: let in "
                 "as a joiner ({} of at most {})", options_.self, id, remote, in_use + 1,
                 options_.max_joiners);
        return std::nullopt;
    }

    /// The most joiners' slots kept at once: those in use (max_joiners) and idle ones.
    std::size_t max_joiner_slots() const noexcept { return 4 * options_.max_joiners + 16; }

    /// Forgets the slots of joiners not in use (nothing references them: no connection, no
    /// handshake, no quarantine) while `keep` or more joiner slots exist, to make room for
    /// one; returns how many joiner slots remain.
    std::size_t forget_idle_joiners(std::size_t keep) {
        std::size_t joiners = 0;
        for (const auto& [id, slot] : peers_) joiners += slot.kind == peer_kind::joiner;
        const auto now = clock::now();
        for (auto it = peers_.begin(); it != peers_.end() && joiners >= keep;) {
            const peer_slot& slot = it->second;
            if (slot.kind == peer_kind::joiner && !slot.dialing && !slot.redial_scheduled &&
                !joiner_in_use(it->first, slot) && now >= slot.quarantined_until()) {
                it = peers_.erase(it);
                --joiners;
            } else {
                ++it;
            }
        }
        return joiners;
    }

    // --- Start-up ----------------------------------------------------------------------------

    /// An IP literal as is; a host name through the system resolver, synchronously (Asio's
    /// asynchronous resolver would run a thread of its own): at start(), and when a member
    /// learned from update_members is first dialed. A failure is logged (at debug unless
    /// `loud`).
    result<std::vector<tcp::endpoint>> resolve(const tcp_endpoint& where, bool passive,
                                               bool loud = true) {
        boost::system::error_code ec;
        const auto address = boost::asio::ip::make_address(where.host, ec);
        if (!ec) return std::vector<tcp::endpoint>{tcp::endpoint{address, where.port}};
        tcp::resolver resolver{executor_};
        auto flags = tcp::resolver::numeric_service;
        if (passive) flags = flags | tcp::resolver::passive;
        const auto results = resolver.resolve(where.host, std::to_string(where.port), flags, ec);
        if (ec || results.empty()) {
            zab::log(loud ? log_level::error : log_level::debug,
                     "tcp_transport {}: cannot resolve {}: {}", options_.self, where.host,
                     ec ? ec.message() : std::string{"no address"});
            if (ec) return std::error_code{ec};
            return make_error_code(errc::invalid_options);
        }
        std::vector<tcp::endpoint> endpoints;
        for (const auto& entry : results) endpoints.push_back(entry.endpoint());
        return endpoints;
    }

    boost::asio::any_io_executor executor_;
    const tcp_transport_options options_;
    const transport_handler handler_;  // kept until the core dies: a running handler is safe
    Security security_;                // the streams' credentials (transport_security.hpp)
    transport_counters counters_;
    membership_claim claim_;  // what our handshake messages say about us
    std::vector<member_conflict> conflicts_;
    tcp::acceptor acceptor_;
    boost::asio::steady_timer accept_retry_timer_;
    /// Every member but self, then joiners and retired members (update_members, admit_joiner).
    /// A member's or retired member's slot is never erased; a joiner's only when nothing
    /// references it (forget_idle_joiners).
    std::map<peer_id, peer_slot> peers_;
    std::uint64_t seed_ = 0;  // the back-off's and the quarantine's jitter
    std::set<connection_ptr> pending_;    // inbound, handshake not complete
    std::map<std::string, std::size_t> pending_by_host_;  // pending_, per source address
    bool pending_full_logged_ = false;
    connection_id next_id_ = 1;
    std::uint16_t local_port_ = 0;
    bool started_ = false;
    bool stopped_ = false;
};

}  // namespace zab::asio::detail
