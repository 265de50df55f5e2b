// examples/kv/decimal.hpp — 64-bit signed integers as Redis writes and accepts them.
//
// INCR and RESP lengths both use Redis's strict decimal form (`string2ll` in redis/util.c):
// an optional '-', then digits with no leading zero ("0" itself excepted), nothing else — no
// '+', no spaces, no "-0" — and the value must fit in an int64. Being as strict as Redis
// keeps one integer one string, so a counter's stored text is always the canonical form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zab::kv {

/// An unsigned decimal of at most 20 digits that fits in a uint64 (TAGGED's client id and
/// sequence, replica ids, configuration versions), or nullopt.
constexpr std::optional<std::uint64_t> parse_uint64(std::string_view text) noexcept {
    if (text.empty() || text.size() > 20) return std::nullopt;
    std::uint64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    return value;
}

/// The int64 `text` spells in Redis's strict decimal form, or nullopt.
constexpr std::optional<std::int64_t> parse_int64(std::string_view text) noexcept {
    if (text.empty() || text.size() > 20) return std::nullopt;  // "-9223372036854775808"
    if (text == "0") return 0;
    const bool negative = text.front() == '-';
    if (negative) text.remove_prefix(1);
    if (text.empty() || text.front() < '1' || text.front() > '9') return std::nullopt;
    // Accumulate the magnitude unsigned: |INT64_MIN| does not fit in an int64.
    std::uint64_t magnitude = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (magnitude > (UINT64_MAX - digit) / 10) return std::nullopt;
        magnitude = magnitude * 10 + digit;
    }
    constexpr auto max_positive = static_cast<std::uint64_t>(INT64_MAX);
    if (negative) {
        if (magnitude > max_positive + 1) return std::nullopt;
        // Two's complement: 0 - magnitude, computed unsigned, is the negative value's bits.
        return static_cast<std::int64_t>(0 - magnitude);
    }
    if (magnitude > max_positive) return std::nullopt;
    return static_cast<std::int64_t>(magnitude);
}

/// `value` in decimal: the one spelling `parse_int64` maps back to it.
inline std::string format_int64(std::int64_t value) { return std::to_string(value); }

}  // namespace zab::kv
