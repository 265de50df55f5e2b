// examples/kv/kv_command.hpp — the replicated key-value map's transaction: one command, and
// its binary encoding (the bytes zab replicates and hands to kv_state_machine::apply).
//
// Encoding, little-endian, every string a u32 length followed by its bytes:
//
//   u8  version          3 (2: the same bytes, an older meaning of the stamp; 1: without
//                        `stamp_ms`; see below)
//   u8  op               1 SET, 2 DEL, 3 INCR, 4 CAS, 5 CALLS, 6 TICK
//   u8  flags            bit 0: a request tag follows; bit 1 (CAS only): `expected` is
//                        present; bit 2 (CALLS only): a MULTI/EXEC block. Every other bit 0.
//   u64 stamp_ms         versions 2 and 3: the proposer's wall clock (ms since the epoch)
//   [u64 client_id, u64 sequence]     if bit 0
//   SET: key, value      DEL, INCR: key      CAS: key, [expected] if bit 1, then desired
//   CALLS: u32 watch count, per watch: key, u64 version;
//          u32 call count, per call: u32 argument count (>= 1), the arguments
//   TICK: nothing
//
// What the stamp means (kv_store.hpp). Version 3: a TICK's stamp (the leader's
// clock) advances the map's clock; any other command's stamp is only the base of the
// relative expiries it sets (EX, PX, EXPIRE) and never moves the clock. Version 2 is what
// kv_server wrote before: every command's stamp advanced the map's clock. A version-2
// record is applied as it was then (`legacy_clock`), so a log or a data directory an older
// kv_server wrote replays to the states it gave; kv_server writes only versions 1 and 3.
// Version 1 is what kv_server wrote before transactions carried a clock: `encode` writes it
// for SET/DEL/INCR/CAS stamped 0 (so logs from then replay, and the golden bytes stay), and
// version 3 (or 2, for a `legacy_clock` command) for everything else; a version-2 or -3
// SET/DEL/INCR/CAS stamped 0, a CALLS that is not a block with other than one call or with
// watches, and a call without arguments are malformed. Nothing may follow. Every command
// has exactly one encoding, so a decoded command re-encodes to the same bytes. Keys and
// values are arbitrary bytes of at most `max_string_bytes` (zab's frame limit,
// codec_limits::max_payload_bytes, is lower by default anyway).
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

/// The command format version `encode` writes (1 for an unstamped SET/DEL/INCR/CAS, 2 for a
/// `legacy_clock` command).
inline constexpr std::uint8_t command_version = 3;
inline constexpr std::uint8_t command_version_legacy_clock = 2;
inline constexpr std::uint8_t command_version_unstamped = 1;

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

/// A watched key of a MULTI/EXEC block: the block applies only if `key`'s version (the zxid
/// of the last transaction that wrote it, 0 while absent) is still `version`.
struct watched_key {
    std::string key;
    std::uint64_t version = 0;
    bool operator==(const watched_key&) const = default;
};

/// Redis commands (kv_calls.hpp lists those a transaction may hold), each its arguments with
/// the name first. `multi`: a MULTI/EXEC block, applied as one transaction (all or, when a
/// watched key changed, none); its outcome is the array of the calls' replies. Otherwise
/// exactly one call and no watches; the outcome is its reply.
struct calls_op {
    std::vector<std::vector<std::string>> calls;
    std::vector<watched_key> watches;
    bool multi = false;
    bool operator==(const calls_op&) const = default;
};

/// Advances the map's clock to the command's stamp, the leader's clock: the keys expired by
/// then are removed. The only command that moves the clock (but see `legacy_clock`); the
/// leader proposes one when a key is due by its clock (kv_server.cpp).
struct tick_op {
    bool operator==(const tick_op&) const = default;
};

using operation = std::variant<set_op, del_op, incr_op, cas_op, calls_op, tick_op>;

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
    /// When it was proposed, by the proposer's wall clock (ms since the Unix epoch). A
    /// TICK's advances the map's clock; any other command's is only the base of the
    /// relative expiries it sets (kv_state_machine.hpp). 0: no clock.
    std::uint64_t stamp_ms = 0;
    /// A version-2 record (written by kv_server before expiry followed the leader's clock
    /// alone): its stamp advances the map's clock whatever the command, as it did then, so
    /// that old logs replay to the same states. `encode` writes it as version 2 again.
    bool legacy_clock = false;
    bool operator==(const command&) const = default;
};

/// The key a SET/DEL/INCR/CAS writes; for CALLS the first call's first argument after its
/// name (empty if none), for TICK empty.
inline const std::string& key_of(const command& c) noexcept {
    static const std::string none;
    return std::visit(
        [](const auto& op) -> const std::string& {
            using T = std::decay_t<decltype(op)>;
            if constexpr (std::is_same_v<T, calls_op>) {
                return !op.calls.empty() && op.calls.front().size() > 1 ? op.calls.front()[1]
                                                                         : none;
            } else if constexpr (std::is_same_v<T, tick_op>) {
                return none;
            } else {
                return op.key;
            }
        },
        c.op);
}

namespace detail {

enum class op_code : std::uint8_t { set = 1, del = 2, incr = 3, cas = 4, calls = 5, tick = 6 };
inline constexpr std::uint8_t flag_tagged = 0x01;
inline constexpr std::uint8_t flag_expected = 0x02;
inline constexpr std::uint8_t flag_multi = 0x04;

inline bool fits(const std::string& s) noexcept { return s.size() <= max_string_bytes; }

inline op_code code_of(const operation& op) noexcept {
    return static_cast<op_code>(op.index() + 1);  // the variant lists the ops in code order
}

/// Reads a u32 count of items that take at least `min_item_bytes` each: a count the input
/// cannot hold is truncation, found before anything is reserved.
inline bool read_count(byte_reader& r, std::uint32_t& count, std::size_t min_item_bytes) {
    if (!r.u32(count)) return false;
    if (count > r.remaining() / min_item_bytes) return r.fail(errc::truncated);
    return true;
}

}  // namespace detail

/// The bytes of `c`. `errc::oversized` if a key or value exceeds `max_string_bytes`.
inline result<std::vector<std::byte>> encode(const command& c) {
    using detail::op_code;
    const op_code code = detail::code_of(c.op);
    std::uint8_t flags = c.tag ? detail::flag_tagged : 0;
    bool all_fit = true;
    std::visit(
        [&](const auto& op) {
            using T = std::decay_t<decltype(op)>;
            if constexpr (std::is_same_v<T, calls_op>) {
                if (op.multi) flags |= detail::flag_multi;
                for (const auto& w : op.watches) all_fit = all_fit && detail::fits(w.key);
                for (const auto& call : op.calls)
                    for (const auto& arg : call) all_fit = all_fit && detail::fits(arg);
            } else if constexpr (std::is_same_v<T, tick_op>) {
            } else {
                all_fit = detail::fits(op.key);
                if constexpr (std::is_same_v<T, set_op>) {
                    all_fit = all_fit && detail::fits(op.value);
                } else if constexpr (std::is_same_v<T, cas_op>) {
                    if (op.expected) flags |= detail::flag_expected;
                    all_fit = all_fit && detail::fits(op.desired) &&
                              (!op.expected || detail::fits(*op.expected));
                }
            }
        },
        c.op);
    if (!all_fit) return make_error_code(errc::oversized);

    const bool unstamped = c.stamp_ms == 0 && code <= op_code::cas;
    std::vector<std::byte> out;
    detail::byte_writer w{out};
    w.u8(unstamped         ? command_version_unstamped
         : c.legacy_clock ? command_version_legacy_clock
                          : command_version);
    w.u8(static_cast<std::uint8_t>(code));
    w.u8(flags);
    if (!unstamped) w.u64(c.stamp_ms);
    if (c.tag) {
        w.u64(c.tag->client_id);
        w.u64(c.tag->sequence);
    }
    std::visit(
        [&](const auto& op) {
            using T = std::decay_t<decltype(op)>;
            if constexpr (std::is_same_v<T, calls_op>) {
                w.u32(static_cast<std::uint32_t>(op.watches.size()));
                for (const auto& watched : op.watches) {
                    w.string(watched.key);
                    w.u64(watched.version);
                }
                w.u32(static_cast<std::uint32_t>(op.calls.size()));
                for (const auto& call : op.calls) {
                    w.u32(static_cast<std::uint32_t>(call.size()));
                    for (const auto& arg : call) w.string(arg);
                }
            } else if constexpr (std::is_same_v<T, tick_op>) {
            } else {
                w.string(op.key);
                if constexpr (std::is_same_v<T, set_op>) {
                    w.string(op.value);
                } else if constexpr (std::is_same_v<T, cas_op>) {
                    if (op.expected) w.string(*op.expected);
                    w.string(op.desired);
                }
            }
        },
        c.op);
    return out;
}

/// The command `bytes` encode. Errors: `errc::truncated` (input ends inside a field),
/// `errc::oversized` (a length above `max_string_bytes`), `errc::unsupported_version`,
/// `errc::unknown_message_type` (an op code that names no command), `errc::malformed`
/// (reserved flag bits set, a flag on a command it does not belong to, an encoding `encode`
/// would not write, or bytes after the last field).
inline result<command> decode(byte_view bytes) {
    using detail::op_code;
    detail::byte_reader r{bytes};
    std::uint8_t version = 0, code = 0, flags = 0;
    if (!r.u8(version)) return r.error();
    if (version != command_version && version != command_version_legacy_clock &&
        version != command_version_unstamped)
        return make_error_code(errc::unsupported_version);
    const bool stamped = version != command_version_unstamped;
    if (!r.u8(code) || !r.u8(flags)) return r.error();
    const auto last = stamped ? op_code::tick : op_code::cas;
    if (code < static_cast<std::uint8_t>(op_code::set) || code > static_cast<std::uint8_t>(last))
        return make_error_code(errc::unknown_message_type);
    const auto op = static_cast<op_code>(code);
    const std::uint8_t allowed = detail::flag_tagged |
                                 (op == op_code::cas ? detail::flag_expected : 0) |
                                 (op == op_code::calls ? detail::flag_multi : 0);
    if ((flags & ~allowed) != 0) return make_error_code(errc::malformed);

    command c;
    c.legacy_clock = version == command_version_legacy_clock;
    if (stamped) {
        if (!r.u64(c.stamp_ms)) return r.error();
        if (c.stamp_ms == 0 && op <= op_code::cas) return make_error_code(errc::malformed);
    }
    if ((flags & detail::flag_tagged) != 0) {
        request_tag tag;
        r.u64(tag.client_id);
        r.u64(tag.sequence);
        c.tag = tag;
    }
    std::string key;
    if (op <= op_code::cas) r.string(key, max_string_bytes);
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
        case op_code::calls: {
            calls_op s;
            s.multi = (flags & detail::flag_multi) != 0;
            std::uint32_t watches = 0, calls = 0;
            if (detail::read_count(r, watches, 4 + 8)) {
                s.watches.resize(watches);
                for (auto& w : s.watches)
                    if (r.string(w.key, max_string_bytes)) r.u64(w.version);
            }
            if (!r.failed() && detail::read_count(r, calls, 4)) {
                s.calls.resize(calls);
                for (auto& call : s.calls) {
                    std::uint32_t argc = 0;
                    if (!detail::read_count(r, argc, 4)) break;
                    if (argc == 0) return make_error_code(errc::malformed);
                    call.resize(argc);
                    for (auto& arg : call) r.string(arg, max_string_bytes);
                }
            }
            if (!r.failed() && !s.multi && (s.calls.size() != 1 || !s.watches.empty()))
                return make_error_code(errc::malformed);
            c.op = std::move(s);
            break;
        }
        case op_code::tick: c.op = tick_op{}; break;
    }
    if (r.failed()) return r.error();
    if (r.remaining() != 0) return make_error_code(errc::malformed);
    return c;
}

}  // namespace zab::kv
