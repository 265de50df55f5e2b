// zab/net/endpoint.hpp — a replica's network address, and its text form ("host:port",
// "[v6]:port": how `member::address` and kv_server's command line spell it).
//
// No Boost.Asio and no codec here: configuration loaders and the key-value example use it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace zab::asio {

/// Where a replica listens: an IP literal ("127.0.0.1", "::1", "0.0.0.0") or a host name.
/// Host names are resolved synchronously: those of `tcp_transport_options::peers` once, in
/// `tcp_transport::start()`; those `update_members` learns when they are first dialed.
struct tcp_endpoint {
    std::string host;
    std::uint16_t port = 0;
    friend bool operator==(const tcp_endpoint&, const tcp_endpoint&) = default;
};

/// "host:port", or "[v6]:port" for a host with a colon in it (how `member::address` and
/// kv_server's command line spell an endpoint).
inline std::string to_string(const tcp_endpoint& endpoint) {
    return endpoint.host.find(':') != std::string::npos
               ? fmt::format("[{}]:{}", endpoint.host, endpoint.port)
               : fmt::format("{}:{}", endpoint.host, endpoint.port);
}

/// Parses "host:port" or "[v6]:port" (a `member::address`): a non-empty host without spaces,
/// a port 1..65535. nullopt for anything else (the text may come from the network).
inline std::optional<tcp_endpoint> parse_endpoint(std::string_view text) {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size() ||
        text.size() - colon - 1 > 5)
        return std::nullopt;
    std::string_view host = text.substr(0, colon);
    if (host.front() == '[') {
        if (host.size() < 3 || host.back() != ']') return std::nullopt;
        host = host.substr(1, host.size() - 2);
    } else if (host.find(':') != std::string_view::npos) {
        return std::nullopt;  // a bare IPv6 address: its port cannot be told apart
    }
    for (const char c : host)
        if (c <= ' ' || c > '~' || c == '[' || c == ']') return std::nullopt;
    std::uint32_t port = 0;
    for (const char c : text.substr(colon + 1)) {
        if (c < '0' || c > '9') return std::nullopt;
        port = port * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (port == 0 || port > 65535) return std::nullopt;
    return tcp_endpoint{std::string{host}, static_cast<std::uint16_t>(port)};
}

}  // namespace zab::asio
