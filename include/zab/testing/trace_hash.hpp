// zab/testing/trace_hash.hpp — a running 64-bit hash of everything a simulated run did.
//
// What it is for: determinism is checked, not assumed (STYLE.md, FoundationDB's
// simulation). The harness feeds every event of a run (sends, deliveries, completions,
// state changes) into a trace_hash; running a seed twice must give the same value, and a
// difference means something read an uncontrolled source (a clock, an address, unordered
// iteration). The hash must therefore be the same on every platform and compiler: integers
// are consumed as explicit little-endian words, never as raw memory. The mixing is the
// round and avalanche of xxHash64 — fast, well-distributed, not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "zab/core/bytes.hpp"

namespace zab::testing {

class trace_hash {
public:
    trace_hash() noexcept : trace_hash{0} {}
    /// A different seed gives an unrelated sequence of values.
    explicit trace_hash(std::uint64_t seed) noexcept : state_{seed + prime_5} {}

    /// Adds one 64-bit integer.
    void add(std::uint64_t word) noexcept { mix(word); }

    /// Adds a byte string: its length, then its bytes as little-endian 8-byte words (the last
    /// one zero-padded). The length makes "ab" + "c" differ from "a" + "bc".
    void add(byte_view bytes) noexcept {
        mix(bytes.size());
        std::size_t offset = 0;
        while (offset < bytes.size()) {
            std::uint64_t word = 0;
            for (std::size_t i = 0; i < 8 && offset + i < bytes.size(); ++i)
                word |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[offset + i])} << (8 * i);
            mix(word);
            offset += 8;
        }
    }

    /// Adds a string, exactly as `add(byte_view)` of its bytes.
    void add(std::string_view text) noexcept { add(as_bytes(text)); }

    /// The hash of everything added so far (adding more afterwards is fine).
    std::uint64_t value() const noexcept {
        std::uint64_t h = state_;
        h ^= h >> 33;
        h *= prime_2;
        h ^= h >> 29;
        h *= prime_3;
        h ^= h >> 32;
        return h;
    }

    friend bool operator==(const trace_hash&, const trace_hash&) = default;

private:
    static constexpr std::uint64_t prime_1 = 0x9e3779b185ebca87u;
    static constexpr std::uint64_t prime_2 = 0xc2b2ae3d27d4eb4fu;
    static constexpr std::uint64_t prime_3 = 0x165667b19e3779f9u;
    static constexpr std::uint64_t prime_5 = 0x27d4eb2f165667c5u;

    void mix(std::uint64_t word) noexcept {
        std::uint64_t lane = word * prime_2;
        lane = (lane << 31) | (lane >> 33);
        lane *= prime_1;
        state_ ^= lane;
        state_ = ((state_ << 27) | (state_ >> 37)) * prime_1 + prime_3;
    }

    std::uint64_t state_;
};

}  // namespace zab::testing
