// zab/storage/format.hpp — the bytes `zab::file_log` puts on disk, and nothing else.
//
// A data directory holds:
//   identity              who owns the directory: cluster id, replica id, "initialized" flag
//   epochs                acceptedEpoch and currentEpoch (docs/protocol.md §2), one small file
//   synced                the synced watermark: how far the log is known durable (issue 34;
//                         absent in a directory of an earlier release, written at open)
//   log.<16 hex digits>   log segments, numbered in creation order, never reused
//   snapshot.<16 hex>     snapshots, numbered like segments. An installed snapshot (a SNAP
//                         sync) starts a log generation, its number: segments with a smaller
//                         number belong to the log it replaced (§11.5), and each segment's
//                         header names the generation it continues. A checkpoint (compaction
//                         of this replica's own log) starts none: it names the generation
//                         whose segments go on after it, and the records up to its zxid in
//                         them are no longer needed
//   <name>.tmp            a file being written atomically; ignored and removed at open
//   damaged-<n>/          the files of a log found corrupt, moved aside by
//                         corruption_policy::resync (never read again; for an operator)
//
// Every integer is little-endian and fixed-width. Every file starts with a magic and a format
// version and ends its header with a CRC32C, so a file of another kind, a newer format, or a
// damaged one is told apart from a good one. Decoders here trust nothing: they check sizes
// before reading and report what is wrong in a short phrase (`problem`) that the caller
// prefixes with the file name and offset.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"

namespace zab::storage_format {

// --- Little-endian fields ------------------------------------------------------------------

inline void put_u32(std::byte* at, std::uint32_t value) noexcept {
    for (int i = 0; i < 4; ++i) at[i] = static_cast<std::byte>((value >> (8 * i)) & 0xffu);
}

inline void put_u64(std::byte* at, std::uint64_t value) noexcept {
    for (int i = 0; i < 8; ++i) at[i] = static_cast<std::byte>((value >> (8 * i)) & 0xffu);
}

inline std::uint32_t get_u32(const std::byte* at) noexcept {
    std::uint32_t value = 0;
    for (int i = 3; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint32_t>(at[i]);
    return value;
}

inline std::uint64_t get_u64(const std::byte* at) noexcept {
    std::uint64_t value = 0;
    for (int i = 7; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint64_t>(at[i]);
    return value;
}

inline bool all_zero(byte_view bytes) noexcept {
    for (std::byte b : bytes)
        if (b != std::byte{0}) return false;
    return true;
}

// --- Constants -----------------------------------------------------------------------------

/// The only format version this build writes and reads (snapshot, epochs, identity files).
inline constexpr std::uint32_t format_version = 1;

/// The format version of log segments. 2: each record names the offset its segment had been
/// synced to before the record was written (issue #15; version 1 records did not).
inline constexpr std::uint32_t segment_format_version = 2;

/// "ZSEG", "ZSNP", "ZEPO", "ZIDN" read as little-endian u32.
inline constexpr std::uint32_t segment_magic = 0x4745535Au;
inline constexpr std::uint32_t snapshot_magic = 0x504E535Au;
inline constexpr std::uint32_t epochs_magic = 0x4F50455Au;
inline constexpr std::uint32_t identity_magic = 0x4E44495Au;
inline constexpr std::uint32_t synced_magic = 0x4E59535Au;  // "ZSYN"

inline constexpr std::size_t segment_header_size = 64;
inline constexpr std::size_t record_header_size = 20;
inline constexpr std::size_t snapshot_header_size = 64;
inline constexpr std::size_t epochs_file_size = 20;
inline constexpr std::size_t identity_file_size = 32;

/// No record payload may exceed this, whatever the options say: it bounds what recovery
/// allocates for a length it read from disk.
inline constexpr std::uint32_t record_bytes_limit = 256u << 20;

inline constexpr std::string_view epochs_file_name = "epochs";
inline constexpr std::string_view identity_file_name = "identity";
inline constexpr std::string_view synced_file_name = "synced";
inline constexpr std::string_view segment_prefix = "log.";
inline constexpr std::string_view snapshot_prefix = "snapshot.";
inline constexpr std::string_view temporary_suffix = ".tmp";
/// `damaged-<n>/`: a subdirectory where corruption_policy::resync moved a damaged log.
inline constexpr std::string_view damaged_prefix = "damaged-";

// --- File names ----------------------------------------------------------------------------

inline std::string segment_file_name(std::uint64_t number) {
    return fmt::format("{}{:016x}", segment_prefix, number);
}

inline std::string snapshot_file_name(std::uint64_t number) {
    return fmt::format("{}{:016x}", snapshot_prefix, number);
}

inline std::string temporary_name(std::string_view final_name) {
    return fmt::format("{}{}", final_name, temporary_suffix);
}

/// The number in `<prefix><16 lowercase hex digits>`, or nothing for any other name.
inline std::optional<std::uint64_t> parse_numbered_name(std::string_view name,
                                                        std::string_view prefix) {
    if (name.size() != prefix.size() + 16 || name.substr(0, prefix.size()) != prefix)
        return std::nullopt;
    std::uint64_t number = 0;
    for (char c : name.substr(prefix.size())) {
        std::uint64_t digit = 0;
        if (c >= '0' && c <= '9') {
            digit = static_cast<std::uint64_t>(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            digit = static_cast<std::uint64_t>(c - 'a' + 10);
        } else {
            return std::nullopt;
        }
        number = (number << 4) | digit;
    }
    return number;
}

// --- Segment header (64 bytes) -------------------------------------------------------------
//   0 u32 magic   4 u32 version   8 u64 cluster_id   16 u64 replica_id   24 u64 number
//  32 u64 base zxid (the record before this segment's first one; records must exceed it)
//  40 u32 max_record_bytes   44 u32 group_commit_window_bytes (as written: recovery uses them)
//  48 u64 generation: the snapshot this segment's records follow (0: none)
//  56..60 zero   60 u32 CRC32C of bytes [0, 60)

struct segment_header {
    std::uint64_t cluster_id = 0;
    std::uint64_t replica_id = 0;
    std::uint64_t number = 0;
    zxid base;
    std::uint32_t max_record_bytes = 0;
    std::uint32_t window_bytes = 0;
    std::uint64_t generation = 0;
};

inline std::array<std::byte, segment_header_size> encode(const segment_header& h) noexcept {
    std::array<std::byte, segment_header_size> out{};
    put_u32(&out[0], segment_magic);
    put_u32(&out[4], segment_format_version);
    put_u64(&out[8], h.cluster_id);
    put_u64(&out[16], h.replica_id);
    put_u64(&out[24], h.number);
    put_u64(&out[32], h.base.value());
    put_u32(&out[40], h.max_record_bytes);
    put_u32(&out[44], h.window_bytes);
    put_u64(&out[48], h.generation);
    put_u32(&out[60], crc32c(byte_view{out.data(), 60}));
    return out;
}

/// Checks magic, CRC, version and reserved bytes, in that order: a CRC-valid header of
/// another version is `unsupported_version`, anything else wrong is damage.
inline result<segment_header> decode_segment_header(byte_view in, std::string& problem) {
    if (in.size() < segment_header_size) {
        problem = fmt::format("header is {} bytes, needs {}", in.size(), segment_header_size);
        return make_error_code(errc::truncated);
    }
    if (get_u32(&in[0]) != segment_magic) {
        problem = fmt::format("bad magic {:#010x} (expected {:#010x})", get_u32(&in[0]),
                              segment_magic);
        return make_error_code(errc::bad_magic);
    }
    if (crc32c(in.first(60)) != get_u32(&in[60])) {
        problem = "header checksum mismatch";
        return make_error_code(errc::bad_checksum);
    }
    if (get_u32(&in[4]) != segment_format_version) {
        problem = fmt::format("format version {} (this build reads {})", get_u32(&in[4]),
                              segment_format_version);
        return make_error_code(errc::unsupported_version);
    }
    if (!all_zero(in.subspan(56, 4))) {
        problem = "reserved header bytes are not zero";
        return make_error_code(errc::malformed);
    }
    segment_header h;
    h.cluster_id = get_u64(&in[8]);
    h.replica_id = get_u64(&in[16]);
    h.number = get_u64(&in[24]);
    h.base = zxid::from_value(get_u64(&in[32]));
    h.max_record_bytes = get_u32(&in[40]);
    h.window_bytes = get_u32(&in[44]);
    h.generation = get_u64(&in[48]);
    return h;
}

// --- Record (20 bytes + payload) -----------------------------------------------------------
//   0 u32 CRC32C of bytes [4, 20 + length)   4 u32 length   8 u64 zxid
//  16 u32 sync distance: the record's offset minus its segment's synced offset when it was
//         written — every byte of the segment before (offset - distance) was durable
//         (fdatasync returned) before this record's bytes were written   20 payload
// All-zero bytes never form a valid record (the CRC of sixteen zero bytes is not zero), so a
// preallocated or hole-filled tail reads as damage, not as records.
//
// The sync distance is what lets recovery tell a torn tail from corruption (segment_scan.hpp):
// a valid record that names a synced offset beyond damaged bytes proves that those bytes had
// been synced, so their damage is not the unsynced end of a write.

struct record_header {
    std::uint32_t checksum = 0;
    std::uint32_t length = 0;
    zxid id;
    std::uint32_t sync_distance = 0;
};

inline record_header decode_record_header(const std::byte* at) noexcept {
    return {get_u32(at), get_u32(at + 4), zxid::from_value(get_u64(at + 8)), get_u32(at + 16)};
}

/// Appends the encoded record to `out`; `sync_distance` as in the layout above.
inline void encode_record(std::vector<std::byte>& out, zxid id, byte_view payload,
                          std::uint32_t sync_distance) {
    const std::size_t start = out.size();
    out.resize(start + record_header_size + payload.size());
    std::byte* at = out.data() + start;
    put_u32(at + 4, static_cast<std::uint32_t>(payload.size()));
    put_u64(at + 8, id.value());
    put_u32(at + 16, sync_distance);
    if (!payload.empty()) std::memcpy(at + record_header_size, payload.data(), payload.size());
    put_u32(at, crc32c(byte_view{at + 4, record_header_size - 4 + payload.size()}));
}

/// True when `whole` (header and payload, exactly) carries a matching CRC.
inline bool record_checksum_matches(byte_view whole) noexcept {
    return whole.size() >= record_header_size &&
           crc32c(whole.subspan(4)) == get_u32(whole.data());
}

// --- Snapshot file (64 bytes + state) ------------------------------------------------------
//   0 u32 magic   4 u32 version   8 u64 cluster_id   16 u64 replica_id
//  24 u64 generation (equals the number in the file name)   32 u64 last_included zxid
//  40 u64 state length   48 u32 flags (bit 0: checkpoint; others zero)
//  52 u64 continued generation (checkpoint only; zero otherwise)
//  60 u32 CRC32C of bytes [0, 60) and then the state

inline constexpr std::uint32_t snapshot_flag_checkpoint = 1;

struct snapshot_header {
    std::uint64_t cluster_id = 0;
    std::uint64_t replica_id = 0;
    std::uint64_t generation = 0;  ///< the number in the file name
    zxid last_included;
    std::uint64_t state_length = 0;
    /// A checkpoint: the log generation `continued_generation` goes on after it. Otherwise
    /// an installed snapshot, which starts generation `generation`.
    bool checkpoint = false;
    std::uint64_t continued_generation = 0;

    /// The generation whose segments hold the records after `last_included`.
    std::uint64_t live_generation() const noexcept {
        return checkpoint ? continued_generation : generation;
    }
};

/// The header of a snapshot of `state`; its CRC covers the state too.
inline std::array<std::byte, snapshot_header_size> encode(const snapshot_header& h,
                                                          byte_view state) noexcept {
    std::array<std::byte, snapshot_header_size> out{};
    put_u32(&out[0], snapshot_magic);
    put_u32(&out[4], format_version);
    put_u64(&out[8], h.cluster_id);
    put_u64(&out[16], h.replica_id);
    put_u64(&out[24], h.generation);
    put_u64(&out[32], h.last_included.value());
    put_u64(&out[40], h.state_length);
    if (h.checkpoint) {
        put_u32(&out[48], snapshot_flag_checkpoint);
        put_u64(&out[52], h.continued_generation);
    }
    put_u32(&out[60], crc32c(state, crc32c(byte_view{out.data(), 60})));
    return out;
}

/// Decodes the header only; `snapshot_checksum_matches` checks it together with the state.
inline result<snapshot_header> decode_snapshot_header(byte_view in, std::string& problem) {
    if (in.size() < snapshot_header_size) {
        problem = fmt::format("file is {} bytes, shorter than its {}-byte header", in.size(),
                              snapshot_header_size);
        return make_error_code(errc::truncated);
    }
    if (get_u32(&in[0]) != snapshot_magic) {
        problem = fmt::format("bad magic {:#010x} (expected {:#010x})", get_u32(&in[0]),
                              snapshot_magic);
        return make_error_code(errc::bad_magic);
    }
    if (get_u32(&in[4]) != format_version) {
        problem = fmt::format("format version {} (this build reads {})", get_u32(&in[4]),
                              format_version);
        return make_error_code(errc::unsupported_version);
    }
    const std::uint32_t flags = get_u32(&in[48]);
    if ((flags & ~snapshot_flag_checkpoint) != 0 ||
        (flags == 0 && !all_zero(in.subspan(52, 8)))) {
        problem = "reserved header bytes are not zero";
        return make_error_code(errc::malformed);
    }
    snapshot_header h;
    h.checkpoint = flags == snapshot_flag_checkpoint;
    h.continued_generation = get_u64(&in[52]);
    h.cluster_id = get_u64(&in[8]);
    h.replica_id = get_u64(&in[16]);
    h.generation = get_u64(&in[24]);
    h.last_included = zxid::from_value(get_u64(&in[32]));
    h.state_length = get_u64(&in[40]);
    return h;
}

inline bool snapshot_checksum_matches(byte_view header, byte_view state) noexcept {
    return header.size() >= snapshot_header_size &&
           crc32c(state, crc32c(header.first(60))) == get_u32(&header[60]);
}

/// The checks every small fixed-size file shares (epochs, identity): its magic, then its
/// version — before its size and checksum, which another version may lay out differently:
/// a file written by a newer (or older) build is `unsupported_version`, never damage — then
/// its size and the CRC32C of everything before the last 4 bytes (stored there).
inline result<void> check_small_file(byte_view in, std::size_t size, std::uint32_t magic,
                                     std::string& problem) {
    if (in.size() < 8) {
        problem = fmt::format("file is {} bytes, expected {}", in.size(), size);
        return make_error_code(errc::malformed);
    }
    if (get_u32(&in[0]) != magic) {
        problem = fmt::format("bad magic {:#010x} (expected {:#010x})", get_u32(&in[0]), magic);
        return make_error_code(errc::bad_magic);
    }
    if (get_u32(&in[4]) != format_version) {
        problem = fmt::format("format version {} (this build reads {})", get_u32(&in[4]),
                              format_version);
        return make_error_code(errc::unsupported_version);
    }
    if (in.size() != size) {
        problem = fmt::format("file is {} bytes, expected {}", in.size(), size);
        return make_error_code(errc::malformed);
    }
    if (crc32c(in.first(size - 4)) != get_u32(&in[size - 4])) {
        problem = "checksum mismatch";
        return make_error_code(errc::bad_checksum);
    }
    return success();
}

// --- Epochs file (20 bytes) ----------------------------------------------------------------
//   0 u32 magic   4 u32 version   8 u32 accepted   12 u32 current   16 u32 CRC32C of [0, 16)

inline std::array<std::byte, epochs_file_size> encode(const epochs& e) noexcept {
    std::array<std::byte, epochs_file_size> out{};
    put_u32(&out[0], epochs_magic);
    put_u32(&out[4], format_version);
    put_u32(&out[8], e.accepted);
    put_u32(&out[12], e.current);
    put_u32(&out[16], crc32c(byte_view{out.data(), 16}));
    return out;
}

inline result<epochs> decode_epochs(byte_view in, std::string& problem) {
    if (auto checked = check_small_file(in, epochs_file_size, epochs_magic, problem); !checked)
        return checked.error();
    return epochs{get_u32(&in[8]), get_u32(&in[12])};
}

// --- Identity file (32 bytes) --------------------------------------------------------------
//   0 u32 magic   4 u32 version   8 u64 cluster_id   16 u64 replica_id
//  24 u32 flags (bit 0: initialized; others zero)   28 u32 CRC32C of [0, 28)

struct identity {
    std::uint64_t cluster_id = 0;
    std::uint64_t replica_id = 0;
    friend bool operator==(const identity&, const identity&) = default;
};

inline constexpr std::uint32_t identity_flag_initialized = 1;

inline std::array<std::byte, identity_file_size> encode(const identity& id) noexcept {
    std::array<std::byte, identity_file_size> out{};
    put_u32(&out[0], identity_magic);
    put_u32(&out[4], format_version);
    put_u64(&out[8], id.cluster_id);
    put_u64(&out[16], id.replica_id);
    put_u32(&out[24], identity_flag_initialized);
    put_u32(&out[28], crc32c(byte_view{out.data(), 28}));
    return out;
}

inline result<identity> decode_identity(byte_view in, std::string& problem) {
    if (auto checked = check_small_file(in, identity_file_size, identity_magic, problem);
        !checked)
        return checked.error();
    if (get_u32(&in[24]) != identity_flag_initialized) {
        problem = fmt::format("flags {:#x}: not marked initialized", get_u32(&in[24]));
        return make_error_code(errc::malformed);
    }
    return identity{get_u64(&in[8]), get_u64(&in[16])};
}

// --- Synced watermark file (two slots of 48 bytes, at offsets 0 and 512; 1024 bytes) -------
//   0 u32 magic   4 u32 version   8 u64 sequence (the slot with the higher one is current)
//  16 u64 generation   24 u64 segment number (0: no segment yet)   32 u64 offset: segment
//         `segment` of `generation` had been fdatasynced at this length — the log reserves
//         room ahead of its records (sparse zeros) and raises the length before it writes
//         past it, so every record that may have been reported durable, and acknowledged,
//         lies within a length the watermark vouched for
//  40 u32 group_commit_window_bytes of the process that wrote it   44 u32 CRC32C of [0, 44)
// Written (after the length it names is synced) by a flush that creates a segment or extends
// one (every few MiB of records, not every flush: file_log.hpp `reserve_to`), lowered before
// a truncation cuts the file below it, and at every open. An update overwrites the older
// slot in place and fdatasyncs: a torn update leaves the other slot, which named no more
// than a length already synced (the slots are in separate sectors). Recovery compares it
// with what it finds: a segment file shorter than it has lost a synced tail, which a torn
// write cannot explain (a torn write does not shorten the file; file_log.hpp).

inline constexpr std::size_t synced_slot_size = 48;
inline constexpr std::size_t synced_slot_stride = 512;
inline constexpr std::size_t synced_file_size = 2 * synced_slot_stride;

struct synced_mark {
    std::uint64_t sequence = 0;
    std::uint64_t generation = 0;
    std::uint64_t segment = 0;
    std::uint64_t offset = 0;
    std::uint32_t window_bytes = 0;

    /// The same position (the sequence aside).
    bool same_place(const synced_mark& o) const noexcept {
        return generation == o.generation && segment == o.segment && offset == o.offset &&
               window_bytes == o.window_bytes;
    }
};

/// The slot (48 bytes) holding `m`; it goes at `synced_slot_offset(m.sequence)`.
inline std::array<std::byte, synced_slot_size> encode(const synced_mark& m) noexcept {
    std::array<std::byte, synced_slot_size> out{};
    put_u32(&out[0], synced_magic);
    put_u32(&out[4], format_version);
    put_u64(&out[8], m.sequence);
    put_u64(&out[16], m.generation);
    put_u64(&out[24], m.segment);
    put_u64(&out[32], m.offset);
    put_u32(&out[40], m.window_bytes);
    put_u32(&out[44], crc32c(byte_view{out.data(), 44}));
    return out;
}

inline constexpr std::uint64_t synced_slot_offset(std::uint64_t sequence) noexcept {
    return (sequence % 2) * synced_slot_stride;
}

/// The current mark of a whole synced file: the valid slot with the higher sequence.
/// `unsupported_version` for a valid slot of another version; `bad_checksum` when neither
/// slot is valid; `malformed` for a file of the wrong size.
inline result<synced_mark> decode_synced(byte_view in, std::string& problem) {
    if (in.size() != synced_file_size) {
        problem = fmt::format("file is {} bytes, expected {}", in.size(), synced_file_size);
        return make_error_code(errc::malformed);
    }
    std::optional<synced_mark> best;
    for (std::size_t slot = 0; slot < 2; ++slot) {
        const byte_view s = in.subspan(slot * synced_slot_stride, synced_slot_size);
        if (get_u32(&s[0]) != synced_magic || crc32c(s.first(44)) != get_u32(&s[44])) continue;
        if (get_u32(&s[4]) != format_version) {
            problem = fmt::format("slot {}: format version {} (this build reads {})", slot,
                                  get_u32(&s[4]), format_version);
            return make_error_code(errc::unsupported_version);
        }
        const synced_mark m{get_u64(&s[8]), get_u64(&s[16]), get_u64(&s[24]), get_u64(&s[32]),
                            get_u32(&s[40])};
        if (synced_slot_offset(m.sequence) != slot * synced_slot_stride) continue;
        if (!best || m.sequence > best->sequence) best = m;
    }
    if (!best) {
        problem = "neither slot is valid (bad magic or checksum)";
        return make_error_code(errc::bad_checksum);
    }
    return *best;
}

}  // namespace zab::storage_format
