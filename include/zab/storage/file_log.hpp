// zab/storage/file_log.hpp — zab::file_log: a crash-safe `zab::log_store` in a directory of
// segment files, with the epoch file and snapshot files beside it (issue #6).
//
// Threading and durability (docs/design.md rules 1–3). Every `log_store` member runs on the
// peer's thread and never blocks on the disk: `append`, `truncate_after`,
// `install_snapshot` and `write_epochs` take effect at once for `read`, `last_zxid`,
// `stored_epochs` and `snapshot` (what is not on disk yet is served from memory), and only
// queue disk work. The driver moves that work to disk in flushes:
//
//     flush_job job = log.begin_flush();        // peer thread: take everything pending
//     job.run();                                // any thread: write, fdatasync, rename…
//     flush_result r = log.finish_flush(std::move(job));   // peer thread: completions
//     if (r.failed()) peer.on_storage_failed(r.error);
//     else { if (r.log_durable) peer.on_log_durable(*r.log_durable);
//            if (r.epochs_durable) peer.on_epochs_durable(*r.epochs_durable); }
//
// One flush covers every append made before `begin_flush`: that is the group commit (many
// appends, one fdatasync per touched segment). At most one job is outstanding.
//
// Failure is terminal (docs/design.md rule 6, docs/protocol.md §2 ZOOKEEPER-3701/4882): once a write,
// sync or truncation fails, this flush and every later one report `errc::storage_failed`
// with the first failure's reason; no job does any I/O again.
//
// Recovery (`open`): the newest snapshot, then the segments of its generation, each record
// checked (length, zxid order, CRC32C). A torn tail of the newest segment is cut; anything
// else that fails a check makes `open` fail with `errc::corrupt` and a reason naming the
// file, the offset and the check (see segment_scan.hpp). `open` changes nothing on disk
// before every check passed, and its repairs (cut a torn tail, remove temporaries and the
// files of a replaced generation) are idempotent: a crash during recovery is harmless.
//
// In memory, beside the records' positions (one index entry per record), the zxids of the
// system transactions (zab::system_txn_indexed_log), noted by that scan and kept by every
// append, truncation, install and compaction: a start reads only those records for its
// membership, and a new leader reads only its log's tail by position (zab::tail_readable_log).
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/core/zxid.hpp"
#include "zab/storage/data_directory.hpp"
#include "zab/storage/durable_io.hpp"
#include "zab/storage/file_log_options.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/storage/flush_job.hpp"
#include "zab/storage/format.hpp"
#include "zab/storage/posix_file.hpp"
#include "zab/storage/segment_scan.hpp"

namespace zab {

class file_log {
public:
    /// Opens (or, if allowed, creates) the data directory of `options` and recovers it.
    ///
    /// Errors, with a sentence in `*diagnostic` (when given) that names the file, the offset
    /// and the check that failed, also logged at error level:
    ///   - `invalid_options`: `options.problem()` is not empty;
    ///   - `invalid_argument`: the directory belongs to another cluster or replica, is not
    ///     initialized while `create_if_missing` is false, or another file_log holds it;
    ///   - `corrupt`: a file fails its checks beyond a torn tail, or the epochs fail the
    ///     start-up checks of docs/protocol.md §2 (accepted ≥ current; the epoch of the last
    ///     logged zxid — the snapshot's when the log is empty — ≤ current);
    ///   - `unsupported_version`: a file of another format version;
    ///   - `storage_failed`: a system call failed (the errno text is in the diagnostic).
    ///
    /// With `options.on_corruption == corruption_policy::resync`, a `corrupt` directory is
    /// moved aside into `damaged-<n>/` instead and the log opens empty (see
    /// file_log_options.hpp); `resynced_after_corruption()` then reports it, the diagnostic
    /// holds what was wrong, and the driver must make the peer a non-voter until synced.
    static result<file_log> open(const file_log_options& options,
                                 std::string* diagnostic = nullptr) {
        std::string why;
        auto opened = recover(options, why);
        if (!opened && opened.error() == errc::corrupt &&
            options.on_corruption == corruption_policy::resync) {
            log(log_level::error, "file_log: {} is corrupt: {}; moving its files aside to "
                "resync from the leader as a non-voter", options.directory, why);
            std::string moved_why;
            auto moved = move_damaged_aside(options, moved_why);
            if (!moved) {
                why = fmt::format("{}; and moving the damaged files aside failed: {}", why,
                                  moved_why);
                opened = moved.error();
            } else {
                why = fmt::format("{}; moved to {}", why, moved.value());
                opened = recover(options, moved_why);
                if (opened) {
                    opened.value().resynced_ = true;
                    log(log_level::warn, "file_log: {} comes up empty (damaged files in {}), "
                        "epochs {}/{}: it must rejoin as a non-voter until synced",
                        options.directory, moved.value(), opened.value().epochs_.accepted,
                        opened.value().epochs_.current);
                } else {
                    why = fmt::format("{}; reopening failed: {}", why, moved_why);
                }
            }
        }
        if (!opened) {
            log(log_level::error, "file_log: cannot open {}: {}", options.directory, why);
        } else {
            // What it read, so that an upgrade's log says which formats it found (every one
            // is the only version this build reads: another is refused above, named).
            log(log_level::info, "file_log: opened {}: segment format {}, snapshot, epochs, "
                "identity and synced format {}; {} records after the snapshot, last {}",
                options.directory, storage_format::segment_format_version,
                storage_format::format_version, opened.value().index_.size(),
                opened.value().last_zxid());
        }
        if (diagnostic != nullptr && (!opened || opened.value().resynced_)) *diagnostic = why;
        return opened;
    }

    /// `open`, for a program that stops when its log cannot be opened: throws
    /// std::system_error whose code is open's error and whose `what()` is the whole
    /// diagnostic (the file, the offset, the check) — `open(options).value()` throws with
    /// the code alone.
    static file_log open_or_throw(const file_log_options& options) {
        std::string why;
        auto opened = open(options, &why);
        if (!opened)
            throw std::system_error(opened.error(),
                                    fmt::format("file_log: cannot open {}: {}", options.directory, why));
        return std::move(opened).value();
    }

    file_log(file_log&&) noexcept = default;
    file_log& operator=(file_log&&) noexcept = default;
    file_log(const file_log&) = delete;
    file_log& operator=(const file_log&) = delete;
    /// What was never flushed is lost, as in a crash. An outstanding job stays valid (it
    /// owns what it touches) but can no longer be finished.
    ~file_log() = default;

    // --- zab::log_store (peer thread; see concepts.hpp for the contract) -----------------

    /// Appends `records` (zxids increasing past `last_zxid()`). A payload larger than
    /// `max_record_bytes` cannot be stored: the log enters its failed state (the next flush
    /// reports it) and the rest of the batch is dropped.
    void append(storage_op op, std::span<const log_record> records) {
        note_log_op(op);
        append_records(records);
    }

    /// Removes every record after `last_kept` (a TRUNC, §5.3). As in sim_log, a `last_kept`
    /// below the snapshot removes every record after the snapshot and keeps the snapshot.
    void truncate_after(storage_op op, zxid last_kept) {
        note_log_op(op);
        if (snapshot_ && last_kept < snapshot_->last_included) last_kept = snapshot_->last_included;
        const auto first_removed = std::upper_bound(
            index_.begin(), index_.end(), last_kept,
            [](zxid z, const index_entry& e) { return z < e.id; });
        const auto removed = static_cast<std::size_t>(index_.end() - first_removed);
        if (removed == 0) return;
        std::uint64_t keep_number = segments_.front().file->number;
        std::uint64_t keep_size = storage_format::segment_header_size;
        if (first_removed != index_.begin()) {
            const index_entry& last = *(first_removed - 1);
            keep_number = last.segment;
            keep_size = last.end();
        }
        index_.erase(first_removed, index_.end());
        forget_system_txns_after(last_kept);
        const std::size_t dropped = std::min(removed, unwritten_.size());
        unwritten_.erase(unwritten_.end() - static_cast<std::ptrdiff_t>(dropped), unwritten_.end());
        in_flight_records_ = std::min(in_flight_records_, unwritten_.size());
        cut_segments(keep_number, keep_size);
    }

    /// Replaces the whole log by a snapshot at `last_included` followed by `following` (a
    /// SNAP sync and the history after it, §5.3, §11.1, §11.5). The snapshot opens a new log
    /// generation, numbered like a segment. The flush writes the new generation's segments
    /// (each header naming the generation) first, then the snapshot file atomically; recovery
    /// takes the newest snapshot file, ignores every segment of an older generation, and
    /// drops segments of a newer one (an install the crash interrupted). So a crash finds
    /// the old log, or the snapshot with all of `following`: never a mix, never a stale
    /// record after `last_included` (ZOOKEEPER-2832/2872).
    ///
    /// A state larger than `max_snapshot_bytes` could not be reopened: the log enters its
    /// failed state instead (the next flush reports why), changing nothing on disk.
    void install_snapshot(storage_op op, zxid last_included, const shared_bytes& state,
                          std::span<const log_record> following) {
        note_log_op(op);
        if (auto problem = snapshot_too_large("install_snapshot", last_included, state);
            !problem.empty()) {
            enter_failed(std::move(problem));
            return;
        }
        generation_ = next_segment_number_++;
        pending_checkpoint_.reset();  // not begun yet: the install replaces what it covers
        pending_install_ = detail::pending_install{generation_, last_included, state, owner_,
                                                   options_.snapshots_kept, false, 0, {}};
        pending_writes_.clear();
        pending_truncation_.reset();
        segments_.clear();
        index_.clear();
        system_txns_.clear();
        unwritten_.clear();
        in_flight_records_ = 0;
        snapshot_ = log_snapshot{last_included, state};
        append_records(following);
    }

    /// The same with no records after the snapshot.
    void install_snapshot(storage_op op, zxid last_included, const shared_bytes& state) {
        install_snapshot(op, last_included, state, {});
    }

    /// Compaction: `state` is the state machine's snapshot as of `last_included`, a record
    /// of this log above the snapshot in effect. It becomes the snapshot in effect at once
    /// (`read` below it answers `compacted`); a checkpoint job (`begin_checkpoint`, handed
    /// out once the record at `last_included` is durable) writes it as a checkpoint file
    /// (temp + fsync + rename + directory fsync) and then unlinks the segments whose records
    /// are all at or below `last_included` (the segment holding it always stays). Not a log
    /// operation: nothing the peer waits for, no flush job carries it, and a crash before
    /// the checkpoint lands leaves the full log. Records after `last_included` stay where
    /// they are. A newer compaction replaces one whose job has not begun. Returns false,
    /// changing nothing, when `last_included` is not such a record, while a snapshot install
    /// waits for its flush, once the log has failed, or when `state` is larger than
    /// `max_snapshot_bytes` (logged at error level: such a checkpoint could not be reopened).
    bool compact(zxid last_included, const shared_bytes& state) {
        if (failed() || pending_install_) return false;
        if (auto problem = snapshot_too_large("compact", last_included, state);
            !problem.empty()) {
            log(log_level::error, "file_log {}: {}", options_.directory, problem);
            return false;
        }
        if (snapshot_ && last_included <= snapshot_->last_included) return false;
        if (!holds(last_included)) return false;
        // A newer checkpoint replaces a pending one.
        pending_checkpoint_ = detail::pending_install{next_segment_number_++, last_included,
                                                      state, owner_, options_.snapshots_kept,
                                                      true, generation_, {}};
        snapshot_ = log_snapshot{last_included, state};
        // The records up to it stay until the checkpoint retires their segments, but they are
        // no longer the log's: nor are their system transactions.
        system_txns_.erase(system_txns_.begin(),
                           std::upper_bound(system_txns_.begin(), system_txns_.end(), last_included));
        return true;
    }

    /// The next flush reports `log_durable` ≥ op (every log operation issued so far).
    void make_durable(storage_op op) { requested_sync_ = std::max(requested_sync_.value_or(op), op); }

    /// Visible at once in `stored_epochs()`; the next flush writes the epoch file atomically
    /// and reports `epochs_durable(op)`. Several writes before a flush: the last one wins.
    void write_epochs(storage_op op, epochs e) {
        epochs_ = e;
        pending_epochs_ = std::pair{op, e};
    }

    /// The last record's zxid, else the snapshot's, else zxid{}.
    zxid last_zxid() const {
        if (!index_.empty()) return index_.back().id;
        return snapshot_ ? snapshot_->last_included : zxid{};
    }

    epochs stored_epochs() const { return epochs_; }

    std::optional<log_snapshot> snapshot() const { return snapshot_; }

    /// Up to `max` records after `after`, ascending: from memory when not yet written, else
    /// pread from the segments and checked again (CRC, zxid, length). `errc::compacted` when
    /// `after` lies below the snapshot; `errc::corrupt` when a record on disk fails its
    /// checks; `storage_failed` when the read itself fails.
    result<std::vector<log_record>> read(zxid after, std::size_t max) const {
        if (snapshot_ && after < snapshot_->last_included) return make_error_code(errc::compacted);
        const std::size_t begin = first_after(after);
        return read_entries(begin, begin + std::min(max, index_.size() - begin));
    }

    /// zab::tail_readable_log: the last `max` records after the snapshot, ascending, found by
    /// position in the index (no record before them is read). Errors as `read`'s.
    result<std::vector<log_record>> read_last(std::size_t max) const {
        const std::size_t floor = first_after(snapshot_ ? snapshot_->last_included : zxid{});
        return read_entries(index_.size() - std::min(max, index_.size() - floor), index_.size());
    }

    /// zab::system_txn_indexed_log: the zxids of the system transactions after the snapshot,
    /// ascending. Found by the scan at open, kept by every append, truncation, snapshot
    /// install and compaction.
    std::vector<zxid> system_txns() const { return system_txns_; }

    // --- flushing ------------------------------------------------------------------------

    /// Peer thread. Takes everything pending — appended bytes, a truncation, a snapshot
    /// install, the last epoch write and the highest sync request — into a job. At most one
    /// job may be outstanding (a second call before `finish_flush` is a bug: asserted).
    /// Call it whenever `has_pending_work()`; an empty job is cheap.
    flush_job begin_flush() {
        ZAB_ASSERT(!job_outstanding_, "begin_flush: the previous flush job is not finished");
        job_outstanding_ = true;
        flush_job job{++job_id_, directory_};
        if (failed()) {
            job.log_failed_before_ = true;
            return job;
        }
        job.install_ = std::exchange(pending_install_, std::nullopt);
        job.truncation_ = std::exchange(pending_truncation_, std::nullopt);
        ZAB_ASSERT(!job.install_ || !job.truncation_,
                   "an install leaves nothing on disk of its generation to truncate");
        // Lowered to the cut, and to no more than earlier jobs wrote of that segment (the cut
        // may keep bytes this job has yet to write): the length the file has once it is cut.
        if (job.truncation_)
            job.lowered_ = next_mark(
                generation_, job.truncation_->file->number,
                std::min(job.truncation_->size, segment_of(job.truncation_->file->number).handed));
        std::size_t records = 0;
        // What the watermark is raised to once the job's writes are synced: the length of a
        // segment file the job creates or extends (the last one), so that a file found shorter
        // than it has lost synced bytes.
        std::optional<std::pair<std::uint64_t, std::uint64_t>> raise;
        for (detail::pending_write& write : pending_writes_) {
            segment_state& segment = segment_of(write.file->number);
            segment.handed = write.offset + write.bytes.size();
            segment.synced_floor.reset();  // this job syncs the segment before its second step
            records += write.records;
            if (write.create) {
                // Not extended in the job that creates it: a torn header is told from
                // corruption by the file being no longer than its first step (segment_scan.hpp).
                segment.reserved = segment.handed;
                raise = {write.file->number, segment.reserved};
            } else if (segment.handed > segment.reserved) {
                segment.reserved = write.extend_to = reserve_to(segment.handed);
                raise = {write.file->number, segment.reserved};
            }
        }
        ZAB_ASSERT(records == unwritten_.size(), "every unwritten record is in a pending write");
        job.writes_ = std::exchange(pending_writes_, {});
        in_flight_records_ = records;
        job.epochs_ = std::exchange(pending_epochs_, std::nullopt);
        job.sync_op_ = std::exchange(requested_sync_, std::nullopt);
        job.watermark_ = watermark_;
        if (raise) {
            job.raised_ = next_mark(generation_, raise->first, raise->second);
        } else if (job.install_) {
            job.raised_ = next_mark(generation_, 0, 0);  // a snapshot alone
        }
        if (!job.empty() && injected_failure_ != 0)
            job.io_.inject_failure(std::exchange(injected_failure_, 0));
        return job;
    }

    /// Peer thread, after `job.run()`. Reports what became durable, or the terminal failure
    /// (the first one, again, for every flush after it).
    flush_result finish_flush(flush_job&& job) {
        ZAB_ASSERT(job_outstanding_ && job.id_ == job_id_,
                   "finish_flush: not the outstanding job of this log");
        ZAB_ASSERT(job.ran_, "finish_flush: the job has not run");
        job_outstanding_ = false;
        const flush_job finished = std::move(job);  // its files are released on return
        stats_ += finished.io_.counters();
        ++stats_.flushes;
        if (!failed() && !finished.io_.ok()) enter_failed(finished.io_.failure());
        flush_result result;
        if (failed()) {
            failure_reported_ = true;
            result.error = make_error_code(errc::storage_failed);
            result.reason = failure_;
            return result;
        }
        const std::size_t written = std::min(in_flight_records_, unwritten_.size());
        unwritten_.erase(unwritten_.begin(), unwritten_.begin() + static_cast<std::ptrdiff_t>(written));
        in_flight_records_ = 0;
        result.log_durable = finished.sync_op_;
        if (finished.epochs_) result.epochs_durable = finished.epochs_->first;
        return result;
    }

    /// The three steps above on the calling thread (which then blocks on the disk), and
    /// then a checkpoint job if one is due (its failure is reported by the next flush).
    flush_result flush() {
        flush_job job = begin_flush();
        job.run();
        flush_result result = finish_flush(std::move(job));
        if (has_checkpoint_work()) {
            checkpoint_job checkpoint = begin_checkpoint();
            checkpoint.run();
            finish_checkpoint(std::move(checkpoint));
        }
        return result;
    }

    // --- checkpoints (compaction's disk work, apart from the flush jobs) ------------------

    /// Whether `begin_checkpoint` has work: a compaction is pending, no checkpoint job is
    /// outstanding, and every record up to the compaction's zxid is durable (written by a
    /// finished flush job), so that the checkpoint never stands for records a crash could
    /// still take (compactable_log's contract).
    bool has_checkpoint_work() const noexcept {
        return pending_checkpoint_ && !checkpoint_outstanding_ && !failed() &&
               durable_through(pending_checkpoint_->last_included);
    }

    /// Peer thread. Takes the pending compaction into a job (asserted: `has_checkpoint_work()`).
    /// Run it (`job.run()`) on any thread — on another than the flush jobs', or it delays
    /// them as before — then hand it back to `finish_checkpoint`. At most one is outstanding;
    /// flush jobs may start and finish meanwhile.
    checkpoint_job begin_checkpoint() {
        ZAB_ASSERT(has_checkpoint_work(), "begin_checkpoint: no checkpoint is due");
        checkpoint_outstanding_ = true;
        detail::pending_install checkpoint = std::move(*pending_checkpoint_);
        pending_checkpoint_.reset();
        checkpoint.retired = covered_segments(checkpoint.last_included);
        return checkpoint_job{++checkpoint_job_id_, directory_, std::move(checkpoint)};
    }

    /// Peer thread, after `job.run()`. A failure puts the log in its terminal failed state
    /// (the next flush reports it, `has_pending_work()` says so); otherwise the segments the
    /// checkpoint retired are forgotten.
    void finish_checkpoint(checkpoint_job&& job) {
        ZAB_ASSERT(checkpoint_outstanding_ && job.id_ == checkpoint_job_id_,
                   "finish_checkpoint: not the outstanding checkpoint job of this log");
        ZAB_ASSERT(job.ran_, "finish_checkpoint: the job has not run");
        checkpoint_outstanding_ = false;
        const checkpoint_job finished = std::move(job);
        stats_ += finished.io_.counters();
        if (!finished.io_.ok()) {
            enter_failed(finished.io_.failure());
            return;
        }
        // After an install meanwhile these segments are gone from memory already.
        if (finished.checkpoint_.continued_generation == generation_)
            forget_segments(finished.checkpoint_.retired);
    }

    bool checkpoint_in_progress() const noexcept { return checkpoint_outstanding_; }

    /// Whether a flush would do or report anything.
    bool has_pending_work() const noexcept {
        return !pending_writes_.empty() || pending_truncation_ || pending_install_ ||
               pending_epochs_ || requested_sync_ || (failed() && !failure_reported_);
    }

    bool flush_in_progress() const noexcept { return job_outstanding_; }

    // --- state ---------------------------------------------------------------------------

    /// True when this `open` initialized the directory (it was missing, empty, or never
    /// initialized): this replica has no history, and the core should make it a non-voter
    /// until synced (docs/protocol.md §2, ZOOKEEPER-261).
    bool fresh() const noexcept { return fresh_; }

    /// True when this `open` found the directory corrupt and, as
    /// `corruption_policy::resync` asks, moved its files aside and came up empty. The driver
    /// must then set `options::non_voter_until_synced` on the peer (its current epoch is 0):
    /// the replica votes for nobody and rejoins as an observer until a leader synced it.
    bool resynced_after_corruption() const noexcept { return resynced_; }

    /// The cause of the last failed `read` (which file, which offset, the errno or the check
    /// that failed); empty when none failed.
    const std::string& last_read_failure() const noexcept { return read_failure_; }

    /// The terminal failed state, and its reason.
    bool failed() const noexcept { return !failure_.empty(); }
    const std::string& failure_reason() const noexcept { return failure_; }

    const file_log_stats& stats() const noexcept { return stats_; }
    const file_log_options& options() const noexcept { return options_; }

    /// Test hook: the first disk step (write, sync, truncation, creation, rename, unlink) of
    /// the next non-empty flush fails with `error_number` as if the system call had returned
    /// it (the call is not made). Exercises the terminal failed state without permission
    /// tricks, which do not stop root.
    void inject_failure_for_testing(int error_number) noexcept { injected_failure_ = error_number; }

private:
    /// A record's place: which segment, where its header starts, how long its payload is.
    struct index_entry {
        zxid id;
        std::uint64_t segment = 0;
        std::uint64_t offset = 0;
        std::uint32_t length = 0;
        std::uint64_t end() const noexcept {
            return offset + storage_format::record_header_size + length;
        }
    };

    struct segment_state {
        std::shared_ptr<detail::segment_file> file;
        zxid base;                   ///< the zxid before its first record
        std::uint64_t size = 0;      ///< bytes, pending ones included
        std::uint64_t handed = 0;    ///< bytes handed to flush jobs (on disk once they finish)
        bool accepts_appends = true; ///< false for a recovered segment cut with other options
        /// Recovered, and not synced by a flush since: only the bytes before this offset are
        /// known durable (the first step a flush writes to it syncs the rest with it).
        std::optional<std::uint64_t> synced_floor;
        /// The file's length as the last job left it (synced with its writes): the log
        /// reserves room ahead of the records in steps (`reserve_to`), and the watermark vouches
        /// for this length, which only a truncation of the log's own lowers.
        std::uint64_t reserved = 0;
    };

    /// Room reserved ahead of the records, in steps of 4 MiB (or of the segment size when it
    /// is smaller): a segment file grows in few length changes, each one a watermark update
    /// (one more fdatasync per step, not per flush), and its sparse zeros cost no disk space.
    static constexpr std::uint64_t reserve_step_bytes = std::uint64_t{4} << 20;
    std::uint64_t reserve_to(std::uint64_t end) const noexcept {
        const std::uint64_t step = std::min(reserve_step_bytes, options_.segment_bytes);
        const std::uint64_t rounded = (end + step - 1) / step * step;
        return rounded <= options_.segment_bytes ? rounded
                                                 : std::max(end, options_.segment_bytes);
    }

    /// Largest single pread of `read`, unless one record is larger.
    static constexpr std::uint64_t read_run_bytes = std::uint64_t{8} << 20;

    file_log(file_log_options options, std::shared_ptr<detail::directory_handle> directory,
             storage_format::identity owner)
        : options_{std::move(options)}, directory_{std::move(directory)}, owner_{owner} {}

    // --- recovery ------------------------------------------------------------------------

    static result<file_log> recover(const file_log_options& options, std::string& why);
    /// What recovery found to repair, done only once every check has passed.
    struct recovery_repairs {
        std::vector<std::string> torn_segments;  ///< the newest segment, if its header was torn
        std::vector<std::string> unfinished;     ///< segments of an install that never landed
        std::optional<detail::pending_truncation> torn_tail;  ///< cut the newest segment here
        std::uint64_t torn_tail_end = 0;  ///< the torn tail's damage ends here (zeros follow)
        std::vector<std::uint64_t> covered;  ///< segments wholly at or below a checkpoint
    };

    result<void> recover_segments(const detail::directory_contents& contents,
                                  std::uint64_t generation,
                                  const std::optional<storage_format::synced_mark>& mark,
                                  recovery_repairs& repairs, std::string& why);
    result<void> check_synced_tail(const std::optional<storage_format::synced_mark>& mark,
                                   const recovery_repairs& repairs, std::string& why) const;
    void open_watermark(const std::optional<storage_format::synced_mark>& found,
                        detail::durable_io& repairs);
    result<void> check_epochs(std::string& why) const;

    // --- in-memory bookkeeping -----------------------------------------------------------

    void note_log_op(storage_op op) {
        ZAB_ASSERT(!last_log_op_ || op >= *last_log_op_, "log operations must be numbered in order");
        last_log_op_ = op;
    }

    void enter_failed(std::string reason) {
        if (failed()) return;
        failure_ = std::move(reason);
        log(log_level::error, "file_log {}: storage failed, log stopped: {}", options_.directory,
            failure_);
    }

    segment_state& segment_of(std::uint64_t number) {
        auto it = std::lower_bound(segments_.begin(), segments_.end(), number,
                                   [](const segment_state& s, std::uint64_t n) {
                                       return s.file->number < n;
                                   });
        ZAB_ASSERT(it != segments_.end() && it->file->number == number, "unknown segment");
        return *it;
    }

    const segment_state& segment_of(std::uint64_t number) const {
        auto it = std::lower_bound(segments_.begin(), segments_.end(), number,
                                   [](const segment_state& s, std::uint64_t n) {
                                       return s.file->number < n;
                                   });
        ZAB_ASSERT(it != segments_.end() && it->file->number == number, "unknown segment");
        return *it;
    }

    /// Whether the index has a record `z`.
    bool holds(zxid z) const {
        const auto at = std::lower_bound(index_.begin(), index_.end(), z,
                                         [](const index_entry& e, zxid x) { return e.id < x; });
        return at != index_.end() && at->id == z;
    }

    /// The segments whose records all lie at or below `z`, a record of the log: those
    /// before the segment holding `z` that are followed by a segment starting at or below
    /// it. The segment holding `z`, and every later one (a flush job may be writing them),
    /// stay.
    std::vector<std::uint64_t> covered_segments(zxid z) const {
        const auto at = std::lower_bound(index_.begin(), index_.end(), z,
                                         [](const index_entry& e, zxid x) { return e.id < x; });
        ZAB_ASSERT(at != index_.end() && at->id == z, "covered_segments: not a record");
        std::vector<std::uint64_t> out;
        for (std::size_t i = 0; i + 1 < segments_.size(); ++i) {
            if (segments_[i + 1].file->number > at->segment || segments_[i + 1].base > z) break;
            out.push_back(segments_[i].file->number);
        }
        return out;
    }

    /// Whether record `z` of the log was written by a finished flush job (synced).
    bool durable_through(zxid z) const {
        const auto at = std::lower_bound(index_.begin(), index_.end(), z,
                                         [](const index_entry& e, zxid x) { return e.id < x; });
        if (at == index_.end() || at->id != z) return false;
        return static_cast<std::size_t>(at - index_.begin()) < index_.size() - unwritten_.size();
    }

    /// The next synced mark (format.hpp), or nothing when it names the same place as the
    /// last one.
    std::optional<storage_format::synced_mark> next_mark(std::uint64_t generation,
                                                         std::uint64_t segment,
                                                         std::uint64_t offset) {
        storage_format::synced_mark mark{mark_.sequence + 1, generation, segment, offset,
                                         options_.group_commit_window_bytes};
        if (mark.same_place(mark_)) return std::nullopt;
        mark_ = mark;
        return mark;
    }

    /// The index position of the first record after `z`.
    std::size_t first_after(zxid z) const {
        return static_cast<std::size_t>(
            std::upper_bound(index_.begin(), index_.end(), z,
                             [](zxid id, const index_entry& e) { return id < e.id; }) -
            index_.begin());
    }

    /// The records at index positions [begin, end): from memory when not yet written, else
    /// pread from the segments and checked again.
    result<std::vector<log_record>> read_entries(std::size_t begin, std::size_t end) const {
        const std::size_t first_unwritten = index_.size() - unwritten_.size();
        std::vector<log_record> out;
        out.reserve(end - begin);
        std::size_t i = begin;
        while (i < std::min(end, first_unwritten)) {
            // One pread for a run of records of one segment (they are contiguous on disk).
            std::size_t j = i + 1;
            while (j < std::min(end, first_unwritten) && index_[j].segment == index_[i].segment &&
                   index_[j].end() - index_[i].offset <= read_run_bytes)
                ++j;
            if (auto run = read_from_disk(i, j, out); !run) return run.error();
            i = j;
        }
        for (; i < end; ++i) out.push_back(unwritten_[i - first_unwritten]);
        return out;
    }

    /// A truncation after `last_kept`: the system transactions it removed are no longer.
    void forget_system_txns_after(zxid last_kept) {
        system_txns_.erase(std::upper_bound(system_txns_.begin(), system_txns_.end(), last_kept),
                           system_txns_.end());
    }

    /// Drops segments `numbers` (unlinked by a checkpoint's job, or found covered by the
    /// checkpoint at open) and their records, which all lie at or below the snapshot.
    void forget_segments(const std::vector<std::uint64_t>& numbers) {
        const auto gone = [&](std::uint64_t n) {
            return std::find(numbers.begin(), numbers.end(), n) != numbers.end();
        };
        std::erase_if(index_, [&](const index_entry& e) { return gone(e.segment); });
        std::erase_if(segments_, [&](const segment_state& seg) { return gone(seg.file->number); });
    }

    /// Appends `records` to memory and to the pending writes. A payload larger than
    /// `max_record_bytes` enters the failed state and drops the rest.
    void append_records(std::span<const log_record> records) {
        for (const log_record& record : records) {
            ZAB_ASSERT(record.id > last_zxid(), "append: zxids must increase past last_zxid()");
            if (record.txn.size() > options_.max_record_bytes) {
                enter_failed(fmt::format("append of {}: {} bytes exceed max_record_bytes ({})",
                                         record.id, record.txn.size(),
                                         options_.max_record_bytes));
                return;
            }
            append_one(record);
        }
    }

    /// Starts a new segment after the last record (or the snapshot).
    void roll() {
        using namespace storage_format;
        auto file = std::make_shared<detail::segment_file>();
        file->number = next_segment_number_++;
        file->name = segment_file_name(file->number);
        file->window_bytes = options_.group_commit_window_bytes;
        const segment_header header{owner_.cluster_id,
                                    owner_.replica_id,
                                    file->number,
                                    last_zxid(),
                                    options_.max_record_bytes,
                                    options_.group_commit_window_bytes,
                                    generation_};
        const auto bytes = encode(header);
        pending_writes_.push_back(
            {file, true, 0, {bytes.begin(), bytes.end()}, {segment_header_size}, 0, {0}});
        segments_.push_back({file, last_zxid(), segment_header_size, 0, true, std::nullopt, 0});
    }

    void append_one(const log_record& record) {
        const std::uint64_t size = storage_format::record_header_size + record.txn.size();
        if (segments_.empty() || !segments_.back().accepts_appends ||
            segments_.back().size + size > options_.segment_bytes)
            roll();
        segment_state& segment = segments_.back();
        if (pending_writes_.empty() || pending_writes_.back().file != segment.file)
            pending_writes_.push_back({segment.file, false, segment.size, {}, {}, 0, {0}});
        detail::pending_write& write = pending_writes_.back();
        // A new write step (synced before the next) when this record would take the current
        // one past the window. The step's start is synced before the record is written: the
        // bytes before this write were synced by earlier jobs (or by recovery), and the job
        // syncs each step before it writes the next.
        if (write.bytes.size() > write.step_starts.back() &&
            write.bytes.size() + size - write.step_starts.back() > segment.file->window_bytes)
            write.step_starts.push_back(write.bytes.size());
        std::uint64_t synced = write.offset + write.step_starts.back();
        if (write.step_starts.size() == 1 && segment.synced_floor)
            synced = std::min(synced, *segment.synced_floor);
        storage_format::encode_record(write.bytes, record.id, record.txn.view(),
                                      static_cast<std::uint32_t>(segment.size - synced));
        write.unit_ends.push_back(write.bytes.size());
        ++write.records;
        index_.push_back({record.id, segment.file->number, segment.size,
                          static_cast<std::uint32_t>(record.txn.size())});
        if (is_system_txn(record.txn.view())) system_txns_.push_back(record.id);
        unwritten_.push_back(record);
        segment.size += size;
    }

    /// After a truncation: segment `keep_number` ends at `keep_size`, later segments go.
    /// Bytes not yet handed to a job are simply dropped; if the cut reaches bytes a job has
    /// (or had), the next flush truncates the files.
    void cut_segments(std::uint64_t keep_number, std::uint64_t keep_size) {
        bool on_disk = false;
        while (segments_.back().file->number > keep_number) {
            on_disk = on_disk || segments_.back().handed > 0;
            segments_.pop_back();
        }
        segment_state& keep = segments_.back();
        ZAB_ASSERT(keep.file->number == keep_number, "truncation point in a missing segment");
        if (keep_size < keep.handed) {
            on_disk = true;
            keep.handed = keep_size;
        }
        keep.size = keep_size;
        while (!pending_writes_.empty() && pending_writes_.back().file->number > keep_number)
            pending_writes_.pop_back();
        if (!pending_writes_.empty() && pending_writes_.back().file == keep.file) {
            detail::pending_write& write = pending_writes_.back();
            if (keep_size <= write.offset) {
                pending_writes_.pop_back();
            } else {
                const auto kept = static_cast<std::size_t>(keep_size - write.offset);
                write.bytes.resize(kept);
                while (!write.unit_ends.empty() && write.unit_ends.back() > kept)
                    write.unit_ends.pop_back();
                while (write.step_starts.size() > 1 && write.step_starts.back() >= kept)
                    write.step_starts.pop_back();
                write.records = write.unit_ends.size() - (write.create ? 1 : 0);
            }
        }
        if (on_disk && (!pending_truncation_ || keep_number < pending_truncation_->file->number ||
                        (keep_number == pending_truncation_->file->number &&
                         keep_size < pending_truncation_->size)))
            pending_truncation_ = detail::pending_truncation{keep.file, keep_size};
        if (pending_truncation_ && pending_truncation_->file == keep.file)
            keep.reserved = std::min(keep.reserved, pending_truncation_->size);
    }

    /// Reads index entries [first, last) (one segment, contiguous) from disk into `out`.
    result<void> read_from_disk(std::size_t first, std::size_t last,
                                std::vector<log_record>& out) const {
        using namespace storage_format;
        const segment_state& segment = segment_of(index_[first].segment);
        const std::uint64_t start = index_[first].offset;
        std::vector<std::byte> bytes(static_cast<std::size_t>(index_[last - 1].end() - start));
        std::size_t got = 0;
        const int error = directory_->fs->read_at(segment.file->fd.get(), bytes, start, got);
        if (error != 0 || got != bytes.size()) {
            read_failure_ = fmt::format(
                "read of {} bytes of {} at offset {} failed: {}", bytes.size(),
                directory_->path + "/" + segment.file->name, start,
                error != 0 ? detail::errno_text(error)
                           : fmt::format("short read ({} bytes): the file was cut", got));
            log(log_level::error, "file_log: {}", read_failure_);
            return make_error_code(errc::storage_failed);
        }
        const shared_bytes run{std::move(bytes)};
        for (std::size_t i = first; i < last; ++i) {
            const index_entry& entry = index_[i];
            const byte_view whole = run.view().subspan(
                static_cast<std::size_t>(entry.offset - start),
                record_header_size + entry.length);
            const record_header h = decode_record_header(whole.data());
            if (h.id != entry.id || h.length != entry.length || !record_checksum_matches(whole)) {
                read_failure_ = fmt::format(
                    "{} at offset {}: record {} fails its checks (found zxid {}, length {}, "
                    "checksum {})",
                    directory_->path + "/" + segment.file->name, entry.offset, entry.id, h.id,
                    h.length, record_checksum_matches(whole) ? "matches" : "mismatch");
                log(log_level::error, "file_log: {}", read_failure_);
                return make_error_code(errc::corrupt);
            }
            out.push_back({entry.id, run.slice(whole.subspan(record_header_size))});
        }
        return success();
    }

    /// Why a snapshot of `state` must not be written, or an empty string.
    std::string snapshot_too_large(std::string_view what, zxid last_included,
                                   const shared_bytes& state) const {
        if (state.size() <= options_.max_snapshot_bytes) return {};
        return fmt::format("{} at {}: the state is {} bytes, more than max_snapshot_bytes ({}): "
                           "open could not load it again (raise max_snapshot_bytes)",
                           what, last_included, state.size(), options_.max_snapshot_bytes);
    }

    static result<std::string> move_damaged_aside(const file_log_options& options,
                                                  std::string& why);

    file_log_options options_;
    std::shared_ptr<detail::directory_handle> directory_;
    storage_format::identity owner_;
    std::shared_ptr<detail::watermark_file> watermark_;  ///< the synced file, open
    storage_format::synced_mark mark_;  ///< the last mark handed to a job (or written at open)
    bool fresh_ = false;
    bool resynced_ = false;
    mutable std::string read_failure_;

    // What `read` and `last_zxid` see: the snapshot, the live segments, and one index entry
    // per record after the snapshot. The last `unwritten_.size()` records have not been
    // written by a finished job yet and are served from `unwritten_`; the first
    // `in_flight_records_` of those belong to the outstanding job.
    std::optional<log_snapshot> snapshot_;
    std::vector<segment_state> segments_;
    std::vector<index_entry> index_;
    /// The zxids of the records after the snapshot that are system transactions, ascending
    /// (zab::system_txn_indexed_log): a start reads only these for its membership (§9).
    std::vector<zxid> system_txns_;
    std::deque<log_record> unwritten_;
    std::size_t in_flight_records_ = 0;
    std::uint64_t next_segment_number_ = 1;
    std::uint64_t generation_ = 0;  ///< of the snapshot in effect (0: none); new segments carry it
    epochs epochs_;

    // What the next flush takes.
    std::vector<detail::pending_write> pending_writes_;
    std::optional<detail::pending_truncation> pending_truncation_;
    std::optional<detail::pending_install> pending_install_;  ///< a snapshot install only
    std::optional<detail::pending_install> pending_checkpoint_;
    std::optional<std::pair<storage_op, epochs>> pending_epochs_;
    std::optional<storage_op> requested_sync_;
    std::optional<storage_op> last_log_op_;

    bool job_outstanding_ = false;
    std::uint64_t job_id_ = 0;
    bool checkpoint_outstanding_ = false;
    std::uint64_t checkpoint_job_id_ = 0;
    std::string failure_;  // not empty: the terminal failed state
    bool failure_reported_ = false;
    int injected_failure_ = 0;
    file_log_stats stats_;
};

static_assert(compactable_log<file_log>);
static_assert(tail_readable_log<file_log>);
static_assert(system_txn_indexed_log<file_log>);

// --- recovery (out of line: the class above is the API) -----------------------------------

/// corruption_policy::resync: moves every zab file of the directory into a new
/// `damaged-<n>/` and initializes the directory again with epochs {accepted, 0} — the
/// acceptedEpoch kept when the epoch file is intact — and the identity. Returns the path of
/// the subdirectory. Crash-safe by its order: the identity goes first, so until the new one
/// lands every state in between is a directory recovery refuses (log files or epochs
/// without an identity) and resyncs again; the old epoch file is copied, then replaced
/// atomically, so the acceptedEpoch is never lost on the way.
inline result<std::string> file_log::move_damaged_aside(const file_log_options& options,
                                                        std::string& why) {
    using namespace storage_format;
    auto directory = detail::open_directory(options, why);
    if (!directory) return directory.error();
    file_system& fs = *options.filesystem;
    const int directory_fd = directory.value()->fd.get();
    std::vector<std::string> names;
    if (const int error = fs.list_directory(options.directory, names); error != 0) {
        why = fmt::format("cannot list {}: {}", options.directory, detail::errno_text(error));
        return make_error_code(errc::storage_failed);
    }
    const detail::directory_contents contents = detail::classify(names);
    std::optional<epochs> old_epochs;
    if (std::string ignored; contents.has_epochs)
        if (auto found = detail::read_epochs(*directory.value(), ignored)) old_epochs = found.value();
    std::string aside;
    for (std::uint64_t n = 1;; ++n) {
        aside = fmt::format("{}{}", damaged_prefix, n);
        if (std::find(names.begin(), names.end(), aside) == names.end()) break;
    }
    const std::string aside_path = fmt::format("{}/{}", options.directory, aside);
    int aside_descriptor = -1;
    int error = fs.make_directory(aside_path);
    if (error == 0) error = fs.open_directory(aside_path, aside_descriptor);
    if (error != 0) {
        why = fmt::format("cannot make {}: {}", aside_path, detail::errno_text(error));
        return make_error_code(errc::storage_failed);
    }
    const detail::unique_fd aside_fd{fs, aside_descriptor};
    detail::durable_io io{fs, options.directory, directory_fd};
    detail::durable_io aside_io{fs, aside_path, aside_fd.get()};
    const auto move = [&](const std::string& name) {
        if (const int failed = fs.rename_file(directory_fd, name, aside + "/" + name);
            failed != 0)
            io.fail(fmt::format("rename of {}/{} into {} failed: {}", options.directory, name,
                                aside_path, detail::errno_text(failed)));
    };
    const auto both_synced = [&] {
        aside_io.sync_directory(sync_site::recovery_removal_directory);
        io.sync_directory(sync_site::recovery_removal_directory);
    };
    if (contents.has_identity) {
        move(std::string{identity_file_name});
        both_synced();
    }
    for (const std::string& name : names) {
        const std::string_view n = name;
        const bool temporary = n.size() > temporary_suffix.size() &&
                               n.substr(n.size() - temporary_suffix.size()) == temporary_suffix;
        if (n == epochs_file_name || n == identity_file_name ||
            !detail::is_zab_file_name(
                temporary ? n.substr(0, n.size() - temporary_suffix.size()) : n))
            continue;
        if (io.ok()) move(name);
    }
    if (contents.has_epochs && io.ok()) {
        std::string unread;
        auto bytes = detail::read_small_file(*directory.value(), std::string{epochs_file_name},
                                             4096, unread);
        if (bytes) {
            const std::array<byte_view, 1> parts{byte_view{bytes.value()}};
            aside_io.write_file_atomically(epochs_file_name, parts, sync_site::epoch_file,
                                           sync_site::epoch_rename_directory);
        }
    }
    if (io.ok() && aside_io.ok()) both_synced();
    const auto epoch_bytes =
        encode(epochs{old_epochs ? old_epochs->accepted : std::uint32_t{0}, 0});
    const auto identity_bytes = encode(identity{options.cluster_id, options.replica_id});
    const std::array<byte_view, 1> epoch_parts{byte_view{epoch_bytes}};
    const std::array<byte_view, 1> identity_parts{byte_view{identity_bytes}};
    if (aside_io.ok()) {
        io.write_file_atomically(epochs_file_name, epoch_parts, sync_site::initial_epoch_file,
                                 sync_site::initial_epoch_directory);
        io.write_file_atomically(identity_file_name, identity_parts, sync_site::identity_file,
                                 sync_site::identity_directory);
    }
    if (!io.ok() || !aside_io.ok()) {
        why = !io.ok() ? io.failure() : aside_io.failure();
        return make_error_code(errc::storage_failed);
    }
    return aside_path;
}

inline result<file_log> file_log::recover(const file_log_options& options, std::string& why) {
    using namespace storage_format;
    if (auto problem = options.problem(); !problem.empty()) {
        why = fmt::format("invalid options: {}", problem);
        return make_error_code(errc::invalid_options);
    }
    auto directory = detail::open_directory(options, why);
    if (!directory) return directory.error();
    std::vector<std::string> names;
    if (const int error = options.filesystem->list_directory(options.directory, names);
        error != 0) {
        why = fmt::format("cannot list {}: {}", options.directory, detail::errno_text(error));
        return make_error_code(errc::storage_failed);
    }
    const detail::directory_contents contents = detail::classify(names);
    const identity owner{options.cluster_id, options.replica_id};
    file_log recovered{options, directory.value(), owner};
    detail::durable_io repairs{*options.filesystem, options.directory,
                               directory.value()->fd.get()};

    if (contents.has_identity) {
        auto found = detail::read_identity(*directory.value(), why);
        if (!found) return found.error();
        if (!(found.value() == owner)) {
            why = fmt::format("data directory {} belongs to cluster {} replica {}, not to cluster "
                              "{} replica {} as configured",
                              options.directory, found.value().cluster_id,
                              found.value().replica_id, owner.cluster_id, owner.replica_id);
            return make_error_code(errc::invalid_argument);
        }
    } else {
        // Not initialized. A crash during initialization may have left `epochs` (written
        // first, still zero); log files without an identity are someone else's data.
        if (!contents.segments.empty() || !contents.snapshots.empty()) {
            why = fmt::format("data directory {} holds log segments or snapshots but no {} "
                              "file: refusing to adopt them",
                              options.directory, identity_file_name);
            return make_error_code(errc::corrupt);
        }
        if (contents.has_epochs) {
            auto found = detail::read_epochs(*directory.value(), why);
            if (!found) return found.error();
            if (!(found.value() == epochs{})) {
                why = fmt::format("data directory {} holds epochs {}/{} but no {} file",
                                  options.directory, found.value().accepted,
                                  found.value().current, identity_file_name);
                return make_error_code(errc::corrupt);
            }
        }
        if (!options.create_if_missing) {
            why = fmt::format("data directory {} is not initialized (no {} file) and "
                              "create_if_missing is false",
                              options.directory, identity_file_name);
            return make_error_code(errc::invalid_argument);
        }
        recovered.fresh_ = true;
    }

    // The snapshot in effect names the live log generation (its own, or the one a
    // checkpoint continues); older segments are the past of that generation.
    std::uint64_t generation = 0;
    if (!contents.snapshots.empty()) {
        auto snapshot = detail::read_snapshot(*directory.value(), contents.snapshots.back(),
                                              owner, options.max_snapshot_bytes, why);
        if (!snapshot) return snapshot.error();
        generation = snapshot.value().live_generation;
        recovered.snapshot_ = std::move(snapshot).value().snapshot;
        recovered.next_segment_number_ = contents.snapshots.back() + 1;
    }
    // How far the log had been synced (absent in a directory of an earlier release).
    std::optional<synced_mark> mark;
    if (contents.has_synced && !recovered.fresh_) {  // a fresh directory's is a leftover
        auto read = detail::read_synced(*directory.value(), why);
        if (!read) return read.error();
        mark = read.value();
    }
    recovery_repairs found;
    if (auto scanned = recovered.recover_segments(contents, generation, mark, found, why);
        !scanned)
        return scanned.error();
    if (auto kept = recovered.check_synced_tail(mark, found, why); !kept) return kept.error();

    if (!recovered.fresh_) {
        if (!contents.has_epochs) {
            why = fmt::format("{}/{} is missing", options.directory, epochs_file_name);
            return make_error_code(errc::corrupt);
        }
        auto found = detail::read_epochs(*directory.value(), why);
        if (!found) return found.error();
        recovered.epochs_ = found.value();
        if (auto checked = recovered.check_epochs(why); !checked) return checked.error();
    }

    // Every check passed: now, and only now, change the directory.
    if (recovered.fresh_) {
        const auto epoch_bytes = encode(epochs{});
        const auto identity_bytes = encode(owner);
        const std::array<byte_view, 1> epoch_parts{byte_view{epoch_bytes}};
        const std::array<byte_view, 1> identity_parts{byte_view{identity_bytes}};
        repairs.write_file_atomically(epochs_file_name, epoch_parts,
                                      sync_site::initial_epoch_file,
                                      sync_site::initial_epoch_directory);
        repairs.write_file_atomically(identity_file_name, identity_parts,
                                      sync_site::identity_file, sync_site::identity_directory);
    }
    bool removed = false;
    for (const std::string& name : found.torn_segments) {
        log(log_level::warn, "file_log: removing {}: its header was torn", repairs.path_of(name));
        removed = repairs.remove(name) || removed;
    }
    for (const std::string& name : found.unfinished) {
        log(log_level::warn, "file_log: removing {}: written for a snapshot install that did "
            "not complete", repairs.path_of(name));
        removed = repairs.remove(name) || removed;
    }
    for (std::uint64_t number : found.covered)  // a checkpoint's unlinks a crash cut short
        removed = repairs.remove(segment_file_name(number)) || removed;
    recovered.forget_segments(found.covered);
    // A torn tail is cut by zeroing its damaged bytes, not by shortening the file: the file
    // keeps the length the watermark vouches for, so a crash after the cut cannot make it
    // look like a lost synced tail at the next open.
    if (found.torn_tail &&
        repairs.zero_range(found.torn_tail->file->fd.get(), found.torn_tail->size,
                           found.torn_tail_end, found.torn_tail->file->name))
        repairs.sync_data(found.torn_tail->file->fd.get(), found.torn_tail->file->name,
                          sync_site::torn_tail_data);
    for (const std::string& name : contents.temporaries) removed = repairs.remove(name) || removed;
    for (std::uint64_t number : contents.segments)
        if (number < generation) removed = repairs.remove(segment_file_name(number)) || removed;
    for (std::size_t i = 0; i + options.snapshots_kept < contents.snapshots.size(); ++i)
        removed = repairs.remove(snapshot_file_name(contents.snapshots[i])) || removed;
    if (removed) repairs.sync_directory(sync_site::recovery_removal_directory);
    // What recovery found is what this replica now vouches for (its vote, ACKEPOCH, a
    // NEWLEADER ACK after a DIFF with nothing new to sync: docs/protocol.md §10.11). After a
    // kill -9 it may be only in the page cache — records written but not yet fdatasynced, an
    // epoch or snapshot file renamed but not yet directory-synced — so make it durable now:
    // the newest segment (only it can hold unsynced bytes: a later one is created only once
    // it is synced whole) and the directory; then the watermark says so (issue 34, defect 3).
    if (!recovered.segments_.empty() && !found.torn_tail) {
        const segment_state& newest = recovered.segments_.back();
        repairs.sync_data(newest.file->fd.get(), newest.file->name, sync_site::torn_tail_data);
    }
    repairs.sync_directory(sync_site::recovery_directory);
    for (segment_state& segment : recovered.segments_) segment.synced_floor.reset();
    recovered.open_watermark(mark, repairs);
    // A resync that began (a `damaged-<n>/` is here) and that no leader has completed yet
    // (nothing logged, currentEpoch 0) — also after a crash at its very end.
    recovered.resynced_ =
        !recovered.fresh_ && recovered.index_.empty() && !recovered.snapshot_ &&
        recovered.epochs_.current == 0 &&
        std::any_of(names.begin(), names.end(), [](const std::string& name) {
            return name.size() > damaged_prefix.size() &&
                   std::string_view{name}.substr(0, damaged_prefix.size()) == damaged_prefix;
        });
    recovered.stats_ += repairs.counters();
    if (!repairs.ok()) {
        why = fmt::format("recovery of {} failed: {}", options.directory, repairs.failure());
        return make_error_code(errc::storage_failed);
    }
    return recovered;
}

/// Sorts the segments after the snapshot by the generation their header names, scans the
/// current generation's in order, checks that each starts where the previous one (or the
/// snapshot) ended, notes a torn tail to cut, and builds the index.
inline result<void> file_log::recover_segments(
    const detail::directory_contents& contents, std::uint64_t generation,
    const std::optional<storage_format::synced_mark>& mark, recovery_repairs& repairs,
    std::string& why) {
    using namespace storage_format;
    const auto failure = [](std::error_code error) {
        return error.category() == std::system_category() ? make_error_code(errc::storage_failed)
                                                          : error;
    };
    generation_ = generation;
    std::vector<std::uint64_t> candidates;
    for (std::uint64_t number : contents.segments) {
        next_segment_number_ = std::max(next_segment_number_, number + 1);
        if (number > generation) candidates.push_back(number);
    }
    next_segment_number_ = std::max(next_segment_number_, generation + 1);

    // Pass 1: headers. A newer generation than the snapshot's is an install whose snapshot
    // never landed (§11.5): its segments were written first and are dropped whole.
    std::vector<std::pair<std::shared_ptr<detail::segment_file>, detail::segment_head>> live;
    // A torn header belongs to a segment's first write step, at most the window of the
    // process that wrote it: the one the watermark records (every process writes it at open,
    // before it creates a segment), not today's option, which may have been lowered since
    // (issue 34, defect 7). Without a watermark (an earlier release's directory): the largest
    // window of the configured one and every readable header before it.
    std::uint32_t torn_window =
        mark ? mark->window_bytes : options_.group_commit_window_bytes;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        auto file = std::make_shared<detail::segment_file>();
        file->number = candidates[i];
        file->name = segment_file_name(candidates[i]);
        const std::string path = fmt::format("{}/{}", options_.directory, file->name);
        int descriptor = -1;
        if (const int error = directory_->fs->open_file(directory_->fd.get(), file->name,
                                                         open_mode::read_write, descriptor);
            error != 0) {
            why = fmt::format("cannot open {}: {}", path, detail::errno_text(error));
            return make_error_code(errc::storage_failed);
        }
        file->fd = detail::unique_fd{*directory_->fs, descriptor};
        const detail::segment_expectation expect{owner_.cluster_id, owner_.replica_id,
                                                 candidates[i], i + 1 == candidates.size(),
                                                 torn_window};
        auto head = detail::read_segment_head(*directory_->fs, file->fd.get(), path, expect, why);
        if (!head) return failure(head.error());
        if (!mark && !head.value().torn)
            torn_window = std::max(torn_window, head.value().header.window_bytes);
        if (head.value().torn) {
            repairs.torn_segments.push_back(file->name);
        } else if (head.value().header.generation > generation) {
            repairs.unfinished.push_back(file->name);
        } else if (head.value().header.generation < generation || !repairs.unfinished.empty()) {
            why = fmt::format("{}: segment of generation {:016x} found among the segments of "
                              "generation {:016x}",
                              path, head.value().header.generation, generation);
            return make_error_code(errc::corrupt);
        } else {
            file->window_bytes = head.value().header.window_bytes;
            live.emplace_back(std::move(file), head.value());
        }
    }

    // Pass 2: the records of the current generation, each segment continuing the last.
    // After an installed snapshot the first segment starts at its zxid; after a checkpoint
    // it may start earlier (its records up to the checkpoint are kept but never read).
    const zxid snapshot_zxid = snapshot_ ? snapshot_->last_included : zxid{};
    const bool checkpoint = snapshot_ && generation_ != contents.snapshots.back();  // not its own
    if (checkpoint) {
        // The segments a checkpoint covers are unlinked after it is durable, with one
        // directory fsync for all of them: a crash may keep any subset of those unlinks
        // (POSIX orders none of them). So every leading segment followed by one that starts
        // at or below the checkpoint is covered, whatever is missing before it: drop it
        // unread. Continuity is checked from the first segment that is not covered.
        std::size_t covered = 0;
        while (covered + 1 < live.size() && live[covered + 1].second.header.base <= snapshot_zxid)
            repairs.covered.push_back(live[covered++].first->number);
        live.erase(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(covered));
    }
    zxid expected_base = snapshot_zxid;
    for (std::size_t i = 0; i < live.size(); ++i) {
        auto& [file, head] = live[i];
        const std::string path = fmt::format("{}/{}", options_.directory, file->name);
        if (i == 0 && checkpoint && head.header.base <= snapshot_zxid)
            expected_base = head.header.base;
        if (head.header.base != expected_base) {
            why = fmt::format("{}: the segment starts after {}, but the log before it ends at "
                              "{}: a segment is missing",
                              path, head.header.base, expected_base);
            return make_error_code(errc::corrupt);
        }
        // Only the newest segment file may end in a torn write: a later file — even one
        // whose header was torn, or one of an install that never landed — was created only
        // once this one was synced whole.
        const bool newest = file->number == candidates.back();
        auto scanned =
            detail::scan_records(*directory_->fs, file->fd.get(), path, head, newest, why);
        if (!scanned) return failure(scanned.error());
        const detail::segment_scan& scan = scanned.value();
        if (scan.damage_end > scan.valid_end) {
            log(log_level::warn, "file_log: cutting the torn tail of {} at offset {} ({} bytes: {})",
                path, scan.valid_end, scan.damage_end - scan.valid_end, scan.tail_damage);
            repairs.torn_tail = detail::pending_truncation{file, scan.valid_end};
            repairs.torn_tail_end = scan.damage_end;
        }
        for (const detail::scanned_record& r : scan.records) {
            index_.push_back({r.id, file->number, r.offset, r.length});
            // Below a checkpoint a record is kept but no longer the log's (compact).
            if (r.system && r.id > snapshot_zxid) system_txns_.push_back(r.id);
        }
        expected_base = scan.records.empty() ? head.header.base : scan.records.back().id;
        const bool same_format = head.header.max_record_bytes == options_.max_record_bytes &&
                                 head.header.window_bytes == options_.group_commit_window_bytes;
        // What a killed process left in the page cache reads as whole but may not be on
        // disk: records appended to the newest segment before a flush has synced it name
        // only the offset its last record found names (or the cut a torn tail got, synced).
        std::optional<std::uint64_t> synced_floor;
        if (newest && scan.damage_end == scan.valid_end) {
            synced_floor = 0;
            for (const detail::scanned_record& r : scan.records)
                synced_floor = std::max(*synced_floor, r.synced);
        }
        segments_.push_back({std::move(file), head.header.base, scan.valid_end, scan.valid_end,
                             same_format, synced_floor, head.file_size});
    }
    if (checkpoint && !segments_.empty()) {
        // The log must reach the checkpoint: its zxid is a record (written durably before the
        // checkpoint was), or where the generation began.
        if (segments_.front().base != snapshot_zxid && !holds(snapshot_zxid)) {
            why = fmt::format("{}: the log of generation {:016x} does not hold {}, the zxid of "
                              "checkpoint {}: records it covers are missing",
                              options_.directory, generation_, snapshot_zxid,
                              snapshot_file_name(contents.snapshots.back()));
            return make_error_code(errc::corrupt);
        }
        // Every covered segment was dropped above: repairs.covered lists them.
    }
    return success();
}

/// Defect 10 of issue 34: a segment file shorter than the synced watermark says has lost a
/// tail that had been synced — its length was synced before any record past the previous
/// length was written, so records in the lost part may have been reported durable and
/// acknowledged — which no torn write explains (a torn write leaves the length, and damages
/// only what a flush had not synced yet). `errc::corrupt`, so that the
/// corruption policy applies: refuse, or resync from the leader as a non-voter (a replica
/// must not vote with a history shorter than what it vouched for, docs/protocol.md §10.11).
inline result<void> file_log::check_synced_tail(
    const std::optional<storage_format::synced_mark>& mark, const recovery_repairs& repairs,
    std::string& why) const {
    using namespace storage_format;
    if (!mark || mark->generation < generation_) return success();  // an install replaced it
    const std::string named =
        fmt::format("{}/{} says segment {} of generation {:016x} had been synced at a length "
                    "of {} bytes",
                    options_.directory, synced_file_name, segment_file_name(mark->segment),
                    mark->generation, mark->offset);
    const auto lost = [&](std::string found) {
        why = fmt::format("{}, but {}: a synced tail was lost (the file system or the disk "
                          "lost synced data; records in it may have been acknowledged), not "
                          "a torn write",
                          named, found);
        return make_error_code(errc::corrupt);
    };
    if (mark->generation > generation_)
        return lost(fmt::format("the snapshot in effect starts generation {:016x}: the "
                                "snapshot file of the newer one is missing",
                                generation_));
    if (mark->segment == 0) return success();
    if (!segments_.empty() && mark->segment < segments_.front().file->number)
        return success();  // a checkpoint covered it
    for (const segment_state& segment : segments_) {
        if (segment.file->number != mark->segment) continue;
        if (segment.reserved >= mark->offset) return success();
        return lost(fmt::format("the file is {} bytes long (its valid records end at offset "
                                "{}{})",
                                segment.reserved, segment.size,
                                repairs.torn_tail ? ", what follows is damaged" : ""));
    }
    const bool torn = std::find(repairs.torn_segments.begin(), repairs.torn_segments.end(),
                                segment_file_name(mark->segment)) != repairs.torn_segments.end();
    return lost(torn ? std::string{"its header is damaged"} : std::string{"the file is missing"});
}

/// Opens the synced file for the flush jobs' updates, creating it (atomically) when the
/// directory has none, and writes the mark of what recovery found and synced, unless the
/// file already says so.
inline void file_log::open_watermark(const std::optional<storage_format::synced_mark>& found,
                                     detail::durable_io& repairs) {
    using namespace storage_format;
    if (!repairs.ok()) return;
    const segment_state* newest = segments_.empty() ? nullptr : &segments_.back();
    mark_ = synced_mark{found ? found->sequence + 1 : 1, generation_,
                        newest ? newest->file->number : 0, newest ? newest->reserved : 0,
                        options_.group_commit_window_bytes};
    const std::string name{synced_file_name};
    if (!found) {
        std::vector<std::byte> bytes(synced_file_size);
        const auto slot = encode(mark_);
        std::copy(slot.begin(), slot.end(),
                  bytes.begin() + static_cast<std::ptrdiff_t>(synced_slot_offset(mark_.sequence)));
        const std::array<byte_view, 1> parts{byte_view{bytes}};
        if (!repairs.write_file_atomically(name, parts, sync_site::synced_watermark_file,
                                           sync_site::synced_watermark_directory))
            return;
    }
    int descriptor = -1;
    if (const int error = directory_->fs->open_file(directory_->fd.get(), name,
                                                     open_mode::read_write, descriptor);
        error != 0) {
        repairs.fail(fmt::format("cannot open {}: {}", repairs.path_of(name),
                                 detail::errno_text(error)));
        return;
    }
    watermark_ = std::make_shared<detail::watermark_file>();
    watermark_->fd = detail::unique_fd{*directory_->fs, descriptor};
    if (found && found->same_place(mark_)) {
        mark_.sequence = found->sequence;
        return;
    }
    if (found) detail::write_mark(repairs, *watermark_, mark_);
}

/// The start-up checks of docs/protocol.md §2 (and §11.2).
inline result<void> file_log::check_epochs(std::string& why) const {
    if (epochs_.accepted < epochs_.current) {
        why = fmt::format("{}: acceptedEpoch {} < currentEpoch {} (docs/protocol.md §2: refuse to "
                          "start)",
                          options_.directory, epochs_.accepted, epochs_.current);
        return make_error_code(errc::corrupt);
    }
    // §2 checks epoch(lastLogged) <= currentEpoch. zab writes a learner's synced history
    // (which holds records of the new epoch when it joins a running leader, §6.3) durably
    // *before* currentEpoch (§11.1, ZOOKEEPER-4643), so a crash in between legitimately
    // leaves epoch(lastLogged) > currentEpoch — the case ZooKeeper patched with its
    // currentEpoch.tmp (ZOOKEEPER-1653). What always holds is the bound by acceptedEpoch:
    // no record of epoch e is logged before e was promised durably (ACKEPOCH, §4). A log
    // beyond *that* was not written by this replica's protocol: refuse it.
    const zxid last = last_zxid();
    if (last != zxid{} && last.epoch() > epochs_.accepted) {
        why = fmt::format("{}: last logged zxid {} is of epoch {}, above acceptedEpoch {} "
                          "(docs/protocol.md §2: refuse to start)",
                          options_.directory, last, last.epoch(), epochs_.accepted);
        return make_error_code(errc::corrupt);
    }
    return success();
}

}  // namespace zab
