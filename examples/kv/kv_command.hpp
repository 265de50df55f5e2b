// examples/kv/kv_command.hpp — the replicated key-value map's transaction: one command, and
// its binary encoding (the bytes zab replicates and hands to kv_state_machine::apply).
//
// Encoding, version 1, little-endian, every string a u32 length followed by its bytes:
//
//   u8  version          1
//   u8  op               1 SET, 2 DEL, 3 INCR, 4 CAS
//   u8  flags            bit 0: a request tag follows; bit 1 (CAS only): `expected` is
//                        present. Every other bit is 0.
//   [u64 client_id, u64 sequence]     if bit 0
//   key
//   SET: value           CAS: [expected] if bit 1, then desired
//
// Nothing may follow. Every command has exactly one encoding, so a decoded command re-encodes
// to the same bytes. Keys and values are arbitrary bytes of at most `max_string_bytes`
// (zab's frame limit, codec_limits::max_payload_bytes, is lower by default anyway).
//
// Decoding treats its input as hostile: any bytes yield a command or an error, never UB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "binary_io.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"

namespace zab::kv {

/// The largest key or value, like Redis's default proto-max-bulk-len (512 MiB).
inline constexpr std::size_t max_string_bytes = std::size_t{512} << 20;

/// The command format version `encode` writes and the only one `decode` reads.
inline constexpr std::uint8_t command_version = 1;

/// SET key value: stores `value` under `key`. Outcome: ok.
struct set_op {
    std::string key;
    std::string value;
    bool operator==(const set_op&) const = default;
};

/// DEL key: removes `key`. Outcome: the number of keys removed (0 or 1), as Redis answers.
struct del_op {
    std::string key;
    bool operator==(const del_op&) const = default;
};

/// INCR key: adds 1 to the integer stored under `key` (a missing key counts as 0). Outcome:
/// the new value, or an error if the value is not an integer or the increment overflows.
struct incr_op {
    std::string key;
    bool operator==(const incr_op&) const = default;
};

/// CAS key expected desired: stores `desired` iff `key` currently holds `expected`, where
/// nullopt means "the key is absent" (create-if-absent). Outcome: matched or mismatched.
struct cas_op {
    std::string key;
    std::optional<std::string> expected;
    std::string desired;
    bool operator==(const cas_op&) const = default;
};

using operation = std::variant<set_op, del_op, incr_op, cas_op>;

/// Names a client's request for exactly-once retries: a client numbers its writes with
/// increasing `sequence` and retries a write with the same tag. kv_state_machine applies a
/// tag at most once (see there for the bounds of that promise).
struct request_tag {
    std::uint64_t client_id = 0;
    std::uint64_t sequence = 0;
    bool operator==(const request_tag&) const = default;
};

/// One transaction of the key-value map.
struct command {
    operation op;
    std::optional<request_tag> tag;  ///< absent: no retry protection
    bool operator==(const command&) const = default;
};

/// The key a command writes.
inline const std::string& key_of(const command& c) noexcept {
    return std::visit([](const auto& op) -> const std::string& { return op.key; }, c.op);
}

namespace detail {

enum class op_code : std::uint8_t { set = 1, del = 2, incr = 3, cas = 4 };
inline constexpr std::uint8_t flag_tagged = 0x01;
inline constexpr std::uint8_t flag_expected = 0x02;

inline bool fits(const std::string& s) noexcept { return s.size() <= max_string_bytes; }

}  // namespace detail

/// The bytes of `c`. `errc::oversized` if a key or value exceeds `max_string_bytes`.
inline result<std::vector<std::byte>> encode(const command& c) {
    using detail::op_code;
    std::uint8_t flags = c.tag ? detail::flag_tagged : 0;
    op_code code = op_code::set;
    bool all_fit = true;
    std::visit(
        [&](const auto& op) {
            using T = std::decay_t<decltype(op)>;
            all_fit = detail::fits(op.key);
            if constexpr (std::is_same_v<T, set_op>) {
                all_fit = all_fit && detail::fits(op.value);
            } else if constexpr (std::is_same_v<T, del_op>) {
                code = op_code::del;
            } else if constexpr (std::is_same_v<T, incr_op>) {
                code = op_code::incr;
            } else {
                code = op_code::cas;
                if (op.expected) flags |= detail::flag_expected;
                all_fit = all_fit && detail::fits(op.desired) &&
                          (!op.expected || detail::fits(*op.expected));
            }
        },
        c.op);
    if (!all_fit) return make_error_code(errc::oversized);

    std::vector<std::byte> out;
    detail::byte_writer w{out};
    w.u8(command_version);
    w.u8(static_cast<std::uint8_t>(code));
    w.u8(flags);
    if (c.tag) {
        w.u64(c.tag->client_id);
        w.u64(c.tag->sequence);
    }
    std::visit(
        [&](const auto& op) {
            using T = std::decay_t<decltype(op)>;
            w.string(op.key);
            if constexpr (std::is_same_v<T, set_op>) {
                w.string(op.value);
            } else if constexpr (std::is_same_v<T, cas_op>) {
                if (op.expected) w.string(*op.expected);
                w.string(op.desired);
            }
        },
        c.op);
    return out;
}

/// The command `bytes` encode. Errors: `errc::truncated` (input ends inside a field),
/// `errc::oversized` (a length above `max_string_bytes`), `errc::unsupported_version`,
/// `errc::unknown_message_type` (an op code that names no command), `errc::malformed`
/// (reserved flag bits set, bit 1 on a non-CAS command, or bytes after the last field).
inline result<command> decode(byte_view bytes) {
    using detail::op_code;
    detail::byte_reader r{bytes};
    std::uint8_t version = 0, code = 0, flags = 0;
    if (!r.u8(version)) return r.error();
    if (version != command_version) return make_error_code(errc::unsupported_version);
    if (!r.u8(code) || !r.u8(flags)) return r.error();
    if (code < static_cast<std::uint8_t>(op_code::set) ||
        code > static_cast<std::uint8_t>(op_code::cas))
        return make_error_code(errc::unknown_message_type);
    const auto op = static_cast<op_code>(code);
    const std::uint8_t allowed =
        detail::flag_tagged | (op == op_code::cas ? detail::flag_expected : 0);
    if ((flags & ~allowed) != 0) return make_error_code(errc::malformed);

    command c;
    if ((flags & detail::flag_tagged) != 0) {
        request_tag tag;
        r.u64(tag.client_id);
        r.u64(tag.sequence);
        c.tag = tag;
    }
    std::string key;
    r.string(key, max_string_bytes);
    switch (op) {
        case op_code::set: {
            set_op s{std::move(key), {}};
            r.string(s.value, max_string_bytes);
            c.op = std::move(s);
            break;
        }
        case op_code::del: c.op = del_op{std::move(key)}; break;
        case op_code::incr: c.op = incr_op{std::move(key)}; break;
        case op_code::cas: {
            cas_op s{std::move(key), std::nullopt, {}};
            if ((flags & detail::flag_expected) != 0) {
                std::string expected;
                r.string(expected, max_string_bytes);
                s.expected = std::move(expected);
            }
            r.string(s.desired, max_string_bytes);
            c.op = std::move(s);
            break;
        }
    }
    if (r.failed()) return r.error();
    if (r.remaining() != 0) return make_error_code(errc::malformed);
    return c;
}

}  // namespace zab::kv
