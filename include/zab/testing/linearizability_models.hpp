// zab/testing/linearizability_models.hpp — the sequential models zab's histories are checked
// against: a single register, and a key-value map partitioned per key.
//
// Both are deterministic: the state after an operation depends only on the state before and
// the input, so an operation whose outcome is unknown (output nullopt) is always accepted
// and has the effect it would have had (a CAS of unknown outcome succeeds iff its expected
// value is the current one; that it failed and that it never happened are the same state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "zab/testing/linearizability.hpp"

namespace zab::testing {

/// A single integer register, initially 0: `read`, `write(v)` and `cas(expected, desired)`,
/// which stores `desired` and answers true iff the register held `expected`.
struct register_model {
    enum class kind { read, write, cas };

    /// What the client asked. `value` is written (write) or stored on success (cas).
    struct input {
        kind what = kind::read;
        std::int64_t value = 0;
        std::int64_t expected = 0;  ///< cas only
        bool operator==(const input&) const = default;
    };
    /// What the client was answered: the value read, or whether a cas succeeded.
    /// A write's output carries nothing.
    struct output {
        std::int64_t value = 0;  ///< read only
        bool succeeded = true;   ///< cas only
    };
    using state = std::int64_t;

    static input read() { return {kind::read, 0, 0}; }
    static input write(std::int64_t value) { return {kind::write, value, 0}; }
    static input cas(std::int64_t expected, std::int64_t desired) {
        return {kind::cas, desired, expected};
    }
    static output read_returned(std::int64_t value) { return {value, true}; }
    static output write_returned() { return {}; }
    static output cas_returned(bool succeeded) { return {0, succeeded}; }

    static state init() { return 0; }

    static std::optional<state> step(const state& current, const input& in,
                                     const std::optional<output>& out) {
        switch (in.what) {
            case kind::read:
                if (out && out->value != current) return std::nullopt;
                return current;
            case kind::write: return in.value;
            case kind::cas: {
                const bool matches = current == in.expected;
                if (out && out->succeeded != matches) return std::nullopt;
                return matches ? in.value : current;
            }
        }
        return std::nullopt;
    }

    static std::size_t hash(const state& s) { return std::hash<state>{}(s); }

    static std::string describe_state(const state& s) { return fmt::format("{}", s); }

    static std::string describe_operation(const input& in, const std::optional<output>& out) {
        switch (in.what) {
            case kind::read:
                return out ? fmt::format("read() -> {}", out->value) : "read() -> ?";
            case kind::write:
                return fmt::format("write({}){}", in.value, out ? "" : " -> ?");
            case kind::cas:
                return fmt::format("cas({}, {}) -> {}", in.expected, in.value,
                                   out ? (out->succeeded ? "true" : "false") : "?");
        }
        return "?";
    }
};

/// A map from string keys to string values, initially empty: `get(k)` answers the value or
/// absent, `put(k, v)`, `del(k)`, and `cas(k, expected, desired)`, which stores `desired` and
/// answers true iff `k` held `expected` (an absent key holds no value: its cas fails).
/// Partitioned per key, so the state is the value of one key.
struct kv_model {
    enum class kind { get, put, del, cas };

    struct input {
        kind what = kind::get;
        std::string key;
        std::string value;     ///< put, and cas's desired value
        std::string expected;  ///< cas only
        bool operator==(const input&) const = default;
    };
    /// The value a get found (nullopt: absent), or whether a cas succeeded. Puts and deletes
    /// answer nothing.
    struct output {
        std::optional<std::string> value;  ///< get only
        bool succeeded = true;             ///< cas only
    };
    using state = std::optional<std::string>;  ///< the value of the partition's key

    static input get(std::string key) { return {kind::get, std::move(key), {}, {}}; }
    static input put(std::string key, std::string value) {
        return {kind::put, std::move(key), std::move(value), {}};
    }
    static input del(std::string key) { return {kind::del, std::move(key), {}, {}}; }
    static input cas(std::string key, std::string expected, std::string desired) {
        return {kind::cas, std::move(key), std::move(desired), std::move(expected)};
    }
    static output get_returned(std::optional<std::string> value) {
        return {std::move(value), true};
    }
    static output put_returned() { return {}; }
    static output del_returned() { return {}; }
    static output cas_returned(bool succeeded) { return {std::nullopt, succeeded}; }

    static state init() { return std::nullopt; }

    static const std::string& partition_key(const input& in) { return in.key; }

    static std::optional<state> step(const state& current, const input& in,
                                     const std::optional<output>& out) {
        switch (in.what) {
            case kind::get:
                if (out && out->value != current) return std::nullopt;
                return current;
            case kind::put: return state{in.value};
            case kind::del: return state{std::nullopt};
            case kind::cas: {
                const bool matches = current == in.expected;
                if (out && out->succeeded != matches) return std::nullopt;
                return matches ? state{in.value} : current;
            }
        }
        return std::nullopt;
    }

    static std::size_t hash(const state& s) {
        return s ? std::hash<std::string>{}(*s) : std::size_t{0x5bd1e995};
    }

    static std::string describe_state(const state& s) {
        return s ? fmt::format("\"{}\"", *s) : std::string{"absent"};
    }

    static std::string describe_operation(const input& in, const std::optional<output>& out) {
        switch (in.what) {
            case kind::get:
                return fmt::format("get(\"{}\") -> {}", in.key,
                                   out ? describe_state(out->value) : "?");
            case kind::put:
                return fmt::format("put(\"{}\", \"{}\"){}", in.key, in.value, out ? "" : " -> ?");
            case kind::del: return fmt::format("del(\"{}\"){}", in.key, out ? "" : " -> ?");
            case kind::cas:
                return fmt::format("cas(\"{}\", \"{}\", \"{}\") -> {}", in.key, in.expected,
                                   in.value, out ? (out->succeeded ? "true" : "false") : "?");
        }
        return "?";
    }
};

static_assert(linearizability_model<register_model>);
static_assert(!partitioned_model<register_model>);
static_assert(partitioned_model<kv_model>);

}  // namespace zab::testing
