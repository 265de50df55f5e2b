// tests/kv/nemesis/resp_client.hpp — a blocking RESP2 client with deadlines, for the nemesis
// test's clients: one request at a time, every wait bounded, any failure final (the caller
// reconnects), so a client facing a paused or killed replica learns it within its timeout.
#pragma once

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <optional>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include <fcntl.h>

#include "kv/decimal.hpp"
#include "kv/resp_writer.hpp"

namespace zab::kv::nemesis {

/// One RESP2 reply. A null array (EXEC aborted by WATCH) is `nil`, as a null bulk string.
struct reply {
    enum class type { simple, error, integer, bulk, nil, array };
    type kind = type::nil;
    std::string text;  ///< simple, error (without the '-'), bulk
    std::int64_t integer = 0;
    std::vector<reply> elements;  ///< array

    bool is_error() const noexcept { return kind == type::error; }
    /// An error reply starting with `prefix` (e.g. "UNKNOWN", "NOQUORUM").
    bool error_is(std::string_view prefix) const {
        return is_error() && std::string_view{text}.substr(0, prefix.size()) == prefix;
    }
};

class resp_client {
public:
    using clock = std::chrono::steady_clock;

    resp_client() = default;
    resp_client(resp_client&& other) noexcept
        : fd_{std::exchange(other.fd_, -1)}, buffer_{std::move(other.buffer_)} {}
    resp_client& operator=(resp_client&& other) noexcept {
        if (this != &other) {
            close();
            fd_ = std::exchange(other.fd_, -1);
            buffer_ = std::move(other.buffer_);
        }
        return *this;
    }
    resp_client(const resp_client&) = delete;
    resp_client& operator=(const resp_client&) = delete;
    ~resp_client() { close(); }

    /// Connects to 127.0.0.1:`port` within `timeout`; false when it cannot.
    bool connect(std::uint16_t port, std::chrono::milliseconds timeout) {
        close();
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return false;
        const int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0)
            return true;
        if (errno != EINPROGRESS || !wait(POLLOUT, clock::now() + timeout)) {
            close();
            return false;
        }
        int error = 0;
        socklen_t length = sizeof error;
        if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
            close();
            return false;
        }
        return true;
    }

    bool connected() const noexcept { return fd_ >= 0; }

    void close() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        buffer_.clear();
    }

    /// Sends `args` as one command and waits for its reply until `timeout` has passed.
    /// nullopt — a timeout, a closed or failed connection, or a malformed reply — closes the
    /// connection: whether the server ran the command is then unknown.
    std::optional<reply> call(const std::vector<std::string>& args,
                              std::chrono::milliseconds timeout) {
        if (fd_ < 0) return std::nullopt;
        const auto deadline = clock::now() + timeout;
        std::string out;
        resp::write_array_header(out, args.size());
        for (const auto& a : args) resp::write_bulk_string(out, a);
        std::string_view pending{out};
        while (!pending.empty()) {
            const ssize_t n = ::send(fd_, pending.data(), pending.size(), MSG_NOSIGNAL);
            if (n > 0) {
                pending.remove_prefix(static_cast<std::size_t>(n));
            } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (!wait(POLLOUT, deadline)) return fail();
            } else {
                return fail();
            }
        }
        for (;;) {
            bool malformed = false;
            if (auto r = parse(malformed)) return r;
            if (malformed || !wait(POLLIN, deadline)) return fail();
            char chunk[16384];
            const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
            if (n > 0) {
                buffer_.append(chunk, static_cast<std::size_t>(n));
            } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                continue;
            } else {
                return fail();
            }
        }
    }

private:
    std::optional<reply> fail() {
        close();
        return std::nullopt;
    }

    bool wait(short events, clock::time_point deadline) const {
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - clock::now());
            if (left.count() <= 0) return false;
            pollfd p{fd_, events, 0};
            const int n = ::poll(&p, 1, static_cast<int>(left.count()));
            if (n > 0) return true;
            if (n < 0 && errno != EINTR) return false;
        }
    }

    /// One complete reply from the front of the buffer, if there is one.
    std::optional<reply> parse(bool& malformed) {
        reply r;
        const std::size_t consumed = parse_at(0, r, malformed, 0);
        if (consumed == 0) return std::nullopt;
        buffer_.erase(0, consumed);
        return r;
    }

    /// Parses the reply at `at` into `r`: the bytes it takes, 0 if incomplete or malformed.
    std::size_t parse_at(std::size_t at, reply& r, bool& malformed, int depth) const {
        const std::size_t eol = buffer_.find("\r\n", at);
        if (eol == std::string::npos) return 0;
        if (eol == at || depth > 4) {
            malformed = true;
            return 0;
        }
        const char type = buffer_[at];
        const std::string_view line = std::string_view{buffer_}.substr(at + 1, eol - at - 1);
        std::size_t next = eol + 2;
        const auto length = [&]() -> std::optional<std::int64_t> {
            const auto n = parse_int64(line);
            if (!n || *n < -1 || *n > (std::int64_t{512} << 20)) malformed = true;
            return malformed ? std::nullopt : n;
        };
        switch (type) {
            case '+': r.kind = reply::type::simple; r.text = line; break;
            case '-': r.kind = reply::type::error; r.text = line; break;
            case ':': {
                r.kind = reply::type::integer;
                const auto value = parse_int64(line);
                if (!value) {
                    malformed = true;
                    return 0;
                }
                r.integer = *value;
                break;
            }
            case '$': {
                const auto n = length();
                if (!n) return 0;
                if (*n < 0) {
                    r.kind = reply::type::nil;
                    break;
                }
                const auto size = static_cast<std::size_t>(*n);
                if (buffer_.size() < next + size + 2) return 0;
                if (buffer_.compare(next + size, 2, "\r\n") != 0) {
                    malformed = true;
                    return 0;
                }
                r.kind = reply::type::bulk;
                r.text = buffer_.substr(next, size);
                next += size + 2;
                break;
            }
            case '*': {
                const auto n = length();
                if (!n) return 0;
                if (*n < 0) {
                    r.kind = reply::type::nil;
                    break;
                }
                r.kind = reply::type::array;
                for (std::int64_t i = 0; i < *n; ++i) {
                    reply element;
                    const std::size_t used = parse_at(next, element, malformed, depth + 1);
                    if (used == 0) return 0;
                    next += used;
                    r.elements.push_back(std::move(element));
                }
                break;
            }
            default: malformed = true; return 0;
        }
        return next - at;
    }

    int fd_ = -1;
    std::string buffer_;
};

}  // namespace zab::kv::nemesis
