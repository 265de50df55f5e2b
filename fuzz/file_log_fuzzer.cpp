// Fuzz target for zab::file_log's recovery (include/zab/storage/: format.hpp, segment_scan.hpp,
// data_directory.hpp and file_log::open).
//
// Input: a control byte, then bytes that become files in a fresh data directory. The control
// byte's low four bits, modulo 3, choose the layout:
//   0   the bytes are segment log.0000000000000001
//   1   the bytes are snapshot.0000000000000001
//   2   the bytes are a list of files, each `tag u8, length u16 (little-endian), bytes`:
//       tag & 7 is the kind (0 segment, 1 snapshot, 2 epochs, 3 identity, 4 a segment's
//       `.tmp`, 5 no identity file, 6 no epochs file, 7 another file), tag >> 3 the number
//       in the name (segments and snapshots 1..32)
// Bit 6 repairs every checksum of the files before they are written (see `fix_checksums`:
// so that mutations get past the CRCs), bit 7 sets `create_if_missing`, bits 5 and 4 choose
// what follows a successful open (below). Unless the input says otherwise, the directory also
// holds a valid identity (cluster 7, replica 3) and an epoch file (100/100), so that open gets
// to the segments.
//
// Oracles, beyond "no crash, no sanitizer report, no huge allocation":
// - open fails only with corrupt, unsupported_version or invalid_argument (never
//   storage_failed: no system call fails on a healthy temporary directory);
// - when it opens, corruption was not taken for a torn tail (issue #15): only the newest
//   segment file was cut, at an offset no later valid record names as synced past; a
//   segment removed for a damaged header was the newest, with no record proving it synced;
// - when it opens: reading every record after the snapshot succeeds (open checked them),
//   in ascending zxids above the snapshot, ending at last_zxid();
// - a second open finds the same records (recovery's repairs are idempotent);
// - what recovery left is a log that can go on: after a truncation to its middle (bit 5),
//   an append after last_zxid(), and a checkpoint at its middle record (bit 4), each
//   flushed, a third open finds exactly the snapshot and the records written.
//
// The seed corpus (corpus/file_log/) holds real files written by file_log with the options
// below (segment format 2: a log of several segments in flushes of three records, a log
// after a truncation, a snapshot install, a checkpoint, records of 0 to 400 bytes) in the
// three modes; truncated, bit-flipped and zero-padded variants; and copies with bits 4-6 of
// the first byte set. Its bit-flipped logs fail the classification oracle above when
// recovery goes back to cutting any damage within a window of the end.
//
// The work is in one directory per process (under /dev/shm when it exists: fsync there is
// cheap), emptied for each input.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zab/core/logging.hpp"
#include "zab/storage/file_log.hpp"

namespace {

namespace fs = std::filesystem;
using zab::zxid;

[[noreturn]] void oracle_failed(const std::string& what) {
    std::fprintf(stderr, "file_log_fuzzer: oracle failed: %s\n", what.c_str());
    std::abort();
}

void check(bool condition, const char* what) {
    if (!condition) oracle_failed(what);
}

/// The per-process work directory: made once, removed at exit.
class work_directory {
public:
    work_directory() {
        zab::set_log_level(zab::log_level::off);
        std::error_code error;
        const fs::path base =
            fs::is_directory("/dev/shm", error) ? fs::path{"/dev/shm"} : fs::temp_directory_path();
        std::string pattern = (base / "zab_file_log_fuzz_XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) oracle_failed("mkdtemp failed");
        root_ = pattern;
    }
    work_directory(const work_directory&) = delete;
    work_directory& operator=(const work_directory&) = delete;
    ~work_directory() {
        std::error_code ignored;
        fs::remove_all(root_, ignored);
    }

    /// The data directory, made empty.
    std::string fresh_data() {
        const fs::path data = root_ / "data";
        std::error_code error;
        fs::remove_all(data, error);
        fs::create_directory(data, error);
        if (error) oracle_failed("cannot make the data directory: " + error.message());
        return data.string();
    }

private:
    fs::path root_;
};

void write_bytes(const std::string& path, const std::uint8_t* data, std::size_t size) {
    std::ofstream out{path, std::ios::binary | std::ios::trunc};
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) oracle_failed("cannot write " + path);
}

/// What a file is, for `fix_checksums`.
enum class file_kind { segment, snapshot, epochs, identity, other };

/// Rewrites every CRC32C the format has where it would be, so that the fuzzer's mutations
/// reach the checks behind the checksums (zxid order, bases, generations, sizes) instead of
/// dying at the first CRC: a segment's header and each record it can walk to (by the
/// lengths as they are), a snapshot's header (which covers the state), the small files.
void fix_checksums(file_kind kind, std::vector<std::byte>& file) {
    using namespace zab::storage_format;
    const auto crc_at = [&](std::size_t at, std::size_t from, std::size_t to) {
        put_u32(&file[at], zab::crc32c(zab::byte_view{file.data() + from, to - from}));
    };
    switch (kind) {
        case file_kind::segment: {
            if (file.size() < segment_header_size) return;
            crc_at(60, 0, 60);
            std::size_t at = segment_header_size;
            while (file.size() - at >= record_header_size) {
                const std::size_t length = get_u32(&file[at + 4]);
                if (file.size() - at - record_header_size < length) return;
                crc_at(at, at + 4, at + record_header_size + length);
                at += record_header_size + length;
            }
            return;
        }
        case file_kind::snapshot:
            if (file.size() < snapshot_header_size) return;
            put_u32(&file[60], zab::crc32c(zab::byte_view{file}.subspan(snapshot_header_size),
                                           zab::crc32c(zab::byte_view{file.data(), 60})));
            return;
        case file_kind::epochs:
            if (file.size() == epochs_file_size) crc_at(16, 0, 16);
            return;
        case file_kind::identity:
            if (file.size() == identity_file_size) crc_at(28, 0, 28);
            return;
        case file_kind::other: return;
    }
}

/// Writes a file of the directory, its checksums repaired first when `fix` is set.
void write_file(const std::string& path, file_kind kind, bool fix, const std::uint8_t* data,
                std::size_t size) {
    if (!fix || kind == file_kind::other) return write_bytes(path, data, size);
    std::vector<std::byte> copy(size);
    if (size > 0) std::memcpy(copy.data(), data, size);
    fix_checksums(kind, copy);
    write_bytes(path, reinterpret_cast<const std::uint8_t*>(copy.data()), copy.size());
}

template <std::size_t N>
void write_file(const std::string& path, const std::array<std::byte, N>& bytes) {
    write_bytes(path, reinterpret_cast<const std::uint8_t*>(bytes.data()), N);
}

zab::file_log_options fuzz_options(const std::string& directory, bool create_if_missing) {
    zab::file_log_options o;
    o.directory = directory;
    o.cluster_id = 7;
    o.replica_id = 3;
    o.create_if_missing = create_if_missing;
    o.max_record_bytes = 400;
    o.group_commit_window_bytes = 1024;
    o.segment_bytes = 2048;
    o.max_snapshot_bytes = 1 << 20;
    return o;
}

/// Lays the input out as files in `dir` (see the file comment).
void write_directory(const std::string& dir, std::uint8_t mode, bool fix, const std::uint8_t* data,
                     std::size_t size) {
    using namespace zab::storage_format;
    bool default_identity = true, default_epochs = true;
    const auto named = [&](const std::string& name) { return dir + "/" + name; };
    if (mode == 0) {
        write_file(named(segment_file_name(1)), file_kind::segment, fix, data, size);
    } else if (mode == 1) {
        write_file(named(snapshot_file_name(1)), file_kind::snapshot, fix, data, size);
    } else {
        std::size_t at = 0;
        while (size - at >= 3) {
            const std::uint8_t tag = data[at];
            std::size_t length = data[at + 1] | (std::size_t{data[at + 2]} << 8);
            at += 3;
            length = std::min(length, size - at);
            const std::uint8_t* bytes = data + at;
            at += length;
            const std::uint64_t number = (tag >> 3) + 1u;
            switch (tag & 7) {
                case 0:
                    write_file(named(segment_file_name(number)), file_kind::segment, fix, bytes,
                               length);
                    break;
                case 1:
                    write_file(named(snapshot_file_name(number)), file_kind::snapshot, fix, bytes,
                               length);
                    break;
                case 2:
                    write_file(named(std::string{epochs_file_name}), file_kind::epochs, fix, bytes,
                               length);
                    default_epochs = false;
                    break;
                case 3:
                    write_file(named(std::string{identity_file_name}), file_kind::identity, fix,
                               bytes, length);
                    default_identity = false;
                    break;
                case 4:
                    write_file(named(temporary_name(segment_file_name(number))), file_kind::segment,
                               fix, bytes, length);
                    break;
                case 5: default_identity = false; break;
                case 6: default_epochs = false; break;
                default: write_bytes(named("unrelated." + std::to_string(number)), bytes, length);
            }
        }
    }
    if (default_identity)
        write_file(named(std::string{identity_file_name}), encode(identity{7, 3}));
    if (default_epochs)
        write_file(named(std::string{epochs_file_name}), encode(zab::epochs{100, 100}));
}

/// Every record after the snapshot, checked in order; `last_zxid()` must end them.
std::vector<zab::log_record> read_everything(const zab::file_log& log) {
    const zxid floor = log.snapshot() ? log.snapshot()->last_included : zxid{};
    check(log.last_zxid() >= floor, "last_zxid() below the snapshot");
    std::vector<zab::log_record> all;
    zxid after = floor;
    for (;;) {
        auto part = log.read(after, 7);
        if (!part) oracle_failed("read failed after a successful open: " + part.error().message());
        if (part.value().empty()) break;
        check(part.value().size() <= 7, "read returned more than asked");
        for (const zab::log_record& r : part.value()) {
            check(r.id > after, "read returned zxids out of order");
            after = r.id;
            all.push_back(r);
        }
    }
    check(after == log.last_zxid(), "the records read do not end at last_zxid()");
    return all;
}

bool same_records(const std::vector<zab::log_record>& a, const std::vector<zab::log_record>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].id != b[i].id || !(a[i].txn == b[i].txn)) return false;
    return true;
}

/// The segment files of `dir`, by number, with their bytes.
std::map<std::uint64_t, std::vector<std::byte>> segments_of(const std::string& dir) {
    std::map<std::uint64_t, std::vector<std::byte>> out;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const auto number = zab::storage_format::parse_numbered_name(
            entry.path().filename().string(), zab::storage_format::segment_prefix);
        if (!number || !entry.is_regular_file()) continue;
        std::ifstream in{entry.path(), std::ios::binary};
        std::vector<char> chars((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
        auto& bytes = out[*number];
        bytes.resize(chars.size());
        if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
    }
    return out;
}

/// Whether `file` holds a whole, checksum-valid record at `from` or later (at most
/// `max_record_bytes` long) that names a synced offset past `cut`: proof that the byte at
/// `cut` had been synced (format.hpp). Written apart from segment_scan.hpp, as an oracle.
bool synced_past(const std::vector<std::byte>& file, std::size_t from, std::size_t cut,
                 std::uint32_t max_record_bytes) {
    using namespace zab::storage_format;
    // Record to record where records are whole, byte by byte elsewhere — as recovery walks:
    // bytes inside a whole record's payload that happen to look like a record (a client's
    // value can hold anything) are that record's data, not proof of a sync.
    for (std::size_t at = from; at + record_header_size <= file.size();) {
        const std::uint32_t length = get_u32(&file[at + 4]);
        const std::uint32_t distance = get_u32(&file[at + 16]);
        if (length > max_record_bytes || file.size() - at - record_header_size < length ||
            !record_checksum_matches(
                zab::byte_view{file.data() + at, record_header_size + length})) {
            ++at;
            continue;
        }
        if (distance <= at && at - distance > cut) return true;
        at += record_header_size + length;
    }
    return false;
}

/// The classification oracle (issue #15), given the segments before and after an open that
/// succeeded: only the newest segment file may be cut, and only where no later record proves
/// the cut bytes synced; a segment removed for a damaged header must be the newest one, with
/// no record in it proving the header synced (checked when no snapshot makes segments of an
/// older generation go too).
void check_classification(const std::map<std::uint64_t, std::vector<std::byte>>& before,
                          const std::map<std::uint64_t, std::vector<std::byte>>& after,
                          bool has_snapshot) {
    using namespace zab::storage_format;
    if (before.empty()) return;
    const std::uint64_t newest = before.rbegin()->first;
    for (const auto& [number, bytes] : before) {
        std::string problem;
        auto header = bytes.size() >= segment_header_size
                          ? decode_segment_header(zab::byte_view{bytes}, problem)
                          : zab::result<segment_header>{zab::make_error_code(zab::errc::truncated)};
        const auto kept = after.find(number);
        if (kept != after.end() && kept->second.size() < bytes.size()) {
            check(number == newest, "a segment other than the newest file was cut");
            check(header.has_value(), "a segment with a damaged header was cut, not refused");
            const std::size_t cut = kept->second.size();
            check(!synced_past(bytes, cut + 1, cut, header.value().max_record_bytes),
                  "a cut dropped bytes that a later record proves synced");
        }
        if (kept == after.end() && !has_snapshot && !header &&
            header.error() != zab::errc::unsupported_version) {
            check(number == newest, "a segment other than the newest file lost its header");
            check(!synced_past(bytes, segment_header_size, 0, record_bytes_limit),
                  "a segment whose header a record proves synced was removed as torn");
        }
    }
}

zab::file_log reopen(const zab::file_log_options& options, const char* when) {
    std::string why;
    auto again = zab::file_log::open(options, &why);
    if (!again) oracle_failed(std::string{when} + ": " + why);
    return std::move(again).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static work_directory work;
    if (size == 0) return 0;
    const std::uint8_t control = data[0];
    const std::string dir = work.fresh_data();
    write_directory(dir, (control & 0x0f) % 3, (control & 0x40) != 0, data + 1, size - 1);
    const auto options = fuzz_options(dir, (control & 0x80) != 0);

    std::vector<zab::log_record> records;  // after the snapshot
    {
        const auto segments_before = segments_of(dir);
        bool has_snapshot = false;
        for (const auto& entry : fs::directory_iterator(dir))
            has_snapshot = has_snapshot ||
                           zab::storage_format::parse_numbered_name(
                               entry.path().filename().string(),
                               zab::storage_format::snapshot_prefix).has_value();
        std::string why;
        auto opened = zab::file_log::open(options, &why);
        if (opened) check_classification(segments_before, segments_of(dir), has_snapshot);
        if (!opened) {
            const std::error_code e = opened.error();
            check(e == zab::errc::corrupt || e == zab::errc::unsupported_version ||
                      e == zab::errc::invalid_argument,
                  "open failed with an unexpected error");
            if (e == zab::errc::corrupt) check(!why.empty(), "corrupt without a reason");
            return 0;
        }
        records = read_everything(opened.value());
    }
    std::optional<zab::log_snapshot> snapshot;
    {
        zab::file_log log = reopen(options, "a second open failed");
        check(same_records(read_everything(log), records), "a second open read other records");
        snapshot = log.snapshot();
        const zxid floor = snapshot ? snapshot->last_included : zxid{};
        if ((control & 0x20) != 0) {
            // A TRUNC to the middle of what recovery found (or to the snapshot).
            const std::size_t keep = records.size() / 2;
            log.truncate_after(1, keep == 0 ? floor : records[keep - 1].id);
            records.resize(keep);
        }
        const zxid last = log.last_zxid();
        check(last == (records.empty() ? floor : records.back().id), "last_zxid() after a cut");
        if (last.counter() == UINT32_MAX || last.epoch() > log.stored_epochs().accepted) return 0;
        const zab::log_record next{zxid{last.epoch(), last.counter() + 1},
                                   zab::shared_bytes::copy_of(zab::as_bytes(std::string{"next"}))};
        log.append(2, {&next, 1});
        log.make_durable(2);
        if (const auto flushed = log.flush(); flushed.failed())
            oracle_failed("append after recovery failed: " + flushed.reason);
        records.push_back(next);
        if ((control & 0x10) != 0) {
            // A checkpoint at the middle record: the records up to it go.
            const zxid at = records[records.size() / 2].id;
            const auto state = zab::shared_bytes::copy_of(zab::as_bytes(std::string{"state"}));
            check(log.compact(at, state), "compact refused a record of the log");
            if (const auto flushed = log.flush(); flushed.failed())
                oracle_failed("checkpoint after recovery failed: " + flushed.reason);
            records.erase(records.begin(), records.begin() + records.size() / 2 + 1);
            snapshot = zab::log_snapshot{at, state};
        }
    }
    zab::file_log log = reopen(options, "open after an append failed");
    check(same_records(read_everything(log), records), "the log is not what was written");
    check(log.snapshot().has_value() == snapshot.has_value() &&
              (!snapshot || (log.snapshot()->last_included == snapshot->last_included &&
                             log.snapshot()->state == snapshot->state)),
          "the snapshot is not what was written");
    return 0;
}
