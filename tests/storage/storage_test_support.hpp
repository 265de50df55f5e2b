// Helpers for the file_log tests: a temporary directory per test case, records with
// recognisable payloads, whole-log reads, and raw file surgery (cut, flip, append garbage)
// to play the part of a crash or of a failing disk.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/logging.hpp"
#include "zab/storage/file_log.hpp"
#include "zab/testing/random.hpp"

namespace storage_test {

using zab::epochs;
using zab::file_log;
using zab::file_log_options;
using zab::log_record;
using zab::shared_bytes;
using zab::zxid;
namespace fs = std::filesystem;

/// A well-mixed 64-bit value that follows from `x` alone (splitmix64's step): payloads and
/// sizes derived from a record's zxid, so a checker needs nothing but the zxid.
inline std::uint64_t mix(std::uint64_t x) { return zab::testing::detail::splitmix64_next(x); }

/// zab logs torn-tail cuts and refused opens; the tests check them through return values.
inline const bool logging_silenced = [] {
    zab::set_log_level(zab::log_level::off);
    return true;
}();

/// A fresh directory under /tmp (mkdtemp), removed with everything in it at the end.
class temporary_directory {
public:
    temporary_directory() {
        std::string pattern = (fs::temp_directory_path() / "zab_storage_XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path_ = pattern;
    }
    temporary_directory(const temporary_directory&) = delete;
    temporary_directory& operator=(const temporary_directory&) = delete;
    ~temporary_directory() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    const std::string& path() const { return path_; }
    /// The data directory inside it (not created: the log creates it).
    std::string data() const { return path_ + "/data"; }

private:
    std::string path_;
};

/// Small files, so that a few dozen records span several segments.
inline file_log_options small_options(const std::string& directory) {
    file_log_options o;
    o.directory = directory;
    o.cluster_id = 7;
    o.replica_id = 3;
    o.max_record_bytes = 400;
    o.group_commit_window_bytes = 1024;
    o.segment_bytes = 2048;
    return o;
}

/// The payload of the tests' records: with its 20-byte header a record takes 76 bytes on disk,
/// the size the layouts the tests describe (records per segment, steps) are counted in.
inline constexpr std::size_t payload_size = 56;

/// A record whose payload names its zxid, padded to `size` bytes.
inline log_record record(std::uint32_t epoch, std::uint32_t counter,
                         std::size_t size = payload_size) {
    std::string text = "txn " + std::to_string(epoch) + "." + std::to_string(counter) + " ";
    while (text.size() < size) text += static_cast<char>('a' + (text.size() + counter) % 26);
    text.resize(size);
    return {zxid{epoch, counter}, shared_bytes::copy_of(zab::as_bytes(text))};
}

inline std::vector<log_record> records(std::uint32_t epoch, std::uint32_t first,
                                       std::uint32_t last, std::size_t size = payload_size) {
    std::vector<log_record> out;
    for (std::uint32_t c = first; c <= last; ++c) out.push_back(record(epoch, c, size));
    return out;
}

inline file_log open_log(const file_log_options& options) {
    std::string why;
    auto opened = file_log::open(options, &why);
    INFO("open failed: " << why);
    REQUIRE(opened.has_value());
    return std::move(opened).value();
}

/// The error and diagnostic of an open that must fail.
struct open_failure {
    std::error_code error;
    std::string why;
};

inline open_failure open_must_fail(const file_log_options& options) {
    std::string why;
    auto opened = file_log::open(options, &why);
    REQUIRE_FALSE(opened.has_value());
    return {opened.error(), why};
}

/// Every record after the snapshot (or from the start), read in pieces of `step`.
inline std::vector<log_record> read_all(const file_log& log, std::size_t step = 1000) {
    zxid after = log.snapshot() ? log.snapshot()->last_included : zxid{};
    std::vector<log_record> out;
    for (;;) {
        auto part = log.read(after, step);
        REQUIRE(part.has_value());
        if (part.value().empty()) return out;
        after = part.value().back().id;
        out.insert(out.end(), part.value().begin(), part.value().end());
    }
}

inline std::vector<zxid> ids(const std::vector<log_record>& log) {
    std::vector<zxid> out;
    for (const auto& r : log) out.push_back(r.id);
    return out;
}

inline std::vector<zxid> ids(std::uint32_t epoch, std::uint32_t first, std::uint32_t last) {
    std::vector<zxid> out;
    for (std::uint32_t c = first; c <= last; ++c) out.push_back(zxid{epoch, c});
    return out;
}

/// Checks ids and payload bytes against what `record()` makes.
inline void require_records(const std::vector<log_record>& got, const std::vector<zxid>& want,
                            std::size_t size = payload_size) {
    REQUIRE(ids(got) == want);
    for (const auto& r : got) REQUIRE(r.txn == record(r.id.epoch(), r.id.counter(), size).txn);
}

inline zab::flush_result flush_ok(file_log& log) {
    auto result = log.flush();
    INFO("flush failed: " << result.reason);
    REQUIRE_FALSE(result.failed());
    return result;
}

/// A log whose epochs (9, 9) admit records of any epoch up to 9: open checks that the last
/// logged zxid's epoch is at most currentEpoch (docs/protocol.md §2).
inline file_log open_new(const file_log_options& options) {
    file_log log = open_log(options);
    log.write_epochs(0, {9, 9});
    flush_ok(log);
    return log;
}

// --- raw files ------------------------------------------------------------------------------

inline std::vector<std::string> files_with_prefix(const std::string& directory,
                                                  const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(directory)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(prefix, 0) == 0) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

inline std::vector<std::string> segment_files(const std::string& directory) {
    return files_with_prefix(directory, "log.");
}

inline std::vector<std::byte> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(chars.size());
    std::transform(chars.begin(), chars.end(), out.begin(), [](char c) { return std::byte(c); });
    return out;
}

inline void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    REQUIRE(out.good());
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

inline void append_to_file(const std::string& path, const std::vector<std::byte>& bytes) {
    auto all = read_file(path);
    all.insert(all.end(), bytes.begin(), bytes.end());
    write_file(path, all);
}

/// Whether every byte of `path` from `offset` on is zero (room a file_log reserved ahead of
/// its records, or a torn tail it zeroed).
inline bool zero_from(const std::string& path, std::size_t offset) {
    const auto bytes = read_file(path);
    return offset <= bytes.size() &&
           std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(offset), bytes.end(),
                       [](std::byte b) { return b == std::byte{0}; });
}

inline void flip_byte(const std::string& path, std::size_t offset) {
    auto bytes = read_file(path);
    REQUIRE(offset < bytes.size());
    bytes[offset] ^= std::byte{0x5a};
    write_file(path, bytes);
}

inline void copy_directory(const std::string& from, const std::string& to) {
    fs::remove_all(to);
    fs::copy(from, to, fs::copy_options::recursive);
}

/// The synced watermark file of `directory` (zab/storage/format.hpp) as it is now. Put back
/// with `restore_watermark` after a flush, it is what a crash leaves when it comes after the
/// flush's data but before its watermark update: the state in which damage in that flush's
/// last write step is a torn tail (with the update landed, the same damage is a lost
/// synced tail, issue 34 defect 10).
inline std::vector<std::byte> saved_watermark(const std::string& directory) {
    return read_file(directory + "/synced");
}

inline void restore_watermark(const std::string& directory, const std::vector<std::byte>& saved) {
    write_file(directory + "/synced", saved);
}

/// Names and sizes of every file: the whole visible state of a directory.
inline std::vector<std::pair<std::string, std::uintmax_t>> directory_state(
    const std::string& directory) {
    std::vector<std::pair<std::string, std::uintmax_t>> out;
    for (const auto& entry : fs::directory_iterator(directory))
        out.emplace_back(entry.path().filename().string(), fs::file_size(entry.path()));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace storage_test
