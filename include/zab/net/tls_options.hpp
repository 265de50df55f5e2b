// zab/net/tls_options.hpp — what `zab::asio::tls_transport` is configured with, and how a
// certificate names the member it belongs to.
//
// Identity. Every replica's certificate carries, in its subjectAltName, the URI
// `zab://member/<id>` (decimal, no leading zero): the member ids it may claim in zab's
// handshake (handshake.hpp). One URI per certificate is the rule for replicas; the common name
// is not looked at. All certificates are signed by the cluster's own CA (`ca_file`), which
// signs nothing else: any certificate it signed is trusted to be the member it names.
//
// No Boost.Asio and no OpenSSL here: a configuration loader can use these types without them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "zab/core/types.hpp"

namespace zab::asio {

/// The lowest TLS version a replica accepts.
enum class tls_version : std::uint8_t { tls1_2, tls1_3 };

/// The credentials of one replica, PEM files read by `start()` and by every
/// `reload_credentials()` (so a file replaced on disk is picked up by the next reload).
struct tls_options {
    /// The cluster CA's certificate(s): a peer's certificate must chain to one of them.
    std::string ca_file;
    /// This replica's certificate, naming its id (`member_uri(self)`), then any intermediate
    /// CA certificates.
    std::string certificate_file;
    /// The certificate's private key (unencrypted PEM).
    std::string private_key_file;
    /// TLS 1.3 by default; `tls1_2` also accepts TLS 1.2 (the cipher suites are OpenSSL's
    /// defaults, forward secret).
    tls_version min_version = tls_version::tls1_3;

    /// Empty if usable (as far as can be told without reading the files), else the problem.
    std::string problem() const {
        if (ca_file.empty()) return "ca_file must not be empty";
        if (certificate_file.empty()) return "certificate_file must not be empty";
        if (private_key_file.empty()) return "private_key_file must not be empty";
        return {};
    }
};

/// The subjectAltName URI that names member `id` in a certificate: `zab://member/<id>`.
inline std::string member_uri(peer_id id) { return fmt::format("zab://member/{}", id); }

/// The member a subjectAltName URI names, if it is one of zab's (`zab://member/<id>`, id
/// decimal without leading zero, not 0).
constexpr std::optional<peer_id> parse_member_uri(std::string_view uri) noexcept {
    constexpr std::string_view prefix = "zab://member/";
    if (!uri.starts_with(prefix)) return std::nullopt;
    const std::string_view digits = uri.substr(prefix.size());
    if (digits.empty() || digits.size() > 20 || digits.front() == '0') return std::nullopt;
    peer_id id = 0;
    for (const char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto digit = static_cast<peer_id>(c - '0');
        if (id > (UINT64_MAX - digit) / 10) return std::nullopt;
        id = id * 10 + digit;
    }
    return id;
}

static_assert(parse_member_uri("zab://member/3") == peer_id{3});
static_assert(!parse_member_uri("zab://member/03"));
static_assert(!parse_member_uri("zab://member/0"));
static_assert(!parse_member_uri("zab://member/3x"));
static_assert(!parse_member_uri("zab://member/18446744073709551616"));

}  // namespace zab::asio
