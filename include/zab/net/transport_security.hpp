// zab/net/transport_security.hpp — what the stream under a peer connection is, and how it is
// secured: the policy `zab::asio::basic_transport<Security>` is parameterised on.
//
// The transport core (tcp_transport_core.hpp) owns everything that does not depend on the
// stream: who dials, zab's hello exchange (handshake.hpp), framing (frame_reader.hpp), the
// bounded send queue, back-off, the handshake deadline, the caps on pending handshakes and
// the quarantine of misbehaving peers. A security policy only says what a connection's stream
// is and how it becomes trusted:
//
//   using stream_type           the stream a connection reads and writes: `async_read_some`,
//                               `async_write_some` (so `async_read` / `async_write`),
//                               `get_executor()`, and `lowest_layer()`, the TCP socket that is
//                               connected, given options and closed;
//   has_handshake               true if the stream needs a handshake of its own (TLS) before
//                               zab's hello; false skips the step (plaintext: nothing to do);
//   prepare(self)               called by `start()`: loads what the policy needs (certificates),
//                               `errc::invalid_options` (logged) if it cannot;
//   make_stream(socket)         wraps a TCP socket (accepted, or about to be connected);
//   async_handshake(stream, role, handler)   the stream's own handshake (only if
//                               has_handshake), `handler(error_code)`; covered by the
//                               transport's handshake deadline;
//   classify_failure(stream, error)  why that handshake failed: the counter and the reason;
//   check_peer(stream, id)      once the peer's id is known (from its hello when accepting, the
//                               id dialed when dialing): a refusal if the stream's credentials do
//                               not belong to that member, std::nullopt if they do. It runs before
//                               the connection can replace or displace anything.
//
// `plaintext_security` (below) is the plain TCP socket, which trusts the hello's id: that is
// `tcp_transport`. `tls_security` (tls_security.hpp, target zab::asio_tls) is mutual TLS
// whose certificates name the member ids.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include "zab/core/error.hpp"
#include "zab/core/types.hpp"
#include "zab/net/tcp_transport_options.hpp"

namespace zab::asio {

/// Which side of a stream's own handshake this end plays: the dialer is the client.
enum class handshake_role : std::uint8_t { client, server };

/// Requirements a transport's security policy must meet (see the file comment for their
/// meaning). The asynchronous handshake is a template member and is not checked here.
template <typename Security>
concept transport_security =
    requires(Security& security, typename Security::stream_type& stream,
             boost::asio::ip::tcp::socket socket, peer_id id, boost::system::error_code error) {
        { Security::has_handshake } -> std::convertible_to<bool>;
        { security.prepare(id) } -> std::same_as<result<void>>;
        { security.make_stream(std::move(socket)) } -> std::same_as<typename Security::stream_type>;
        { security.check_peer(stream, id) } -> std::same_as<std::optional<handshake_refusal>>;
        { security.classify_failure(stream, error) } -> std::same_as<handshake_refusal>;
        stream.lowest_layer().close(error);
        stream.get_executor();
    };

/// Plain TCP: the hello's id is taken at its word (handshake.hpp: identification, not
/// authentication). For replicas on a network only they can reach.
struct plaintext_security {
    using stream_type = boost::asio::ip::tcp::socket;
    static constexpr bool has_handshake = false;

    result<void> prepare(peer_id) { return success(); }
    stream_type make_stream(boost::asio::ip::tcp::socket socket) { return socket; }
    template <typename Handler>
    void async_handshake(stream_type&, handshake_role, Handler&&) {}  // never called
    std::optional<handshake_refusal> check_peer(stream_type&, peer_id) { return std::nullopt; }
    handshake_refusal classify_failure(stream_type&, boost::system::error_code error) {
        return {&handshake_rejections::closed_by_remote, error.message()};
    }
};

static_assert(transport_security<plaintext_security>);

}  // namespace zab::asio
