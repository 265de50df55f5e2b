// zab/net/tcp_transport.hpp — `zab::asio::tcp_transport`: the replicas of one zab group
// talking over TCP, modelling `zab::transport` (concepts.hpp).
//
// What it does:
// - Keeps one connection to every other member. The higher id of each pair dials the lower
//   one, retrying forever with jittered exponential back-off while started; each connection
//   gets a fresh `connection_id`, unique for the transport's lifetime.
// - Opens each connection with a fixed hello exchange (handshake.hpp: cluster id, peer ids);
//   reports `on_connected` only once it succeeded both ways, and `on_disconnected` exactly
//   once for each `on_connected`. A peer that connects again replaces its old connection.
// - Delivers whole frames (header validated, at most `max_frame_size`, in order) and closes a
//   connection that sends anything else. Nothing a remote sends can crash it or make it
//   allocate beyond its bounds; every refusal is logged (zab's logger hook) and counted.
// - Writes from a bounded queue per connection, several frames per system call, TCP_NODELAY.
//
// Threading: `executor` is the application's (an io_context's executor, or a strand). Every
// member function must be called on it, every handler runs on it, and the transport starts
// no thread. The io_context must outlive the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include <boost/asio/any_io_executor.hpp>

#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/types.hpp"
#include "zab/net/tcp_transport_core.hpp"
#include "zab/net/tcp_transport_options.hpp"

namespace zab::asio {

class tcp_transport {
public:
    /// Does no I/O: `start()` does. `handler` receives the events (tcp_transport_options.hpp).
    tcp_transport(boost::asio::any_io_executor executor, tcp_transport_options options,
                  transport_handler handler)
        : core_{std::make_shared<detail::transport_core>(std::move(executor), std::move(options),
                                                         std::move(handler))} {}

    /// Movable (the state lives behind a pointer, so handlers already posted stay valid); a
    /// moved-from transport may only be destroyed or assigned to.
    tcp_transport(const tcp_transport&) = delete;
    tcp_transport& operator=(const tcp_transport&) = delete;
    tcp_transport(tcp_transport&&) noexcept = default;
    tcp_transport& operator=(tcp_transport&& other) noexcept {
        if (this != &other) {
            stop();
            core_ = std::move(other.core_);
        }
        return *this;
    }

    /// Stops (see `stop()`).
    ~tcp_transport() { stop(); }

    /// Validates the options, resolves the peers' host names (synchronously: IP literals need
    /// no resolver), binds and listens on self's endpoint, and starts dialing. Errors:
    /// `errc::invalid_options` (logged with the field), the system's error for an address
    /// that cannot be resolved or bound (e.g. address in use), `errc::invalid_argument` if
    /// already started or stopped. Nothing is left listening after an error.
    result<void> start() { return core_->start(); }

    /// Closes the listener and every connection and cancels every timer. After it returns no
    /// handler is called again (not even `on_disconnected` for the connections it closed: the
    /// driver is stopping too). Idempotent; the destructor calls it. The transport cannot be
    /// started again: make a new one.
    void stop() noexcept {
        if (core_) core_->stop();
    }

    /// `zab::transport`: queues `frame` on `connection` to `to`. Dropped silently (and counted)
    /// if that is not `to`'s current connection. If the connection's queue would exceed
    /// `max_queued_bytes_per_peer`, the connection is closed instead (on_disconnected follows).
    void send(peer_id to, connection_id connection, const shared_bytes& frame) {
        core_->send(to, connection, frame);
    }

    /// `zab::transport`: closes `connection` to `to` if it is still the current one;
    /// `on_disconnected` follows (never from inside this call). A dialer reconnects later.
    void close(peer_id to, connection_id connection) { core_->close(to, connection); }

    /// What happened so far: connections, refusals by reason, frames, bytes, overflows.
    const transport_counters& counters() const noexcept { return core_->counters(); }

    /// Members that contradict this replica — a different member list, a second process with
    /// a member's id — as the handshakes found them (tcp_transport_options.hpp). Empty when
    /// the group is consistent.
    const std::vector<member_conflict>& conflicts() const noexcept { return core_->conflicts(); }

    /// What this transport's handshakes say about it: configuration version and digest, and
    /// its process instance.
    const membership_claim& claim() const noexcept { return core_->claim(); }

    /// The port bound by `start()` (the one chosen by the system if self's port is 0); 0
    /// before.
    std::uint16_t local_port() const noexcept { return core_->local_port(); }

    /// Inbound connections accepted and still in their handshake (at most
    /// `max_pending_handshakes`).
    std::size_t pending_handshakes() const noexcept { return core_->pending_handshakes(); }

private:
    std::shared_ptr<detail::transport_core> core_;
};

static_assert(zab::transport<tcp_transport>);

}  // namespace zab::asio
