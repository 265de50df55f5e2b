// zab_compare_load — the one load generator of benchmarks/compare/run: a closed loop of
// operations against kv_server or redis-server (RESP), a ZooKeeper ensemble (its client wire
// protocol, jute) or an etcd cluster (its JSON gateway over HTTP/1.1), with the same
// methodology for every protocol:
//
//   - W operations outstanding at all times (closed loop: each completion issues the next),
//     over C connections (default: min(W, 8) for RESP and ZooKeeper, which pipeline on one
//     connection; W for etcd, whose HTTP/1.1 gateway answers one request at a time per
//     connection);
//   - each operation on a key drawn uniformly from K keys (k000000 ...), 100-byte values;
//   - a warm-up, then a measured interval: every operation completing in it counts, with its
//     latency (issue to last reply byte parsed), kept per operation and sorted at the end;
//   - the server processes' CPU (utime + stime of /proc/<pid>/stat, every thread) read at the
//     start and at the end of the measured interval, divided by the operations;
//   - then the outstanding operations drain and the connections close (ZooKeeper sessions
//     with closeSession, so that no session expiry lands in a later measurement).
//
// One thread, one io_context: every protocol gets the same client.
//
//   zab_compare_load --protocol resp|zookeeper|etcd --endpoints 127.0.0.1:P[,...]
//                    --op populate|write|read|read-linearizable [--outstanding 1]
//                    [--connections N] [--warmup 2] [--duration 10] [--keys 1000]
//                    [--value-bytes 100] [--server-pids PID,...] [--resp-linearizable
//                    readmode|get] [--seed 1] [--header]
//
// Operations per protocol:
//   resp       write: SET k v; read: GET k; read-linearizable: GET k on a connection that sent
//              READMODE linearizable first (kv_server; --resp-linearizable get: a plain GET,
//              for a single redis-server, where every read is linearizable); populate: SET.
//   zookeeper  write: setData(/zcmp/k, v, version -1); read: getData(/zcmp/k); read-
//              linearizable: sync(/zcmp/k) then getData(/zcmp/k), pipelined, one operation;
//              populate: create(/zcmp/k, v) (an existing node is fine), /zcmp first.
//   etcd       write: POST /v3/kv/put; read: POST /v3/kv/range with serializable: true;
//              read-linearizable: the same range without it; populate: put.
//
// populate writes every key once (spread over the connections) and prints how long it took.
// Otherwise one CSV line (--header: a header line first): protocol, operation, outstanding,
// connections, depth (outstanding per connection, at most), ops, seconds, ops_per_s, p50_us,
// p99_us, max_us, server_cpu_us_per_op (empty without --server-pids),
// client_cpu_us_per_op, load1 (the 1-minute load average when the program started).
//
// Endpoints are numeric IPv4/IPv6 addresses. A server closing a connection, an error reply, a
// malformed reply or a read that misses its key stops the run: a message on stderr, exit 1.
// Bad command line: exit 2.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <variant>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using clock_type = std::chrono::steady_clock;
constexpr auto use_tuple = net::as_tuple(net::use_awaitable);

/// What stops a run: printed on stderr, exit 1.
class failure : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class protocol { resp, zookeeper, etcd };
enum class operation { populate, write, read, read_linearizable };

std::string_view name_of(protocol p) {
    switch (p) {
        case protocol::resp: return "resp";
        case protocol::zookeeper: return "zookeeper";
        case protocol::etcd: return "etcd";
    }
    return "?";
}

std::string_view name_of(operation o) {
    switch (o) {
        case operation::populate: return "populate";
        case operation::write: return "write";
        case operation::read: return "read";
        case operation::read_linearizable: return "read-linearizable";
    }
    return "?";
}

struct options {
    protocol proto = protocol::resp;
    operation op = operation::write;
    std::vector<tcp::endpoint> endpoints;
    int outstanding = 1;
    int connections = 0;  ///< 0: the protocol's default
    double warmup_s = 2;
    double duration_s = 10;
    int keys = 1000;
    int value_bytes = 100;
    std::vector<int> server_pids;
    bool resp_readmode = true;  ///< read-linearizable over RESP: READMODE linearizable first
    std::uint64_t seed = 1;
    bool header = false;
};

// ---- command line -------------------------------------------------------------------------

constexpr std::string_view usage_text =
    "usage: zab_compare_load --protocol resp|zookeeper|etcd --endpoints ADDR:PORT[,...]\n"
    "                        --op populate|write|read|read-linearizable [--outstanding 1]\n"
    "                        [--connections N] [--warmup 2] [--duration 10] [--keys 1000]\n"
    "                        [--value-bytes 100] [--server-pids PID,...]\n"
    "                        [--resp-linearizable readmode|get] [--seed 1] [--header]\n";

template <typename Int>
std::optional<Int> parse_int(std::string_view text) {
    Int value{};
    const auto* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || ptr != end) return std::nullopt;
    return value;
}

std::optional<double> parse_seconds(std::string_view text) {
    double value = 0;
    const auto* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || ptr != end || !(value >= 0) || value > 86400) return std::nullopt;
    return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    while (true) {
        const auto at = text.find(separator);
        parts.push_back(text.substr(0, at));
        if (at == std::string_view::npos) return parts;
        text.remove_prefix(at + 1);
    }
}

std::optional<tcp::endpoint> parse_endpoint(std::string_view text) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    const auto port = parse_int<std::uint16_t>(text.substr(colon + 1));
    boost::system::error_code ec;
    const auto address = net::ip::make_address(std::string(host), ec);
    if (ec || !port || *port == 0) return std::nullopt;
    return tcp::endpoint{address, *port};
}

/// The options, or a message saying what is wrong with the command line.
std::variant<options, std::string> parse_arguments(int argc, char** argv) {
    options o;
    bool have_protocol = false, have_op = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--header") {
            o.header = true;
            continue;
        }
        if (i + 1 >= argc) return fmt::format("{} needs a value", flag);
        const std::string_view value = argv[++i];
        if (flag == "--protocol") {
            if (value == "resp") o.proto = protocol::resp;
            else if (value == "zookeeper") o.proto = protocol::zookeeper;
            else if (value == "etcd") o.proto = protocol::etcd;
            else return fmt::format("--protocol: '{}' is not resp, zookeeper or etcd", value);
            have_protocol = true;
        } else if (flag == "--op") {
            if (value == "populate") o.op = operation::populate;
            else if (value == "write") o.op = operation::write;
            else if (value == "read") o.op = operation::read;
            else if (value == "read-linearizable") o.op = operation::read_linearizable;
            else return fmt::format("--op: '{}' is not populate, write, read or read-linearizable", value);
            have_op = true;
        } else if (flag == "--endpoints") {
            for (auto part : split(value, ',')) {
                const auto endpoint = parse_endpoint(part);
                if (!endpoint) return fmt::format("--endpoints: '{}' is not ADDRESS:PORT", part);
                o.endpoints.push_back(*endpoint);
            }
        } else if (flag == "--outstanding" || flag == "--connections" || flag == "--keys" ||
                   flag == "--value-bytes") {
            const auto n = parse_int<int>(value);
            const int low = flag == "--connections" || flag == "--value-bytes" ? 0 : 1;
            if (!n || *n < low || *n > 1'000'000)
                return fmt::format("{}: '{}' is not a number from {} to 1000000", flag, value, low);
            if (flag == "--outstanding") o.outstanding = *n;
            else if (flag == "--connections") o.connections = *n;
            else if (flag == "--keys") o.keys = *n;
            else o.value_bytes = *n;
        } else if (flag == "--warmup" || flag == "--duration") {
            const auto s = parse_seconds(value);
            if (!s) return fmt::format("{}: '{}' is not a number of seconds", flag, value);
            (flag == "--warmup" ? o.warmup_s : o.duration_s) = *s;
        } else if (flag == "--server-pids") {
            for (auto part : split(value, ',')) {
                const auto pid = parse_int<int>(part);
                if (!pid || *pid <= 0) return fmt::format("--server-pids: '{}' is not a pid", part);
                o.server_pids.push_back(*pid);
            }
        } else if (flag == "--resp-linearizable") {
            if (value == "readmode") o.resp_readmode = true;
            else if (value == "get") o.resp_readmode = false;
            else return fmt::format("--resp-linearizable: '{}' is not readmode or get", value);
        } else if (flag == "--seed") {
            const auto n = parse_int<std::uint64_t>(value);
            if (!n) return fmt::format("--seed: '{}' is not a number", value);
            o.seed = *n;
        } else {
            return fmt::format("unknown option '{}'", flag);
        }
    }
    if (!have_protocol) return std::string("--protocol is required");
    if (!have_op) return std::string("--op is required");
    if (o.endpoints.empty()) return std::string("--endpoints is required");
    if (o.duration_s <= 0 && o.op != operation::populate)
        return std::string("--duration must be above 0");
    if (o.connections == 0)
        o.connections = o.proto == protocol::etcd ? o.outstanding : std::min(o.outstanding, 8);
    if (o.connections > o.outstanding)
        return fmt::format("--connections {} is above --outstanding {}", o.connections,
                           o.outstanding);
    if (o.proto == protocol::etcd && o.connections != o.outstanding)
        return std::string(
            "etcd: HTTP/1.1 carries one request at a time: --connections must equal --outstanding");
    return o;
}

// ---- what the run measures ----------------------------------------------------------------

/// The CPU time (utime + stime, in clock ticks) of the processes, from /proc/<pid>/stat.
std::uint64_t cpu_ticks(const std::vector<int>& pids) {
    std::uint64_t total = 0;
    for (int pid : pids) {
        std::ifstream in(fmt::format("/proc/{}/stat", pid));
        std::string stat;
        if (!in || !std::getline(in, stat))
            throw failure(fmt::format("server process {} is gone (no /proc/{}/stat)", pid, pid));
        // Field 2, the command, is in parentheses and may hold spaces: count after the last ')'.
        const auto close = stat.rfind(')');
        if (close == std::string::npos) throw failure(fmt::format("/proc/{}/stat: unreadable", pid));
        std::istringstream fields(stat.substr(close + 1));
        std::string field;
        std::uint64_t utime = 0, stime = 0;
        for (int index = 3; index <= 15 && fields >> field; ++index) {
            if (index == 14 || index == 15) {
                const auto v = parse_int<std::uint64_t>(field);
                if (!v) throw failure(fmt::format("/proc/{}/stat: unreadable", pid));
                (index == 14 ? utime : stime) = *v;
            }
        }
        total += utime + stime;
    }
    return total;
}

double own_cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double load1() {
    std::ifstream in("/proc/loadavg");
    double value = -1;
    in >> value;
    return value;
}

enum class phase { setup, populate, warmup, measure, drain };

/// What the connections share.
struct run_state {
    explicit run_state(net::io_context& io, const options& o) : io(io), opts(o), watchdog(io) {}

    net::io_context& io;
    const options& opts;
    net::steady_timer watchdog;
    phase current = phase::setup;
    int open = 0;      ///< connections still running
    int next_key = 0;  ///< populate: the next key to write
    std::vector<std::uint64_t> latencies_ns;
    std::optional<std::string> error;

    void fail(std::string message) {
        if (!error) error = std::move(message);
        io.stop();
    }
    bool issuing() const { return current == phase::warmup || current == phase::measure; }
    /// The key of the next operation, or nullopt when the connection should issue no more.
    std::optional<int> next(std::mt19937_64& random) {
        if (current == phase::populate) {
            if (next_key >= opts.keys) return std::nullopt;
            return next_key++;
        }
        if (!issuing()) return std::nullopt;
        return std::uniform_int_distribution<int>(0, opts.keys - 1)(random);
    }
    void completed(clock_type::time_point start, clock_type::time_point end) {
        if (current == phase::measure)
            latencies_ns.push_back(std::uint64_t(
                std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()));
    }
    void connection_done() {
        if (--open == 0) watchdog.cancel();
    }
};

std::string key_name(int key) { return fmt::format("k{:06d}", key); }

/// `bytes` printable bytes, the same every run.
std::string make_value(int bytes) {
    std::string value(std::size_t(bytes), 'x');
    for (std::size_t i = 0; i < value.size(); ++i) value[i] = char('a' + (i * 7 + 3) % 26);
    return value;
}

std::string base64(std::string_view in) {
    static constexpr char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= in.size(); i += 3) {
        const std::uint32_t v = std::uint32_t(std::uint8_t(in[i])) << 16 |
                                std::uint32_t(std::uint8_t(in[i + 1])) << 8 |
                                std::uint32_t(std::uint8_t(in[i + 2]));
        for (int shift = 18; shift >= 0; shift -= 6) out += alphabet[(v >> shift) & 63];
    }
    if (const auto rest = in.size() - i; rest > 0) {
        std::uint32_t v = std::uint32_t(std::uint8_t(in[i])) << 16;
        if (rest == 2) v |= std::uint32_t(std::uint8_t(in[i + 1])) << 8;
        out += alphabet[(v >> 18) & 63];
        out += alphabet[(v >> 12) & 63];
        out += rest == 2 ? alphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::string printable(std::string_view bytes) {
    std::string out;
    for (char c : bytes.substr(0, 200)) out += (c >= 32 && c < 127) ? c : '.';
    if (bytes.size() > 200) out += "...";
    return out;
}

// ---- connections that pipeline: RESP and ZooKeeper ----------------------------------------

/// One connection that keeps `depth` operations in flight: writes requests back to back and
/// matches the replies in order. A protocol supplies the bytes of an operation and parses a
/// reply.
class pipelined_connection {
public:
    pipelined_connection(run_state& state, tcp::endpoint endpoint, int index, int depth)
        : state_(state), socket_(state.io), endpoint_(endpoint), depth_(depth),
          random_(state.opts.seed * 1'000'003 + std::uint64_t(index)), index_(index) {}
    virtual ~pipelined_connection() = default;
    pipelined_connection(const pipelined_connection&) = delete;
    pipelined_connection& operator=(const pipelined_connection&) = delete;

    net::awaitable<void> setup() {
        auto [ec] = co_await socket_.async_connect(endpoint_, use_tuple);
        if (ec) throw failure(fmt::format("{}: connect: {}", describe(), ec.message()));
        socket_.set_option(tcp::no_delay(true));
        co_await handshake();
    }

    net::awaitable<void> run() {
        struct pending {
            clock_type::time_point start;
            int replies;
        };
        std::deque<pending> in_flight;
        const auto issue = [&] {
            const auto key = state_.next(random_);
            if (!key) return;
            const int replies = encode(*key);
            in_flight.push_back({clock_type::now(), replies});
        };
        for (int i = 0; i < depth_; ++i) issue();
        co_await flush();
        while (!in_flight.empty()) {
            co_await read_more();
            std::size_t at = 0;
            while (at < in_length_) {
                const auto reply = parse(input().substr(at));
                if (reply.consumed == 0) break;
                at += reply.consumed;
                if (!reply.answers_request) continue;
                if (in_flight.empty())
                    throw failure(fmt::format("{}: a reply to no request", describe()));
                if (--in_flight.front().replies == 0) {
                    state_.completed(in_flight.front().start, clock_type::now());
                    in_flight.pop_front();
                    issue();
                }
            }
            consume(at);
            if (!out_.empty()) co_await flush();
        }
        co_await goodbye();
        boost::system::error_code ignored;
        socket_.close(ignored);
    }

protected:
    struct parsed {
        std::size_t consumed = 0;     ///< 0: the reply is not complete yet
        bool answers_request = true;  ///< false: a message the server sent on its own
    };

    /// Appends the request(s) of one operation on `key` to out_; returns how many replies
    /// complete it.
    virtual int encode(int key) = 0;
    /// Parses the reply at the front of `in`; throws `failure` on an error or malformed reply.
    virtual parsed parse(std::string_view in) = 0;
    virtual std::string_view protocol_name() const = 0;
    virtual net::awaitable<void> handshake() { co_return; }
    virtual net::awaitable<void> goodbye() { co_return; }

    std::string describe() const {
        return fmt::format("{} {}:{} (connection {})", protocol_name(),
                           endpoint_.address().to_string(), endpoint_.port(), index_);
    }

    net::awaitable<void> flush() {
        auto [ec, n] = co_await net::async_write(socket_, net::buffer(out_), use_tuple);
        if (ec) throw failure(fmt::format("{}: write: {}", describe(), ec.message()));
        out_.clear();
    }

    /// What was received and not consumed yet.
    std::string_view input() const { return {in_.data(), in_length_}; }
    /// Drops the first `n` bytes of input().
    void consume(std::size_t n) {
        std::memmove(in_.data(), in_.data() + n, in_length_ - n);
        in_length_ -= n;
    }

    /// Appends what the socket has to input() (at least one byte); throws if the connection
    /// ends. Grows the buffer only for a reply larger than it (parse() bounds them).
    net::awaitable<void> read_more() {
        auto [ec, n] = co_await receive();
        if (ec == net::error::eof || ec == net::error::connection_reset)
            throw failure(fmt::format("{}: the server closed the connection", describe()));
        if (ec) throw failure(fmt::format("{}: read: {}", describe(), ec.message()));
    }
    net::awaitable<std::tuple<boost::system::error_code, std::size_t>> receive() {
        if (in_length_ == in_.size()) in_.resize(in_.size() * 2);
        auto [ec, n] = co_await socket_.async_read_some(
            net::buffer(in_.data() + in_length_, in_.size() - in_length_), use_tuple);
        in_length_ += n;
        co_return std::tuple{ec, n};
    }

    /// Reads until parse() finds one whole message at the front of input(), and consumes it.
    net::awaitable<void> read_one() {
        while (true) {
            const auto reply = parse(input());
            if (reply.consumed > 0) {
                consume(reply.consumed);
                if (reply.answers_request) co_return;
                continue;
            }
            co_await read_more();
        }
    }

    run_state& state_;
    tcp::socket socket_;
    std::vector<char> in_ = std::vector<char>(64 * 1024);
    std::size_t in_length_ = 0;
    std::string out_;

private:
    tcp::endpoint endpoint_;
    int depth_;
    std::mt19937_64 random_;
    int index_;
};

// RESP (kv_server, redis-server).
class resp_connection final : public pipelined_connection {
public:
    resp_connection(run_state& state, tcp::endpoint endpoint, int index, int depth)
        : pipelined_connection(state, endpoint, index, depth),
          value_(make_value(state.opts.value_bytes)) {}

private:
    enum class expect { ok, value };

    std::string_view protocol_name() const override { return "resp"; }

    net::awaitable<void> handshake() override {
        if (state_.opts.op == operation::read_linearizable && state_.opts.resp_readmode) {
            append_command({"READMODE", "linearizable"});
            expected_.push_back(expect::ok);
            co_await flush();
            co_await read_one();
        }
    }

    void append_command(std::initializer_list<std::string_view> args) {
        out_ += fmt::format("*{}\r\n", args.size());
        for (auto arg : args) {
            out_ += fmt::format("${}\r\n", arg.size());
            out_ += arg;
            out_ += "\r\n";
        }
    }

    int encode(int key) override {
        const auto name = key_name(key);
        if (state_.opts.op == operation::write || state_.opts.op == operation::populate) {
            append_command({"SET", name, value_});
            expected_.push_back(expect::ok);
        } else {
            append_command({"GET", name});
            expected_.push_back(expect::value);
        }
        return 1;
    }

    parsed parse(std::string_view in) override {
        if (in.empty()) return {};
        const auto end_of_line = in.find("\r\n");
        if (end_of_line == std::string_view::npos) {
            if (in.size() > 64 * 1024) throw failure(fmt::format("{}: malformed reply (no line end)", describe()));
            return {};
        }
        const auto line = in.substr(1, end_of_line - 1);
        if (expected_.empty()) throw failure(fmt::format("{}: a reply to no request", describe()));
        const expect what = expected_.front();
        std::size_t consumed = end_of_line + 2;
        switch (in.front()) {
            case '-':
                throw failure(fmt::format("{}: error reply: {}", describe(), printable(line)));
            case '+':
                if (what != expect::ok || line != "OK")
                    throw failure(fmt::format("{}: unexpected reply +{}", describe(), printable(line)));
                break;
            case '$': {
                const auto length = parse_int<long>(line);
                if (!length || *length < -1)
                    throw failure(fmt::format("{}: malformed bulk length '{}'", describe(), printable(line)));
                if (*length == -1)
                    throw failure(fmt::format("{}: GET found no value (was the key space populated?)", describe()));
                if (what != expect::value || *length != state_.opts.value_bytes)
                    throw failure(fmt::format("{}: unexpected {}-byte bulk reply", describe(), *length));
                const auto total = consumed + std::size_t(*length) + 2;
                if (in.size() < total) return {};
                if (in.substr(total - 2, 2) != "\r\n")
                    throw failure(fmt::format("{}: malformed bulk reply (no CRLF after the data)", describe()));
                consumed = total;
                break;
            }
            default:
                throw failure(fmt::format("{}: unexpected reply '{}'", describe(), printable(in.substr(0, end_of_line))));
        }
        expected_.pop_front();
        return {consumed, true};
    }

    std::string value_;
    std::deque<expect> expected_;
};

// ZooKeeper's client protocol: 4-byte big-endian length, then jute records (big-endian ints
// and longs, a string or buffer as an int length and the bytes, a boolean as one byte).
class zookeeper_connection final : public pipelined_connection {
public:
    zookeeper_connection(run_state& state, tcp::endpoint endpoint, int index, int depth)
        : pipelined_connection(state, endpoint, index, depth),
          value_(make_value(state.opts.value_bytes)) {}

private:
    // Request types (ZooDefs.OpCode) and error codes (KeeperException.Code) used here.
    static constexpr std::int32_t op_create = 1, op_get_data = 4, op_set_data = 5, op_sync = 9,
                                  op_close_session = -11;
    static constexpr std::int32_t error_node_exists = -110;
    static constexpr std::int32_t perms_all = 31;
    static constexpr std::string_view parent = "/zcmp";

    std::string_view protocol_name() const override { return "zookeeper"; }

    static void put_i32(std::string& out, std::int32_t v) {
        const auto u = std::uint32_t(v);
        for (int shift = 24; shift >= 0; shift -= 8) out += char((u >> shift) & 0xff);
    }
    static void put_i64(std::string& out, std::int64_t v) {
        const auto u = std::uint64_t(v);
        for (int shift = 56; shift >= 0; shift -= 8) out += char((u >> shift) & 0xff);
    }
    static void put_bytes(std::string& out, std::string_view bytes) {
        put_i32(out, std::int32_t(bytes.size()));
        out += bytes;
    }
    static std::int32_t get_i32(std::string_view in, std::size_t at) {
        std::uint32_t u = 0;
        for (std::size_t i = 0; i < 4; ++i) u = u << 8 | std::uint8_t(in[at + i]);
        return std::int32_t(u);
    }

    static std::string_view error_name(std::int32_t code) {
        switch (code) {
            case -4: return "ConnectionLoss";
            case -5: return "MarshallingError";
            case -6: return "Unimplemented";
            case -7: return "OperationTimeout";
            case -8: return "BadArguments";
            case -101: return "NoNode";
            case -102: return "NoAuth";
            case -103: return "BadVersion";
            case -110: return "NodeExists";
            case -112: return "SessionExpired";
            case -118: return "SessionMoved";
            case -119: return "NotReadOnly";
            case -122: return "RequestTimeout";
            case -125: return "QuotaExceeded";
            case -127: return "Throttled";
            default: return "error";
        }
    }

    /// Starts a frame: its length is filled in by end_frame.
    std::size_t begin_request(std::int32_t type) {
        const auto start = out_.size();
        put_i32(out_, 0);
        put_i32(out_, next_xid_);
        put_i32(out_, type);
        sent_types_.push_back(type);
        ++next_xid_;
        return start;
    }
    void end_frame(std::size_t start) {
        std::string length;
        put_i32(length, std::int32_t(out_.size() - start - 4));
        out_.replace(start, 4, length);
    }

    void append_create(std::string_view path) {
        const auto frame = begin_request(op_create);
        put_bytes(out_, path);
        put_bytes(out_, path == parent ? std::string_view{} : std::string_view(value_));
        put_i32(out_, 1);  // one ACL: world:anyone, every permission
        put_i32(out_, perms_all);
        put_bytes(out_, "world");
        put_bytes(out_, "anyone");
        put_i32(out_, 0);  // persistent
        end_frame(frame);
    }

    net::awaitable<void> handshake() override {
        // ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
        std::string request;
        put_i32(request, 0);
        put_i64(request, 0);
        put_i32(request, 30'000);
        put_i64(request, 0);
        put_bytes(request, std::string(16, '\0'));
        request += '\0';
        put_i32(out_, std::int32_t(request.size()));
        out_ += request;
        co_await flush();
        while (in_length_ < 4) co_await read_more();
        const auto length = get_i32(input(), 0);
        // ConnectResponse: protocolVersion, timeOut, sessionId, passwd (, readOnly).
        if (length < 4 + 4 + 8 + 4 || length > 4096)
            throw failure(fmt::format("{}: malformed ConnectResponse ({} bytes)", describe(), length));
        while (in_length_ < 4 + std::size_t(length)) co_await read_more();
        const auto timeout = get_i32(input(), 8);
        if (timeout <= 0)
            throw failure(fmt::format("{}: the server refused the session (ConnectResponse timeOut {})",
                                      describe(), timeout));
        consume(4 + std::size_t(length));
        if (state_.opts.op == operation::populate && first_) {
            first_ = false;
            append_create(parent);
            co_await flush();
            co_await read_one();
        }
    }

    net::awaitable<void> goodbye() override {
        // closeSession, so that the ensemble does not keep the session until it expires (an
        // expiry is a transaction: it would land in a later measurement).
        end_frame(begin_request(op_close_session));
        co_await flush();
        while (!sent_types_.empty()) {
            auto [ec, n] = co_await receive();
            if (ec) co_return;  // the server closes the connection after closeSession: fine
            std::size_t at = 0;
            while (at < in_length_) {
                const auto reply = parse(input().substr(at));
                if (reply.consumed == 0) break;
                at += reply.consumed;
            }
            consume(at);
        }
    }

    int encode(int key) override {
        const auto path = fmt::format("{}/{}", parent, key_name(key));
        switch (state_.opts.op) {
            case operation::populate: append_create(path); return 1;
            case operation::write: {
                const auto frame = begin_request(op_set_data);
                put_bytes(out_, path);
                put_bytes(out_, value_);
                put_i32(out_, -1);  // any version
                end_frame(frame);
                return 1;
            }
            case operation::read_linearizable: {
                const auto frame = begin_request(op_sync);
                put_bytes(out_, path);
                end_frame(frame);
                break;
            }
            case operation::read: break;
        }
        const auto frame = begin_request(op_get_data);
        put_bytes(out_, path);
        out_ += '\0';  // no watch
        end_frame(frame);
        return state_.opts.op == operation::read_linearizable ? 2 : 1;
    }

    parsed parse(std::string_view in) override {
        if (in.size() < 4) return {};
        const auto length = get_i32(in, 0);
        if (length < 16 || length > 16 * 1024 * 1024)
            throw failure(fmt::format("{}: malformed reply frame length {}", describe(), length));
        if (in.size() < 4 + std::size_t(length)) return {};
        const auto frame = in.substr(4, std::size_t(length));
        // ReplyHeader: xid, zxid, err.
        const auto xid = get_i32(frame, 0);
        const auto err = get_i32(frame, 12);
        const std::size_t consumed = 4 + std::size_t(length);
        if (xid == -1 || xid == -2) return {consumed, false};  // a watch event, a ping's reply
        if (sent_types_.empty())
            throw failure(fmt::format("{}: a reply (xid {}) to no request", describe(), xid));
        if (xid != expected_xid_)
            throw failure(fmt::format("{}: reply xid {}, expected {}", describe(), xid, expected_xid_));
        const auto type = sent_types_.front();
        sent_types_.pop_front();
        ++expected_xid_;
        if (err != 0 && !(type == op_create && err == error_node_exists))
            throw failure(fmt::format("{}: request type {} failed: error {} ({}){}", describe(), type,
                                      err, error_name(err),
                                      err == -101 ? " (was the key space populated?)" : ""));
        if (type == op_get_data) {
            if (frame.size() < 20 || get_i32(frame, 16) != state_.opts.value_bytes)
                throw failure(fmt::format("{}: getData returned {} bytes, expected {}", describe(),
                                          frame.size() < 20 ? -1 : get_i32(frame, 16),
                                          state_.opts.value_bytes));
        }
        return {consumed, true};
    }

    std::string value_;
    std::int32_t next_xid_ = 1;
    std::int32_t expected_xid_ = 1;
    std::deque<std::int32_t> sent_types_;
    bool first_ = true;

public:
    /// Only the first connection creates the parent node.
    void skip_parent() { first_ = false; }
};

// ---- etcd: the gRPC gateway's JSON over HTTP/1.1, one request at a time -------------------

class etcd_connection {
public:
    etcd_connection(run_state& state, tcp::endpoint endpoint, int index,
                    const std::vector<std::string>& keys_base64, const std::string& value_base64)
        : state_(state), socket_(state.io), endpoint_(endpoint), index_(index),
          random_(state.opts.seed * 1'000'003 + std::uint64_t(index)), keys_(keys_base64),
          value_(value_base64) {}

    net::awaitable<void> setup() {
        auto [ec] = co_await socket_.async_connect(endpoint_, use_tuple);
        if (ec) throw failure(fmt::format("{}: connect: {}", describe(), ec.message()));
        socket_.set_option(tcp::no_delay(true));
    }

    net::awaitable<void> run() {
        http::request<http::string_body> request{http::verb::post, "/", 11};
        request.set(http::field::host, fmt::format("{}:{}", endpoint_.address().to_string(),
                                                   endpoint_.port()));
        request.set(http::field::content_type, "application/json");
        request.keep_alive(true);
        const bool writes = state_.opts.op == operation::write || state_.opts.op == operation::populate;
        request.target(writes ? "/v3/kv/put" : "/v3/kv/range");
        boost::beast::flat_buffer buffer;
        while (const auto key = state_.next(random_)) {
            if (writes)
                request.body() = fmt::format(R"({{"key":"{}","value":"{}"}})", keys_[std::size_t(*key)], value_);
            else if (state_.opts.op == operation::read)
                request.body() = fmt::format(R"({{"key":"{}","serializable":true}})", keys_[std::size_t(*key)]);
            else
                request.body() = fmt::format(R"({{"key":"{}"}})", keys_[std::size_t(*key)]);
            request.prepare_payload();
            const auto start = clock_type::now();
            auto [write_error, written] = co_await http::async_write(socket_, request, use_tuple);
            if (write_error) throw failure(fmt::format("{}: write: {}", describe(), write_error.message()));
            http::response<http::string_body> response;
            auto [read_error, read] = co_await http::async_read(socket_, buffer, response, use_tuple);
            if (read_error == http::error::end_of_stream || read_error == net::error::eof ||
                read_error == net::error::connection_reset)
                throw failure(fmt::format("{}: the server closed the connection", describe()));
            if (read_error) throw failure(fmt::format("{}: read: {}", describe(), read_error.message()));
            const auto& body = response.body();
            if (response.result() != http::status::ok)
                throw failure(fmt::format("{}: POST {} answered {}: {}", describe(),
                                          writes ? "/v3/kv/put" : "/v3/kv/range",
                                          response.result_int(), printable(body)));
            if (body.find("\"header\"") == std::string::npos)
                throw failure(fmt::format("{}: malformed reply: {}", describe(), printable(body)));
            if (!writes && body.find("\"kvs\"") == std::string::npos)
                throw failure(fmt::format("{}: range found no value (was the key space populated?): {}",
                                          describe(), printable(body)));
            state_.completed(start, clock_type::now());
            if (!response.keep_alive())
                throw failure(fmt::format("{}: the server closes the connection", describe()));
        }
        boost::system::error_code ignored;
        socket_.close(ignored);
    }

private:
    std::string describe() const {
        return fmt::format("etcd {}:{} (connection {})", endpoint_.address().to_string(),
                           endpoint_.port(), index_);
    }

    run_state& state_;
    tcp::socket socket_;
    tcp::endpoint endpoint_;
    int index_;
    std::mt19937_64 random_;
    const std::vector<std::string>& keys_;
    const std::string& value_;
};

// ---- the run ------------------------------------------------------------------------------

/// Starts `work` on the io_context; an exception ends the run (state.fail).
void spawn(run_state& state, net::awaitable<void> work, bool counts_as_connection) {
    net::co_spawn(state.io, std::move(work),
                  [&state, counts_as_connection](std::exception_ptr error) {
                      if (error) {
                          try {
                              std::rethrow_exception(error);
                          } catch (const std::exception& e) {
                              state.fail(e.what());
                          }
                          return;
                      }
                      if (counts_as_connection) state.connection_done();
                  });
}

/// Fails the run if the connections are not done within `seconds`.
net::awaitable<void> guard(run_state& state, double seconds, std::string what) {
    state.watchdog.expires_after(std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(seconds)));
    auto [ec] = co_await state.watchdog.async_wait(use_tuple);
    if (!ec) throw failure(fmt::format("{} did not finish within {} s", what, seconds));
}

struct measurement {
    clock_type::time_point start, end;
    std::uint64_t cpu_start = 0, cpu_end = 0;
    double client_cpu_start = 0, client_cpu_end = 0;
};

net::awaitable<void> phases(run_state& state, measurement& m) {
    const auto seconds = [](double s) {
        return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
    };
    net::steady_timer timer(state.io);
    state.current = phase::warmup;
    timer.expires_after(seconds(state.opts.warmup_s));
    co_await timer.async_wait(net::use_awaitable);
    m.cpu_start = cpu_ticks(state.opts.server_pids);
    m.client_cpu_start = own_cpu_seconds();
    m.start = clock_type::now();
    state.current = phase::measure;
    timer.expires_after(seconds(state.opts.duration_s));
    co_await timer.async_wait(net::use_awaitable);
    state.current = phase::drain;
    m.end = clock_type::now();
    m.cpu_end = cpu_ticks(state.opts.server_pids);
    m.client_cpu_end = own_cpu_seconds();
    co_await guard(state, 30, "draining the outstanding operations");
}

int run(const options& o) {
    const double load_before = load1();
    net::io_context io;
    run_state state(io, o);

    // The connections, and how many operations each keeps in flight.
    std::vector<std::unique_ptr<pipelined_connection>> pipelined;
    std::vector<std::unique_ptr<etcd_connection>> http_connections;
    std::vector<std::string> keys_base64;
    std::string value_base64;
    if (o.proto == protocol::etcd) {
        for (int k = 0; k < o.keys; ++k) keys_base64.push_back(base64(key_name(k)));
        value_base64 = base64(make_value(o.value_bytes));
    }
    int max_depth = 0;
    for (int i = 0; i < o.connections; ++i) {
        const int depth = o.outstanding / o.connections + (i < o.outstanding % o.connections ? 1 : 0);
        max_depth = std::max(max_depth, depth);
        const auto& endpoint = o.endpoints[std::size_t(i) % o.endpoints.size()];
        switch (o.proto) {
            case protocol::resp:
                pipelined.push_back(std::make_unique<resp_connection>(state, endpoint, i, depth));
                break;
            case protocol::zookeeper: {
                auto c = std::make_unique<zookeeper_connection>(state, endpoint, i, depth);
                if (i > 0) c->skip_parent();
                pipelined.push_back(std::move(c));
                break;
            }
            case protocol::etcd:
                http_connections.push_back(
                    std::make_unique<etcd_connection>(state, endpoint, i, keys_base64, value_base64));
                break;
        }
    }

    // Connect (and handshake) every connection first.
    state.open = o.connections;
    for (auto& c : pipelined) spawn(state, c->setup(), true);
    for (auto& c : http_connections) spawn(state, c->setup(), true);
    spawn(state, guard(state, 30, "connecting"), false);
    io.run();
    if (state.error) {
        fmt::print(stderr, "zab_compare_load: {}\n", *state.error);
        return 1;
    }

    // Then the load.
    io.restart();
    state.open = o.connections;
    measurement m;
    const auto populate_start = clock_type::now();
    if (o.op == operation::populate) {
        state.current = phase::populate;
        spawn(state, guard(state, 300, "populating the key space"), false);
    } else {
        spawn(state, phases(state, m), false);
    }
    for (auto& c : pipelined) spawn(state, c->run(), true);
    for (auto& c : http_connections) spawn(state, c->run(), true);
    io.run();
    if (state.error) {
        fmt::print(stderr, "zab_compare_load: {}\n", *state.error);
        return 1;
    }

    if (o.op == operation::populate) {
        fmt::print("populated {} keys ({}-byte values) in {:.2f} s\n", o.keys, o.value_bytes,
                   std::chrono::duration<double>(clock_type::now() - populate_start).count());
        return 0;
    }
    auto& latencies = state.latencies_ns;
    if (latencies.empty()) {
        fmt::print(stderr, "zab_compare_load: no operation completed in the measured interval\n");
        return 1;
    }
    std::sort(latencies.begin(), latencies.end());
    const auto percentile = [&](double p) {
        const auto rank = std::size_t(std::max(1.0, std::ceil(p * double(latencies.size()))));
        return double(latencies[rank - 1]) / 1e3;
    };
    const double seconds = std::chrono::duration<double>(m.end - m.start).count();
    const double ops = double(latencies.size());
    const std::string server_cpu =
        o.server_pids.empty()
            ? std::string()
            : fmt::format("{:.1f}", double(m.cpu_end - m.cpu_start) /
                                        double(sysconf(_SC_CLK_TCK)) * 1e6 / ops);
    if (o.header)
        fmt::print("protocol,operation,outstanding,connections,depth,ops,seconds,ops_per_s,p50_us,"
                   "p99_us,max_us,server_cpu_us_per_op,client_cpu_us_per_op,load1\n");
    fmt::print("{},{},{},{},{},{},{:.3f},{:.0f},{:.0f},{:.0f},{:.0f},{},{:.1f},{:.2f}\n",
               name_of(o.proto), name_of(o.op), o.outstanding, o.connections, max_depth,
               latencies.size(), seconds, ops / seconds, percentile(0.50), percentile(0.99),
               double(latencies.back()) / 1e3, server_cpu,
               (m.client_cpu_end - m.client_cpu_start) * 1e6 / ops, load_before);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = parse_arguments(argc, argv);
    if (auto* message = std::get_if<std::string>(&parsed)) {
        fmt::print(stderr, "zab_compare_load: {}\n{}", *message, usage_text);
        return 2;
    }
    try {
        return run(std::get<options>(parsed));
    } catch (const std::exception& e) {
        fmt::print(stderr, "zab_compare_load: {}\n", e.what());
        return 1;
    }
}
