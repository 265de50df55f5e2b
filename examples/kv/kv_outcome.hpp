// examples/kv/kv_outcome.hpp — what applying one kv command did, as the client is answered.
//
// zab's state machines must not fail (concepts.hpp): a command that is refused — it does not
// decode, INCR finds no integer, a CAS finds another value — is refused the same way on every
// replica, so the refusal is an outcome like any other and not an error of `apply`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "binary_io.hpp"
#include "kv_command.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"

namespace zab::kv {

/// Redis's wording for the refusals (errors are "ERR ..." as Redis sends them, without the
/// leading '-' of the RESP error line).
inline constexpr std::string_view error_not_integer = "ERR value is not an integer or out of range";
inline constexpr std::string_view error_overflow = "ERR increment or decrement would overflow";
/// A TAGGED request older than the client's last applied one (zab::session_status::
/// applied_earlier): not applied now; under the contract of one tagged request per client at
/// a time, a late copy of one applied earlier, whose outcome is no longer kept. Its own code
/// (not ERR): a client can tell it from a refusal.
inline constexpr std::string_view error_applied_earlier =
    "APPLIED earlier: the request's sequence number is older than the client's last applied "
    "request, so it was applied before that one (one tagged request per client at a time); "
    "its reply is not kept";
/// Prefix of the outcome of bytes that do not decode as a command; the decode error follows.
inline constexpr std::string_view error_malformed_prefix = "ERR malformed command: ";

enum class outcome_kind : std::uint8_t {
    ok = 1,              ///< SET: "+OK"
    integer = 2,         ///< INCR: the new value; DEL: the number of keys removed (0 or 1)
    cas_matched = 3,     ///< CAS stored its desired value
    cas_mismatched = 4,  ///< CAS found another value (or a value where it expected none)
    error = 5,           ///< refused; `error` says why
    reply = 6,           ///< CALLS: `reply` is the RESP reply (one call's, or EXEC's array)
};

/// The outcome of one applied command.
struct outcome {
    outcome_kind kind = outcome_kind::ok;
    std::int64_t integer = 0;  ///< `integer` only; 0 otherwise
    std::string error;         ///< `error` only, e.g. `error_not_integer`; empty otherwise
    std::string reply;         ///< `reply` only: RESP bytes, never empty; empty otherwise
    /// True when the command was a retry of a request already applied (same client id and
    /// sequence): nothing was applied again, and the fields above are the original outcome.
    bool duplicate = false;

    static outcome ok() { return {}; }
    static outcome integer_value(std::int64_t value) {
        return {outcome_kind::integer, value, {}, {}, false};
    }
    static outcome cas(bool matched) {
        return {matched ? outcome_kind::cas_matched : outcome_kind::cas_mismatched, 0, {}, {},
                false};
    }
    static outcome failure(std::string text) {
        return {outcome_kind::error, 0, std::move(text), {}, false};
    }
    static outcome resp(std::string bytes) {
        return {outcome_kind::reply, 0, {}, std::move(bytes), false};
    }

    bool operator==(const outcome&) const = default;
};

// --- the outcome as bytes --------------------------------------------------------------------
//
// How kv_store's `apply` returns an outcome (zab::result_machine; docs/protocol.md §6.6) and
// how the session table and the snapshot keep one: u8 kind, u64 integer (two's
// complement), error text, reply bytes (strings as a u32 length then the bytes). Not the
// `duplicate` mark: that is the session's answer (kv_state_machine.hpp), not the outcome's.

namespace detail {

inline void write_outcome(byte_writer& w, const outcome& o) {
    w.u8(static_cast<std::uint8_t>(o.kind));
    w.u64(static_cast<std::uint64_t>(o.integer));
    w.string(o.error);
    w.string(o.reply);
}

inline std::size_t outcome_size(const outcome& o) noexcept {
    return 1 + 8 + 4 + o.error.size() + 4 + o.reply.size();
}

/// Reads one outcome, rejecting any encoding `write_outcome` would not have written.
inline bool read_outcome(byte_reader& in, outcome& out) {
    std::uint8_t kind = 0;
    std::uint64_t integer = 0;
    if (!in.u8(kind) || !in.u64(integer) || !in.string(out.error, max_string_bytes) ||
        !in.string(out.reply, max_string_bytes))
        return false;
    if (kind < static_cast<std::uint8_t>(outcome_kind::ok) ||
        kind > static_cast<std::uint8_t>(outcome_kind::reply))
        return in.fail(errc::corrupt);
    out.kind = static_cast<outcome_kind>(kind);
    out.integer = static_cast<std::int64_t>(integer);
    const bool integer_ok = out.kind == outcome_kind::integer || out.integer == 0;
    const bool text_ok = (out.kind == outcome_kind::error) != out.error.empty();
    const bool reply_ok = (out.kind == outcome_kind::reply) != out.reply.empty();
    return integer_ok && text_ok && reply_ok ? true : in.fail(errc::corrupt);
}

}  // namespace detail

inline shared_bytes encode_outcome(const outcome& o) {
    std::vector<std::byte> out;
    out.reserve(detail::outcome_size(o));
    detail::byte_writer w{out};
    detail::write_outcome(w, o);
    return shared_bytes{std::move(out)};
}

/// The outcome `bytes` hold, or nullopt for bytes `encode_outcome` would not write.
inline std::optional<outcome> decode_outcome(byte_view bytes) {
    detail::byte_reader in{bytes};
    outcome o;
    if (!detail::read_outcome(in, o) || in.remaining() != 0) return std::nullopt;
    return o;
}

}  // namespace zab::kv
