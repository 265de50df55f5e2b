// zab/core/zxid.hpp — the transaction id: epoch in the high 32 bits, counter in the low 32.
#pragma once

#include <compare>
#include <cstdint>

#include <fmt/format.h>

namespace zab {

/// Epoch of a leader (docs/protocol.md §1). Epochs stay far below 2^32; overflow is not handled.
using epoch_t = std::uint32_t;

/// A zxid: `(epoch << 32) | counter` (docs/protocol.md §1). Ordered as the pair (epoch, counter).
/// Counter 0 is never a transaction: `(e, 0)` is the NEWLEADER zxid / epoch marker.
/// Counter 0xffffffff is never proposed: reaching it forces a new election (ZOOKEEPER-1277).
class zxid {
public:
    static constexpr std::uint32_t counter_max = 0xffffffffu;

    constexpr zxid() noexcept = default;
    constexpr zxid(epoch_t epoch, std::uint32_t counter) noexcept
        : value_{(std::uint64_t{epoch} << 32) | counter} {}

    /// Rebuilds a zxid from its 64-bit wire/disk representation.
    static constexpr zxid from_value(std::uint64_t value) noexcept {
        zxid z;
        z.value_ = value;
        return z;
    }

    constexpr std::uint64_t value() const noexcept { return value_; }
    constexpr epoch_t epoch() const noexcept { return static_cast<epoch_t>(value_ >> 32); }
    constexpr std::uint32_t counter() const noexcept {
        return static_cast<std::uint32_t>(value_ & 0xffffffffu);
    }

    /// True for `(e, 0)`: the marker a new leader of epoch `e` starts from.
    constexpr bool is_epoch_marker() const noexcept { return counter() == 0; }

    /// True when the next counter in this epoch would be the forbidden all-ones value
    /// (§1, ZOOKEEPER-1277): the leader must step down instead of proposing it.
    constexpr bool counter_exhausted() const noexcept { return counter() >= counter_max - 1; }

    /// The next zxid in the same epoch. Precondition: `!counter_exhausted()`.
    constexpr zxid next() const noexcept { return zxid{epoch(), counter() + 1}; }

    /// Whether `next` may follow this zxid in one log: within an epoch every counter follows
    /// the previous one, and a later epoch starts at its first counter — 1, or one past a
    /// leader's `options::test_only.initial_counter` (docs/protocol.md §5.3, §10.13,
    /// ZOOKEEPER-4925: a hole at the start of an epoch is a hole too).
    constexpr bool continued_by(zxid next, std::uint32_t first_counter = 1) const noexcept {
        if (next.epoch() == epoch()) return next.counter() == counter() + 1;
        return next.epoch() > epoch() && next.counter() == first_counter;
    }

    friend constexpr auto operator<=>(zxid, zxid) noexcept = default;

private:
    std::uint64_t value_ = 0;
};

}  // namespace zab

/// Formats as `<epoch, counter>`, the notation of the seeds.
template <>
struct fmt::formatter<zab::zxid> {
    constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
    template <typename Context>
    auto format(zab::zxid z, Context& ctx) const {
        return fmt::format_to(ctx.out(), "<{}, {}>", z.epoch(), z.counter());
    }
};
