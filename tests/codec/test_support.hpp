// Helpers shared by the codec tests: a seeded generator of random messages, frames built
// byte by byte, and readable error comparisons.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/codec.hpp"
#include "zab/core/crc32c.hpp"

namespace zab::test {

/// Bytes written as a list of small integers, for byte-exact expectations.
inline std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
    std::vector<std::byte> out;
    for (int v : values) out.push_back(static_cast<std::byte>(v));
    return out;
}

/// splitmix64: tiny, seedable and identical on every platform (the standard library's
/// distributions are not), so a failing case replays from its seed.
class splitmix64 {
public:
    explicit splitmix64(std::uint64_t seed) noexcept : state_{seed} {}

    std::uint64_t next() noexcept {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    /// Uniform enough in [0, bound) for tests (modulo bias is irrelevant here). bound > 0.
    std::uint64_t below(std::uint64_t bound) noexcept { return next() % bound; }

    bool one_in(std::uint64_t n) noexcept { return below(n) == 0; }

    /// A u64 that is often an edge value (0, 1, max, max-1) and otherwise random.
    std::uint64_t u64() noexcept {
        switch (below(8)) {
            case 0: return 0;
            case 1: return 1;
            case 2: return ~0ull;
            case 3: return ~0ull - 1;
            case 4: return below(1000);
            default: return next();
        }
    }

    std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(u64()); }

private:
    std::uint64_t state_;
};

/// Random messages of every type. Owns the bytes their byte fields view, so messages stay
/// valid as long as the factory.
class message_factory {
public:
    explicit message_factory(std::uint64_t seed) : rng_{seed} {}

    splitmix64& rng() noexcept { return rng_; }

    /// A random byte field: empty a quarter of the time, otherwise short, medium or long.
    byte_view bytes() {
        std::size_t size = 0;
        switch (rng_.below(4)) {
            case 0: size = 0; break;
            case 1: size = rng_.below(16); break;
            case 2: size = rng_.below(600); break;
            default: size = rng_.below(rng_.one_in(8) ? 70000 : 5000); break;
        }
        auto& buffer = storage_.emplace_back(size);
        for (auto& b : buffer) b = static_cast<std::byte>(rng_.next());
        return buffer;
    }

    zxid any_zxid() noexcept { return zxid::from_value(rng_.u64()); }

    /// A valid PROPOSALS batch of `count` (≥ 1) random transactions: a run inside one epoch,
    /// from a counter that is often at the edges (1, or ending at the epoch's last one).
    wire::proposal_batch batch(std::uint32_t count) {
        const std::uint32_t last_first = zxid::counter_max - (count - 1);
        const std::uint32_t counter =
            rng_.one_in(4) ? 1 : rng_.one_in(3) ? last_first : static_cast<std::uint32_t>(1 + rng_.below(last_first));
        std::vector<std::byte> entries;
        for (std::uint32_t i = 0; i < count; ++i) {
            const auto size = static_cast<std::uint32_t>(rng_.below(rng_.one_in(16) ? 4000 : 64));
            for (int b = 0; b < 4; ++b) entries.push_back(static_cast<std::byte>(size >> (8 * b)));
            for (std::uint32_t b = 0; b < size; ++b) entries.push_back(static_cast<std::byte>(rng_.next()));
        }
        auto& buffer = storage_.emplace_back(std::move(entries));
        return {zxid{rng_.u32(), counter}, count, buffer};
    }

    /// A valid REQUESTS frame of `count` (≥ 1) random writes, its request ids often at the
    /// top of their range.
    wire::forwarded_batch forwarded(std::uint32_t count) {
        const wire::proposal_batch entries = batch(count);
        const std::uint64_t last_first = UINT64_MAX - (count - 1);
        return {rng_.one_in(4) ? last_first : rng_.u64() % last_first, count, entries.txns};
    }

    /// A valid REPLIES frame: an accepted run inside one epoch, or a refusal of all.
    wire::reply_batch replies() {
        const auto count = static_cast<std::uint32_t>(1 + rng_.below(rng_.one_in(4) ? 300 : 8));
        const std::uint64_t first_request = rng_.u64() % (UINT64_MAX - (count - 1));
        const auto outcome = static_cast<wire::reply_outcome>(rng_.below(10));
        if (outcome != wire::reply_outcome::accepted) return {first_request, count, outcome, zxid{}};
        const std::uint32_t last_first = zxid::counter_max - (count - 1);
        const auto counter = static_cast<std::uint32_t>(1 + rng_.below(last_first));
        return {first_request, count, outcome, zxid{rng_.u32(), counter}};
    }

    template <typename M>
    M make() {
        if constexpr (std::is_same_v<M, wire::notification>) {
            return {static_cast<peer_state>(rng_.below(4)), rng_.u64(), any_zxid(), rng_.u64(),
                    rng_.u32()};
        } else if constexpr (std::is_same_v<M, wire::follower_info> || std::is_same_v<M, wire::observer_info> ||
                             std::is_same_v<M, wire::leader_info>) {
            return {rng_.u32(), rng_.u32(), {rng_.u32(), rng_.u32(), rng_.u64()}};
        } else if constexpr (std::is_same_v<M, wire::ack_epoch>) {
            return {any_zxid(), rng_.one_in(3) ? std::nullopt : std::optional{rng_.u32()}};
        } else if constexpr (std::is_same_v<M, wire::diff> || std::is_same_v<M, wire::trunc> ||
                             std::is_same_v<M, wire::new_leader> || std::is_same_v<M, wire::ack> ||
                             std::is_same_v<M, wire::commit> || std::is_same_v<M, wire::sync_ack>) {
            return {any_zxid()};
        } else if constexpr (std::is_same_v<M, wire::snap>) {
            return {any_zxid(), rng_.u64(), rng_.u64(), bytes()};
        } else if constexpr (std::is_same_v<M, wire::snap_ack>) {
            return {rng_.u64()};
        } else if constexpr (std::is_same_v<M, wire::proposal> || std::is_same_v<M, wire::inform>) {
            return {any_zxid(), bytes()};
        } else if constexpr (std::is_same_v<M, wire::up_to_date>) {
            return {};
        } else if constexpr (std::is_same_v<M, wire::forwarded_request>) {
            return {rng_.u64(), static_cast<wire::request_kind>(rng_.below(2)), bytes()};
        } else if constexpr (std::is_same_v<M, wire::ping>) {
            return {any_zxid(), rng_.u64()};
        } else if constexpr (std::is_same_v<M, wire::sync_answer>) {
            return {rng_.u64()};
        } else if constexpr (std::is_same_v<M, wire::forwarded_reply>) {
            return {rng_.u64(), static_cast<wire::reply_outcome>(rng_.below(6)), any_zxid()};
        } else if constexpr (std::is_same_v<M, wire::proposal_batch>) {
            return batch(static_cast<std::uint32_t>(1 + rng_.below(rng_.one_in(4) ? 300 : 8)));
        } else if constexpr (std::is_same_v<M, wire::forwarded_batch>) {
            return forwarded(static_cast<std::uint32_t>(1 + rng_.below(rng_.one_in(4) ? 300 : 8)));
        } else if constexpr (std::is_same_v<M, wire::reply_batch>) {
            return replies();
        } else {
            static_assert(std::is_same_v<M, wire::handover>, "message_factory: add the new message type");
            return {rng_.u64(), any_zxid(), rng_.u32(), rng_.u64()};
        }
    }

    /// A random message of a uniformly chosen type.
    wire::message any() {
        return make_index(rng_.below(std::variant_size_v<wire::message>),
                          std::make_index_sequence<std::variant_size_v<wire::message>>{});
    }

    frame_context context() noexcept { return {rng_.u64(), rng_.u64()}; }

private:
    template <std::size_t... I>
    wire::message make_index(std::size_t index, std::index_sequence<I...>) {
        wire::message out;
        (void)((index == I && (out = make<std::variant_alternative_t<I, wire::message>>(), true)) || ...);
        return out;
    }

    splitmix64 rng_;
    std::deque<std::vector<std::byte>> storage_;
};

/// Header fields for `raw_frame`; defaults make a valid header.
struct raw_header {
    std::uint32_t magic = frame_magic;
    /// Default: the version of the frame's type (frame_version_of).
    std::optional<std::uint8_t> version = std::nullopt;
    std::uint16_t flags = 0;
    std::uint64_t group_id = 0;
    std::uint64_t config_version = 0;
    std::optional<std::uint32_t> payload_length = std::nullopt;  ///< default: the payload's size
    std::optional<std::uint32_t> payload_crc32c = std::nullopt;  ///< default: the payload's CRC32C
};

/// A frame assembled byte by byte, independently of the encoder, so tests can build frames
/// the encoder would never produce (bad payloads with a correct CRC, bad headers, …).
inline std::vector<std::byte> raw_frame(std::uint8_t type, byte_view payload,
                                        const raw_header& h = {}) {
    std::vector<std::byte> out;
    auto put = [&out](std::uint64_t value, int size) {
        for (int i = 0; i < size; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
    };
    put(h.magic, 4);
    put(h.version.value_or(frame_version_of(static_cast<wire::message_type>(type))), 1);
    put(type, 1);
    put(h.flags, 2);
    put(h.group_id, 8);
    put(h.config_version, 8);
    put(h.payload_length.value_or(static_cast<std::uint32_t>(payload.size())), 4);
    put(h.payload_crc32c.value_or(crc32c(payload)), 4);
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

inline std::uint8_t type_byte(wire::message_type t) noexcept { return static_cast<std::uint8_t>(t); }

/// The wire type of every alternative of `message`, in variant order.
inline auto all_message_types() {
    return []<std::size_t... I>(std::index_sequence<I...>) {
        return std::array{wire::message_type_v<std::variant_alternative_t<I, wire::message>>...};
    }
    (std::make_index_sequence<std::variant_size_v<wire::message>>{});
}

inline std::vector<std::byte> to_vector(byte_view bytes) { return {bytes.begin(), bytes.end()}; }

/// The payload part of an encoded frame.
inline std::vector<std::byte> payload_of(const shared_bytes& frame) {
    return to_vector(frame.view().subspan(frame_header_size));
}

/// "ok" or the error's message: reads well in Catch's failure output.
template <typename T>
std::string status(const result<T>& r) {
    return r ? std::string{"ok"} : r.error().message();
}
inline std::string status(errc e) { return make_error_code(e).message(); }

/// Collects the byte fields of a message, through the codec's own field lists.
struct byte_field_collector {
    std::vector<byte_view> found;
    template <typename... F>
    void operator()(const F&... values) {
        (collect(values), ...);
    }
    template <typename F>
    void collect(const F& value) {
        if constexpr (std::is_same_v<F, byte_view>) found.push_back(value);
    }
};

inline std::vector<byte_view> byte_fields(const wire::message& m) {
    byte_field_collector collector;
    std::visit([&](const auto& v) { detail::fields(collector, v); }, m);
    return collector.found;
}

}  // namespace zab::test
