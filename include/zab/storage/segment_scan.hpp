// zab/storage/segment_scan.hpp — recovery's reading of one log segment: which records are
// valid, and whether what follows them is a torn tail (cut it) or corruption (refuse).
//
// The rule (issue #6): a flush never leaves more than the segment's group-commit window of
// bytes un-synced, and it starts syncing on a record boundary (durable_io, flush_job). So a
// crash can damage only the last segment, and only within one window after the last synced
// record. Recovery therefore accepts damage only
//   - in the last segment, and
//   - when no valid record starts a window or more after the first damaged byte,
// and cuts the file there. Anything else (damage in an earlier segment, a valid record
// further on, records out of order, another replica's segment) is corruption: reported, never
// dropped silently.
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
    /// What was wrong at `valid_end` when the file is longer (a torn tail); empty otherwise.
    std::string tail_damage;
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

/// Judges the record at `offset`: valid (and then `out` describes it), damaged (a torn
/// write may explain it) or corrupt (it is whole and valid but out of order).
inline result<verdict> judge_record(block_reader& reader, std::uint64_t offset,
                                    std::uint64_t file_size,
                                    const storage_format::segment_header& header, zxid previous,
                                    scanned_record& out, std::string& problem) {
    using namespace storage_format;
    if (file_size - offset < record_header_size) {
        problem = fmt::format("{} bytes left, less than a record header", file_size - offset);
        return verdict::damaged;
    }
    auto head = reader.bytes(offset, record_header_size);
    if (!head) return head.error();
    const record_header h = decode_record_header(head.value().data());
    if (h.length > header.max_record_bytes) {
        problem = fmt::format("record length {} exceeds the segment's max_record_bytes {}",
                              h.length, header.max_record_bytes);
        return verdict::damaged;
    }
    if (file_size - offset - record_header_size < h.length) {
        problem = fmt::format("record of {} bytes runs past the end of the file", h.length);
        return verdict::damaged;
    }
    auto whole = reader.bytes(offset, record_header_size + h.length);
    if (!whole) return whole.error();
    if (!record_checksum_matches(whole.value())) {
        problem = "record checksum mismatch";
        return verdict::damaged;
    }
    out = {h.id, offset, h.length};
    if (h.id <= previous) {
        problem = fmt::format("valid record {} does not follow {}: records out of order",
                              h.id, previous);
        return verdict::corrupt;
    }
    return verdict::valid;
}

/// The offset of a whole, checksum-valid record starting in [from, file end), if any.
inline result<std::optional<std::uint64_t>> find_valid_record(
    block_reader& reader, std::uint64_t from, std::uint64_t file_size,
    const storage_format::segment_header& header) {
    using namespace storage_format;
    for (std::uint64_t at = from; file_size >= record_header_size &&
                                  at <= file_size - record_header_size;
         ++at) {
        auto head = reader.bytes(at, record_header_size);
        if (!head) return head.error();
        const record_header h = decode_record_header(head.value().data());
        if (h.length > header.max_record_bytes ||
            file_size - at - record_header_size < h.length)
            continue;
        auto whole = reader.bytes(at, record_header_size + h.length);
        if (!whole) return whole.error();
        if (record_checksum_matches(whole.value())) return std::optional<std::uint64_t>{at};
    }
    return std::optional<std::uint64_t>{};
}

}  // namespace scan_detail

/// Reads and checks the header of segment `path` (open as `fd` in `fs`). A damaged header is
/// a torn one (`torn`) only for the newest file and only if the file is no longer than one
/// window: it was being created when the power went. Otherwise fails with `errc::corrupt` (or
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
        if (expect.last && header.error() != errc::unsupported_version &&
            head.file_size <= expect.fallback_window_bytes) {
            head.torn = true;
            head.damage = problem;
            return head;
        }
        why = fmt::format("{}: offset 0: segment header: {}", path, problem);
        return header.error() == errc::unsupported_version ? header.error()
                                                           : make_error_code(errc::corrupt);
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
        auto verdict = scan_detail::judge_record(reader, offset, head.file_size, h, previous,
                                                 record, problem);
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
    scan.valid_end = offset;
    if (offset == head.file_size) return scan;

    // Damage at `offset`: a torn tail only in the last segment, and only if nothing valid
    // lies a window or more beyond it.
    if (!last) {
        why = fmt::format("{}: offset {}: {}; only the newest segment may end in a torn write",
                          path, offset, problem);
        return make_error_code(errc::corrupt);
    }
    auto found =
        scan_detail::find_valid_record(reader, offset + h.window_bytes, head.file_size, h);
    if (!found) {
        why = fmt::format("{}: read failed: {}", path, found.error().message());
        return found.error();
    }
    if (found.value()) {
        why = fmt::format("{}: offset {}: {}, but a valid record starts at offset {}, more than "
                          "the group-commit window ({} bytes) further: not a torn tail",
                          path, offset, problem, *found.value(), h.window_bytes);
        return make_error_code(errc::corrupt);
    }
    scan.tail_damage = problem;
    return scan;
}

}  // namespace zab::detail
