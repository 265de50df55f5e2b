// examples/kv/kv_outcome.hpp — what applying one kv command did, as the client is answered.
//
// zab's state machines must not fail (concepts.hpp): a command that is refused — it does not
// decode, INCR finds no integer, a CAS finds another value — is refused the same way on every
// replica, so the refusal is an outcome like any other and not an error of `apply`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace zab::kv {

/// Redis's wording for the refusals (errors are "ERR ..." as Redis sends them, without the
/// leading '-' of the RESP error line).
inline constexpr std::string_view error_not_integer = "ERR value is not an integer or out of range";
inline constexpr std::string_view error_overflow = "ERR increment or decrement would overflow";
/// A retry older than the client's last applied request: its own outcome is no longer kept.
inline constexpr std::string_view error_stale_sequence =
    "ERR request sequence number is older than the client's last applied request";
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

}  // namespace zab::kv
