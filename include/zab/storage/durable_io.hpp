// zab/storage/durable_io.hpp — the steps that change a data directory (write, fdatasync,
// ftruncate, create, rename, unlink, directory fsync), made through the log's file_system,
// counted, worded, and stopped at the first failure.
//
// One `durable_io` serves one flush job (or one recovery). Its first failed step is
// remembered with a sentence naming the step, the file and the errno; every later step then
// does nothing and fails too, so a job never continues past a failed fsync and nothing is
// retried (docs/design.md rule 6: after a failed fsync the page cache may have dropped the dirty
// pages, and a second fsync would "succeed" on data that is gone).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/core/bytes.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/storage/posix_file.hpp"

namespace zab {

/// What a file_log did to its disk, cumulated over every finished flush and the recovery.
struct file_log_stats {
    std::uint64_t flushes = 0;           ///< flush jobs finished (empty ones included)
    std::uint64_t records_written = 0;   ///< log records handed to pwrite
    std::uint64_t bytes_written = 0;     ///< bytes written, every file
    std::uint64_t data_syncs = 0;        ///< fdatasync calls on segment files
    std::uint64_t watermark_syncs = 0;   ///< fdatasync calls on the synced watermark file
    std::uint64_t file_syncs = 0;        ///< fsync calls on snapshot, epoch and identity files
    std::uint64_t directory_syncs = 0;   ///< fsync calls on the data directory
    std::uint64_t truncations = 0;       ///< ftruncate calls that cut a segment (TRUNC)
    std::uint64_t extensions = 0;        ///< ftruncate calls that reserve room in a segment
    std::uint64_t files_created = 0;     ///< segment files, and temporaries of atomic writes
    std::uint64_t files_removed = 0;
    std::uint64_t snapshots_written = 0;
    std::uint64_t epoch_writes = 0;

    file_log_stats& operator+=(const file_log_stats& o) noexcept {
        flushes += o.flushes;
        records_written += o.records_written;
        bytes_written += o.bytes_written;
        data_syncs += o.data_syncs;
        watermark_syncs += o.watermark_syncs;
        file_syncs += o.file_syncs;
        directory_syncs += o.directory_syncs;
        truncations += o.truncations;
        extensions += o.extensions;
        files_created += o.files_created;
        files_removed += o.files_removed;
        snapshots_written += o.snapshots_written;
        epoch_writes += o.epoch_writes;
        return *this;
    }
};

namespace detail {

class durable_io {
public:
    /// Steps act on files of directory `path`, open in `fs` as `directory_fd` (both kept
    /// alive by the caller for this object's lifetime).
    durable_io(file_system& fs, std::string path, int directory_fd)
        : fs_{&fs}, path_{std::move(path)}, directory_fd_{directory_fd} {}

    bool ok() const noexcept { return failure_.empty(); }
    /// The first failure, e.g. "fdatasync of /data/log.0000000000000001 failed: I/O error".
    const std::string& failure() const noexcept { return failure_; }
    const file_log_stats& counters() const noexcept { return counters_; }
    file_log_stats& counters() noexcept { return counters_; }
    const std::string& directory() const noexcept { return path_; }

    /// Test hook: the next step that changes the disk fails with `error_number`, as if its
    /// system call had returned it (the call is not made).
    void inject_failure(int error_number) noexcept { injected_ = error_number; }

    /// Records a failure that is not a system call's (e.g. memory exhausted inside a job).
    void fail(std::string reason) {
        if (ok()) failure_ = std::move(reason);
    }

    bool write(int fd, byte_view data, std::uint64_t offset, std::string_view name) {
        if (!ok()) return false;
        if (const int error = attempt([&] { return fs_->write_at(fd, data, offset); }))
            return failed(error, fmt::format("write of {} bytes at offset {} of", data.size(),
                                             offset), name);
        counters_.bytes_written += data.size();
        return true;
    }

    /// fdatasync; `site` says which of file_log's syncs this is (see file_system.hpp).
    bool sync_data(int fd, std::string_view name, sync_site site) {
        if (!ok()) return false;
        if (const int error = attempt([&] { return fs_->sync_data(fd, site); }))
            return failed(error, "fdatasync of", name);
        ++counters_.data_syncs;
        return true;
    }

    /// fdatasync of the synced watermark file (counted apart from the segments').
    bool sync_watermark(int fd, std::string_view name) {
        if (!ok()) return false;
        if (const int error =
                attempt([&] { return fs_->sync_data(fd, sync_site::synced_watermark); }))
            return failed(error, "fdatasync of", name);
        ++counters_.watermark_syncs;
        return true;
    }

    bool sync_file(int fd, std::string_view name, sync_site site) {
        if (!ok()) return false;
        if (const int error = attempt([&] { return fs_->sync_file(fd, site); }))
            return failed(error, "fsync of", name);
        ++counters_.file_syncs;
        return true;
    }

    bool sync_directory(sync_site site) {
        if (!ok()) return false;
        if (const int error = attempt([&] { return fs_->sync_directory(directory_fd_, site); }))
            return failed(error, "fsync of the directory", "");
        ++counters_.directory_syncs;
        return true;
    }

    /// Cuts `fd` to `size` bytes (a TRUNC).
    bool truncate(int fd, std::uint64_t size, std::string_view name) {
        return resize(fd, size, name, "ftruncate to", counters_.truncations);
    }

    /// Extends `fd` to `size` bytes of (sparse) zeros: room reserved ahead of the records.
    bool extend(int fd, std::uint64_t size, std::string_view name) {
        return resize(fd, size, name, "ftruncate (extending) to", counters_.extensions);
    }

    /// Overwrites [from, to) of `fd` with zeros (a torn tail's damaged bytes), keeping the
    /// file's length.
    bool zero_range(int fd, std::uint64_t from, std::uint64_t to, std::string_view name) {
        constexpr std::uint64_t block = std::uint64_t{64} << 10;
        const std::vector<std::byte> zeros(static_cast<std::size_t>(std::min(block, to - from)));
        for (std::uint64_t at = from; at < to; at += block) {
            const std::size_t length = static_cast<std::size_t>(std::min(block, to - at));
            if (!write(fd, byte_view{zeros.data(), length}, at, name)) return false;
        }
        return true;
    }

    /// Creates `name` (it must not exist) for reading and writing.
    bool create(std::string_view name, unique_fd& out) {
        return open_for_writing(name, open_mode::create_exclusive, out);
    }

    /// Removes `name`; a file that is already gone is fine (recovery and jobs are idempotent).
    bool remove(std::string_view name) {
        if (!ok()) return false;
        const std::string n{name};
        bool removed = false;
        if (const int error = attempt([&] {
                const int e = fs_->remove_file(directory_fd_, n);
                removed = e == 0;
                return removed || e == ENOENT ? 0 : e;
            }))
            return failed(error, "unlink of", name);
        if (removed) ++counters_.files_removed;
        return true;
    }

    /// Replaces `name` by a file holding `parts`, atomically at a crash: write `name.tmp`,
    /// fsync it (`file_site`), rename it over `name`, fsync the directory (`directory_site`)
    /// (docs/protocol.md §2, §11.2).
    bool write_file_atomically(std::string_view name, std::span<const byte_view> parts,
                               sync_site file_site, sync_site directory_site) {
        const std::string temporary = fmt::format("{}.tmp", name);
        unique_fd fd;
        if (!open_for_writing(temporary, open_mode::create_or_truncate, fd)) return false;
        std::uint64_t offset = 0;
        for (byte_view part : parts) {
            if (!write(fd.get(), part, offset, temporary)) return false;
            offset += part.size();
        }
        if (!sync_file(fd.get(), temporary, file_site)) return false;
        fd.reset();
        const std::string final_name{name};
        if (const int error =
                attempt([&] { return fs_->rename_file(directory_fd_, temporary, final_name); }))
            return failed(error, fmt::format("rename to {} of", final_name), temporary);
        return sync_directory(directory_site);
    }

    /// The names in the directory (reads only: never an injected failure).
    bool list(std::vector<std::string>& names) {
        if (!ok()) return false;
        if (const int error = fs_->list_directory(path_, names); error != 0)
            return failed(error, "listing of the directory", "");
        return true;
    }

    std::string path_of(std::string_view name) const { return fmt::format("{}/{}", path_, name); }

private:
    bool resize(int fd, std::uint64_t size, std::string_view name, std::string_view what,
                std::uint64_t& counter) {
        if (!ok()) return false;
        if (const int error = attempt([&] { return fs_->truncate_file(fd, size); }))
            return failed(error, fmt::format("{} {} bytes of", what, size), name);
        ++counter;
        return true;
    }

    /// Runs `call` (which returns 0 or an errno), unless a failure was injected.
    template <typename Call>
    int attempt(Call call) {
        if (injected_ != 0) return std::exchange(injected_, 0);
        return call();
    }

    bool open_for_writing(std::string_view name, open_mode mode, unique_fd& out) {
        if (!ok()) return false;
        const std::string n{name};
        int fd = -1;
        if (const int error = attempt([&] { return fs_->open_file(directory_fd_, n, mode, fd); }))
            return failed(error, "creation of", name);
        out = unique_fd{*fs_, fd};
        ++counters_.files_created;
        return true;
    }

    bool failed(int error, std::string_view step, std::string_view name) {
        failure_ = name.empty()
                       ? fmt::format("{} {} failed: {}", step, path_, errno_text(error))
                       : fmt::format("{} {} failed: {}", step, path_of(name), errno_text(error));
        return false;
    }

    file_system* fs_;
    std::string path_;
    int directory_fd_;
    int injected_ = 0;
    std::string failure_;
    file_log_stats counters_;
};

}  // namespace detail
}  // namespace zab
