// examples/kv/kv_peer_security.hpp — the security policy of kv_server's peer transport:
// plaintext or mutual TLS (zab::asio::tls_security), chosen at start by the command line,
// behind one type. So kv_server instantiates one node type, `basic_transport<kv_peer_security>`,
// whichever it runs (the node is the bulk of its compile time), instead of one per transport.
//
// A plaintext stream costs one branch per read and write over `tcp_transport`'s; its
// handshake step completes at once (posted, never inline). With TLS every call goes to
// `tls_security` unchanged: certificates naming `zab://member/<id>`, the checks, the counters
// and `reload_credentials` are tls_transport's (tls_security.hpp).
#pragma once

#include <optional>
#include <utility>
#include <variant>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include "zab/net/tls_security.hpp"
#include "zab/net/transport_security.hpp"

namespace zab::kv {

/// A TCP socket, or a TLS stream over one (zab::asio::tls_stream).
class peer_stream {
public:
    using socket_type = boost::asio::ip::tcp::socket;
    using executor_type = socket_type::executor_type;
    using lowest_layer_type = socket_type::lowest_layer_type;

    explicit peer_stream(socket_type socket) : stream_{std::in_place_index<0>, std::move(socket)} {}
    explicit peer_stream(zab::asio::tls_stream stream)
        : stream_{std::in_place_index<1>, std::move(stream)} {}

    zab::asio::tls_stream* tls() noexcept { return std::get_if<1>(&stream_); }

    executor_type get_executor() { return lowest_layer().get_executor(); }
    lowest_layer_type& lowest_layer() {
        if (auto* s = tls()) return s->lowest_layer();
        return std::get<0>(stream_).lowest_layer();
    }

    template <typename Buffers, typename Handler>
    void async_read_some(const Buffers& buffers, Handler&& handler) {
        if (auto* s = tls()) return s->async_read_some(buffers, std::forward<Handler>(handler));
        std::get<0>(stream_).async_read_some(buffers, std::forward<Handler>(handler));
    }
    template <typename Buffers, typename Handler>
    void async_write_some(const Buffers& buffers, Handler&& handler) {
        if (auto* s = tls()) return s->async_write_some(buffers, std::forward<Handler>(handler));
        std::get<0>(stream_).async_write_some(buffers, std::forward<Handler>(handler));
    }

private:
    std::variant<socket_type, zab::asio::tls_stream> stream_;
};

/// Plaintext when made without TLS options, else mutual TLS (see the file comment).
class peer_security {
public:
    using stream_type = peer_stream;
    static constexpr bool has_handshake = true;  // a plaintext stream's completes at once

    peer_security() = default;
    explicit peer_security(zab::asio::tls_options options)
        : tls_{std::in_place, std::move(options)} {}

    bool uses_tls() const noexcept { return tls_.has_value(); }
    /// The TLS policy (null for plaintext): its options, its reload count.
    const zab::asio::tls_security* tls() const noexcept { return tls_ ? &*tls_ : nullptr; }

    result<void> prepare(peer_id self) { return tls_ ? tls_->prepare(self) : success(); }

    /// tls_security::reload_credentials; `errc::invalid_argument` over plaintext.
    result<void> reload_credentials(zab::asio::tls_options options) {
        if (!tls_) return make_error_code(errc::invalid_argument);
        return tls_->reload_credentials(std::move(options));
    }

    stream_type make_stream(boost::asio::ip::tcp::socket socket) {
        if (tls_) return stream_type{tls_->make_stream(std::move(socket))};
        return stream_type{std::move(socket)};
    }

    template <typename Handler>
    void async_handshake(stream_type& stream, zab::asio::handshake_role role, Handler&& handler) {
        if (auto* s = stream.tls(); s != nullptr && tls_)
            return tls_->async_handshake(*s, role, std::forward<Handler>(handler));
        boost::asio::post(stream.get_executor(),
                          [h = std::forward<Handler>(handler)]() mutable {
                              h(boost::system::error_code{});
                          });
    }

    std::optional<zab::asio::handshake_refusal> check_peer(stream_type& stream, peer_id id) {
        if (auto* s = stream.tls(); s != nullptr && tls_) return tls_->check_peer(*s, id);
        return std::nullopt;
    }

    zab::asio::handshake_refusal classify_failure(stream_type& stream,
                                                  boost::system::error_code error) {
        if (auto* s = stream.tls(); s != nullptr && tls_) return tls_->classify_failure(*s, error);
        return {&zab::asio::handshake_rejections::closed_by_remote, error.message()};
    }

private:
    std::optional<zab::asio::tls_security> tls_;
};

static_assert(zab::asio::transport_security<peer_security>);

}  // namespace zab::kv
