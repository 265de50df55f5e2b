// zab/core/codec.hpp — the wire format: one frame per message, encoded and decoded.
//
// A frame is a 32-byte header followed by the message's payload. Everything is little-endian
// and fixed width, whatever the host:
//
//   offset size field
//        0    4 magic            0x3142415A: the bytes 'Z' 'A' 'B' '1'
//        4    1 version          the version its type appeared in (5 or 6, frame_version_of)
//        5    1 type             message_type (messages.hpp)
//        6    2 flags            0; reserved for a later version, so nonzero is malformed now
//        8    8 group_id         which zab group the message belongs to: several groups may
//                                share one connection (docs/design.md, "room to leave")
//       16    8 config_version   the sender's configuration version (reconfiguration, §9)
//       24    4 payload_length   bytes after the header
//       28    4 payload_crc32c   CRC32C (crc32c.hpp) of the payload bytes
//       32    …  payload
//
// The payload is the message's fields in declaration order (see `detail::fields` below):
// zxid as u64 (`zxid::value()`), epoch_t and other u32 as u32, peer ids, rounds and request
// ids as u64, enums as u8 (validated), agreed_options as its u32, u32 and u64,
// `std::optional<epoch_t>` as a u8 presence flag (0 or 1) followed by the u32 when present,
// byte fields as a u32 length followed by the bytes.
// A message without fields (UPTODATE) has an empty payload. Nothing may follow the last
// field. Every field has exactly one encoding, so decode∘encode is the identity on every
// valid frame (the fuzz target checks this).
//
// Decoding treats its input as hostile (docs/design.md rules 6 and 9): any byte string yields a
// message or a `zab::errc`, never an assertion, a throw or undefined behaviour. Encoding
// only sees zab's own messages, so its preconditions are ZAB_ASSERTs.
//
// To add a message: give it a wire type in messages.hpp and one `detail::fields` overload
// here. Sizing, encoding and decoding all follow from that one list of fields. A new type
// raises `frame_version` and is written with it (frame_version_of); the types before it keep
// the version they had, so a replica of the previous release reads them (docs/protocol.md
// §0.2), and the protocol version gates sending the new one.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// The first four bytes of every frame: "ZAB1" read as a little-endian u32. Lets a receiver
/// tell a zab peer from anything else that connected to its port.
inline constexpr std::uint32_t frame_magic = 0x3142415Au;

/// The newest frame format version this build writes and reads. 5: FOLLOWERINFO,
/// OBSERVERINFO and LEADERINFO carry the options every replica must share (agreed_options);
/// 6: REQUESTS and REPLIES (forwarded_batch, reply_batch). A frame carries the version its
/// message type appeared in (frame_version_of), so the frames of version 5 are byte for byte
/// those of the release before, which reads only version 5 (docs/protocol.md §0.2).
inline constexpr std::uint8_t frame_version = 6;

/// The oldest frame format version this build reads.
inline constexpr std::uint8_t oldest_frame_version = 5;

/// The frame version a message of wire type `type` is written with: the version the type
/// appeared in, 5 for every type older than version 6.
constexpr std::uint8_t frame_version_of(wire::message_type type) noexcept {
    switch (type) {
        case wire::message_type::forwarded_batch:
        case wire::message_type::reply_batch: return 6;
        default: return 5;
    }
}

/// Size of the fixed frame header. A stream transport reads exactly this many bytes, calls
/// `decode_header`, and only then knows how many payload bytes to read.
inline constexpr std::size_t frame_header_size = 32;

/// Bounds applied while decoding, so a peer cannot make us allocate or wait for more than we
/// chose. The default must exceed the largest message the application produces (a
/// transaction; a SNAP carries one chunk of `options::snapshot_chunk_bytes`): an encoded
/// frame above the receiver's limit is refused.
struct codec_limits {
    std::uint32_t max_payload_bytes = 64u << 20;
    /// The newest frame version read: a newer one is `unsupported_version`. Below
    /// `frame_version` only to make a peer read as a previous release did (tests of mixed
    /// groups: options::test_hooks::protocol).
    std::uint8_t newest_frame_version = frame_version;
};

/// Header fields the sender chooses per connection, not per message.
struct frame_context {
    std::uint64_t group_id = 0;        ///< which zab group on a shared connection
    std::uint64_t config_version = 0;  ///< the sender's configuration version (§9)
};

/// A decoded, validated frame header: magic, version and flags have been checked, `type`
/// names a known message and `payload_length` is within the limits.
struct frame_header {
    std::uint8_t version = oldest_frame_version;  ///< frame_version_of(type)
    wire::message_type type = wire::message_type::notification;
    std::uint64_t group_id = 0;
    std::uint64_t config_version = 0;
    std::uint32_t payload_length = 0;
    std::uint32_t payload_crc32c = 0;

    /// Header plus payload: the number of bytes a stream transport must have before `decode`.
    std::size_t frame_size() const noexcept { return frame_header_size + payload_length; }

    friend bool operator==(const frame_header&, const frame_header&) = default;
};

/// A decoded frame. The byte fields of `msg` (snapshot, txn) point into the decoded buffer:
/// keep that buffer (e.g. its `shared_bytes`) alive as long as the message.
struct decoded_frame {
    frame_header header;
    wire::message msg;
};

namespace detail {

// --- Little-endian loads and stores (memcpy: the bytes have any alignment) -----------------

template <std::unsigned_integral T>
constexpr T byteswap(T value) noexcept {
    T swapped = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
        swapped = static_cast<T>((swapped << 8) | (value & 0xffu));
        value = static_cast<T>(value >> 8);
    }
    return swapped;
}

template <std::unsigned_integral T>
inline T load_le(const std::byte* p) noexcept {
    T value;
    std::memcpy(&value, p, sizeof value);
    if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
        value = byteswap(value);
    }
    return value;
}

template <std::unsigned_integral T>
inline void store_le(std::byte* p, T value) noexcept {
    if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
        value = byteswap(value);
    }
    std::memcpy(p, &value, sizeof value);
}

// --- Writer and reader over one payload ----------------------------------------------------

/// Writes fields into a buffer sized in advance by `encoded_size`. Running out of room is a
/// bug in the sizing, hence an assertion.
class wire_writer {
public:
    explicit wire_writer(std::span<std::byte> out) noexcept
        : position_{out.data()}, end_{out.data() + out.size()} {}

    template <std::unsigned_integral T>
    void put(T value) noexcept {
        ZAB_ASSERT(remaining() >= sizeof(T), "encode: field past the sized buffer");
        store_le(position_, value);
        position_ += sizeof(T);
    }

    void put_raw(byte_view bytes) noexcept {
        ZAB_ASSERT(remaining() >= bytes.size(), "encode: bytes past the sized buffer");
        if (!bytes.empty()) {  // memcpy from a null pointer is undefined even for 0 bytes
            std::memcpy(position_, bytes.data(), bytes.size());
        }
        position_ += bytes.size();
    }

    std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - position_); }

private:
    std::byte* position_;
    std::byte* end_;
};

/// Reads fields from an untrusted payload. The first read past the end fails, and so does
/// every read after it; the caller checks `failed()` once at the end instead of after each
/// field.
class wire_reader {
public:
    explicit wire_reader(byte_view in) noexcept
        : position_{in.data()}, end_{in.data() + in.size()} {}

    template <std::unsigned_integral T>
    bool get(T& value) noexcept {
        if (remaining() < sizeof(T)) {
            return fail();
        }
        value = load_le<T>(position_);
        position_ += sizeof(T);
        return true;
    }

    /// A view of the next `size` bytes, without copying them.
    bool get_raw(std::size_t size, byte_view& bytes) noexcept {
        if (remaining() < size) {
            return fail();
        }
        bytes = byte_view{position_, size};
        position_ += size;
        return true;
    }

    /// Marks the payload as malformed (a short field, a bad enum or flag value).
    bool fail() noexcept {
        failed_ = true;
        return false;
    }

    bool failed() const noexcept { return failed_; }
    std::size_t remaining() const noexcept {
        return failed_ ? 0 : static_cast<std::size_t>(end_ - position_);
    }

private:
    const std::byte* position_;
    const std::byte* end_;
    bool failed_ = false;
};

// --- How each field type is sized, written and read ----------------------------------------
//
// One overload triple per field type. The deleted templates catch a field of a type without
// an encoding (say a new u16) at compile time, instead of silently converting it.

template <typename T>
std::size_t field_size(const T&) = delete;
template <typename T>
void put_field(wire_writer&, const T&) = delete;
template <typename T>
bool get_field(wire_reader&, T&) = delete;

// u32 (epochs, protocol versions) and u64 (peer ids, rounds, request ids).
constexpr std::size_t field_size(const std::uint32_t&) noexcept { return 4; }
inline void put_field(wire_writer& out, const std::uint32_t& value) noexcept { out.put(value); }
inline bool get_field(wire_reader& in, std::uint32_t& value) noexcept { return in.get(value); }

constexpr std::size_t field_size(const std::uint64_t&) noexcept { return 8; }
inline void put_field(wire_writer& out, const std::uint64_t& value) noexcept { out.put(value); }
inline bool get_field(wire_reader& in, std::uint64_t& value) noexcept { return in.get(value); }

// zxid: its 64-bit value, so the wire order of zxids is their numeric order.
constexpr std::size_t field_size(const zxid&) noexcept { return 8; }
inline void put_field(wire_writer& out, const zxid& value) noexcept { out.put(value.value()); }
inline bool get_field(wire_reader& in, zxid& value) noexcept {
    std::uint64_t raw = 0;
    if (!in.get(raw)) {
        return false;
    }
    value = zxid::from_value(raw);
    return true;
}

// Enums: one byte, and a value outside the enum is malformed (never cast an unchecked byte
// into an enum: a switch over it would then fall through every case).
template <typename E>
struct wire_enum_traits;
template <>
struct wire_enum_traits<peer_state> {
    static constexpr auto max = static_cast<std::uint8_t>(peer_state::observing);
};
template <>
struct wire_enum_traits<wire::request_kind> {
    static constexpr auto max = static_cast<std::uint8_t>(wire::request_kind::lease_sync);
};
template <>
struct wire_enum_traits<wire::reply_outcome> {
    static constexpr auto max = static_cast<std::uint8_t>(wire::reply_outcome::new_config_no_quorum);
};

template <typename E>
concept wire_enum =
    std::is_enum_v<E> && std::same_as<std::underlying_type_t<E>, std::uint8_t> && requires {
    wire_enum_traits<E>::max;
};

template <wire_enum E>
constexpr std::size_t field_size(const E&) noexcept {
    return 1;
}
template <wire_enum E>
void put_field(wire_writer& out, const E& value) noexcept {
    out.put(static_cast<std::uint8_t>(value));
}
template <wire_enum E>
bool get_field(wire_reader& in, E& value) noexcept {
    std::uint8_t raw = 0;
    if (!in.get(raw)) {
        return false;
    }
    if (raw > wire_enum_traits<E>::max) {
        return in.fail();
    }
    value = static_cast<E>(raw);
    return true;
}

// std::optional<epoch_t>: presence flag 0 or 1 (any other value is malformed, so that every
// message has a single encoding), then the epoch when present.
inline std::size_t field_size(const std::optional<epoch_t>& value) noexcept {
    return value ? 1 + sizeof(epoch_t) : 1;
}
inline void put_field(wire_writer& out, const std::optional<epoch_t>& value) noexcept {
    out.put(static_cast<std::uint8_t>(value ? 1 : 0));
    if (value) {
        out.put(*value);
    }
}
inline bool get_field(wire_reader& in, std::optional<epoch_t>& value) noexcept {
    std::uint8_t present = 0;
    if (!in.get(present)) {
        return false;
    }
    if (present == 0) {
        value.reset();
        return true;
    }
    if (present != 1) {
        return in.fail();
    }
    epoch_t epoch = 0;
    if (!in.get(epoch)) {
        return false;
    }
    value = epoch;
    return true;
}

// agreed_options: its three fields in declaration order (u32, u32, u64).
constexpr std::size_t field_size(const wire::agreed_options&) noexcept { return 16; }
inline void put_field(wire_writer& out, const wire::agreed_options& value) noexcept {
    out.put(value.read_lease_ticks);
    out.put(value.max_clock_drift_ppm);
    out.put(value.fingerprint);
}
inline bool get_field(wire_reader& in, wire::agreed_options& value) noexcept {
    return in.get(value.read_lease_ticks) && in.get(value.max_clock_drift_ppm) &&
           in.get(value.fingerprint);
}

// Byte fields: u32 length, then the bytes. Decoding returns a view into the payload; a length
// that runs past the payload is malformed.
inline std::size_t field_size(const byte_view& value) noexcept { return 4 + value.size(); }
inline void put_field(wire_writer& out, const byte_view& value) noexcept {
    ZAB_ASSERT(value.size() <= UINT32_MAX, "encode: byte field longer than 4 GiB");
    out.put(static_cast<std::uint32_t>(value.size()));
    out.put_raw(value);
}
inline bool get_field(wire_reader& in, byte_view& value) noexcept {
    std::uint32_t size = 0;
    return in.get(size) && in.get_raw(size, value);
}

// --- Archives: one visitor each for sizing, writing and reading ----------------------------

struct size_archive {
    std::size_t size = 0;
    void operator()(const auto&... values) noexcept { ((size += field_size(values)), ...); }
};

struct write_archive {
    wire_writer& out;
    void operator()(const auto&... values) noexcept { (put_field(out, values), ...); }
};

struct read_archive {
    wire_reader& in;
    // Stops at the first failure; the reader remembers it.
    void operator()(auto&... values) noexcept { (void)(get_field(in, values) && ...); }
};

// --- The fields of every message, in wire order --------------------------------------------
//
// `M` is the message type, const when encoding. Changing an order or a field type here
// changes the wire format: the golden tests in tests/codec/ fail, and `frame_version` must
// then be bumped.

template <typename M, typename T>
concept message_of = std::same_as<std::remove_const_t<M>, T>;

void fields(auto& a, message_of<wire::notification> auto& m) {
    a(m.state, m.leader, m.leader_zxid, m.round, m.leader_epoch);
}
void fields(auto& a, message_of<wire::follower_info> auto& m) {
    a(m.accepted_epoch, m.protocol, m.agreed);
}
void fields(auto& a, message_of<wire::observer_info> auto& m) {
    a(m.accepted_epoch, m.protocol, m.agreed);
}
void fields(auto& a, message_of<wire::leader_info> auto& m) { a(m.new_epoch, m.protocol, m.agreed); }
void fields(auto& a, message_of<wire::ack_epoch> auto& m) { a(m.last_logged, m.current_epoch); }
void fields(auto& a, message_of<wire::diff> auto& m) { a(m.last); }
void fields(auto& a, message_of<wire::trunc> auto& m) { a(m.truncate_to); }
void fields(auto& a, message_of<wire::snap> auto& m) {
    a(m.last_included, m.total_size, m.offset, m.chunk);
}
void fields(auto& a, message_of<wire::snap_ack> auto& m) { a(m.received); }
void fields(auto& a, message_of<wire::sync_ack> auto& m) { a(m.received); }
void fields(auto& a, message_of<wire::new_leader> auto& m) { a(m.epoch_zxid); }
void fields(auto& a, message_of<wire::ack> auto& m) { a(m.acked); }
void fields(auto& a, message_of<wire::up_to_date> auto&) { a(); }
void fields(auto& a, message_of<wire::proposal> auto& m) { a(m.id, m.txn); }
void fields(auto& a, message_of<wire::commit> auto& m) { a(m.id); }
void fields(auto& a, message_of<wire::inform> auto& m) { a(m.id, m.txn); }
void fields(auto& a, message_of<wire::forwarded_request> auto& m) { a(m.request_id, m.kind, m.txn); }
void fields(auto& a, message_of<wire::ping> auto& m) { a(m.last_proposed, m.round); }
void fields(auto& a, message_of<wire::sync_answer> auto& m) { a(m.request_id); }
void fields(auto& a, message_of<wire::forwarded_reply> auto& m) { a(m.request_id, m.outcome, m.id); }
void fields(auto& a, message_of<wire::handover> auto& m) {
    a(m.leader, m.leader_zxid, m.leader_epoch, m.round);
}
void fields(auto& a, message_of<wire::proposal_batch> auto& m) { a(m.first, m.count, m.txns); }
void fields(auto& a, message_of<wire::forwarded_batch> auto& m) {
    a(m.first_request_id, m.count, m.txns);
}
void fields(auto& a, message_of<wire::reply_batch> auto& m) {
    a(m.first_request_id, m.count, m.outcome, m.first);
}

/// Walks a byte field of `count` entries, each a u32 length and that many bytes, calling
/// `f(index, entry)` until it returns false. False when the entries do not fill `bytes`
/// exactly (fewer, more, or one running past the end); `f` has then seen only whole entries.
template <typename F>
bool for_each_entry(byte_view bytes, std::uint32_t count, F&& f) {
    wire_reader in{bytes};
    for (std::uint32_t i = 0; i < count; ++i) {
        byte_view entry;
        if (!get_field(in, entry)) return false;
        if (!f(i, entry)) return true;
    }
    return in.remaining() == 0 && !in.failed();
}

/// Checks a decoded message beyond its fields' encodings. Every message but a batch is
/// valid once its fields decode.
template <typename M>
bool well_formed(const M&) noexcept {
    return true;
}
inline bool well_formed(const wire::proposal_batch& m) noexcept {
    // A run inside one epoch, never counter 0 (§1), whose entries fill `txns` exactly.
    if (m.count == 0 || m.first.counter() == 0) return false;
    if (std::uint64_t{m.first.counter()} + m.count - 1 > zxid::counter_max) return false;
    return for_each_entry(m.txns, m.count, [](std::uint32_t, byte_view) { return true; });
}
inline bool well_formed(const wire::forwarded_batch& m) noexcept {
    // Consecutive request ids that do not wrap, entries filling `txns` exactly.
    if (m.count == 0 || m.first_request_id > UINT64_MAX - (m.count - 1)) return false;
    return for_each_entry(m.txns, m.count, [](std::uint32_t, byte_view) { return true; });
}
inline bool well_formed(const wire::reply_batch& m) noexcept {
    if (m.count == 0 || m.first_request_id > UINT64_MAX - (m.count - 1)) return false;
    if (m.outcome != wire::reply_outcome::accepted) return m.first == zxid{};
    // An accepted run: a PROPOSALS batch's zxids, inside one epoch, never counter 0 (§1).
    return m.first.counter() != 0 && std::uint64_t{m.first.counter()} + m.count - 1 <= zxid::counter_max;
}

template <typename M>
std::size_t payload_size(const M& m) noexcept {
    size_archive archive;
    fields(archive, m);
    return archive.size;
}

template <std::size_t... I>
bool is_known_message_type(std::uint8_t type, std::index_sequence<I...>) noexcept {
    return ((type ==
             static_cast<std::uint8_t>(wire::message_type_v<std::variant_alternative_t<I, wire::message>>)) ||
            ...);
}

/// True if `type` is the wire type of some alternative of `message`.
inline bool is_known_message_type(std::uint8_t type) noexcept {
    return is_known_message_type(type, std::make_index_sequence<std::variant_size_v<wire::message>>{});
}

/// Decodes `payload` as a message of type `M` into `out`. False if it is malformed.
template <typename M>
bool decode_payload_as(byte_view payload, wire::message& out) noexcept {
    M& m = out.emplace<M>();
    wire_reader in{payload};
    read_archive archive{in};
    fields(archive, m);
    return !in.failed() && in.remaining() == 0 && well_formed(m);  // trailing bytes: malformed
}

template <std::size_t... I>
bool decode_payload(wire::message_type type, byte_view payload, wire::message& out,
                    std::index_sequence<I...>) noexcept {
    bool decoded = false;
    // Exactly one alternative has this wire type; `||` stops there.
    (void)((type == wire::message_type_v<std::variant_alternative_t<I, wire::message>> &&
            (decoded = decode_payload_as<std::variant_alternative_t<I, wire::message>>(payload, out),
             true)) ||
           ...);
    return decoded;
}

/// Decodes `payload` as the message named by `type` into `out`. False if it is malformed.
inline bool decode_payload(wire::message_type type, byte_view payload, wire::message& out) noexcept {
    return decode_payload(type, payload, out,
                          std::make_index_sequence<std::variant_size_v<wire::message>>{});
}

/// Writes the header of frame `out` (header and payload, the payload already written).
inline void put_header(std::span<std::byte> out, const frame_context& context,
                       wire::message_type type) noexcept {
    const std::span<const std::byte> payload = out.subspan(frame_header_size);
    wire_writer header{out.first(frame_header_size)};
    header.put(frame_magic);
    header.put(frame_version_of(type));
    header.put(static_cast<std::uint8_t>(type));
    header.put(std::uint16_t{0});  // flags
    header.put(context.group_id);
    header.put(context.config_version);
    header.put(static_cast<std::uint32_t>(payload.size()));
    header.put(crc32c(payload));
}

}  // namespace detail

/// Size in bytes of the whole frame (header and payload) that encodes `msg`.
inline std::size_t encoded_size(const wire::message& msg) noexcept {
    const std::size_t payload =
        std::visit([](const auto& m) { return detail::payload_size(m); }, msg);
    ZAB_ASSERT(payload <= UINT32_MAX, "encode: message larger than a frame can carry");
    return frame_header_size + payload;
}

/// Encodes `msg` as one frame into `out`, which must be exactly `encoded_size(msg)` bytes
/// (asserted: the caller is zab). Lets a caller place frames in a buffer it manages, e.g. a
/// batch of frames in one write.
inline void encode_into(std::span<std::byte> out, const frame_context& context,
                        const wire::message& msg) noexcept {
    ZAB_ASSERT(out.size() == encoded_size(msg), "encode_into: buffer is not encoded_size(msg)");
    const std::span<std::byte> payload = out.subspan(frame_header_size);
    const wire::message_type type = std::visit(
        [&](const auto& m) {
            detail::wire_writer writer{payload};
            detail::write_archive archive{writer};
            detail::fields(archive, m);
            ZAB_ASSERT(writer.remaining() == 0, "encode: payload_size and fields disagree");
            return wire::message_type_v<std::decay_t<decltype(m)>>;
        },
        msg);
    detail::put_header(out, context, type);
}

/// Encodes `msg` as one frame in a new buffer. Encode once and share the result: the same
/// bytes go to every follower and into the log (docs/design.md rule 10).
///
/// The frame and its reference count are one allocation (shared_bytes::make).
inline shared_bytes encode(const frame_context& context, const wire::message& msg) {
    return shared_bytes::make(encoded_size(msg), [&](std::span<std::byte> buffer) {
        encode_into(buffer, context, msg);
    });
}

/// Calls `f(id, txn)` for each transaction of a decoded batch, in order, until it returns
/// false. `txn` points into the batch's frame. The decoder checked the batch (well_formed).
template <typename F>
void for_each_batch_txn(const wire::proposal_batch& batch, F&& f) {
    const bool whole = detail::for_each_entry(batch.txns, batch.count, [&](std::uint32_t i, byte_view txn) {
        return f(zxid{batch.first.epoch(), batch.first.counter() + i}, txn);
    });
    ZAB_ASSERT(whole, "for_each_batch_txn: a batch the decoder did not check");
}

namespace detail {

/// A frame of `type` whose payload is `head` (u64), the entry count (u32) and the entries of
/// `txns` as one byte field (each a u32 length and the bytes): PROPOSALS and REQUESTS. Each
/// transaction's bytes are written once, straight into the frame; `placed[i]` (when
/// `placed` is not empty) is then the view of `txns[i]` inside the returned frame.
inline shared_bytes encode_entries(const frame_context& context, wire::message_type type,
                                   std::uint64_t head, std::span<const byte_view> txns,
                                   std::span<byte_view> placed) {
    ZAB_ASSERT(!txns.empty() && txns.size() <= UINT32_MAX, "encode_entries: no entries");
    ZAB_ASSERT(placed.empty() || placed.size() == txns.size(), "encode_entries: bad spans");
    std::size_t entries = 0;
    for (const byte_view txn : txns) entries += field_size(txn);
    ZAB_ASSERT(entries <= UINT32_MAX, "encode_entries: a batch larger than a frame");
    const std::size_t payload_size = sizeof(std::uint64_t) + sizeof(std::uint32_t) + 4 + entries;
    ZAB_ASSERT(payload_size <= UINT32_MAX, "encode_entries: a batch larger than a frame");
    return shared_bytes::make(frame_header_size + payload_size, [&](std::span<std::byte> out) {
        const std::span<std::byte> payload = out.subspan(frame_header_size);
        wire_writer writer{payload};
        writer.put(head);
        writer.put(static_cast<std::uint32_t>(txns.size()));
        writer.put(static_cast<std::uint32_t>(entries));
        for (std::size_t i = 0; i < txns.size(); ++i) {
            writer.put(static_cast<std::uint32_t>(txns[i].size()));
            const std::size_t at = payload.size() - writer.remaining();
            writer.put_raw(txns[i]);
            if (!placed.empty()) placed[i] = byte_view{payload.data() + at, txns[i].size()};
        }
        ZAB_ASSERT(writer.remaining() == 0, "encode_entries: sizing and writing disagree");
        put_header(out, context, type);
    });
}

}  // namespace detail

/// Encodes a PROPOSALS frame for `txns` (at least one), the first as zxid `first`, writing
/// each transaction's bytes once, straight into the frame; `placed[i]` is then the view of
/// `txns[i]` inside the returned frame (for log records that share it, docs/design.md rule
/// 10). The same bytes as `encode(context, wire::proposal_batch{…})` with the entries laid
/// out in `txns`.
inline shared_bytes encode_proposal_batch(const frame_context& context, zxid first,
                                          std::span<const byte_view> txns,
                                          std::span<byte_view> placed) {
    ZAB_ASSERT(!txns.empty() && placed.size() == txns.size(), "encode_proposal_batch: bad spans");
    ZAB_ASSERT(std::uint64_t{first.counter()} + txns.size() - 1 <= zxid::counter_max &&
                   first.counter() != 0,
               "encode_proposal_batch: a run outside one epoch");
    return detail::encode_entries(context, wire::message_type::proposal_batch, first.value(), txns,
                                  placed);
}

/// Encodes a REQUESTS frame (protocol 0x10001 on, §0.2) for the forwarded writes `txns` (at
/// least one), with the request ids `first_request_id`, `first_request_id + 1`, …: the same
/// bytes as `encode(context, wire::forwarded_batch{…})` with the entries laid out in `txns`.
inline shared_bytes encode_forwarded_batch(const frame_context& context, std::uint64_t first_request_id,
                                           std::span<const byte_view> txns) {
    ZAB_ASSERT(first_request_id <= UINT64_MAX - (txns.size() - 1),
               "encode_forwarded_batch: request ids that wrap");
    return detail::encode_entries(context, wire::message_type::forwarded_batch, first_request_id,
                                  txns, {});
}

/// Calls `f(request_id, txn)` for each write of a decoded REQUESTS frame, in order, until it
/// returns false. `txn` points into the frame. The decoder checked the batch (well_formed).
template <typename F>
void for_each_forwarded_txn(const wire::forwarded_batch& batch, F&& f) {
    const bool whole = detail::for_each_entry(batch.txns, batch.count, [&](std::uint32_t i, byte_view txn) {
        return f(batch.first_request_id + i, txn);
    });
    ZAB_ASSERT(whole, "for_each_forwarded_txn: a batch the decoder did not check");
}

/// Decodes and validates the 32-byte header at the start of `bytes` (bytes after it are not
/// looked at). A stream transport calls this on the first 32 bytes of a frame, before it
/// allocates anything for the payload. Errors, checked in this order:
/// - `truncated`: fewer than 32 bytes;
/// - `bad_magic`: not a zab frame;
/// - `unsupported_version`: a frame version below `oldest_frame_version` or above
///   `limits.newest_frame_version`;
/// - `unknown_message_type`: the type byte names no message, or one that appeared in a
///   later frame version than the frame's (version 5 knows neither REQUESTS nor REPLIES);
/// - `malformed`: a type in a frame of a later version than its own (each type has one
///   version, frame_version_of: one encoding per message), or reserved flags not zero;
/// - `oversized`: `payload_length` exceeds `limits.max_payload_bytes`.
inline result<frame_header> decode_header(byte_view bytes,
                                          const codec_limits& limits = {}) noexcept {
    if (bytes.size() < frame_header_size) {
        return make_error_code(errc::truncated);
    }
    const std::byte* p = bytes.data();
    if (detail::load_le<std::uint32_t>(p) != frame_magic) {
        return make_error_code(errc::bad_magic);
    }
    const auto version = detail::load_le<std::uint8_t>(p + 4);
    if (version < oldest_frame_version || version > limits.newest_frame_version) {
        return make_error_code(errc::unsupported_version);
    }
    const auto type = detail::load_le<std::uint8_t>(p + 5);
    if (!detail::is_known_message_type(type) ||
        frame_version_of(static_cast<wire::message_type>(type)) > version) {
        return make_error_code(errc::unknown_message_type);
    }
    if (frame_version_of(static_cast<wire::message_type>(type)) != version) {
        return make_error_code(errc::malformed);
    }
    if (detail::load_le<std::uint16_t>(p + 6) != 0) {
        return make_error_code(errc::malformed);
    }
    frame_header header;
    header.version = version;
    header.type = static_cast<wire::message_type>(type);
    header.group_id = detail::load_le<std::uint64_t>(p + 8);
    header.config_version = detail::load_le<std::uint64_t>(p + 16);
    header.payload_length = detail::load_le<std::uint32_t>(p + 24);
    header.payload_crc32c = detail::load_le<std::uint32_t>(p + 28);
    if (header.payload_length > limits.max_payload_bytes) {
        return make_error_code(errc::oversized);
    }
    return header;
}

/// Decodes `frame`, which must hold exactly one frame. The message's byte fields are views
/// into `frame` (nothing is copied or allocated). Errors: those of `decode_header`, then
/// - `truncated`: fewer bytes than the header announces;
/// - `malformed`: more bytes than the header announces;
/// - `bad_checksum`: the payload's CRC32C differs from the header's;
/// - `malformed`: the payload does not decode as its type (a field runs past the end, an enum
///   or presence flag is out of range, or bytes are left after the last field).
inline result<decoded_frame> decode(byte_view frame, const codec_limits& limits = {}) noexcept {
    const auto header = decode_header(frame, limits);
    if (!header) {
        return header.error();
    }
    // assume_value: checked just above, and value() would not be inlined (it may throw).
    const frame_header& h = header.assume_value();
    // Compared without adding to the length, which cannot overflow even with a 32-bit size_t.
    const std::size_t after_header = frame.size() - frame_header_size;
    if (after_header < h.payload_length) {
        return make_error_code(errc::truncated);
    }
    if (after_header > h.payload_length) {
        return make_error_code(errc::malformed);
    }
    const byte_view payload = frame.subspan(frame_header_size);
    if (crc32c(payload) != h.payload_crc32c) {
        return make_error_code(errc::bad_checksum);
    }
    // Decoded in place in the result that is returned: no copy of the message.
    result<decoded_frame> decoded{decoded_frame{h, wire::message{}}};
    if (!detail::decode_payload(h.type, payload, decoded.assume_value().msg)) {
        return make_error_code(errc::malformed);
    }
    return decoded;
}

}  // namespace zab
