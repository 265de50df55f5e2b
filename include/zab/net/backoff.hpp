// zab/net/backoff.hpp — jittered exponential back-off between reconnection attempts.
//
// After the n-th failed attempt in a row the dialer waits a delay drawn uniformly from
// [d/2, d], d = min(reconnect_max, reconnect_min · 2^n). The jitter keeps replicas that lost
// each other at the same moment (a restarted leader, a healed partition) from dialing in
// lockstep. A connection that completed its handshake resets n to 0.
//
// The jitter needs no reproducibility (the simulator never runs this code), only independence
// between replicas: each back-off draws from its own small generator (splitmix64).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace zab::asio {

class backoff {
public:
    backoff(std::chrono::milliseconds min, std::chrono::milliseconds max,
            std::uint64_t seed) noexcept
        : min_{min}, max_{std::max(min, max)}, state_{seed} {}

    /// The delay before the next attempt; counts one more failure.
    std::chrono::milliseconds next_delay() noexcept {
        // min · 2^n, saturating at max without overflowing.
        std::chrono::milliseconds delay = max_;
        if (failures_ < 62 && min_.count() <= (max_.count() >> failures_)) {
            delay = min_ * (std::int64_t{1} << failures_);
        }
        ++failures_;
        const auto span = static_cast<std::uint64_t>(delay.count() - delay.count() / 2);
        const auto offset = static_cast<std::int64_t>(span == 0 ? 0 : random() % (span + 1));
        return std::chrono::milliseconds{delay.count() / 2 + offset};
    }

    /// A connection succeeded: the next failure starts again from `min`.
    void reset() noexcept { failures_ = 0; }

    unsigned failures() const noexcept { return failures_; }

private:
    std::uint64_t random() noexcept {  // splitmix64
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15u);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        return z ^ (z >> 31);
    }

    std::chrono::milliseconds min_;
    std::chrono::milliseconds max_;
    std::uint64_t state_;
    unsigned failures_ = 0;
};

}  // namespace zab::asio
