// zab/session/session_envelope.hpp — the transaction format zab::session_machine reads by
// default: a small header (the request's session tag, the leader's clock) before the
// application's own transaction.
//
// Encoding, little-endian:
//
//   u8  magic     0xE5
//   u8  flags     bit 0: a tag follows; bit 1: a clock follows; every other bit 0
//   [u64 client_id, u64 sequence]   if bit 0
//   [u64 clock_ms]                  if bit 1: the leader's clock (ms), when the leader
//                                   proposes it; advances the session clock (§6.7)
//   the inner transaction (any bytes, possibly none)
//
// Bytes that are not an envelope (another first byte, a header cut short, unknown flags)
// are applied as they are, untagged: every replica reads the same bytes the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/session/session_table.hpp"

namespace zab {

/// What session_machine learns of one transaction from its codec.
struct session_header {
    std::optional<session_tag> tag;         ///< none: applied every time, no session
    std::optional<std::uint64_t> clock_ms;  ///< a leader's clock: advances the session clock
    byte_view payload;                      ///< what the inner machine applies
};

/// A codec for session_machine: `C::inspect(txn)` reads a transaction's session header. It
/// must be a pure function of the bytes (every replica reads them alike) and never fail.
template <typename C>
concept session_codec = requires(byte_view txn) {
    { C::inspect(txn) } -> std::same_as<session_header>;
};

/// The default codec: the envelope above.
struct session_envelope {
    static constexpr std::byte magic{0xE5};

    /// `payload` in an envelope with `tag` and `clock_ms`, as a client (tag) or a leader
    /// (clock) proposes it.
    static std::vector<std::byte> wrap(byte_view payload, std::optional<session_tag> tag,
                                       std::optional<std::uint64_t> clock_ms = std::nullopt) {
        const std::size_t header = 2 + (tag ? 16 : 0) + (clock_ms ? 8 : 0);
        std::vector<std::byte> out(header + payload.size());
        detail::wire_writer w{out};
        w.put(std::to_integer<std::uint8_t>(magic));
        w.put(static_cast<std::uint8_t>((tag ? 1 : 0) | (clock_ms ? 2 : 0)));
        if (tag) {
            w.put(tag->client_id);
            w.put(tag->sequence);
        }
        if (clock_ms) w.put(*clock_ms);
        w.put_raw(payload);
        return out;
    }

    static session_header inspect(byte_view txn) {
        session_header h{std::nullopt, std::nullopt, txn};
        detail::wire_reader in{txn};
        std::uint8_t first = 0, flags = 0;
        if (!in.get(first) || std::byte{first} != magic || !in.get(flags) || (flags & ~3u) != 0)
            return h;
        session_tag tag;
        std::uint64_t clock = 0;
        if ((flags & 1) != 0 && (!in.get(tag.client_id) || !in.get(tag.sequence))) return h;
        if ((flags & 2) != 0 && !in.get(clock)) return h;
        if ((flags & 1) != 0) h.tag = tag;
        if ((flags & 2) != 0) h.clock_ms = clock;
        h.payload = txn.subspan(txn.size() - in.remaining());
        return h;
    }
};

static_assert(session_codec<session_envelope>);

}  // namespace zab
