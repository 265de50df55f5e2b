// kv_metrics_http.hpp — kv_server's metrics port (--metrics-port): a small HTTP/1.1 server
// (Boost.Beast) that answers GET /metrics and GET /health through a handler
// (kv_metrics.hpp's route_metrics_request), on the server's io_context.
//
// Anyone who can reach the port can talk to it, so it is bounded: at most
// `max_connections` at once (more are closed at once), a request's header at most 8 KiB and
// no body (else 400 and close), 10 s to send a request (else closed), answers written under
// the same deadline. Keep-alive is honoured for well-formed requests.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include "kv/kv_metrics.hpp"
#include "zab/core/logging.hpp"

namespace zab::kv {

/// The metrics port's HTTP server. `handler(method, target)` answers each request; it runs
/// on the io_context's thread.
class metrics_http_server {
public:
    using handler_type = std::function<http_answer(std::string_view method, std::string_view target)>;
    static constexpr std::size_t max_connections = 64;
    static constexpr std::size_t max_header_bytes = 8 << 10;
    static constexpr std::chrono::seconds request_timeout{10};

    metrics_http_server(boost::asio::io_context& io, handler_type handler)
        : acceptor_{io}, retry_{io}, state_{std::make_shared<shared_state>(std::move(handler))} {}
    metrics_http_server(const metrics_http_server&) = delete;
    metrics_http_server& operator=(const metrics_http_server&) = delete;
    ~metrics_http_server() { stop(); }

    /// Listens on host:port and starts accepting; an error text on failure.
    std::optional<std::string> start(const std::string& host, std::uint16_t port) {
        boost::system::error_code error;
        const auto address = boost::asio::ip::make_address(host, error);
        if (error) return fmt::format("metrics host '{}': {}", host, error.message());
        const boost::asio::ip::tcp::endpoint endpoint{address, port};
        acceptor_.open(endpoint.protocol(), error);
        if (!error) acceptor_.set_option(boost::asio::ip::tcp::acceptor::reuse_address(true), error);
        if (!error) acceptor_.bind(endpoint, error);
        if (!error) acceptor_.listen(boost::asio::socket_base::max_listen_connections, error);
        if (error) return fmt::format("cannot listen for metrics on {}:{}: {}", host, port, error.message());
        accept();
        return std::nullopt;
    }

    /// Stops accepting and closes every connection (the handler is not called again).
    void stop() {
        boost::system::error_code ignored;
        acceptor_.close(ignored);
        retry_.cancel();
        state_->stopped = true;
        const auto open = state_->open;  // closing erases
        for (const auto& [id, weak] : open)
            if (const auto s = weak.lock()) s->close();
    }

    std::uint16_t local_port() const {
        boost::system::error_code ignored;
        return acceptor_.local_endpoint(ignored).port();
    }

private:
    class session;

    /// What the server and its connections share (connections may outlive the server).
    struct shared_state {
        explicit shared_state(handler_type h) : handler{std::move(h)} {}
        handler_type handler;
        std::map<std::uint64_t, std::weak_ptr<session>> open;  ///< for stop() to close
        std::uint64_t last_id = 0;
        bool stopped = false;
    };

    class session : public std::enable_shared_from_this<session> {
    public:
        session(boost::asio::ip::tcp::socket socket, std::shared_ptr<shared_state> state)
            : stream_{std::move(socket)},
              buffer_{max_header_bytes},
              state_{std::move(state)},
              id_{++state_->last_id} {}
        session(const session&) = delete;
        session& operator=(const session&) = delete;
        ~session() { state_->open.erase(id_); }

        std::uint64_t id() const noexcept { return id_; }

        void read() {
            parser_.emplace();
            parser_->header_limit(static_cast<std::uint32_t>(max_header_bytes));
            stream_.expires_after(request_timeout);
            boost::beast::http::async_read(
                stream_, buffer_, *parser_,
                [self = this->shared_from_this()](boost::beast::error_code error, std::size_t) {
                    self->on_read(error);
                });
        }

    private:
        void on_read(boost::beast::error_code error) {
            namespace http = boost::beast::http;
            if (error == http::error::end_of_stream || error == boost::asio::error::eof ||
                error == boost::beast::error::timeout || error == boost::asio::error::operation_aborted ||
                error == boost::asio::error::connection_reset)
                return close();
            if (error || state_->stopped) {
                // Not HTTP, a header too long, a body: the client's fault, said once.
                if (state_->stopped) return close();
                return answer({400, "text/plain; charset=utf-8", "bad request\n"}, false);
            }
            const auto& request = parser_->get();
            http_answer a = state_->handler(std::string_view{request.method_string()},
                                            std::string_view{request.target()});
            if (request.method() == http::verb::head) a.body.clear();  // headers only
            answer(std::move(a), request.keep_alive());
        }

        void answer(http_answer a, bool keep_alive) {
            namespace http = boost::beast::http;
            response_ = {};
            response_.version(11);
            response_.result(a.status);
            response_.set(http::field::server, "kv_server");
            response_.set(http::field::content_type, a.content_type);
            response_.set(http::field::cache_control, "no-store");
            response_.body() = std::move(a.body);
            response_.keep_alive(keep_alive);
            response_.prepare_payload();
            stream_.expires_after(request_timeout);
            http::async_write(stream_, response_,
                              [self = this->shared_from_this(), keep_alive](
                                  boost::beast::error_code error, std::size_t) {
                                  if (error || !keep_alive) return self->close();
                                  self->read();
                              });
        }

    public:
        void close() {
            boost::beast::error_code ignored;
            stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
            stream_.close();
        }

        boost::beast::tcp_stream stream_;
        boost::beast::flat_buffer buffer_;
        std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> parser_;
        boost::beast::http::response<boost::beast::http::string_body> response_;
        std::shared_ptr<shared_state> state_;
        std::uint64_t id_;
    };

    void accept() {
        acceptor_.async_accept([this, state = state_](boost::system::error_code error,
                                                      boost::asio::ip::tcp::socket socket) {
            if (state->stopped || error == boost::asio::error::operation_aborted) return;
            if (!error) {
                if (state->open.size() >= max_connections) {
                    boost::system::error_code ignored;
                    socket.close(ignored);
                } else {
                    auto s = std::make_shared<session>(std::move(socket), state);
                    state->open.emplace(s->id(), s);
                    s->read();
                }
            } else {
                // Out of descriptors, say: accepting again at once would spin.
                zab::log(zab::log_level::warn, "kv_server: metrics port: accept: {}", error.message());
                retry_.expires_after(std::chrono::milliseconds{100});
                retry_.async_wait([this, state](boost::system::error_code e) {
                    if (!e && !state->stopped) accept();
                });
                return;
            }
            accept();
        });
    }

    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer retry_;
    std::shared_ptr<shared_state> state_;
};

}  // namespace zab::kv
