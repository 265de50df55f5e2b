// zab_transport_bench — two transports on loopback, plaintext (`tcp_transport`) against mutual
// TLS (`tls_transport`): one-way streaming throughput for a few frame sizes, and the round
// trip of one small frame (ping-pong). Both ends run on one io_context in one thread, so a
// figure is the CPU of both ends together: a comparison of the two, not a network measurement.
//
//   tests/net/make_member_certificates.sh /tmp/zab-pki 1 2
//   build/release/benchmarks/zab_transport_bench --pki /tmp/zab-pki [--smoke]
//
// Without --pki only plaintext runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "zab/core/codec.hpp"
#include "zab/net/tcp_transport.hpp"
#include "zab/net/tls_transport.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

zab::shared_bytes make_frame(std::size_t txn_bytes) {
    std::vector<std::byte> txn(txn_bytes, std::byte{0x5A});
    return zab::encode(zab::frame_context{1, 0},
                       zab::wire::message{zab::wire::proposal{zab::zxid{1, 1}, txn}});
}

struct endpoint_state {
    std::optional<zab::connection_id> connection;
    std::uint64_t frames = 0;
    std::function<void(const zab::shared_bytes&)> on_frame;
};

zab::asio::transport_handler handler_for(endpoint_state& e) {
    return {[&e](zab::peer_id, zab::connection_id c) { e.connection = c; },
            [&e](zab::peer_id, zab::connection_id) { e.connection.reset(); },
            [&e](zab::peer_id, zab::connection_id, const zab::shared_bytes& frame) {
                ++e.frames;
                if (e.on_frame) e.on_frame(frame);
            }};
}

template <typename Condition>
bool run_until(boost::asio::io_context& io, Condition condition) {
    const auto deadline = clock_type::now() + std::chrono::seconds{60};
    while (!condition()) {
        if (clock_type::now() > deadline) return false;
        if (io.stopped()) io.restart();
        io.run_one_for(std::chrono::milliseconds{20});
    }
    return true;
}

zab::asio::tcp_transport_options options_for(zab::peer_id self, std::uint16_t port_of_1) {
    zab::asio::tcp_transport_options o;
    o.self = self;
    o.cluster_id = 1;
    o.peers[1] = {"127.0.0.1", port_of_1};
    o.peers[2] = {"127.0.0.1", 0};
    return o;
}

/// Runs the measurements over transports made by `make(self, port_of_1, handler)`.
template <typename Transport, typename Make>
int measure(const char* name, Make make, bool smoke) {
    boost::asio::io_context io;
    endpoint_state one, two;
    auto t1 = make(io, zab::peer_id{1}, std::uint16_t{0}, handler_for(one));
    if (!t1->start()) return 1;
    auto t2 = make(io, zab::peer_id{2}, t1->local_port(), handler_for(two));
    if (!t2->start()) return 1;
    if (!run_until(io, [&] { return one.connection && two.connection; })) return 1;

    for (const std::size_t size : {std::size_t{100}, std::size_t{4096}, std::size_t{65536}}) {
        const zab::shared_bytes frame = make_frame(size);
        const std::uint64_t total_bytes = smoke ? (1u << 20) : (512u << 20);
        const std::uint64_t count = std::max<std::uint64_t>(1, total_bytes / frame.size());
        const std::uint64_t window = std::max<std::uint64_t>(16, (4u << 20) / frame.size());
        const std::uint64_t received_before = one.frames;
        std::uint64_t sent = 0;
        const auto began = clock_type::now();
        while (sent < count) {
            const std::uint64_t batch = std::min(window, count - sent);
            for (std::uint64_t i = 0; i < batch; ++i) t2->send(1, *two.connection, frame);
            sent += batch;
            if (!run_until(io, [&] { return one.frames - received_before == sent; })) return 1;
        }
        const double seconds = std::chrono::duration<double>(clock_type::now() - began).count();
        std::printf("%-9s stream  %6zu-byte txns: %9.0f frames/s %8.1f MB/s\n", name, size,
                    static_cast<double>(count) / seconds,
                    static_cast<double>(count * frame.size()) / seconds / 1e6);
    }

    // Ping-pong: 1 answers each frame from 2 with the same frame.
    const zab::shared_bytes ping = make_frame(32);
    one.on_frame = [&](const zab::shared_bytes& f) { t1->send(2, *one.connection, f); };
    const int rounds = smoke ? 100 : 20000;
    std::vector<double> micros;
    micros.reserve(static_cast<std::size_t>(rounds));
    for (int i = 0; i < rounds; ++i) {
        const std::uint64_t before = two.frames;
        const auto began = clock_type::now();
        t2->send(1, *two.connection, ping);
        if (!run_until(io, [&] { return two.frames == before + 1; })) return 1;
        micros.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - began).count());
    }
    std::sort(micros.begin(), micros.end());
    std::printf("%-9s ping-pong round trip: p50 %.1f us, p99 %.1f us (%d rounds)\n", name,
                micros[micros.size() / 2], micros[micros.size() * 99 / 100], rounds);
    one.on_frame = nullptr;
    t2->stop();
    t1->stop();
    io.poll();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    bool smoke = false;
    std::string pki;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--smoke") == 0) smoke = true;
        else if (std::strcmp(argv[i], "--pki") == 0 && i + 1 < argc) pki = argv[++i];
        else {
            std::fprintf(stderr, "usage: %s [--pki DIR] [--smoke]\n", argv[0]);
            return 2;
        }
    }
    int failures = measure<zab::asio::tcp_transport>(
        "plaintext",
        [](boost::asio::io_context& io, zab::peer_id self, std::uint16_t port,
           zab::asio::transport_handler h) {
            return std::make_unique<zab::asio::tcp_transport>(io.get_executor(),
                                                              options_for(self, port), h);
        },
        smoke);
    if (!pki.empty()) {
        failures += measure<zab::asio::tls_transport>(
            "tls1.3",
            [&](boost::asio::io_context& io, zab::peer_id self, std::uint16_t port,
                zab::asio::transport_handler h) {
                zab::asio::tls_options tls;
                tls.ca_file = pki + "/ca.pem";
                tls.certificate_file = fmt::format("{}/member-{}.pem", pki, self);
                tls.private_key_file = fmt::format("{}/member-{}.key", pki, self);
                return std::make_unique<zab::asio::tls_transport>(
                    io.get_executor(), options_for(self, port), h, zab::asio::tls_security{tls});
            },
            smoke);
    }
    if (failures != 0) std::fprintf(stderr, "a measurement failed (hang or start error)\n");
    return failures == 0 ? 0 : 1;
}
