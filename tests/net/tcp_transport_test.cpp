// zab::asio::tcp_transport: first its pure pieces (the hello encoding, the frame reader, the
// send queue, the back-off), then real transports on loopback.
//
// Every transport listens on port 0 and the tests read `local_port()`. One io_context is
// driven by the test thread: `run_until(condition)` runs handlers until the condition holds,
// with a generous deadline that only turns a hang into a failure (no sleeps, no timing
// assertions). Members are 1, 2, 3 (transports) and 4 (played by raw sockets); the higher id
// dials, so transports are started in increasing id order, each knowing the lower ports.
//
// Every recorded event is checked as it happens: on_connected only for a peer without a
// current connection, on_disconnected and on_receive only for the current one, and none of
// them from inside send() or close(). Set ZAB_NET_TEST_LOG=1 to see the transport's log.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "zab/core/codec.hpp"
#include "zab/core/logging.hpp"
#include "zab/net/backoff.hpp"
#include "zab/net/frame_reader.hpp"
#include "zab/net/handshake.hpp"
#include "zab/net/send_queue.hpp"
#include "zab/net/tcp_transport.hpp"
#include "../run_until.hpp"

namespace {

using namespace std::chrono_literals;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using zab::byte_view;
using zab::connection_id;
using zab::errc;
using zab::peer_id;
using zab::shared_bytes;
using zab::asio::hello_kind;
using zab::asio::hello_message;
using zab::asio::tcp_transport;
using zab::asio::tcp_transport_options;

constexpr std::uint64_t cluster = 0xC1D;

/// The claim a member of the harness's group (1..4, all voters) makes: what a transport built
/// from its `peers` computes, and a process instance.
zab::asio::membership_claim member_claim(std::uint64_t instance = 0x5EED) {
    std::vector<zab::member> members;
    for (peer_id id = 1; id <= 4; ++id) members.push_back({id, zab::learner_type::participant});
    return {0, zab::configuration::membership_digest(members), instance};
}

/// Kind, cluster and ids of a decoded message: what a test of routing compares.
bool routed(const hello_message& m, hello_kind kind, peer_id from, peer_id to,
            std::uint64_t cluster_id = cluster) {
    return m.kind == kind && m.cluster_id == cluster_id && m.from == from && m.to == to;
}

// --- Log capture: keeps the output quiet, lets a test check that a refusal was logged -------

struct captured_log {
    std::vector<std::string> lines;
    bool echo = std::getenv("ZAB_NET_TEST_LOG") != nullptr;
};

captured_log& log_capture() {
    static captured_log capture;
    return capture;
}

void capture_sink(void*, zab::log_level level, std::string_view line) {
    captured_log& capture = log_capture();
    if (capture.lines.size() >= 20000) {
        capture.lines.erase(capture.lines.begin(), capture.lines.begin() + 10000);
    }
    capture.lines.emplace_back(line);
    if (capture.echo) {
        std::fprintf(stderr, "[%d] %.*s\n", static_cast<int>(level), static_cast<int>(line.size()),
                     line.data());
    }
}

bool logged(std::string_view needle) {
    const auto& lines = log_capture().lines;
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
        return line.find(needle) != std::string::npos;
    });
}

// --- Frames ---------------------------------------------------------------------------------

/// A valid PROPOSAL frame whose transaction is `txn_bytes` bytes derived from `seq`.
shared_bytes make_frame(std::uint32_t seq, std::size_t txn_bytes) {
    std::vector<std::byte> txn(txn_bytes);
    for (std::size_t i = 0; i < txn_bytes; ++i) {
        txn[i] = static_cast<std::byte>((seq * 131u + i * 7u) & 0xffu);
    }
    return zab::encode(zab::frame_context{cluster, 0},
                       zab::wire::message{zab::wire::proposal{zab::zxid{1, seq}, txn}});
}

std::vector<std::byte> bytes_of(const shared_bytes& frame) {
    return {frame.data(), frame.data() + frame.size()};
}

std::vector<std::byte> bytes_of(const std::array<std::byte, zab::asio::hello_size>& hello) {
    return {hello.begin(), hello.end()};
}

void put_u32(std::vector<std::byte>& bytes, std::size_t offset, std::uint32_t value) {
    zab::detail::store_le(bytes.data() + offset, value);
}

// --- Transports under test ------------------------------------------------------------------

/// One transport and everything it reported.
struct node {
    peer_id id = 0;
    std::unique_ptr<tcp_transport> transport;
    std::map<peer_id, connection_id> current;  // from on_connected / on_disconnected
    std::map<peer_id, int> connects;
    std::map<peer_id, int> disconnects;
    std::vector<std::string> events;           // "+3#7": connected to 3 on connection 7
    std::map<peer_id, std::vector<shared_bytes>> received;
    std::vector<std::string> violations;
    bool inside_call = false;                  // in send() or close()
    std::function<void(node&, peer_id, connection_id, const shared_bytes&)> receive_hook;

    void check_not_inside(const char* what) {
        if (inside_call) violations.push_back(fmt::format("{} from inside send/close", what));
    }

    zab::asio::transport_handler handler() {
        return {
            [this](peer_id peer, connection_id connection) {
                check_not_inside("on_connected");
                if (current.contains(peer)) {
                    violations.push_back(fmt::format("+{}#{} while #{} is current", peer,
                                                     connection, current[peer]));
                }
                current[peer] = connection;
                ++connects[peer];
                events.push_back(fmt::format("+{}#{}", peer, connection));
            },
            [this](peer_id peer, connection_id connection) {
                check_not_inside("on_disconnected");
                if (!current.contains(peer) || current[peer] != connection) {
                    violations.push_back(fmt::format("-{}#{} is not current", peer, connection));
                }
                current.erase(peer);
                ++disconnects[peer];
                events.push_back(fmt::format("-{}#{}", peer, connection));
            },
            [this](peer_id peer, connection_id connection, const shared_bytes& frame) {
                check_not_inside("on_receive");
                if (!current.contains(peer) || current[peer] != connection) {
                    violations.push_back(fmt::format("frame on {}#{}: not current", peer,
                                                     connection));
                }
                received[peer].push_back(frame);
                if (receive_hook) receive_hook(*this, peer, connection, frame);
            },
        };
    }

    void send(peer_id to, const shared_bytes& frame) { send(to, current.at(to), frame); }
    void send(peer_id to, connection_id connection, const shared_bytes& frame) {
        inside_call = true;
        transport->send(to, connection, frame);
        inside_call = false;
    }
    void close(peer_id to, connection_id connection) {
        inside_call = true;
        transport->close(to, connection);
        inside_call = false;
    }
    const zab::asio::transport_counters& counters() const { return transport->counters(); }
};

/// Several transports on one io_context, driven by the test thread.
struct harness {
    net::io_context io;  // first: destroyed after every transport
    std::map<peer_id, std::uint16_t> ports;
    std::map<peer_id, std::unique_ptr<node>> nodes;
    std::vector<peer_id> members{1, 2, 3, 4};
    tcp_transport_options base;
    std::string dial_host = "127.0.0.1";

    harness() {
        zab::set_log_sink(&capture_sink);
        zab::set_log_level(zab::log_level::debug);
        base.cluster_id = cluster;
        base.handshake_timeout = 2000ms;
        base.reconnect_min = 10ms;
        base.reconnect_max = 200ms;
    }
    harness(const harness&) = delete;
    harness& operator=(const harness&) = delete;

    ~harness() {
        nodes.clear();
        drain();
        zab::set_log_sink(nullptr);
        zab::set_log_level(zab::log_level::warn);
    }

    tcp_transport_options options_for(peer_id id) const {
        tcp_transport_options options = base;
        options.self = id;
        for (const peer_id member : members) {
            const auto port = ports.find(member);
            options.peers[member] = {member == id ? std::string{"127.0.0.1"} : dial_host,
                                     port == ports.end() ? std::uint16_t{0} : port->second};
        }
        return options;
    }

    node& start(peer_id id,
                const std::function<void(tcp_transport_options&)>& adjust = {}) {
        auto n = std::make_unique<node>();
        n->id = id;
        tcp_transport_options options = options_for(id);
        if (adjust) adjust(options);
        n->transport = std::make_unique<tcp_transport>(io.get_executor(), std::move(options),
                                                       n->handler());
        const auto outcome = n->transport->start();
        REQUIRE(outcome.has_value());
        ports[id] = n->transport->local_port();
        REQUIRE(ports[id] != 0);
        node& started = *n;
        nodes[id] = std::move(n);
        return started;
    }

    node& operator[](peer_id id) { return *nodes.at(id); }

    /// Runs handlers until `condition()` holds; false if it did not within `limit` (a hang).
    template <typename Condition>
    bool run_until(Condition condition, std::chrono::milliseconds limit = 30s) {
        return zab::test::run_until(io, condition, limit);
    }

    /// Runs whatever is ready, for a while: lets late (wrong) events surface before a check
    /// that none came. Never a condition for success.
    void run_for(std::chrono::milliseconds duration) {
        if (io.stopped()) io.restart();
        io.run_for(duration);
    }

    /// Runs the handlers that are ready (completions of cancelled operations).
    void drain() {
        if (io.stopped()) io.restart();
        io.poll();
    }

    bool connected(peer_id a, peer_id b) {
        return nodes.contains(a) && nodes.contains(b) && nodes[a]->current.contains(b) &&
               nodes[b]->current.contains(a);
    }

    bool all_connected(std::initializer_list<peer_id> ids) {
        for (const peer_id a : ids) {
            for (const peer_id b : ids) {
                if (a < b && !connected(a, b)) return false;
            }
        }
        return true;
    }

    /// Starts 1, 2, 3 and waits until each pair is connected.
    void start_three() {
        start(1);
        start(2);
        start(3);
        REQUIRE(run_until([&] { return all_connected({1, 2, 3}); }));
    }

    void require_no_violations() {
        for (const auto& [id, n] : nodes) {
            INFO("node " << id);
            for (const auto& violation : n->violations) FAIL_CHECK(violation);
        }
    }
};

// --- Raw sockets, for whatever a transport must survive -------------------------------------

class raw_client {
public:
    raw_client(net::io_context& io, std::uint16_t port) : state_{std::make_shared<state>(io)} {
        const tcp::endpoint where{net::ip::make_address("127.0.0.1"), port};
        state_->socket.async_connect(where, [s = state_](boost::system::error_code ec) {
            if (ec) {
                s->closed = true;
                return;
            }
            s->connected = true;
            boost::system::error_code ignored;
            s->socket.set_option(tcp::no_delay{true}, ignored);
            watch(s);
        });
    }
    /// Wraps a connection accepted by a `raw_listener`.
    explicit raw_client(tcp::socket socket)
        : state_{std::make_shared<state>(std::move(socket))} {
        state_->connected = true;
        watch(state_);
    }
    raw_client(raw_client&&) = default;
    raw_client& operator=(raw_client&&) = default;
    ~raw_client() {
        if (state_) {
            boost::system::error_code ignored;
            state_->socket.close(ignored);
        }
    }

    bool connected() const { return state_->connected; }
    /// The other end closed (or reset) the connection.
    bool closed() const { return state_->closed; }
    std::vector<std::byte>& received() { return state_->received; }

    /// Writes synchronously: loopback, small amounts, so the kernel buffers it at once.
    void write(const std::vector<std::byte>& bytes) {
        boost::system::error_code ignored;
        net::write(state_->socket, net::buffer(bytes), ignored);
    }

private:
    struct state {
        explicit state(net::io_context& io) : socket{io} {}
        explicit state(tcp::socket accepted) : socket{std::move(accepted)} {}
        tcp::socket socket;
        std::array<std::byte, 65536> buffer{};
        std::vector<std::byte> received;
        bool connected = false;
        bool closed = false;
    };

    static void watch(const std::shared_ptr<state>& s) {
        s->socket.async_read_some(net::buffer(s->buffer),
                                  [s](boost::system::error_code ec, std::size_t n) {
                                      s->received.insert(s->received.end(), s->buffer.begin(),
                                                         s->buffer.begin() +
                                                             static_cast<std::ptrdiff_t>(n));
                                      if (ec) {
                                          s->closed = true;
                                          return;
                                      }
                                      watch(s);
                                  });
    }

    std::shared_ptr<state> state_;
};

/// A raw listener standing in for a member that a transport dials. Bound at once (so the port
/// is reserved and connects to it are refused), listening only once `listen()` is called.
class raw_listener {
public:
    explicit raw_listener(net::io_context& io) : acceptor_{io} {
        acceptor_.open(tcp::v4());
        acceptor_.bind(tcp::endpoint{net::ip::make_address("127.0.0.1"), 0});
    }
    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    void listen() { acceptor_.listen(); }

    /// The next connection, accepted.
    raw_client accept(harness& h) {
        struct pending {
            std::optional<tcp::socket> socket;
        };
        auto accepted = std::make_shared<pending>();
        acceptor_.async_accept([accepted](boost::system::error_code ec, tcp::socket socket) {
            if (!ec) accepted->socket.emplace(std::move(socket));
        });
        REQUIRE(h.run_until([&] { return accepted->socket.has_value(); }));
        return raw_client{std::move(*accepted->socket)};
    }

private:
    tcp::acceptor acceptor_;
};

raw_client connect_raw(harness& h, peer_id target) {
    raw_client raw{h.io, h.ports.at(target)};
    REQUIRE(h.run_until([&] { return raw.connected() || raw.closed(); }));
    REQUIRE(raw.connected());
    return raw;
}

std::vector<std::byte> hello_bytes(hello_kind kind, peer_id from, peer_id to,
                                   std::uint64_t cluster_id = cluster,
                                   zab::asio::membership_claim claim = member_claim()) {
    return bytes_of(zab::asio::encode_hello(
        hello_message{kind, cluster_id, from, to, claim, zab::asio::refusal_reason::none}));
}

/// Plays the dialer's side of the handshake as `claimed` towards transport `target`, and
/// waits until the target reports the connection. Returns its connection id there.
connection_id handshake_as(harness& h, raw_client& raw, peer_id claimed, peer_id target) {
    const int connects_before = h[target].connects[claimed];
    raw.write(hello_bytes(hello_kind::hello, claimed, target));
    REQUIRE(h.run_until([&] { return raw.received().size() >= zab::asio::hello_size; }));
    const auto welcome = zab::asio::decode_hello(raw.received());
    REQUIRE(welcome.has_value());
    CHECK(routed(welcome.value(), hello_kind::welcome, target, claimed));
    raw.received().erase(raw.received().begin(),
                         raw.received().begin() + zab::asio::hello_size);
    raw.write(hello_bytes(hello_kind::confirm, claimed, target));
    REQUIRE(h.run_until([&] { return h[target].connects[claimed] == connects_before + 1; }));
    return h[target].current.at(claimed);
}

/// Sends `bytes` on a fresh raw connection to `target` and waits until `target` closes it.
void expect_refused(harness& h, peer_id target, const std::vector<std::byte>& bytes) {
    raw_client raw = connect_raw(h, target);
    raw.write(bytes);
    REQUIRE(h.run_until([&] { return raw.closed(); }));
}

std::size_t total_received(node& n) {
    std::size_t total = 0;
    for (const auto& [peer, frames] : n.received) total += frames.size();
    return total;
}

}  // namespace

// === The pure pieces =========================================================================

TEST_CASE("hello: round trip; a hostile hello is an error value, never a crash") {
    const hello_message message{hello_kind::welcome, 0xABCDEF, 3, 1, {7, 0xD16E57, 0x1234},
                                zab::asio::refusal_reason::none};
    const auto bytes = zab::asio::encode_hello(message);
    REQUIRE(zab::asio::decode_hello(bytes).value() == message);
    hello_message refusal = message;
    refusal.kind = hello_kind::refusal;
    refusal.reason = zab::asio::refusal_reason::duplicate_id;
    REQUIRE(zab::asio::decode_hello(zab::asio::encode_hello(refusal)).value() == refusal);

    auto corrupted = [&](std::size_t offset, std::uint8_t value) {
        auto copy = bytes;
        copy[offset] = static_cast<std::byte>(value);
        return zab::asio::decode_hello(copy);
    };
    CHECK(corrupted(0, 0).error() == errc::bad_magic);
    CHECK(corrupted(4, 1).error() == errc::unsupported_version);  // the 32-byte version 1
    CHECK(corrupted(5, 0).error() == errc::malformed);  // kinds are 1..4
    CHECK(corrupted(5, 5).error() == errc::malformed);
    CHECK(corrupted(6, 1).error() == errc::malformed);  // a reason outside a refusal
    {
        auto copy = zab::asio::encode_hello(refusal);
        copy[6] = std::byte{0};  // a refusal without a reason
        CHECK(zab::asio::decode_hello(copy).error() == errc::malformed);
        copy[6] = std::byte{4};  // or with an unknown one
        CHECK(zab::asio::decode_hello(copy).error() == errc::malformed);
        copy[6] = std::byte{3};  // "I dial you", the answer to a probe
        REQUIRE(zab::asio::decode_hello(copy).has_value());
        CHECK(zab::asio::decode_hello(copy).value().reason == zab::asio::refusal_reason::dial_back);
    }
    CHECK(zab::asio::decode_hello(byte_view{bytes}.first(zab::asio::hello_size - 1)).error() ==
          errc::truncated);

    // A frame is not a hello and a hello is not a frame: each side refuses the other's bytes.
    CHECK(zab::asio::decode_hello(make_frame(1, 64).view()).error() == errc::bad_magic);
    CHECK(zab::decode_header(bytes).error() == errc::bad_magic);
}

TEST_CASE("frame_reader: frames cut anywhere come out whole and in order") {
    std::vector<shared_bytes> frames;
    std::vector<std::byte> stream;
    for (std::uint32_t seq = 0; seq < 300; ++seq) {
        const std::size_t size = seq == 150 ? 300'000 : (seq * 977u) % 3000u;
        frames.push_back(make_frame(seq, size));
        const auto bytes = bytes_of(frames.back());
        stream.insert(stream.end(), bytes.begin(), bytes.end());
    }
    for (const std::size_t chunk : {1u, 7u, 31u, 32u, 33u, 1000u, 4096u, 100'000u}) {
        INFO("chunk " << chunk);
        // A staging buffer smaller than many frames: both paths (copy out, read in place).
        zab::asio::frame_reader reader{1u << 20, 1024};
        std::vector<shared_bytes> out;
        std::size_t position = 0;
        while (position < stream.size()) {
            const auto buffer = reader.read_buffer();
            REQUIRE(!buffer.empty());
            const std::size_t n = std::min({chunk, buffer.size(), stream.size() - position});
            std::memcpy(buffer.data(), stream.data() + position, n);
            reader.commit(n);
            position += n;
            for (;;) {
                auto next = reader.next();
                REQUIRE(next.has_value());
                if (!next.value()) break;
                out.push_back(*next.value());
            }
        }
        REQUIRE(out.size() == frames.size());
        for (std::size_t i = 0; i < frames.size(); ++i) {
            INFO("frame " << i);
            REQUIRE(out[i] == frames[i]);
        }
        REQUIRE(reader.buffered_bytes() == 0);
    }
}

TEST_CASE("frame_reader: a large frame's buffer grows with what arrives, not what is announced") {
    // A 60 MiB frame announced, its bytes trickling in: the buffer stays within a doubling of
    // what arrived (plus the first step), and the frame still comes out whole.
    constexpr std::size_t payload = 60u << 20;
    const shared_bytes frame = make_frame(7, payload);
    const auto bytes = bytes_of(frame);
    zab::asio::frame_reader reader{64u << 20};
    std::size_t position = 0;
    std::size_t largest_offered = 0;
    std::optional<shared_bytes> out;
    while (!out) {
        const auto buffer = reader.read_buffer();
        REQUIRE(!buffer.empty());
        // What the reader holds for the frame never exceeds twice what arrived plus 1 MiB.
        largest_offered = std::max(largest_offered, position + buffer.size());
        CHECK(position + buffer.size() <= 2 * position + zab::asio::frame_reader::large_step_bytes +
                                               zab::asio::frame_reader::default_staging_bytes);
        const std::size_t n = std::min<std::size_t>({buffer.size(), bytes.size() - position,
                                                     std::size_t{3} << 20});
        std::memcpy(buffer.data(), bytes.data() + position, n);
        reader.commit(n);
        position += n;
        auto next = reader.next();
        REQUIRE(next.has_value());
        if (next.value()) out = *next.value();
    }
    CHECK(*out == frame);
    CHECK(largest_offered == bytes.size());
}

TEST_CASE("frame_reader: a bad or oversized header is refused before any allocation") {
    constexpr std::size_t max_frame = 64 * 1024;
    auto feed = [](zab::asio::frame_reader& reader, const std::vector<std::byte>& bytes) {
        const auto buffer = reader.read_buffer();
        REQUIRE(buffer.size() >= bytes.size());
        std::memcpy(buffer.data(), bytes.data(), bytes.size());
        reader.commit(bytes.size());
        return reader.next();
    };
    const auto header = [] {
        auto bytes = bytes_of(make_frame(1, 10));
        bytes.resize(zab::frame_header_size);
        return bytes;
    }();

    SECTION("a payload one byte over the limit") {
        auto bytes = header;
        put_u32(bytes, 24, max_frame - zab::frame_header_size + 1);
        zab::asio::frame_reader reader{max_frame};
        CHECK(feed(reader, bytes).error() == errc::oversized);
        CHECK(reader.next().error() == errc::oversized);  // stays failed
    }
    SECTION("a payload exactly at the limit is awaited") {
        auto bytes = header;
        put_u32(bytes, 24, max_frame - zab::frame_header_size);
        zab::asio::frame_reader reader{max_frame};
        const auto next = feed(reader, bytes);
        REQUIRE(next.has_value());
        CHECK_FALSE(next.value().has_value());
    }
    SECTION("a 4 GiB length") {
        auto bytes = header;
        put_u32(bytes, 24, 0xFFFFFFFFu);
        zab::asio::frame_reader reader{max_frame};
        CHECK(feed(reader, bytes).error() == errc::oversized);
    }
    SECTION("not a zab header") {
        zab::asio::frame_reader reader{max_frame};
        auto bytes = header;
        bytes[0] = std::byte{0};
        CHECK(feed(reader, bytes).error() == errc::bad_magic);
        zab::asio::frame_reader reader2{max_frame};
        bytes = header;
        bytes[5] = std::byte{0xEE};  // no such message type
        CHECK(feed(reader2, bytes).error() == errc::unknown_message_type);
        zab::asio::frame_reader reader3{max_frame};
        bytes = header;
        bytes[6] = std::byte{1};  // reserved flags
        CHECK(feed(reader3, bytes).error() == errc::malformed);
    }
}

TEST_CASE("send_queue: bounded in bytes, gathers up to the gather bound, one write at a time") {
    zab::asio::send_queue queue{1000, 250};
    const shared_bytes hundred = shared_bytes::copy_of(zab::as_bytes(std::string(100, 'x')));
    for (int i = 0; i < 10; ++i) REQUIRE(queue.push(hundred));
    CHECK_FALSE(queue.push(hundred));  // 1100 > 1000: refused, nothing queued
    CHECK(queue.queued_bytes() == 1000);

    REQUIRE(queue.ready_to_write());
    CHECK(queue.begin_write().size() == 2);  // 200 bytes; a third would pass 250
    CHECK_FALSE(queue.ready_to_write());
    CHECK_FALSE(queue.push(hundred));        // in-flight bytes still count
    const auto written = queue.finish_write();
    CHECK(written.frames == 2);
    CHECK(written.bytes == 200);
    CHECK(queue.queued_bytes() == 800);

    // A frame larger than the gather bound goes alone.
    zab::asio::send_queue big{10'000, 250};
    const shared_bytes large = shared_bytes::copy_of(zab::as_bytes(std::string(600, 'y')));
    REQUIRE(big.push(hundred));
    REQUIRE(big.push(large));
    CHECK(big.begin_write().size() == 1);
    big.finish_write();
    CHECK(big.begin_write().size() == 1);
    CHECK(big.finish_write().bytes == 600);
    CHECK_FALSE(big.ready_to_write());
}

TEST_CASE("backoff: jittered, doubling from min, capped at max, reset by a success") {
    zab::asio::backoff backoff{10ms, 100ms, 42};
    for (int attempt = 0; attempt < 12; ++attempt) {
        const auto cap = std::min(100ms, std::chrono::milliseconds{10 << std::min(attempt, 20)});
        const auto delay = backoff.next_delay();
        INFO("attempt " << attempt);
        CHECK(delay >= cap / 2);
        CHECK(delay <= cap);
    }
    backoff.reset();
    const auto first = backoff.next_delay();
    CHECK(first >= 5ms);
    CHECK(first <= 10ms);

    zab::asio::backoff forever{1ms, std::chrono::hours{1}, 7};  // no overflow, ever
    for (int attempt = 0; attempt < 200; ++attempt) {
        const auto delay = forever.next_delay();
        REQUIRE(delay >= 1ms / 2);
        REQUIRE(delay <= std::chrono::hours{1});
    }
}

// === Transports on loopback ==================================================================

TEST_CASE("tcp_transport: options are checked, a port in use is a clear error") {
    harness h;
    auto refused = [&](tcp_transport_options options, std::string_view field) {
        INFO(field);
        CHECK_THAT(options.problem(), Catch::Contains(std::string{field}));
        tcp_transport transport{h.io.get_executor(), options, {}};
        CHECK(transport.start().error() == errc::invalid_options);
    };
    auto options = h.options_for(2);
    options.self = 0;
    refused(options, "self");
    options = h.options_for(2);
    options.self = 9;
    refused(options, "peers must contain self");
    options = h.options_for(2);  // dials 1, whose port is unknown (0)
    refused(options, "peers[1].port");
    options = h.options_for(1);
    options.max_frame_size = 8;
    refused(options, "max_frame_size");
    options = h.options_for(1);
    options.reconnect_max = 1ms;
    refused(options, "reconnect_max");
    options = h.options_for(1);
    options.max_pending_handshakes = 0;
    refused(options, "max_pending_handshakes");

    node& one = h.start(1);
    CHECK(one.transport->start().error() == errc::invalid_argument);  // already started
    // A second transport on the same port: the system's error, logged with the address.
    tcp_transport clash{h.io.get_executor(), h.options_for(1), {}};
    const auto started = clash.start();
    REQUIRE_FALSE(started.has_value());
    CHECK_FALSE(started.error().message().empty());
    CHECK(logged(fmt::format("cannot listen on 127.0.0.1:{}", h.ports[1])));
    CHECK(clash.local_port() == 0);
}

TEST_CASE("tcp_transport: three transports connect pairwise, exactly once") {
    harness h;
    h.start_three();
    h.run_for(200ms);  // a duplicate or a drop would show up here
    for (const peer_id id : {1, 2, 3}) {
        node& n = h[id];
        INFO("node " << id);
        for (const peer_id other : {1, 2, 3}) {
            if (other == id) continue;
            CHECK(n.connects[other] == 1);
            CHECK(n.disconnects[other] == 0);
        }
        CHECK(n.counters().connections_established == 2);
        // 1 accepts from 2 and 3; 3 dials 1 and 2.
        CHECK(n.counters().connections_accepted == (id == 1 ? 2u : id == 2 ? 1u : 0u));
        CHECK(n.counters().connections_dialed == (id == 3 ? 2u : id == 2 ? 1u : 0u));
    }
    // Connection ids are unique within a transport.
    CHECK(h[1].current.at(2) != h[1].current.at(3));
    CHECK(h[3].current.at(1) != h[3].current.at(2));
    h.require_no_violations();
}

TEST_CASE("tcp_transport: frames arrive whole and in order, a 5 MB one included") {
    harness h;
    h.start_three();
    auto sizes = [](std::uint32_t seq) -> std::size_t {
        if (seq == 150) return 5'000'000;
        if (seq % 40 == 0) return 200'000;
        return (seq * 7919u) % 5000u;
    };
    std::map<std::pair<peer_id, peer_id>, std::vector<shared_bytes>> sent;
    const std::vector<std::pair<peer_id, peer_id>> streams{{3, 1}, {1, 3}, {2, 1}, {2, 3}};
    for (std::uint32_t seq = 0; seq < 300; ++seq) {
        for (const auto& [from, to] : streams) {
            const shared_bytes frame = make_frame(seq + 1000 * static_cast<std::uint32_t>(from),
                                                  sizes(seq));
            sent[{from, to}].push_back(frame);
            h[from].send(to, frame);
        }
    }
    REQUIRE(h.run_until([&] {
        for (const auto& [from, to] : streams) {
            if (h[to].received[from].size() < 300) return false;
        }
        return true;
    }));
    for (const auto& [from, to] : streams) {
        INFO("from " << from << " to " << to);
        const auto& got = h[to].received[from];
        REQUIRE(got.size() == 300);
        for (std::size_t i = 0; i < got.size(); ++i) {
            INFO("frame " << i);
            REQUIRE(got[i] == sent[{from, to}][i]);
        }
    }
    CHECK(h[1].counters().frames_received == 600);
    CHECK(h[3].counters().frames_received == 600);
    CHECK(h[2].counters().frames_sent == 600);
    std::uint64_t bytes_from_two = 0;
    for (const auto& frame : sent[{2, 1}]) bytes_from_two += 2 * frame.size();  // to 1 and 3
    CHECK(h[2].counters().bytes_sent == bytes_from_two);
    CHECK(h[1].disconnects.empty());
    h.require_no_violations();
}

TEST_CASE("tcp_transport: close() is reported on both sides, then a new connection") {
    harness h;
    h.start_three();
    // Closed by the acceptor (1 accepts from 3), then by the dialer (3 dials 2).
    for (const auto& pair : {std::pair<peer_id, peer_id>{1, 3}, {3, 2}}) {
        const peer_id closer = pair.first;  // not a structured binding: lambdas capture it
        const peer_id other = pair.second;
        INFO("node " << closer << " closes its connection to " << other);
        const connection_id old_here = h[closer].current.at(other);
        const connection_id old_there = h[other].current.at(closer);
        const std::size_t events_before = h[closer].events.size();
        h[closer].close(other, old_here);
        CHECK(h[closer].events.size() == events_before);  // never from inside close()
        REQUIRE(h.run_until([&] {
            return h[closer].disconnects[other] == 1 && h[other].disconnects[closer] == 1;
        }));
        CHECK(h[closer].events.at(events_before) == fmt::format("-{}#{}", other, old_here));
        REQUIRE(h.run_until([&] { return h.connected(closer, other); }));
        CHECK(h[closer].current.at(other) != old_here);
        CHECK(h[other].current.at(closer) != old_there);

        // The old id is stale: a send on it is dropped (counted), a close is ignored.
        const auto stale_before = h[closer].counters().stale_sends_dropped;
        h[closer].send(other, old_here, make_frame(1, 10));
        h[closer].close(other, old_here);
        CHECK(h[closer].counters().stale_sends_dropped == stale_before + 1);
        // The new connection carries frames.
        const shared_bytes frame = make_frame(2, 1000);
        h[closer].send(other, frame);
        REQUIRE(h.run_until([&] { return !h[other].received[closer].empty(); }));
        CHECK(h[other].received[closer].back() == frame);
    }
    h.run_for(100ms);
    CHECK(h[1].connects[3] == 2);
    CHECK(h[3].connects[2] == 2);
    CHECK(h[1].connects[2] == 1);  // the untouched pair was not disturbed
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a restarted peer is reconnected, host names resolved") {
    harness h;
    h.dial_host = "localhost";  // resolved once by start(); may try ::1 before 127.0.0.1
    h.start_three();
    const connection_id old_1 = h[1].current.at(2);
    const connection_id old_3 = h[3].current.at(2);
    h.nodes.erase(2);  // the process "crashes": its transport is destroyed
    REQUIRE(h.run_until([&] { return h[1].disconnects[2] == 1 && h[3].disconnects[2] == 1; }));
    CHECK(h[1].events.back() == fmt::format("-2#{}", old_1));

    h.start(2);  // same id, same port
    REQUIRE(h.run_until([&] { return h.all_connected({1, 2, 3}); }));
    CHECK(h[1].current.at(2) != old_1);
    CHECK(h[3].current.at(2) != old_3);
    CHECK(h[2].connects[1] == 1);
    CHECK(h[2].connects[3] == 1);
    const shared_bytes frame = make_frame(9, 100);
    h[3].send(2, frame);
    h[2].send(1, frame);
    REQUIRE(h.run_until([&] {
        return h[2].received[3].size() == 1 && h[1].received[2].size() == 1;
    }));
    h.require_no_violations();
}

TEST_CASE("tcp_transport: bad handshakes are refused, logged and counted; peers unaffected") {
    harness h;
    h.start_three();
    const auto rejected = [&](peer_id id) { return h[id].counters().rejected; };

    // Random bytes.
    std::vector<std::byte> noise(1000);
    std::uint64_t x = 12345;
    for (auto& b : noise) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        b = static_cast<std::byte>(x >> 56);
    }
    expect_refused(h, 1, noise);
    CHECK(rejected(1).bad_magic == 1);

    // A zab frame instead of a hello: the wrong magic.
    expect_refused(h, 1, bytes_of(make_frame(1, 100)));
    CHECK(rejected(1).bad_magic == 2);

    auto hello = hello_bytes(hello_kind::hello, 4, 1);
    hello[4] = std::byte{9};
    expect_refused(h, 1, hello);
    CHECK(rejected(1).bad_version == 1);

    expect_refused(h, 1, hello_bytes(hello_kind::confirm, 4, 1));  // a confirm first
    CHECK(rejected(1).malformed == 1);

    expect_refused(h, 1, hello_bytes(hello_kind::hello, 4, 1, cluster + 1));
    CHECK(rejected(1).wrong_cluster == 1);
    CHECK(logged(fmt::format("cluster id {} is not ours", cluster + 1)));

    expect_refused(h, 1, hello_bytes(hello_kind::hello, 1, 1));  // our own id
    CHECK(rejected(1).unknown_peer == 1);
    CHECK(logged("peer id 1 is our own"));

    expect_refused(h, 1, hello_bytes(hello_kind::hello, 4, 2));  // meant for peer 2
    CHECK(rejected(1).unexpected_peer == 1);

    expect_refused(h, 3, hello_bytes(hello_kind::hello, 1, 3));  // 3 dials 1, not the reverse
    CHECK(rejected(3).wrong_direction == 1);

    // Half a hello, then silence: the handshake times out.
    {
        raw_client raw = connect_raw(h, 1);
        auto partial = hello_bytes(hello_kind::hello, 4, 1);
        partial.resize(10);
        raw.write(partial);
        REQUIRE(h.run_until([&] { return raw.closed(); }));
        CHECK(rejected(1).timeout == 1);
    }
    CHECK(h[1].connects[4] == 0);
    CHECK(h[1].transport->pending_handshakes() == 0);
    for (const peer_id id : {1, 2, 3}) CHECK(h[id].disconnects.empty());
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a dialer retries, and refuses a welcome from the wrong peer") {
    harness h;
    raw_listener one{h.io};  // plays member 1, which 2 dials
    h.ports[1] = one.port();
    node& two = h.start(2);
    // Nothing listens yet: refused, and tried again (with back-off) until something does.
    REQUIRE(h.run_until([&] { return two.counters().dial_failures >= 3; }));
    one.listen();

    struct wrong_welcome {
        const char* what;
        peer_id from;
        peer_id to;
        std::uint64_t cluster_id;
        std::uint64_t zab::asio::handshake_rejections::*counter;
    };
    using rejections = zab::asio::handshake_rejections;
    const wrong_welcome cases[] = {
        {"another member answered", 3, 2, cluster, &rejections::unexpected_peer},
        {"addressed to someone else", 1, 3, cluster, &rejections::unexpected_peer},
        {"another cluster", 1, 2, cluster + 1, &rejections::wrong_cluster},
    };
    std::uint64_t unexpected = 0;
    for (const auto& c : cases) {
        INFO(c.what);
        raw_client peer = one.accept(h);
        REQUIRE(h.run_until([&] { return peer.received().size() >= zab::asio::hello_size; }));
        CHECK(routed(zab::asio::decode_hello(peer.received()).value(), hello_kind::hello, 2, 1));
        peer.write(hello_bytes(hello_kind::welcome, c.from, c.to, c.cluster_id));
        REQUIRE(h.run_until([&] { return peer.closed(); }));
        if (c.counter == &rejections::unexpected_peer) ++unexpected;
        CHECK(two.counters().rejected.unexpected_peer == unexpected);
    }
    CHECK(two.counters().rejected.wrong_cluster == 1);
    CHECK(two.connects[1] == 0);

    // The right welcome: 2 confirms, and reports the connection.
    raw_client peer = one.accept(h);
    REQUIRE(h.run_until([&] { return peer.received().size() >= zab::asio::hello_size; }));
    peer.received().clear();
    peer.write(hello_bytes(hello_kind::welcome, 1, 2));
    REQUIRE(h.run_until([&] { return peer.received().size() >= zab::asio::hello_size; }));
    CHECK(routed(zab::asio::decode_hello(peer.received()).value(), hello_kind::confirm, 2, 1));
    peer.received().clear();
    REQUIRE(h.run_until([&] { return two.connects[1] == 1; }));
    const shared_bytes frame = make_frame(4, 40);
    peer.write(bytes_of(frame));
    two.send(1, frame);
    REQUIRE(h.run_until([&] {
        return two.received[1].size() == 1 && peer.received().size() == frame.size();
    }));
    CHECK(two.received[1][0] == frame);
    CHECK(peer.received() == bytes_of(frame));
    h.require_no_violations();
}

TEST_CASE("tcp_transport: bad frames after a good handshake close that connection only") {
    harness h;
    h.start_three();
    const auto header_with = [](std::size_t offset, std::uint32_t value) {
        auto bytes = bytes_of(make_frame(1, 10));
        bytes.resize(zab::frame_header_size);
        put_u32(bytes, offset, value);
        return bytes;
    };
    const std::size_t max_payload = h.base.max_frame_size - zab::frame_header_size;

    struct bad_case {
        const char* what;
        std::vector<std::byte> bytes;
        bool oversized;
    };
    std::vector<bad_case> cases;
    cases.push_back({"a 4 GiB payload length", header_with(24, 0xFFFFFFFFu), true});
    cases.push_back({"one byte over max_frame_size",
                     header_with(24, static_cast<std::uint32_t>(max_payload + 1)), true});
    cases.push_back({"the wrong frame magic", header_with(0, 0x12345678u), false});
    auto unknown_type = header_with(24, 10);
    unknown_type[5] = std::byte{0xEE};
    cases.push_back({"an unknown message type", unknown_type, false});
    auto flags = header_with(24, 10);
    flags[6] = std::byte{1};
    cases.push_back({"reserved flags set", flags, false});

    std::uint64_t oversized = 0;
    std::uint64_t malformed = 0;
    for (const auto& c : cases) {
        INFO(c.what);
        raw_client raw = connect_raw(h, 1);
        const connection_id id = handshake_as(h, raw, 4, 1);
        raw.write(c.bytes);
        REQUIRE(h.run_until([&] { return raw.closed() && h[1].disconnects[4] > 0; }));
        CHECK(h[1].events.back() == fmt::format("-4#{}", id));
        (c.oversized ? oversized : malformed) += 1;
        CHECK(h[1].counters().oversized_frames == oversized);
        CHECK(h[1].counters().malformed_frames == malformed);
        CHECK(h[1].received[4].empty());
        h[1].disconnects[4] = 0;
    }
    CHECK(logged("bad frame header"));
    for (const peer_id id : {1, 2, 3}) {
        for (const peer_id other : {1, 2, 3}) {
            if (other != id) CHECK(h[id].disconnects[other] == 0);
        }
    }
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a frame trickled one byte at a time is delivered whole") {
    harness h;
    h.start_three();
    raw_client raw = connect_raw(h, 1);
    const connection_id id = handshake_as(h, raw, 4, 1);
    const shared_bytes frame = make_frame(77, 300);
    const auto bytes = bytes_of(frame);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const auto before = h[1].counters().bytes_received;
        raw.write({bytes[i]});
        // Each byte is read on its own before the next is written.
        REQUIRE(h.run_until([&] { return h[1].counters().bytes_received == before + 1; }));
        if (i + 1 < bytes.size()) REQUIRE(h[1].received[4].empty());
    }
    REQUIRE(h.run_until([&] { return h[1].received[4].size() == 1; }));
    CHECK(h[1].received[4][0] == frame);
    CHECK(h[1].current.at(4) == id);

    // And the other way: a frame sent to the raw peer arrives as written.
    h[1].send(4, frame);
    REQUIRE(h.run_until([&] { return raw.received().size() >= frame.size(); }));
    CHECK(raw.received() == bytes);
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a flood of silent connections is bounded; the peers keep talking") {
    harness h;
    h.base.handshake_timeout = 1500ms;
    h.start_three();
    const auto accepted_before = h[1].counters().connections_accepted;

    std::vector<raw_client> flood;
    flood.reserve(200);
    for (int i = 0; i < 200; ++i) flood.emplace_back(h.io, h.ports[1]);

    // Meanwhile, the real peers exchange frames.
    std::vector<shared_bytes> sent;
    for (std::uint32_t seq = 0; seq < 100; ++seq) {
        sent.push_back(make_frame(seq, 100 + seq * 10));
        h[3].send(1, sent.back());
        h[2].send(1, sent.back());
        h[1].send(3, sent.back());
    }
    REQUIRE(h.run_until([&] {
        return h[1].counters().connections_accepted == accepted_before + 200;
    }));
    const auto& rejected = h[1].counters().rejected;
    CHECK(h[1].transport->pending_handshakes() <= 64);
    CHECK(rejected.too_many_pending >= 136);
    CHECK(rejected.too_many_pending + h[1].transport->pending_handshakes() + rejected.timeout == 200);
    CHECK(logged("handshakes already pending"));

    REQUIRE(h.run_until([&] {
        return h[1].received[3].size() == 100 && h[1].received[2].size() == 100 &&
               h[3].received[1].size() == 100;
    }));
    CHECK(h[1].received[3] == sent);
    CHECK(h[3].received[1] == sent);

    // The pending ones time out; then a real handshake gets a slot again.
    REQUIRE(h.run_until([&] { return h[1].transport->pending_handshakes() == 0; }));
    CHECK(rejected.timeout + rejected.too_many_pending == 200);
    REQUIRE(h.run_until([&] {
        return std::all_of(flood.begin(), flood.end(), [](const raw_client& r) {
            return r.closed();
        });
    }));
    raw_client late = connect_raw(h, 1);
    handshake_as(h, late, 4, 1);

    for (const peer_id id : {1, 2, 3}) {
        for (const peer_id other : {1, 2, 3}) {
            if (other != id) CHECK(h[id].connects[other] == 1);
        }
        CHECK(h[id].disconnects.empty());
    }
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a send queue overflow closes that connection, never blocks") {
    harness h;
    h.base.max_queued_bytes_per_peer = 1u << 20;
    h.start_three();
    const connection_id old = h[1].current.at(3);
    const std::size_t events_before = h[1].events.size();
    // No handler runs between these sends, so no write can complete and pop its frames: the
    // frame after the last that fits overflows, and the sends after it name a closed
    // connection.
    const shared_bytes frame = make_frame(1, 128 * 1024);
    const std::size_t fitting = h.base.max_queued_bytes_per_peer / frame.size();
    for (int i = 0; i < 16; ++i) h[1].send(3, old, frame);
    CHECK(h[1].counters().queue_overflows == 1);
    CHECK(h[1].counters().stale_sends_dropped == 16 - (fitting + 1));
    CHECK(h[1].events.size() == events_before);  // on_disconnected comes later
    CHECK(logged("send queue to peer 3 is full"));

    REQUIRE(h.run_until([&] { return h[1].disconnects[3] == 1 && h[3].disconnects[1] == 1; }));
    CHECK(h[1].events.at(events_before) == fmt::format("-3#{}", old));
    REQUIRE(h.run_until([&] { return h.connected(1, 3); }));
    h[1].send(3, frame);
    REQUIRE(h.run_until([&] { return !h[3].received[1].empty(); }));
    CHECK(h[3].received[1].back() == frame);
    CHECK(h[1].connects[2] == 1);
    CHECK(h[1].disconnects[2] == 0);
    h.require_no_violations();
}

TEST_CASE("tcp_transport: stop() and destruction with operations in flight") {
    harness h;
    h.start_three();
    // Work in flight everywhere: pending handshakes, half a frame, large writes both ways.
    raw_client silent = connect_raw(h, 1);
    raw_client talker = connect_raw(h, 1);
    handshake_as(h, talker, 4, 1);
    talker.write([] {
        auto half = bytes_of(make_frame(3, 1000));
        half.resize(500);
        return half;
    }());
    const shared_bytes big = make_frame(8, 5'000'000);
    h[2].send(1, make_frame(9, 10));  // 1's first frame: it stops on it
    for (int i = 0; i < 3; ++i) {
        h[3].send(1, big);
        h[1].send(3, big);
        h[2].send(3, big);
        h[3].send(2, big);
    }

    // 1 stops itself from inside its first on_receive; 3 destroys its own transport from
    // inside its first on_receive. Neither hears anything afterwards.
    std::size_t events_at_stop_1 = 0;
    std::size_t received_at_stop_1 = 0;
    bool three_destroyed = false;
    h[1].receive_hook = [&](node& n, peer_id, connection_id, const shared_bytes&) {
        if (events_at_stop_1 != 0) return;
        n.transport->stop();
        n.transport->stop();  // idempotent
        events_at_stop_1 = n.events.size();
        received_at_stop_1 = total_received(n);
    };
    h[3].receive_hook = [&](node& n, peer_id, connection_id, const shared_bytes&) {
        n.transport.reset();
        three_destroyed = true;
    };
    REQUIRE(h.run_until([&] { return events_at_stop_1 != 0 && three_destroyed; }));
    const std::size_t events_3 = h[3].events.size();
    const std::size_t received_3 = total_received(h[3]);

    // A stopped transport ignores everything and cannot be restarted.
    h[1].send(2, 1, big);
    h[1].close(2, 1);
    CHECK(h[1].transport->start().error() == errc::invalid_argument);

    // 2 is stopped and destroyed at once, mid-write.
    h[2].transport->stop();
    h[2].transport.reset();
    h.run_for(300ms);  // every cancelled operation completes, touching nothing freed
    CHECK(h[1].events.size() == events_at_stop_1);
    CHECK(total_received(h[1]) == received_at_stop_1);
    CHECK(h[3].events.size() == events_3);
    CHECK(total_received(h[3]) == received_3);
    REQUIRE(h.run_until([&] { return silent.closed() && talker.closed(); }));

    h[1].transport.reset();  // destroyed after stop(), with nothing left to cancel
    h.drain();
    h.require_no_violations();
}

// === Members that contradict each other (issue 15 defect 9) ==================================

namespace {

const zab::asio::member_conflict* conflict_with(node& n, peer_id peer,
                                                zab::asio::refusal_reason reason,
                                                bool refused_us) {
    for (const auto& c : n.transport->conflicts())
        if (c.peer == peer && c.reason == reason && c.refused_us == refused_us) return &c;
    return nullptr;
}

}  // namespace

TEST_CASE("tcp_transport: replicas started with different member lists refuse each other and "
          "say why on both sides") {
    using zab::asio::refusal_reason;
    harness h;
    h.start(1);
    // 2 was started believing the group is 1, 2, 3, 5: the same version (0), other members.
    h.members = {1, 2, 3, 5};
    node& two = h.start(2);
    REQUIRE(h.run_until([&] { return two.counters().rejected.refused_by_peer >= 3; }));
    CHECK(h[1].counters().rejected.different_membership >= 3);
    CHECK(h[1].connects[2] == 0);
    CHECK(two.connects[1] == 0);
    const auto* ours = conflict_with(h[1], 2, refusal_reason::different_membership, false);
    const auto* theirs = conflict_with(two, 1, refusal_reason::different_membership, true);
    REQUIRE(ours != nullptr);
    REQUIRE(theirs != nullptr);
    CHECK(ours->times >= 3);
    CHECK(ours->detail.find("peer 2 was started with a different member list") !=
          std::string::npos);
    CHECK(theirs->detail.find("peer 1 refused us: different membership") != std::string::npos);
    CHECK(h[1].transport->conflicts().size() == 1);  // one finding, counted, not one per try
    CHECK(logged("was started with a different member list"));

    // At another configuration version the lists may differ (a reconfiguration brings the
    // older one up to date): the handshake passes.
    h.nodes.erase(2);
    h.drain();
    node& later = h.start(2, [](tcp_transport_options& o) { o.config_version = 7; });
    REQUIRE(h.run_until([&] { return h.connected(1, 2); }));
    CHECK(later.transport->conflicts().empty());
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a connection claiming an existing peer's id replaces it once; the "
          "replaced process coming back while it is connected is a duplicate, refused") {
    using zab::asio::refusal_reason;
    harness h;
    // The real 3 notices and dials again after this: a margin for the impostor's exchange.
    h.base.reconnect_min = 300ms;
    h.base.reconnect_max = 600ms;
    h.start_three();
    const connection_id original = h[1].current.at(3);

    // A raw socket claims to be 3 (say, 3 restarted and its old connection is half-open).
    std::optional<raw_client> impostor{connect_raw(h, 1)};
    const connection_id replacement = handshake_as(h, *impostor, 3, 1);
    const auto& events = h[1].events;
    REQUIRE(events.size() >= 2);
    CHECK(events[events.size() - 2] == fmt::format("-3#{}", original));
    CHECK(events.back() == fmt::format("+3#{}", replacement));
    CHECK(h[1].counters().replaced_connections == 1);

    // The new connection carries frames both ways.
    const shared_bytes frame = make_frame(5, 50);
    impostor->write(bytes_of(frame));
    REQUIRE(h.run_until([&] { return !h[1].received[3].empty(); }));
    CHECK(h[1].received[3].back() == frame);
    h[1].send(3, replacement, frame);
    REQUIRE(h.run_until([&] { return impostor->received().size() >= frame.size(); }));

    // The real 3 is alive: it lost its connection and dials again. Two live processes hold
    // id 3 now. It is refused, told why, and the other's connection is left alone (they used
    // to replace each other, forever).
    REQUIRE(h.run_until([&] { return h[3].disconnects[1] == 1; }));
    REQUIRE(h.run_until([&] { return h[3].counters().rejected.refused_by_peer >= 2; }));
    CHECK(h[1].counters().replaced_connections == 1);
    CHECK(h[1].counters().rejected.duplicate_id >= 2);
    CHECK(h[1].current.at(3) == replacement);
    CHECK(!impostor->closed());
    const auto* ours = conflict_with(h[1], 3, refusal_reason::duplicate_id, false);
    const auto* theirs = conflict_with(h[3], 1, refusal_reason::duplicate_id, true);
    REQUIRE(ours != nullptr);
    REQUIRE(theirs != nullptr);
    CHECK(ours->detail.find("two live processes have id 3") != std::string::npos);
    CHECK(ours->detail.find("(process 0000000000005eed)") != std::string::npos);
    CHECK(theirs->detail.find("another live process has our id 3") != std::string::npos);
    CHECK(logged("two live processes have id 3"));

    // The other process goes away: the real 3 is taken back.
    impostor.reset();
    REQUIRE(h.run_until([&] { return h.connected(1, 3); }));
    CHECK(h[1].current.at(3) != replacement);
    const shared_bytes after = make_frame(6, 60);
    h[3].send(1, after);
    REQUIRE(h.run_until([&] { return h[1].received[3].back() == after; }));
    h.require_no_violations();
}

// === Members that change: joiners, update_members (reconfiguration, docs/protocol.md §9) ======

namespace {

/// The digest of a member list of voters `ids` (what a transport of those peers claims).
std::uint64_t digest_of(std::initializer_list<peer_id> ids) {
    std::vector<zab::member> members;
    for (const peer_id id : ids) members.push_back({id, zab::learner_type::participant});
    return zab::configuration::membership_digest(members);
}

/// `h`'s address of transport `id` (as update_members takes it).
zab::asio::tcp_endpoint address_of(harness& h, peer_id id) {
    return {"127.0.0.1", h.ports.at(id)};
}

}  // namespace

TEST_CASE("tcp_transport: a joiner unknown to the members connects to each and exchanges "
          "frames") {
    harness h;
    h.members = {1, 2, 3};
    h.start_three();
    // 5 knows the members and itself, and claims the members' list (it is not in it).
    node& five = h.start(5, [&](tcp_transport_options& o) {
        o.peers[5] = {"127.0.0.1", 0};
        o.config_digest = digest_of({1, 2, 3});
    });
    REQUIRE(h.run_until([&] { return h.all_connected({1, 2, 3, 5}); }));
    for (const peer_id id : {1, 2, 3}) {
        INFO("member " << id);
        const auto info = h[id].transport->peer_info(5);
        REQUIRE(info.has_value());
        CHECK(info->kind == zab::asio::peer_kind::joiner);
        CHECK(!info->dialed_by_us);
        CHECK(info->connected);
        CHECK(h[id].counters().joiners_admitted == 1);
        CHECK(h[id].counters().rejected.unknown_peer == 0);
    }
    CHECK(logged("peer 5 (from 127.0.0.1:"));
    const shared_bytes to_joiner = make_frame(1, 100), from_joiner = make_frame(2, 200);
    h[1].send(5, to_joiner);
    five.send(2, from_joiner);
    REQUIRE(h.run_until([&] { return !five.received[1].empty() && !h[2].received[5].empty(); }));
    CHECK(five.received[1].front() == to_joiner);
    CHECK(h[2].received[5].front() == from_joiner);
    h.require_no_violations();
}

TEST_CASE("tcp_transport: update_members adds a member that is then dialed, moves one, retires "
          "one; a joiner becomes a member") {
    harness h;
    h.members = {1, 2, 3};
    h.start(1);
    h.start(2);
    // 3 knows 2's address but not 1's (a member it learns of later), and claims {1, 2, 3}.
    node& three = h.start(3, [&](tcp_transport_options& o) {
        o.peers.erase(1);
        o.config_digest = digest_of({1, 2, 3});
    });
    REQUIRE(h.run_until([&] { return h.connected(2, 3); }));
    CHECK(!three.transport->peer_info(1).has_value());
    three.transport->update_members(
        {{1, address_of(h, 1)}, {2, address_of(h, 2)}, {3, {"127.0.0.1", 0}}}, 0,
        digest_of({1, 2, 3}));
    REQUIRE(h.run_until([&] { return h.all_connected({1, 2, 3}); }));
    CHECK(three.transport->peer_info(1)->dialed_by_us);

    // 1 moves (say, to another machine): the connection to the old address stays; the next
    // dial goes to the new one.
    raw_listener moved{h.io};
    moved.listen();
    const connection_id before = three.current.at(1);
    three.transport->update_members(
        {{1, {"127.0.0.1", moved.port()}}, {2, address_of(h, 2)}, {3, {"127.0.0.1", 0}}}, 0,
        digest_of({1, 2, 3}));
    h.run_for(100ms);
    CHECK(three.current.at(1) == before);
    CHECK(three.disconnects[1] == 0);
    CHECK(three.transport->peer_info(1)->address.port == moved.port());
    three.close(1, before);
    raw_client dialed = moved.accept(h);
    REQUIRE(h.run_until([&] { return dialed.received().size() >= zab::asio::hello_size; }));
    const auto hello = zab::asio::decode_hello(dialed.received());
    REQUIRE(hello.has_value());
    CHECK(routed(hello.value(), hello_kind::hello, 3, 1));

    // 2 is removed from the group: retired at 3, never dialed again, but a connection from it
    // is still accepted (a removed member that restarts must hear it was removed).
    const auto dialed_before = three.counters().connections_dialed;
    three.transport->update_members({{1, {"127.0.0.1", moved.port()}}, {3, {"127.0.0.1", 0}}},
                                    9, digest_of({1, 3}));
    CHECK(three.transport->claim().config_version == 9);
    CHECK(three.transport->claim().config_digest == digest_of({1, 3}));
    CHECK(three.transport->peer_info(2)->kind == zab::asio::peer_kind::retired);
    CHECK(!three.transport->peer_info(2)->dialed_by_us);
    three.close(2, three.current.at(2));
    REQUIRE(h.run_until([&] { return !h[2].current.contains(3); }));
    h.run_for(300ms);  // a redial (every 10-200 ms here) would show up
    CHECK(!three.current.contains(2));
    CHECK(three.counters().connections_dialed == dialed_before);
    CHECK(logged("peer 2 is no longer a member"));
    // 2 restarted from its files, at the configuration version before (a raw client plays
    // it), connects to 3, which it used to be dialed by: accepted.
    raw_client returning = connect_raw(h, 3);
    returning.write(hello_bytes(hello_kind::hello, 2, 3));
    REQUIRE(h.run_until([&] { return returning.received().size() >= zab::asio::hello_size; }));
    const auto welcome = zab::asio::decode_hello(returning.received());
    REQUIRE(welcome.has_value());
    CHECK(routed(welcome.value(), hello_kind::welcome, 3, 2));
    CHECK(three.counters().rejected.wrong_direction == 0);

    // A joiner (5) that a reconfiguration then makes a member keeps its connection.
    node& five = h.start(5, [&](tcp_transport_options& o) {
        o.peers = {{1, address_of(h, 1)}, {5, {"127.0.0.1", 0}}};
        o.config_digest = digest_of({1, 2, 3});
    });
    REQUIRE(h.run_until([&] { return h.connected(1, 5); }));
    CHECK(h[1].transport->peer_info(5)->kind == zab::asio::peer_kind::joiner);
    const connection_id joined = h[1].current.at(5);
    h[1].transport->update_members({{1, address_of(h, 1)}, {5, address_of(h, 5)}}, 11,
                                   digest_of({1, 5}));
    CHECK(h[1].transport->peer_info(5)->kind == zab::asio::peer_kind::member);
    CHECK(!h[1].transport->peer_info(5)->dialed_by_us);  // 5 is the higher id: it dials
    h.run_for(100ms);
    CHECK(h[1].current.at(5) == joined);
    (void)five;
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a removed member with the lowest id, restarted with its old member "
          "list, probes the members that retired it and is connected (issue 34 defect 12)") {
    harness h;
    h.members = {1, 2, 3};
    const auto fast_probe = [](tcp_transport_options& o) { o.probe_after = 100ms; };
    h.start(1, fast_probe);
    h.start(2, fast_probe);
    h.start(3, fast_probe);
    REQUIRE(h.run_until([&] { return h.all_connected({1, 2, 3}); }));
    h.nodes.erase(1);  // 1 stops
    REQUIRE(h.run_until([&] { return h[2].disconnects[1] == 1 && h[3].disconnects[1] == 1; }));
    // A reconfiguration removed 1 while it was down: 2 and 3 retired it.
    for (const peer_id id : {2, 3})
        h[id].transport->update_members({{2, address_of(h, 2)}, {3, address_of(h, 3)}}, 9,
                                        digest_of({2, 3}));
    // 1 restarts from its files: members {1, 2, 3} at the version before. It dials nobody
    // (both are above it), and nobody dials it; only its probes reach them.
    node& one = h.start(1, fast_probe);
    REQUIRE(h.run_until([&] { return h.connected(1, 2) && h.connected(1, 3); }, 10s));
    CHECK(one.counters().probes >= 2);
    CHECK(one.counters().probes_dialed_back == 0);
    CHECK(one.counters().connections_dialed >= 2);
    for (const peer_id id : {2, 3}) {
        CHECK(h[id].transport->peer_info(1)->kind == zab::asio::peer_kind::retired);
        CHECK(h[id].counters().rejected.wrong_direction == 0);
        CHECK(h[id].transport->conflicts().empty());
    }
    CHECK(one.transport->conflicts().empty());
    // The connection carries frames both ways (the members' cores tell 1's it was removed).
    one.send(2, make_frame(1, 10));
    h[3].send(1, make_frame(2, 10));
    REQUIRE(h.run_until([&] { return h[2].received[1].size() == 1 && one.received[3].size() == 1; }));
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a probe of a member that dials us is answered \"I dial you\" and "
          "dialed at once, whatever its back-off; no conflict either side") {
    harness h;
    h.members = {1, 2};
    // 2 starts first: its dial of 1 fails, and its back-off is a minute.
    node& two = h.start(2, [](tcp_transport_options& o) {
        o.reconnect_min = 60s;
        o.reconnect_max = 60s;
        o.peers[1].port = 1;  // nobody listens there: the first dial fails
    });
    REQUIRE(h.run_until([&] { return two.counters().dial_failures >= 1; }, 10s));
    // 2 learns 1's real address (as a reconfiguration would give it): dialed next time, in a
    // minute. 1's probe brings that forward.
    node& one = h.start(1, [](tcp_transport_options& o) { o.probe_after = 100ms; });
    two.transport->update_members({{1, address_of(h, 1)}, {2, address_of(h, 2)}}, 0,
                                  digest_of({1, 2}));
    const auto started = std::chrono::steady_clock::now();
    REQUIRE(h.run_until([&] { return h.connected(1, 2); }, 10s));
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    CHECK(one.counters().probes >= 1);
    CHECK(one.counters().probes_dialed_back >= 1);
    CHECK(one.counters().connections_dialed == one.counters().probes);  // probes only
    CHECK(two.counters().rejected.wrong_direction >= 1);
    CHECK(one.counters().rejected.refused_by_peer == 0);
    CHECK(one.transport->conflicts().empty());
    CHECK(two.transport->conflicts().empty());
    // The established connection is 2's (the higher id dials): 1 probes no more.
    const auto probes = one.counters().probes;
    h.run_for(400ms);
    CHECK(one.counters().probes == probes);
    CHECK(h[1].connects[2] == 1);
    h.require_no_violations();
}

TEST_CASE("tcp_transport: at most max_joiners ids that are not members are connected at once") {
    harness h;  // members 1..4; 1 alone runs
    h.start(1, [](tcp_transport_options& o) { o.max_joiners = 1; });
    std::optional<raw_client> seven{connect_raw(h, 1)};
    handshake_as(h, *seven, 7, 1);
    CHECK(h[1].transport->peer_info(7)->kind == zab::asio::peer_kind::joiner);

    // A second joiner is refused while 7 is connected, and said why.
    expect_refused(h, 1, hello_bytes(hello_kind::hello, 8, 1));
    CHECK(h[1].counters().rejected.too_many_joiners == 1);
    CHECK(logged("peer 8 is not a member, and 1 joiners are connected already (max_joiners 1)"));
    CHECK(h[1].connects[8] == 0);
    // Members are not joiners: 4 still gets in.
    raw_client four = connect_raw(h, 1);
    handshake_as(h, four, 4, 1);

    // Once 7 is gone, 8 may join.
    seven.reset();  // its socket closes
    REQUIRE(h.run_until([&] { return !h[1].current.contains(7); }));
    std::optional<raw_client> eight{connect_raw(h, 1)};
    handshake_as(h, *eight, 8, 1);
    CHECK(h[1].counters().joiners_admitted == 2);

    // Joiners come and go under ever new ids: each gets in, and the records of those gone
    // are reused (at most 4 * max_joiners + 16 kept), so the table stays bounded.
    eight.reset();
    REQUIRE(h.run_until([&] { return !h[1].current.contains(8); }));
    for (peer_id id = 100; id < 130; ++id) {
        INFO("joiner " << id);
        std::optional<raw_client> joiner{connect_raw(h, 1)};
        handshake_as(h, *joiner, id, 1);
        joiner.reset();
        REQUIRE(h.run_until([&] { return !h[1].current.contains(id); }));
    }
    CHECK(h[1].counters().joiners_admitted == 32);
    CHECK(h[1].counters().rejected.too_many_joiners == 1);
    CHECK(!h[1].transport->peer_info(100).has_value());  // forgotten to make room
    CHECK(h[1].transport->peer_info(129)->kind == zab::asio::peer_kind::joiner);

    // With max_joiners 0 nobody but members gets in.
    h.start(2, [](tcp_transport_options& o) { o.max_joiners = 0; });
    expect_refused(h, 2, hello_bytes(hello_kind::hello, 9, 2));
    CHECK(h[2].counters().rejected.too_many_joiners == 1);
    h.require_no_violations();
}

TEST_CASE("tcp_transport: a learned member whose host name does not resolve is retried, never "
          "a crash") {
    harness h;
    h.members = {1, 2};
    node& two = h.start(2, [](tcp_transport_options& o) { o.peers.erase(1); });
    h.start(1);
    two.transport->update_members({{1, {"no-such-host.invalid", 7001}}, {2, {"127.0.0.1", 0}}},
                                  0, digest_of({1, 2}));
    REQUIRE(h.run_until([&] { return two.counters().resolve_failures >= 2; }));
    CHECK(logged("cannot resolve no-such-host.invalid"));
    // Told the right address, it connects.
    two.transport->update_members({{1, address_of(h, 1)}, {2, {"127.0.0.1", 0}}}, 0,
                                  digest_of({1, 2}));
    REQUIRE(h.run_until([&] { return h.connected(1, 2); }));
    h.require_no_violations();
}
