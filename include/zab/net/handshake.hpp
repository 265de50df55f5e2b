// zab/net/handshake.hpp — the fixed-size hello that opens every connection between replicas.
//
// Before any zab frame, the two ends of a TCP connection introduce themselves. The dialer
// (the higher peer id, see tcp_transport.hpp) and the acceptor exchange three messages of the
// same 56-byte layout:
//
//   dialer   → acceptor   hello    (cluster, from = dialer, to = the peer it meant to dial)
//   acceptor → dialer     welcome  (cluster, from = acceptor, to = dialer), once the hello passed
//   dialer   → acceptor   confirm  (same fields as the hello), once the welcome passed
//
// or, in place of the welcome, a refusal (kind 4, with a reason) when the acceptor found the
// two contradict each other — a different member list, or its id already taken by another
// live process — so that the refused side can say why too, not just "closed by the other end";
// or when the dialer is a member that the acceptor dials itself (`dial_back`): the lower id
// of a pair probes the higher one it has not heard from (tcp_transport_core.hpp), and is
// answered "I dial you" — and dialed at once.
//
// Each side reports the connection only after the other has accepted its own message: the
// dialer when it has checked the welcome and written the confirm, the acceptor when it has
// read the confirm. So `on_connected` always means "the handshake succeeded both ways".
//
// Layout, little-endian like the frame format (codec.hpp):
//
//   offset size field
//        0    4 magic           0x4842415A: the bytes 'Z' 'A' 'B' 'H' (not the frame magic
//                               'ZAB1', so a frame sent before the handshake is refused, and
//                               vice versa)
//        4    1 version         2
//        5    1 kind            1 hello, 2 welcome, 3 confirm, 4 refusal
//        6    2 reason          a refusal's `refusal_reason`; 0 in every other kind
//        8    8 cluster_id      which zab group the sender belongs to
//       16    8 from            the sender's peer id
//       24    8 to              the peer id the sender believes it is talking to
//       32    8 config_version  the sender's configuration version (config.hpp)
//       40    8 config_digest   `configuration::digest()` of the sender's member list: two
//                               replicas at the same version with different digests were
//                               started with different member lists and are refused
//       48    8 instance        a random number drawn when the sender's transport was made:
//                               tells a restarted process from a second live one with the
//                               same id (see tcp_transport_core.hpp)
//
// This is identification, not authentication: over `tcp_transport` anyone who can reach the
// port and knows the cluster id can claim a member's id, so run the replicas on a trusted
// network. Over `tls_transport` (tls_security.hpp) the hello is sent inside mutual TLS, and
// an id is accepted only from a peer whose certificate, signed by the cluster CA, names it.
//
// Pure code (no Boost.Asio): decoding treats the bytes as hostile and returns an error value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/error.hpp"
#include "zab/core/types.hpp"

namespace zab::asio {

/// The first four bytes of every handshake message: "ZABH" read as a little-endian u32.
inline constexpr std::uint32_t hello_magic = 0x4842415Au;
static_assert(hello_magic != frame_magic, "a hello must never parse as a frame");

/// The handshake version this build writes and the only one it accepts.
/// Version 1 (32 bytes) had no membership, instance or refusal.
inline constexpr std::uint8_t hello_version = 2;

/// Every handshake message is exactly this long.
inline constexpr std::size_t hello_size = 56;

/// Which of the handshake messages this is (see the file comment).
enum class hello_kind : std::uint8_t { hello = 1, welcome = 2, confirm = 3, refusal = 4 };

constexpr std::string_view to_string(hello_kind kind) noexcept {
    switch (kind) {
        case hello_kind::hello: return "hello";
        case hello_kind::welcome: return "welcome";
        case hello_kind::confirm: return "confirm";
        case hello_kind::refusal: return "refusal";
    }
    return "?";
}

/// Why an acceptor refused a member's hello (a refusal's `reason`).
enum class refusal_reason : std::uint16_t {
    none = 0,
    different_membership = 1,  ///< same configuration version, different member lists
    duplicate_id = 2,          ///< another live process already holds the sender's id
    dial_back = 3,             ///< a member we dial probed us: we dial it (no contradiction)
};

constexpr std::string_view to_string(refusal_reason reason) noexcept {
    switch (reason) {
        case refusal_reason::none: return "none";
        case refusal_reason::different_membership: return "different membership";
        case refusal_reason::duplicate_id: return "duplicate id";
        case refusal_reason::dial_back: return "it dials us";
    }
    return "?";
}

/// Who a sender says it is, beside its id: its configuration and its process instance.
struct membership_claim {
    std::uint64_t config_version = 0;
    std::uint64_t config_digest = 0;
    std::uint64_t instance = 0;
    friend bool operator==(const membership_claim&, const membership_claim&) = default;
};

/// One decoded handshake message.
struct hello_message {
    hello_kind kind = hello_kind::hello;
    std::uint64_t cluster_id = 0;
    peer_id from = 0;
    peer_id to = 0;
    membership_claim claim;
    refusal_reason reason = refusal_reason::none;  ///< a refusal's; none otherwise
    friend bool operator==(const hello_message&, const hello_message&) = default;
};

/// The 32 bytes of `message`.
inline std::array<std::byte, hello_size> encode_hello(const hello_message& message) noexcept {
    std::array<std::byte, hello_size> out{};
    std::byte* p = out.data();
    zab::detail::store_le(p, hello_magic);
    zab::detail::store_le(p + 4, hello_version);
    zab::detail::store_le(p + 5, static_cast<std::uint8_t>(message.kind));
    zab::detail::store_le(p + 6, static_cast<std::uint16_t>(message.reason));
    zab::detail::store_le(p + 8, message.cluster_id);
    zab::detail::store_le(p + 16, message.from);
    zab::detail::store_le(p + 24, message.to);
    zab::detail::store_le(p + 32, message.claim.config_version);
    zab::detail::store_le(p + 40, message.claim.config_digest);
    zab::detail::store_le(p + 48, message.claim.instance);
    return out;
}

/// Decodes the handshake message at the start of `bytes` (it must hold at least 56). Checks
/// only the format; whether the cluster and the ids are acceptable is the transport's call.
/// Errors, in this order: `truncated` (fewer than 56 bytes), `bad_magic`,
/// `unsupported_version`, `malformed` (unknown kind; a reason outside a refusal, or a
/// refusal without a known one).
inline result<hello_message> decode_hello(byte_view bytes) noexcept {
    if (bytes.size() < hello_size) {
        return make_error_code(errc::truncated);
    }
    const std::byte* p = bytes.data();
    if (zab::detail::load_le<std::uint32_t>(p) != hello_magic) {
        return make_error_code(errc::bad_magic);
    }
    if (zab::detail::load_le<std::uint8_t>(p + 4) != hello_version) {
        return make_error_code(errc::unsupported_version);
    }
    const auto kind = zab::detail::load_le<std::uint8_t>(p + 5);
    const auto reason = zab::detail::load_le<std::uint16_t>(p + 6);
    if (kind < static_cast<std::uint8_t>(hello_kind::hello) ||
        kind > static_cast<std::uint8_t>(hello_kind::refusal)) {
        return make_error_code(errc::malformed);
    }
    const bool refusal = kind == static_cast<std::uint8_t>(hello_kind::refusal);
    const bool known_reason = reason >= static_cast<std::uint16_t>(refusal_reason::different_membership) &&
                              reason <= static_cast<std::uint16_t>(refusal_reason::dial_back);
    if (refusal ? !known_reason : reason != 0) {
        return make_error_code(errc::malformed);
    }
    hello_message message;
    message.kind = static_cast<hello_kind>(kind);
    message.reason = static_cast<refusal_reason>(reason);
    message.cluster_id = zab::detail::load_le<std::uint64_t>(p + 8);
    message.from = zab::detail::load_le<std::uint64_t>(p + 16);
    message.to = zab::detail::load_le<std::uint64_t>(p + 24);
    message.claim.config_version = zab::detail::load_le<std::uint64_t>(p + 32);
    message.claim.config_digest = zab::detail::load_le<std::uint64_t>(p + 40);
    message.claim.instance = zab::detail::load_le<std::uint64_t>(p + 48);
    return message;
}

}  // namespace zab::asio
