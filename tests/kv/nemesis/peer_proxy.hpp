// tests/kv/nemesis/peer_proxy.hpp — TCP forwarders between replicas that the nemesis can cut.
//
// Each ordered pair of replicas (from, to) gets a route: a listening port on 127.0.0.1 that
// replica `from` is told is `to`'s peer address, forwarding to `to`'s real peer port. Since
// every connection between two replicas passes through a route that names both ends, cutting
// replica k closes every connection to or from k and refuses new ones until `heal(k)`: a
// network partition of k from the rest, without touching the processes.
//
// Runs on the io_context it is given (one thread); `cut` and `heal` may be called from any
// thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <set>
#include <utility>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace zab::kv::nemesis {

class peer_proxy {
public:
    using tcp = boost::asio::ip::tcp;

    explicit peer_proxy(boost::asio::io_context& io) : io_{io} {}
    peer_proxy(const peer_proxy&) = delete;
    peer_proxy& operator=(const peer_proxy&) = delete;

    /// Opens the route from replica `from` to replica `to`, whose peer port is `target_port`.
    /// Returns the port `from` must dial. Call before the io_context runs.
    std::uint16_t add_route(std::uint32_t from, std::uint32_t to, std::uint16_t target_port) {
        auto& r = routes_.emplace_back(io_, from, to, target_port);
        accept(r);
        return r.acceptor.local_endpoint().port();
    }

    /// Cuts replica `id` off: closes its connections and refuses new ones until healed.
    void cut(std::uint32_t id) {
        boost::asio::post(io_, [this, id] {
            cut_.insert(id);
            for (auto it = links_.begin(); it != links_.end();) {
                if (auto l = it->lock(); l && (l->from == id || l->to == id)) l->close();
                it = it->expired() ? links_.erase(it) : std::next(it);
            }
        });
    }

    /// Lets replica `id` connect again.
    void heal(std::uint32_t id) {
        boost::asio::post(io_, [this, id] { cut_.erase(id); });
    }

    /// Connections forwarded since the start, and refused because an end was cut.
    std::uint64_t forwarded() const noexcept { return forwarded_; }
    std::uint64_t refused() const noexcept { return refused_; }

private:
    struct route {
        route(boost::asio::io_context& io, std::uint32_t f, std::uint32_t t, std::uint16_t port)
            : acceptor{io, tcp::endpoint{boost::asio::ip::address_v4::loopback(), 0}},
              from{f}, to{t}, target{boost::asio::ip::address_v4::loopback(), port} {}
        tcp::acceptor acceptor;
        std::uint32_t from;
        std::uint32_t to;
        tcp::endpoint target;
    };

    /// One forwarded connection: the accepted socket and the one to the target, a pump each
    /// way; closing either end closes both.
    struct link : std::enable_shared_from_this<link> {
        link(tcp::socket accepted, tcp::socket outbound, std::uint32_t f, std::uint32_t t)
            : sockets{std::move(accepted), std::move(outbound)}, from{f}, to{t} {}
        std::array<tcp::socket, 2> sockets;
        std::array<std::array<char, 64 * 1024>, 2> buffers{};
        std::uint32_t from;
        std::uint32_t to;

        void close() {
            boost::system::error_code ignored;
            for (auto& s : sockets) s.close(ignored);
        }

        /// Reads from sockets[i] and writes what it read to the other one, until either fails.
        void pump(std::size_t i) {
            sockets[i].async_read_some(
                boost::asio::buffer(buffers[i]),
                [self = shared_from_this(), i](boost::system::error_code e, std::size_t n) {
                    if (e) return self->close();
                    boost::asio::async_write(
                        self->sockets[1 - i], boost::asio::buffer(self->buffers[i].data(), n),
                        [self, i](boost::system::error_code e2, std::size_t) {
                            if (e2) return self->close();
                            self->pump(i);
                        });
                });
        }
    };

    void accept(route& r) {
        r.acceptor.async_accept([this, &r](boost::system::error_code e, tcp::socket socket) {
            if (e) return;  // the acceptor was closed
            accept(r);
            if (cut_.contains(r.from) || cut_.contains(r.to)) {
                ++refused_;
                boost::system::error_code ignored;
                socket.close(ignored);
                return;
            }
            auto l = std::make_shared<link>(std::move(socket), tcp::socket{io_}, r.from, r.to);
            links_.remove_if([](const std::weak_ptr<link>& w) { return w.expired(); });
            links_.push_back(l);
            ++forwarded_;
            l->sockets[1].async_connect(r.target, [this, l](boost::system::error_code e2) {
                // Cut while connecting: the close in cut() made this fail or it comes now.
                if (e2 || cut_.contains(l->from) || cut_.contains(l->to)) return l->close();
                l->pump(0);
                l->pump(1);
            });
        });
    }

    boost::asio::io_context& io_;
    std::list<route> routes_;  // stable addresses: the accept handlers refer to them
    std::list<std::weak_ptr<link>> links_;
    std::set<std::uint32_t> cut_;
    std::atomic<std::uint64_t> forwarded_ = 0;
    std::atomic<std::uint64_t> refused_ = 0;
};

}  // namespace zab::kv::nemesis
