// zab/storage/flush_job.hpp — the disk work of one file_log flush, runnable on any thread.
//
// `file_log::begin_flush()` (peer thread) moves everything pending into a `flush_job`;
// `job.run()` (any thread, blocks) does the writes and syncs; `file_log::finish_flush(job)`
// (peer thread) turns its outcome into completions for the peer. The job owns what it works
// on: the bytes to write, and shared references to the directory and segment files it
// touches, so it never reads or writes the log's members while it runs (docs/design.md rules 1–3).
//
// Order inside a job, chosen so that a crash at any instant leaves a state recovery accepts:
//   1. truncation: newer segments unlinked newest first (a directory fsync each, so the
//      survivors are always a prefix of the log), then ftruncate + fdatasync;
//   2. appends, segment by segment in order: a new segment is created and the directory
//      fsynced before data goes in; data is written in the steps the log cut when it
//      encoded the records (at most the group-commit window each, on record boundaries;
//      each record names its step's start as synced), each followed by fdatasync — one per
//      touched segment when the batch fits in one window;
//   3. snapshot install (instead of 1; then every append of the job belongs to the new
//      generation): the new generation's segments as in 2, then the snapshot file (temp +
//      fsync + rename + directory fsync) — the instant the install happens — then the old
//      generation's segments and surplus snapshots are unlinked (§11.5);
//   4. the synced watermark (format.hpp), once what it names is synced: raised to the
//      length of a segment file the job created or extended (room reserved ahead of the
//      records, a few MiB at a time: most jobs leave it alone), or to a new generation once
//      its snapshot landed; and lowered, before 1 cuts anything, to the length the cut file
//      will have, so that it never vouches for a length a truncation removed (issue 34,
//      defect 10);
//   5. the epoch file, atomically (temp + fsync + rename + directory fsync, §2, §11.2).
//
// A checkpoint (compaction of the log's own records) is not in a flush job: it is a
// `checkpoint_job` of its own (`file_log::begin_checkpoint`), which the driver runs beside the
// flush jobs, so that writing O(state) bytes never delays an append's or an epoch write's
// durability (issue 34, defect 4). The log hands one out only once every record up to the
// checkpoint is durable, and it unlinks only segments that no flush job touches any more, so
// the two kinds of job never write the same file: a crash in either leaves the whole log, or
// the checkpoint with every record after it (the compactable_log contract).
// The first failed step ends the job; nothing is retried (docs/design.md rule 6).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"
#include "zab/storage/data_directory.hpp"
#include "zab/storage/durable_io.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/storage/format.hpp"
#include "zab/storage/posix_file.hpp"

namespace zab {

class file_log;

namespace detail {

/// One segment file, shared by the log (which preads records from it) and the flush jobs
/// (which create and write it). `fd` is set by the job that creates the file (or by open);
/// the log reads through it only records a finished job wrote.
struct segment_file {
    std::uint64_t number = 0;
    std::string name;
    std::uint32_t window_bytes = 0;  ///< the group-commit window its header records
    unique_fd fd;
};

/// Bytes to write at the end of one segment.
struct pending_write {
    std::shared_ptr<segment_file> file;
    bool create = false;          ///< create the file first; `bytes` then begins with the header
    std::uint64_t offset = 0;     ///< where `bytes` go in the file
    std::vector<std::byte> bytes;
    std::vector<std::size_t> unit_ends;  ///< end (in `bytes`) of the header and of each record
    std::size_t records = 0;
    /// Where (in `bytes`, ascending, the first 0) each write step begins: the job writes and
    /// fdatasyncs one step at a time. Each record names the start of its step as its
    /// segment's synced offset (format.hpp), so the job must sync at every one of them.
    std::vector<std::size_t> step_starts{0};
    /// 0, or the length to extend the file to before writing: room reserved ahead of the
    /// records, made durable by the first step's fdatasync (file_log.hpp, `reserve_to`).
    std::uint64_t extend_to = 0;
};

/// Cut `file` to `size` bytes and remove every segment numbered above it.
struct pending_truncation {
    std::shared_ptr<segment_file> file;
    std::uint64_t size = 0;
};

/// The synced watermark file (format.hpp), open for in-place updates; shared by the log and
/// its flush jobs (one job at a time writes it).
struct watermark_file {
    unique_fd fd;
};

/// Writes `mark` into its slot of the synced file and fdatasyncs it.
inline bool write_mark(durable_io& io, const watermark_file& file,
                       const storage_format::synced_mark& mark) {
    const auto bytes = storage_format::encode(mark);
    return io.write(file.fd.get(), bytes, storage_format::synced_slot_offset(mark.sequence),
                    storage_format::synced_file_name) &&
           io.sync_watermark(file.fd.get(), storage_format::synced_file_name);
}

/// Write snapshot file `generation`, then retire what it replaces: the log generations
/// before it (an install), or the segments `retired` (a checkpoint, which continues
/// generation `continued_generation`).
struct pending_install {
    std::uint64_t generation = 0;
    zxid last_included;
    shared_bytes state;
    storage_format::identity owner;
    std::uint32_t snapshots_kept = 1;
    bool checkpoint = false;
    std::uint64_t continued_generation = 0;
    std::vector<std::uint64_t> retired;  ///< checkpoint: segment numbers, filled at begin_flush
};

/// Writes snapshot file `in.generation` (temp + fsync + rename + directory fsync), then
/// retires what it replaces: the older generations' segments (an install) or `in.retired`
/// (a checkpoint), and the snapshots beyond `in.snapshots_kept`, with one directory fsync.
/// The first failed step stops it (`io.ok()` is then false).
inline void write_snapshot(durable_io& io, const pending_install& in) {
    using namespace storage_format;
    const snapshot_header header{in.owner.cluster_id, in.owner.replica_id, in.generation,
                                 in.last_included, in.state.size(), in.checkpoint,
                                 in.checkpoint ? in.continued_generation : 0};
    const auto header_bytes = encode(header, in.state.view());
    const std::array<byte_view, 2> parts{byte_view{header_bytes}, in.state.view()};
    if (!io.write_file_atomically(snapshot_file_name(in.generation), parts,
                                  sync_site::snapshot_file, sync_site::snapshot_rename_directory))
        return;
    ++io.counters().snapshots_written;

    // The snapshot is durable: from here on recovery ignores the older generation (or,
    // after a checkpoint, the segments it covers), so removal order does not matter and
    // one directory fsync covers it.
    std::vector<std::string> names;
    if (!io.list(names)) return;
    const directory_contents contents = classify(names);
    if (in.checkpoint) {
        for (std::uint64_t number : in.retired)
            if (!io.remove(segment_file_name(number))) return;
    } else {
        for (std::uint64_t number : contents.segments)
            if (number < in.generation && !io.remove(segment_file_name(number))) return;
    }
    const std::size_t kept = std::min<std::size_t>(in.snapshots_kept, contents.snapshots.size());
    for (std::size_t i = 0; i + kept < contents.snapshots.size(); ++i)
        if (!io.remove(snapshot_file_name(contents.snapshots[i]))) return;
    io.sync_directory(sync_site::snapshot_retire_directory);
}

}  // namespace detail

/// What a finished flush means for the peer. Deliver `log_durable` as
/// `peer.on_log_durable(op)`, `epochs_durable` as `peer.on_epochs_durable(op)`, or, when
/// `failed()`, `error` as `peer.on_storage_failed(error)`: terminal (docs/design.md rule 6).
struct flush_result {
    std::optional<storage_op> log_durable;     ///< every log operation ≤ this is durable
    std::optional<storage_op> epochs_durable;  ///< the epoch write with this op is durable
    std::error_code error;                     ///< errc::storage_failed, or empty
    std::string reason;                        ///< which step on which file failed, and why

    bool failed() const noexcept { return static_cast<bool>(error); }
};

/// The disk work of one flush. Move-only; made by `file_log::begin_flush`, handed back to
/// `file_log::finish_flush` after `run()`.
class flush_job {
public:
    flush_job(flush_job&&) noexcept = default;
    flush_job& operator=(flush_job&&) noexcept = default;
    flush_job(const flush_job&) = delete;
    flush_job& operator=(const flush_job&) = delete;
    ~flush_job() = default;

    /// Does the writes, syncs, truncation, snapshot and epoch-file steps (see the file
    /// comment). May block for as long as the disk takes; may run on any thread, but only
    /// once and not concurrently with anything else on this job. Never throws: a failure is
    /// kept for `finish_flush`.
    void run() noexcept {
        ZAB_ASSERT(!ran_, "flush_job::run called twice");
        ran_ = true;
        if (log_failed_before_) return;
        try {
            if (truncation_) truncate();
            for (detail::pending_write& write : writes_) append(write);
            if (install_) install_snapshot();
            if (raised_ && io_.ok()) detail::write_mark(io_, *watermark_, *raised_);
            if (epochs_) write_epochs();
        } catch (const std::exception& e) {
            io_.fail(fmt::format("flush of {} failed: {}", io_.directory(), e.what()));
        }
    }

    /// Log records this job writes (for the metrics hook's flush_records).
    std::size_t records() const noexcept {
        std::size_t n = 0;
        for (const detail::pending_write& write : writes_) n += write.records;
        return n;
    }

    /// True when `run()` has no disk work to do (it may still complete a sync request).
    bool empty() const noexcept {
        return !install_ && !truncation_ && writes_.empty() && !epochs_;
    }

private:
    friend class file_log;

    flush_job(std::uint64_t id, std::shared_ptr<const detail::directory_handle> directory)
        : id_{id},
          directory_{std::move(directory)},
          io_{*directory_->fs, directory_->path, directory_->fd.get()} {}

    void install_snapshot() { detail::write_snapshot(io_, *install_); }

    void truncate() {
        using namespace storage_format;
        const detail::pending_truncation& cut = *truncation_;
        ZAB_ASSERT(cut.file->fd, "truncation of a segment no job created");
        if (lowered_ && !detail::write_mark(io_, *watermark_, *lowered_)) return;
        std::vector<std::string> names;
        if (!io_.list(names)) return;
        std::vector<std::uint64_t> segments = detail::classify(names).segments;
        std::sort(segments.rbegin(), segments.rend());
        for (std::uint64_t number : segments) {
            if (number <= cut.file->number) break;
            if (!io_.remove(segment_file_name(number)) ||
                !io_.sync_directory(sync_site::truncation_removal_directory))
                return;
        }
        if (!io_.truncate(cut.file->fd.get(), cut.size, cut.file->name)) return;
        io_.sync_data(cut.file->fd.get(), cut.file->name, sync_site::truncation_data);
    }

    void append(detail::pending_write& write) {
        detail::segment_file& file = *write.file;
        if (write.create) {
            if (!io_.create(file.name, file.fd) ||
                !io_.sync_directory(sync_site::segment_created_directory))
                return;
        }
        ZAB_ASSERT(file.fd, "append to a segment no job created");
        if (write.extend_to != 0 && !io_.extend(file.fd.get(), write.extend_to, file.name))
            return;
        // The steps the log cut (at most one window each, on record boundaries): each one
        // written, then synced, before the next — its records say so (format.hpp).
        for (std::size_t k = 0; k < write.step_starts.size(); ++k) {
            const std::size_t start = write.step_starts[k];
            const std::size_t end =
                k + 1 < write.step_starts.size() ? write.step_starts[k + 1] : write.bytes.size();
            const byte_view step{write.bytes.data() + start, end - start};
            if (!io_.write(file.fd.get(), step, write.offset + start, file.name)) return;
            if (!io_.sync_data(file.fd.get(), file.name, sync_site::segment_data)) return;
        }
        io_.counters().records_written += write.records;
    }

    void write_epochs() {
        const auto bytes = storage_format::encode(epochs_->second);
        const std::array<byte_view, 1> parts{byte_view{bytes}};
        if (io_.write_file_atomically(storage_format::epochs_file_name, parts,
                                      sync_site::epoch_file, sync_site::epoch_rename_directory))
            ++io_.counters().epoch_writes;
    }

    std::uint64_t id_ = 0;
    std::shared_ptr<const detail::directory_handle> directory_;
    detail::durable_io io_;
    bool ran_ = false;
    bool log_failed_before_ = false;
    std::optional<detail::pending_install> install_;
    std::optional<detail::pending_truncation> truncation_;
    std::vector<detail::pending_write> writes_;
    std::optional<std::pair<storage_op, epochs>> epochs_;
    std::optional<storage_op> sync_op_;
    std::shared_ptr<const detail::watermark_file> watermark_;
    std::optional<storage_format::synced_mark> lowered_;  ///< before the truncation
    std::optional<storage_format::synced_mark> raised_;   ///< after the appends / install
};

/// A checkpoint's disk work (see the file comment): the snapshot file of a compaction, then
/// the unlinks of the segments it covers. Move-only; made by `file_log::begin_checkpoint`,
/// handed back to `file_log::finish_checkpoint` after `run()`. It may run on any thread, and
/// while a flush job runs on another: they touch different files.
class checkpoint_job {
public:
    checkpoint_job(checkpoint_job&&) noexcept = default;
    checkpoint_job& operator=(checkpoint_job&&) noexcept = default;
    checkpoint_job(const checkpoint_job&) = delete;
    checkpoint_job& operator=(const checkpoint_job&) = delete;
    ~checkpoint_job() = default;

    /// Writes the checkpoint and unlinks what it covers. Blocks for as long as the disk
    /// takes (O(state)); only once; never throws (a failure is kept for `finish_checkpoint`).
    void run() noexcept {
        ZAB_ASSERT(!ran_, "checkpoint_job::run called twice");
        ran_ = true;
        try {
            detail::write_snapshot(io_, checkpoint_);
        } catch (const std::exception& e) {
            io_.fail(fmt::format("checkpoint of {} failed: {}", io_.directory(), e.what()));
        }
    }

    /// The zxid the checkpoint stands for.
    zxid last_included() const noexcept { return checkpoint_.last_included; }

private:
    friend class file_log;

    checkpoint_job(std::uint64_t id, std::shared_ptr<const detail::directory_handle> directory,
                   detail::pending_install checkpoint)
        : id_{id},
          directory_{std::move(directory)},
          io_{*directory_->fs, directory_->path, directory_->fd.get()},
          checkpoint_{std::move(checkpoint)} {}

    std::uint64_t id_ = 0;
    std::shared_ptr<const detail::directory_handle> directory_;
    detail::durable_io io_;
    detail::pending_install checkpoint_;
    bool ran_ = false;
};

}  // namespace zab
