// zab/testing/random.hpp — zab's own seeded PRNG and the few distributions the simulator uses.
//
// What it models: every random choice of a simulated run (network delays, disk latencies,
// crash outcomes, fault schedules) comes from one seed, so a failing run replays exactly
// from that seed (docs/design.md rule 11). The standard library's engines are portable but its
// distributions are not (libstdc++ and libc++ draw differently), so zab has its own:
// xoshiro256** (Blackman & Vigna) seeded through splitmix64, Lemire's unbiased bounded
// integers, and 53-bit doubles. Nothing here may change output without changing the golden
// values in tests/sim/random_test.cpp: a seed printed by an old failure must still replay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"

namespace zab::testing {

namespace detail {

constexpr std::uint64_t rotate_left(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
}

/// splitmix64: expands one 64-bit seed into a well-mixed sequence (used only for seeding).
constexpr std::uint64_t splitmix64_next(std::uint64_t& state) noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/// The full 128-bit product of two 64-bit values, as {high, low}. Written out in 32-bit
/// halves so it needs no compiler extension (`__int128` is not ISO C++).
constexpr std::pair<std::uint64_t, std::uint64_t> multiply_wide(std::uint64_t a,
                                                                std::uint64_t b) noexcept {
    const std::uint64_t a_low = a & 0xffffffffu, a_high = a >> 32;
    const std::uint64_t b_low = b & 0xffffffffu, b_high = b >> 32;
    const std::uint64_t low_low = a_low * b_low;
    const std::uint64_t high_low = a_high * b_low;
    const std::uint64_t low_high = a_low * b_high;
    const std::uint64_t high_high = a_high * b_high;
    const std::uint64_t middle = (low_low >> 32) + (high_low & 0xffffffffu) + low_high;
    const std::uint64_t high = high_high + (high_low >> 32) + (middle >> 32);
    const std::uint64_t low = (middle << 32) | (low_low & 0xffffffffu);
    return {high, low};
}

}  // namespace detail

/// A deterministic pseudo-random generator: xoshiro256** seeded through splitmix64.
/// Not for cryptography. Copying a prng copies its position in the stream.
class prng {
public:
    explicit prng(std::uint64_t seed) noexcept : seed_{seed} {
        std::uint64_t expander = seed;
        for (auto& word : state_) word = detail::splitmix64_next(expander);
    }

    /// The seed this generator was constructed with (not its current position).
    std::uint64_t seed() const noexcept { return seed_; }

    /// The next 64 uniformly distributed bits.
    std::uint64_t next() noexcept {
        const std::uint64_t result = detail::rotate_left(state_[1] * 5, 7) * 9;
        const std::uint64_t shifted = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= shifted;
        state_[3] = detail::rotate_left(state_[3], 45);
        return result;
    }

    /// Uniform in [0, n), without modulo bias (Lemire, "Fast random integer generation in an
    /// interval", 2019). Precondition: n > 0.
    std::uint64_t below(std::uint64_t n) noexcept {
        ZAB_ASSERT(n > 0, "prng::below needs a non-empty range");
        auto [high, low] = detail::multiply_wide(next(), n);
        if (low < n) {
            const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
            while (low < threshold) std::tie(high, low) = detail::multiply_wide(next(), n);
        }
        return high;
    }

    /// Uniform in [lo, hi], both included. Precondition: lo <= hi.
    std::uint64_t between(std::uint64_t lo, std::uint64_t hi) noexcept {
        ZAB_ASSERT(lo <= hi, "prng::between needs lo <= hi");
        const std::uint64_t span = hi - lo;
        if (span == UINT64_MAX) return next();
        return lo + below(span + 1);
    }

    /// Uniform in [0, 1) with 53 random bits (every value a multiple of 2^-53).
    double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

    /// True with probability p. chance(0) is never true, chance(1) always.
    bool chance(double p) noexcept {
        ZAB_ASSERT(p >= 0.0 && p <= 1.0, "prng::chance needs a probability in [0, 1]");
        return unit() < p;
    }

    /// A new generator whose stream is derived deterministically from this one (advancing
    /// this one by one draw). Give each simulated component its own fork, so that adding a
    /// draw in one component does not shift every other component's choices.
    prng fork() noexcept { return prng{next()}; }

    /// Fisher–Yates shuffle, deterministic for a given stream position.
    template <class T>
    void shuffle(std::span<T> items) noexcept(std::is_nothrow_swappable_v<T>) {
        for (std::size_t i = items.size(); i > 1; --i) {
            using std::swap;
            swap(items[i - 1], items[below(i)]);
        }
    }

    template <class T>
    void shuffle(std::vector<T>& items) {
        shuffle(std::span<T>{items});
    }

    /// One element chosen uniformly. Precondition: `items` is not empty.
    template <class T>
    const T& pick(std::span<const T> items) noexcept {
        ZAB_ASSERT(!items.empty(), "prng::pick needs at least one item");
        return items[below(items.size())];
    }

    template <class T>
    const T& pick(const std::vector<T>& items) noexcept {
        return pick(std::span<const T>{items});
    }

private:
    std::uint64_t seed_;
    std::uint64_t state_[4] = {};
};

}  // namespace zab::testing
