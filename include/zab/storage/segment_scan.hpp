// zab/storage/segment_scan.hpp — recovery's reading of one log segment: which records are
// valid, and whether what follows them is a torn tail (cut it) or corruption (refuse).
//
// What a power loss can leave (issue #6, #15). A flush writes a segment in steps (at most
// the group-commit window each, on record boundaries) and fdatasyncs each step before it
// writes the next; a new segment is created only once every earlier one is synced whole.
// So the only bytes a crash may damage are those of the newest segment's last step — and,
// when that step is the segment's first, its header. Every record names the offset its
// segment had been synced to before the record was written (format.hpp), so:
//   - damage in a segment that is not the newest file is corruption (a later file exists
//     only once this one was synced);
//   - damage at offset D of the newest segment is a torn tail — cut there — unless a valid
//     record after D names a synced offset beyond D: then D's bytes had been synced before
//     that record was written, and their damage is corruption;
//   - a damaged header is a torn one — the file goes — only on the newest file, no longer
//     than one window, and when no valid record in it names a synced offset past 0;
//   - records out of order, another replica's segment, a segment missing in the middle
//     (file_log.hpp checks the bases) are corruption.
// A segment's file is longer than its records once the log has reserved room ahead of them
// (file_log.hpp extends it, in steps, so that a file shorter than the synced watermark says
// proves a lost tail): bytes that are all zero from the records' end to the end of the file
// are that reserved room, not damage, in any segment (a torn write that never reached the
// disk leaves the same zeros, and no record in them was valid).
// Corruption is reported (`errc::corrupt`, with the file and the offset), never dropped
// silently. Damage that no later record proves synced cannot be told from a torn tail: it
// is confined to the newest segment's last write step (one flush, at most a window).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/core/zxid.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/storage/format.hpp"
#include "zab/storage/posix_file.hpp"

namespace zab::detail {

/// Reads a file through a buffer of at least 1 MiB, so that scanning record by record (or
/// byte by byte, past damage) does not cost a system call per step.
class block_reader {
public:
    block_reader(file_system& fs, int fd, std::uint64_t file_size)
        : fs_{&fs}, fd_{fd}, file_size_{file_size} {}

    /// The bytes [offset, offset + length); the caller checked that they lie in the file.
    /// `length` is bounded by the caller (a header, or a record of at most
    /// storage_format::record_bytes_limit). An errno on a read error or a short read.
    result<byte_view> bytes(std::uint64_t offset, std::size_t length) {
        if (offset >= start_ && offset + length <= start_ + filled_)
            return byte_view{buffer_.data() + (offset - start_), length};
        const std::size_t wanted = static_cast<std::size_t>(
            std::min<std::uint64_t>(std::max<std::size_t>(length, block_bytes),
                                    file_size_ - offset));
        if (buffer_.size() < wanted) buffer_.resize(wanted);
        std::size_t got = 0;
        if (const int error = fs_->read_at(fd_, {buffer_.data(), wanted}, offset, got);
            error != 0)
            return std::error_code{error, std::system_category()};
        start_ = offset;
        filled_ = got;
        if (got < length) return std::error_code{EIO, std::system_category()};
        return byte_view{buffer_.data(), length};
    }

private:
    static constexpr std::size_t block_bytes = std::size_t{1} << 20;
    file_system* fs_;
    int fd_;
    std::uint64_t file_size_;
    std::vector<std::byte> buffer_;
    std::uint64_t start_ = 0;
    std::size_t filled_ = 0;
};

/// A valid record found by the scan: where it is, not its bytes.
struct scanned_record {
    zxid id;
    std::uint64_t offset = 0;   ///< of its header
    std::uint32_t length = 0;   ///< of its payload
    bool system = false;        ///< its payload is one of zab's own transactions (is_system_txn)
    std::uint64_t synced = 0;   ///< the segment was durable up to here before it was written
    std::uint64_t end() const noexcept {
        return offset + storage_format::record_header_size + length;
    }
};

/// A segment's header as recovery found it.
struct segment_head {
    storage_format::segment_header header;
    std::uint64_t file_size = 0;
    /// The newest segment's header itself was torn: the file holds nothing and goes.
    bool torn = false;
    std::string damage;  ///< what was wrong with a torn header
};

/// What recovery found in the records of one segment file.
struct segment_scan {
    std::vector<scanned_record> records;
    /// End of the last valid record (or of the header): the file keeps these bytes.
    std::uint64_t valid_end = 0;
    /// What was wrong at `valid_end` when bytes that are not all zero follow it (a torn
    /// tail); empty otherwise.
    std::string tail_damage;
    /// End of the last byte that is not zero (at least `valid_end`): a torn tail's damage
    /// lies in [valid_end, damage_end); zeros after it are reserved room.
    std::uint64_t damage_end = 0;
};

/// What recovery expects of a segment's header.
struct segment_expectation {
    std::uint64_t cluster_id = 0;
    std::uint64_t replica_id = 0;
    std::uint64_t number = 0;
    /// Whether this is the newest segment file: only it may have a torn header.
    bool last = false;
    /// The window to assume when the header itself is unreadable (the configured one).
    std::uint32_t fallback_window_bytes = 0;
};

namespace scan_detail {

enum class verdict { valid, damaged, corrupt };

/// Reads the record at `offset`: true when it is whole (within the file and
/// `max_record_bytes`) and its checksum matches, and then `out` (and `distance`, its sync
/// distance) describe it; false, with `problem` saying why, when it is damaged.
inline result<bool> read_whole_record(block_reader& reader, std::uint64_t offset,
                                      std::uint64_t file_size, std::uint32_t max_record_bytes,
                                      scanned_record& out, std::uint32_t& distance,
                                      std::string& problem) {
    using namespace storage_format;
    if (file_size - offset < record_header_size) {
        problem = fmt::format("{} bytes left, less than a record header", file_size - offset);
        return false;
    }
    auto head = reader.bytes(offset, record_header_size);
    if (!head) return head.error();
    const record_header h = decode_record_header(head.value().data());
    if (h.length > max_record_bytes) {
        problem = fmt::format("record length {} exceeds the segment's max_record_bytes {}",
                              h.length, max_record_bytes);
        return false;
    }
    if (file_size - offset - record_header_size < h.length) {
        problem = fmt::format("record of {} bytes runs past the end of the file", h.length);
        return false;
    }
    auto whole = reader.bytes(offset, record_header_size + h.length);
    if (!whole) return whole.error();
    if (!record_checksum_matches(whole.value())) {
        problem = "record checksum mismatch";
        return false;
    }
    distance = h.sync_distance;
    out = {h.id, offset, h.length, is_system_txn(whole.value().subspan(record_header_size)),
           offset - std::min<std::uint64_t>(h.sync_distance, offset)};
    return true;
}

/// Judges the record at `offset`: valid (and then `out` describes it), damaged (a torn
/// write may explain it) or corrupt (it is whole and valid but out of order, or names a
/// synced offset before the start of the file).
inline result<verdict> judge_record(block_reader& reader, std::uint64_t offset,
                                    std::uint64_t file_size, std::uint32_t max_record_bytes,
                                    zxid previous, scanned_record& out, std::string& problem) {
    std::uint32_t distance = 0;
    auto whole =
        read_whole_record(reader, offset, file_size, max_record_bytes, out, distance, problem);
    if (!whole) return whole.error();
    if (!whole.value()) return verdict::damaged;
    if (distance > offset) {
        problem = fmt::format("valid record {} names a synced offset {} bytes before itself, "
                              "before the start of the file",
                              out.id, distance);
        return verdict::corrupt;
    }
    if (out.id <= previous) {
        problem = fmt::format("valid record {} does not follow {}: records out of order",
                              out.id, previous);
        return verdict::corrupt;
    }
    return verdict::valid;
}

/// The first whole, checksum-valid record starting in [from, starts_before) that names a
/// synced offset past `damaged_at`: the proof that the byte there had been synced before that
/// record was written. Walks from record to record where it finds them, byte by byte
/// elsewhere.
inline result<std::optional<scanned_record>> find_synced_past(
    block_reader& reader, std::uint64_t from, std::uint64_t damaged_at,
    std::uint64_t starts_before, std::uint64_t file_size, std::uint32_t max_record_bytes) {
    std::string ignored;
    for (std::uint64_t at = from; at < starts_before;) {
        scanned_record record;
        std::uint32_t distance = 0;
        auto whole =
            read_whole_record(reader, at, file_size, max_record_bytes, record, distance, ignored);
        if (!whole) return whole.error();
        if (!whole.value()) {
            ++at;
            continue;
        }
        if (distance <= at && record.synced > damaged_at)
            return std::optional<scanned_record>{record};
        at = record.end();
    }
    return std::optional<scanned_record>{};
}

/// Success when the damage (`problem`) at `damaged_at` may be a torn write: no record from
/// `from` on proves it synced (find_synced_past). Else `errc::corrupt` (or the read error),
/// `why` naming the file, the offset and the proof.
inline result<void> refuse_if_synced_past(block_reader& reader, const std::string& path,
                                          std::uint64_t from, std::uint64_t damaged_at,
                                          std::uint64_t starts_before, std::uint64_t file_size,
                                          std::uint32_t max_record_bytes,
                                          const std::string& problem, std::string& why) {
    auto synced =
        find_synced_past(reader, from, damaged_at, starts_before, file_size, max_record_bytes);
    if (!synced) {
        why = fmt::format("{}: read failed: {}", path, synced.error().message());
        return synced.error();
    }
    if (!synced.value()) return success();
    why = fmt::format("{}: offset {}: {}; but record {} at offset {} was written after the "
                      "segment had been synced to offset {}: the damaged bytes had been "
                      "synced, not a torn tail: corruption",
                      path, damaged_at, problem, synced.value()->id, synced.value()->offset,
                      synced.value()->synced);
    return make_error_code(errc::corrupt);
}

}  // namespace scan_detail

/// Reads and checks the header of segment `path` (open as `fd` in `fs`). A damaged header is
/// a torn one (`torn`) only for the newest file, only if the file is no longer than one
/// window, and only if no record in it proves the header synced: it was being created when
/// the power went. Otherwise fails with `errc::corrupt` (or
/// `unsupported_version`, or the errno of a failed read), `why` naming the file and the check.
inline result<segment_head> read_segment_head(file_system& fs, int fd, const std::string& path,
                                              const segment_expectation& expect,
                                              std::string& why) {
    using namespace storage_format;
    segment_head head;
    if (const int error = fs.size_of(fd, head.file_size); error != 0) {
        why = fmt::format("{}: fstat failed: {}", path, errno_text(error));
        return std::error_code{error, std::system_category()};
    }
    std::string problem;
    result<segment_header> header = make_error_code(errc::truncated);
    if (head.file_size < segment_header_size) {
        problem = fmt::format("file is {} bytes, shorter than a segment header", head.file_size);
    } else {
        block_reader reader{fs, fd, head.file_size};
        auto bytes = reader.bytes(0, segment_header_size);
        if (!bytes) {
            why = fmt::format("{}: read failed: {}", path, bytes.error().message());
            return bytes.error();
        }
        header = decode_segment_header(bytes.value(), problem);
    }
    if (!header) {
        if (header.error() == errc::unsupported_version) {
            why = fmt::format("{}: offset 0: segment header: {}", path, problem);
            return header.error();
        }
        if (!expect.last) {
            why = fmt::format("{}: offset 0: segment header: {}; only the newest segment may "
                              "have a torn header (a later one exists only once this one was "
                              "synced)",
                              path, problem);
            return make_error_code(errc::corrupt);
        }
        if (head.file_size > expect.fallback_window_bytes) {
            why = fmt::format("{}: offset 0: segment header: {}; the file holds {} bytes, more "
                              "than the first write step (a window of {} bytes) that a torn "
                              "header could belong to",
                              path, problem, head.file_size, expect.fallback_window_bytes);
            return make_error_code(errc::corrupt);
        }
        // The header went out with the segment's first step: if a record names a synced
        // offset past 0, that step — the header with it — had been synced.
        block_reader reader{fs, fd, head.file_size};
        if (auto torn = scan_detail::refuse_if_synced_past(
                reader, path, segment_header_size, 0, head.file_size, head.file_size,
                record_bytes_limit,
                "segment header: " + problem, why);
            !torn)
            return torn.error();
        head.torn = true;
        head.damage = problem;
        return head;
    }
    head.header = header.value();
    const segment_header& h = head.header;
    if (h.cluster_id != expect.cluster_id || h.replica_id != expect.replica_id) {
        why = fmt::format("{}: segment of cluster {} replica {}, this directory belongs to "
                          "cluster {} replica {}",
                          path, h.cluster_id, h.replica_id, expect.cluster_id, expect.replica_id);
        return make_error_code(errc::corrupt);
    }
    if (h.number != expect.number) {
        why = fmt::format("{}: header says segment number {:016x}, the name says {:016x}", path,
                          h.number, expect.number);
        return make_error_code(errc::corrupt);
    }
    if (h.max_record_bytes > record_bytes_limit ||
        h.window_bytes <
            segment_header_size + record_header_size + std::uint64_t{h.max_record_bytes}) {
        why = fmt::format("{}: header fields out of range (max_record_bytes {}, window {})", path,
                          h.max_record_bytes, h.window_bytes);
        return make_error_code(errc::corrupt);
    }
    return head;
}

/// The end of the last byte in [from, file_size) that is not zero, or `from` when they are
/// all zero (reads backwards from the end in blocks).
inline result<std::uint64_t> end_of_content(file_system& fs, int fd, std::uint64_t from,
                                            std::uint64_t file_size) {
    constexpr std::uint64_t block = std::uint64_t{64} << 10;
    std::vector<std::byte> buffer(static_cast<std::size_t>(block));
    std::uint64_t end = file_size;
    while (end > from) {
        const std::uint64_t start = end - std::min(block, end - from);
        const std::size_t length = static_cast<std::size_t>(end - start);
        std::size_t got = 0;
        if (const int error = fs.read_at(fd, {buffer.data(), length}, start, got); error != 0)
            return std::error_code{error, std::system_category()};
        if (got < length) return std::error_code{EIO, std::system_category()};
        for (std::size_t i = length; i > 0; --i)
            if (buffer[i - 1] != std::byte{0}) return start + i;
        end = start;
    }
    return from;
}

/// Reads every record of a segment whose header passed, and classifies what follows the
/// last valid one: nothing, a torn tail (only if `last`, see the file comment), or
/// corruption (`errc::corrupt`, `why` naming the file, the offset and the check).
inline result<segment_scan> scan_records(file_system& fs, int fd, const std::string& path,
                                         const segment_head& head, bool last, std::string& why) {
    using namespace storage_format;
    const segment_header& h = head.header;
    block_reader reader{fs, fd, head.file_size};
    segment_scan scan;
    std::string problem;
    std::uint64_t offset = segment_header_size;
    zxid previous = h.base;
    while (offset < head.file_size) {
        scanned_record record;
        auto verdict = scan_detail::judge_record(reader, offset, head.file_size,
                                                 h.max_record_bytes, previous, record, problem);
        if (!verdict) {
            why = fmt::format("{}: read at offset {} failed: {}", path, offset,
                              verdict.error().message());
            return verdict.error();
        }
        if (verdict.value() == scan_detail::verdict::corrupt) {
            why = fmt::format("{}: offset {}: {}", path, offset, problem);
            return make_error_code(errc::corrupt);
        }
        if (verdict.value() == scan_detail::verdict::damaged) break;
        scan.records.push_back(record);
        previous = record.id;
        offset = record.end();
    }
    scan.valid_end = scan.damage_end = offset;
    if (offset == head.file_size) return scan;
    auto content = end_of_content(fs, fd, offset, head.file_size);
    if (!content) {
        why = fmt::format("{}: read after offset {} failed: {}", path, offset,
                          content.error().message());
        return content.error();
    }
    if (content.value() == offset) return scan;  // reserved room
    scan.damage_end = content.value();

    // Damage at `offset`: a torn tail only in the newest segment, and only if no valid
    // record after it names a synced offset past it (see the file comment).
    if (!last) {
        why = fmt::format("{}: offset {}: {}; only the newest segment may end in a torn write "
                          "(a later one exists only once this one was synced): not a torn tail",
                          path, offset, problem);
        return make_error_code(errc::corrupt);
    }
    // A record proving the damage synced starts before the zeros (its header is not zero);
    // it may end in them, so it is read within the whole file.
    if (auto torn = scan_detail::refuse_if_synced_past(reader, path, offset + 1, offset,
                                                       scan.damage_end, head.file_size,
                                                       h.max_record_bytes,
                                                       problem, why);
        !torn)
        return torn.error();
    scan.tail_damage = problem;
    return scan;
}

}  // namespace zab::detail
