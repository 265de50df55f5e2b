// zab/net/tcp_transport.hpp — `zab::asio::basic_transport<Security>`: the replicas of one zab
// group talking over TCP, modelling `zab::transport` (concepts.hpp); `tcp_transport` is the
// plaintext one. The stream under each connection and how it is secured is the `Security`
// policy (transport_security.hpp): `plaintext_security` here, `tls_security` in
// tls_transport.hpp (`tls_transport`). Everything else below is the same code for both.
//
// What it does:
// - Keeps one connection to every other member. The higher id of each pair dials the lower
//   one, retrying forever with jittered exponential back-off while started; each connection
//   gets a fresh `connection_id`, unique for the transport's lifetime. The member list follows
//   reconfigurations (`update_members`); a replica that is no member yet may connect (it is
//   joining: at most `max_joiners` at once), which is why a joiner's id must be above every
//   member's: nobody dials it.
// - Opens each connection with a fixed hello exchange (handshake.hpp: cluster id, peer ids);
//   reports `on_connected` only once it succeeded both ways, and `on_disconnected` exactly
//   once for each `on_connected`. A peer that connects again replaces its old connection.
// - Delivers whole frames (header validated, at most `max_frame_size`, in order) and closes a
//   connection that sends anything else. Nothing a remote sends can crash it or make it
//   allocate beyond its bounds; every refusal is logged (zab's logger hook) and counted.
// - Writes from a bounded queue per connection, several frames per system call, TCP_NODELAY.
// - Resists hostile connections: every handshake (the stream's and zab's) within
//   `handshake_timeout`, at most `max_pending_handshakes` in progress (and
//   `max_pending_handshakes_per_address` from one address), a member that keeps sending bad
//   frames quarantined (tcp_transport_options.hpp). A connection replaces a member's only
//   once its handshake, the security policy's identity check included, has passed.
//
// Threading: `executor` is the application's (an io_context's executor, or a strand). Every
// member function must be called on it, every handler runs on it, and the transport starts
// no thread. The io_context must outlive the transport.
#pragma once

#include <cstddef>
#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/types.hpp"
#include "zab/net/tcp_transport_core.hpp"
#include "zab/net/tcp_transport_options.hpp"
#include "zab/net/transport_security.hpp"

namespace zab::asio {

template <transport_security Security>
class basic_transport {
public:
    using security_type = Security;

    /// Does no I/O: `start()` does. `handler` receives the events (tcp_transport_options.hpp).
    basic_transport(boost::asio::any_io_executor executor, tcp_transport_options options,
                    transport_handler handler, Security security = Security{})
        : core_{std::make_shared<detail::transport_core<Security>>(
              std::move(executor), std::move(options), std::move(handler), std::move(security))} {}

    /// Movable (the state lives behind a pointer, so handlers already posted stay valid); a
    /// moved-from transport may only be destroyed or assigned to.
    basic_transport(const basic_transport&) = delete;
    basic_transport& operator=(const basic_transport&) = delete;
    basic_transport(basic_transport&&) noexcept = default;
    basic_transport& operator=(basic_transport&& other) noexcept {
        if (this != &other) {
            stop();
            core_ = std::move(other.core_);
        }
        return *this;
    }

    /// Stops (see `stop()`).
    ~basic_transport() { stop(); }

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

    /// The member list changed (a reconfiguration, docs/protocol.md §9; zab::asio::node calls
    /// it as configurations are logged and committed): `members` maps every member of the
    /// configurations in force to its peer address (an empty host: unknown, not dialed; self's
    /// entry is ignored), and `config_version` / `config_digest` are the committed
    /// configuration's, which the handshake claims from now on. New ids are dialed if below
    /// ours; a changed address is used from the next dial (an established connection stays);
    /// ids no longer listed are retired — never dialed again, their inbound connections still
    /// accepted. A host name is resolved when first dialed; one that does not resolve is
    /// logged and tried again with the back-off. Call on the executor, before or after start().
    void update_members(const std::map<peer_id, tcp_endpoint>& members,
                        std::uint64_t config_version, std::uint64_t config_digest) {
        core_->update_members(members, config_version, config_digest);
    }

    /// What the transport knows of peer `id` (member, joiner or retired; address; dialed from
    /// here; connected), or nullopt for an id it never heard of.
    std::optional<transport_peer> peer_info(peer_id id) const { return core_->peer_info(id); }

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

    /// The security policy (its credentials). Call on the executor.
    Security& security() noexcept { return core_->security(); }
    const Security& security() const noexcept { return core_->security(); }

    /// Replaces the policy's credentials for the connections made from now on (certificate
    /// rotation: tls_security::reload_credentials); established connections are kept. Only
    /// for a policy that has credentials. Call on the executor.
    template <typename Credentials>
        requires requires(Security& s, Credentials&& c) {
            { s.reload_credentials(std::forward<Credentials>(c)) } -> std::same_as<result<void>>;
        }
    result<void> reload_credentials(Credentials&& credentials) {
        return core_->security().reload_credentials(std::forward<Credentials>(credentials));
    }

private:
    std::shared_ptr<detail::transport_core<Security>> core_;
};

/// The plaintext transport: the hello's ids are trusted (handshake.hpp). Run it on a network
/// only the replicas reach, or use `tls_transport` (tls_transport.hpp).
using tcp_transport = basic_transport<plaintext_security>;

static_assert(zab::transport<tcp_transport>);

}  // namespace zab::asio
