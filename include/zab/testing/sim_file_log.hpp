// zab/testing/sim_file_log.hpp — the production `zab::file_log` on a simulated disk that can
// lose power: a `zab::log_store` for the deterministic simulator that runs file_log's own
// code (segments, CRCs, flush jobs, recovery) instead of sim_log's model of it.
//
// What it models. The log lives in a durable_image_fs (zab/testing/durable_image_fs.hpp).
// A `sync` or a `write_epochs` starts a flush when none is in flight: `begin_flush` at once
// (group commit: the job takes every operation issued so far), and the job runs — writes,
// fdatasyncs, renames — at the instant the disk completes it, a latency drawn as sim_log
// draws it from `disk_options`; `finish_flush` then turns its result into completions,
// delivered as events (docs/design.md rule 2), and the next flush starts if more was requested
// meanwhile. Log syncs and epoch writes complete in the order issued, each with the flush
// that carried it. A compaction's checkpoint is a job of its own (file_log::begin_checkpoint),
// started once its records are durable and run at an instant drawn the same way, beside
// the flush jobs: a slow checkpoint never holds a sync back.
//
// `crash()` is a power loss: a flush in flight gets as far as a random number of disk
// operations, then the file system keeps, drops or tears what was not synced (the weights
// of `disk_options`), and file_log's recovery opens what is left — which must succeed: a
// recovery that fails is a bug in file_log, and is asserted. Afterwards the visible state is
// the recovered one, as with sim_log.
//
// `kill()` is kill -9 of the process instead: the jobs in flight stop as at a crash, the page
// cache (durable_image_fs::kill) keeps what they wrote, and file_log's recovery opens that —
// which must make durable what it then vouches for, or a later `crash` loses it (issue 34,
// defect 3: "kill, then power loss").
//
// Storage faults: the calls of sim_log (storage_fault_calls: `inject`, `set_slow`,
// `heal_storage_faults`, `set_operation_observer`), with one difference that file_log's group commit makes: a
// terminal fault fails the whole flush that carries the operation (file_log's terminal failed
// state: every sync and epoch write it answers fails, and so does every later flush until the
// log is opened again by a crash and restart), and a delay delays that flush. The failed
// completion carries file_log's own error (errc::storage_failed), not the fault's.
//
// Inspection mirrors sim_log's (the protocol observer's view): `records()` is what `read`
// sees, `durable_records()` / `durable_snapshot()` / `durable_epochs()` what the completions
// delivered so far promise.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"
#include "zab/storage/file_log.hpp"
#include "zab/storage/log_image.hpp"
#include "zab/testing/durable_image_fs.hpp"
#include "zab/testing/event_queue.hpp"
#include "zab/testing/random.hpp"
#include "zab/testing/sim_log.hpp"

namespace zab::testing {

/// Segments and windows small enough that a simulated run rolls segments (16 KiB) and
/// syncs a large flush in several steps (4 KiB); records up to 2 KiB. `directory` and `filesystem` are set by sim_file_log.
inline file_log_options sim_file_log_options() {
    file_log_options o;
    o.cluster_id = 1;
    o.replica_id = 1;
    o.max_record_bytes = 2u << 10;
    o.group_commit_window_bytes = 4u << 10;
    o.segment_bytes = 16u << 10;
    o.max_snapshot_bytes = 64u << 20;
    return o;
}

class sim_file_log : public storage_fault_calls {
public:
    /// Opens (initializes) the log on an empty simulated disk. `log_options` as in
    /// `sim_file_log_options()`; a disk that lies (`lie_probability`) is not modelled.
    sim_file_log(event_queue& events, prng& random, disk_options options = {},
                 file_log_options log_options = sim_file_log_options())
        : events_{events},
          random_{random},
          options_{options},
          log_options_{std::move(log_options)} {
        check_options(options_);
        log_options_.directory = "/zab";
        log_options_.filesystem = &disk_;
        const std::string failure = reopen();
        ZAB_ASSERT(failure.empty(), "file_log cannot open an empty simulated disk");
    }

    sim_file_log(const sim_file_log&) = delete;
    sim_file_log& operator=(const sim_file_log&) = delete;
    /// Cancels its pending completion: the event_queue must outlive the sim_file_log.
    ~sim_file_log() {
        cancel_flush();
        cancel_checkpoint();
    }

    /// Where completions go. Empty: completions are dropped (a stopped replica).
    void set_completion_handler(std::function<void(const storage_completion&)> handler) {
        handler_ = std::move(handler);
    }

    /// Changes latencies and crash weights from now on (a disk turning slow).
    void set_options(disk_options options) {
        check_options(options);
        options_ = options;
    }

    // --- zab::log_store ------------------------------------------------------------------

    void append(storage_op op, std::span<const log_record> records) {
        issue(storage_op_kind::append, op);
        log_->append(op, records);
        visible_.append(records);
        last_log_op_ = op;
        unsynced_.push_back(
            {op, operation_kind::append, zxid{}, {records.begin(), records.end()}, {}});
    }

    void truncate_after(storage_op op, zxid last_kept) {
        issue(storage_op_kind::truncate, op);
        log_->truncate_after(op, last_kept);
        visible_.truncate_after(snapshot_floor(last_kept));
        last_log_op_ = op;
        unsynced_.push_back({op, operation_kind::truncate, snapshot_floor(last_kept), {}, {}});
    }

    void install_snapshot(storage_op op, zxid last_included, const shared_bytes& state,
                          std::span<const log_record> following) {
        issue(storage_op_kind::install_snapshot, op);
        log_->install_snapshot(op, last_included, state, following);
        visible_ = log_image::installed(last_included, state, following);
        last_log_op_ = op;
        unsynced_.push_back(
            {op, operation_kind::install_snapshot, zxid{}, visible_.records, visible_.snapshot});
    }

    /// zab::compactable_log: as file_log::compact. The observer's durable image takes it with
    /// the next sync that covers the log operations issued before it (as sim_log does).
    bool compact(zxid last_included, const shared_bytes& state) {
        if (!log_->compact(last_included, state)) return false;
        visible_.compact(last_included, state);
        unsynced_.push_back({last_log_op_.value_or(0),
                             operation_kind::compact,
                             zxid{},
                             {},
                             log_snapshot{last_included, state}});
        start_checkpoint_if_idle();
        return true;
    }

    /// Completes (`log_durable`, op) with the flush that carries it.
    void make_durable(storage_op op) {
        issue(storage_op_kind::sync, op);
        log_->make_durable(op);
        requested_.push_back({request_kind::sync, op, {}});
        start_flush_if_idle();
    }

    /// Visible at once; completes (`epochs_durable`, op) with the flush that carries it.
    void write_epochs(storage_op op, epochs e) {
        issue(storage_op_kind::epoch_write, op, e);
        log_->write_epochs(op, e);
        requested_.push_back({request_kind::epochs, op, e});
        start_flush_if_idle();
    }

    zxid last_zxid() const { return log_->last_zxid(); }
    epochs stored_epochs() const { return log_->stored_epochs(); }
    std::optional<log_snapshot> snapshot() const { return log_->snapshot(); }
    result<std::vector<log_record>> read(zxid after, std::size_t max) const {
        return log_->read(after, max);
    }
    /// zab::tail_readable_log and zab::system_txn_indexed_log: file_log's own.
    result<std::vector<log_record>> read_last(std::size_t max) const { return log_->read_last(max); }
    std::vector<zxid> system_txns() const { return log_->system_txns(); }

    // --- fault injection -----------------------------------------------------------------

    /// Power loss (see the file comment). Completions not yet delivered never are. A
    /// recovery that fails is a bug in file_log: asserted.
    void crash() {
        const std::string failure = crash_and_recover();
        if (!failure.empty()) {
            std::fprintf(stderr, "sim_file_log: recovery failed: %s\n", failure.c_str());
            ZAB_ASSERT(failure.empty(), "file_log recovery failed after a power loss");
        }
    }

    /// `crash()` for a test that broke the disk on purpose (durable_image_fs::skip_syncs):
    /// returns why recovery failed, and then the log must not be used again; empty when it
    /// recovered.
    std::string crash_and_recover() {
        stop_jobs();
        disk_.power_loss(random_, {options_.crash_keep, options_.crash_drop, options_.crash_tear});
        return reopen();
    }

    /// kill -9 of the process (issue 34, defect 3): the jobs in flight stop where the
    /// process died, as at a crash, but the page cache survives — what they wrote is there,
    /// un-synced, and the next open reads it (and must make it durable before it vouches for
    /// it: a later `crash` loses whatever nobody synced). Completions not yet delivered never
    /// are. Returns how many bytes of the disk were un-synced when the process died, the
    /// part a later power loss could take. A recovery that fails is asserted, as in `crash`.
    std::uint64_t kill() {
        stop_jobs(true);
        const std::uint64_t unsynced = disk_.unsynced_bytes();
        disk_.kill();
        std::string failure = reopen();
        if (failure.empty()) failure = observe_durable_image();
        if (!failure.empty()) {
            std::fprintf(stderr, "sim_file_log: after a kill: %s\n", failure.c_str());
            ZAB_ASSERT(failure.empty(), "file_log recovery after a kill failed, or left what "
                                        "a power loss would take");
        }
        return unsynced;
    }

    /// What `open` does from now on with a directory that fails its checks beyond a torn
    /// tail (file_log_options::on_corruption; refuse unless set).
    void set_corruption_policy(corruption_policy policy) { log_options_.on_corruption = policy; }

    /// A backup of the data directory: what it holds durably now.
    durable_image_fs::image backup() const { return disk_.durable_copy(); }

    /// The process stopped, the directory replaced by `saved`, the log opened on it again:
    /// returns why recovery refused it (then the log must not be used until a later restore
    /// or crash opens it), empty when it opened.
    std::string restore(const durable_image_fs::image& saved) {
        stop_jobs();
        disk_.restore(saved);
        return reopen();
    }

    /// Whether the log is open (false after a recovery that refused the directory).
    bool is_open() const noexcept { return log_.has_value(); }

    /// The next flush fails with `error` (an errno value when of the system category, else
    /// EIO) as if its first disk step had: the log enters its terminal failed state.
    void fail_next_flush(std::error_code error) {
        log_->inject_failure_for_testing(error.category() == std::system_category() ? error.value()
                                                                                    : EIO);
    }

    // --- inspection ----------------------------------------------------------------------

    /// What the delivered completions promise: the records after the durable snapshot, that
    /// snapshot, and the epochs.
    const std::vector<log_record>& durable_records() const { return durable_.records; }
    const std::optional<log_snapshot>& durable_snapshot() const { return durable_.snapshot; }
    zxid durable_last_zxid() const { return durable_.last_zxid(); }
    epochs durable_epochs() const { return durable_epochs_; }
    /// Every record after the snapshot, synced or not (what `read` sees).
    const std::vector<log_record>& records() const { return visible_.records; }
    /// The simulated disk, and the log on it.
    durable_image_fs& disk() noexcept { return disk_; }
    const file_log& log() const { return *log_; }
    /// Flush jobs started.
    std::uint64_t flushes() const noexcept { return flushes_; }
    /// Checkpoint jobs started.
    std::uint64_t checkpoints() const noexcept { return checkpoints_; }

private:
    enum class operation_kind { append, truncate, install_snapshot, compact };
    enum class request_kind { sync, epochs };

    struct pending_operation {
        storage_op op;
        operation_kind kind;
        zxid last_kept;
        std::vector<log_record> records;
        std::optional<log_snapshot> snapshot;
    };

    struct request {
        request_kind kind;
        storage_op op;
        epochs value;
    };

    static void check_options(const disk_options& o) {
        ZAB_ASSERT(o.sync_latency_min <= o.sync_latency_max, "disk_options: latency min > max");
        ZAB_ASSERT(o.slow_factor > 0.0, "disk_options: slow_factor must be positive");
        ZAB_ASSERT(o.lie_probability == 0.0, "sim_file_log: a lying disk is sim_log's alone");
        ZAB_ASSERT(o.crash_keep >= 0.0 && o.crash_drop >= 0.0 && o.crash_tear >= 0.0 &&
                       o.crash_keep + o.crash_drop + o.crash_tear > 0.0,
                   "disk_options: crash weights must be non-negative, not all zero");
    }

    /// Ends the jobs in flight as a process death or a power loss does: they get as far as a
    /// random number of disk operations between them, in either order (they run beside each
    /// other). (A run without a checkpoint in flight draws what it drew before they existed.)
    /// `killed`: at most a few operations, so that the process dies between a write and its
    /// fdatasync as often as not — the state a kill leaves and a power loss does not.
    void stop_jobs(bool killed = false) {
        cancel_flush();
        cancel_checkpoint();
        if (job_ || checkpoint_job_) disk_.fail_after(random_.below(killed ? 4 : 24));
        const bool checkpoint_first = checkpoint_job_ && job_ && random_.chance(0.5);
        if (checkpoint_first) checkpoint_job_->run();
        if (job_) job_->run();
        if (checkpoint_job_ && !checkpoint_first) checkpoint_job_->run();
        job_.reset();
        checkpoint_job_.reset();
        log_.reset();
    }

    /// file_log (like sim_log) never truncates below the snapshot in effect.
    zxid snapshot_floor(zxid last_kept) const {
        return visible_.snapshot ? std::max(last_kept, visible_.snapshot->last_included)
                                 : last_kept;
    }

    /// Everything `log` holds: its snapshot and the records after it.
    static log_image read_all(const file_log& log) {
        log_image image{log.snapshot(), {}};
        for (zxid after = image.last_zxid();;) {
            auto part = log.read(after, 1024);
            ZAB_ASSERT(part.has_value(), "file_log read failed right after recovery");
            if (part.value().empty()) break;
            after = part.value().back().id;
            image.records.insert(image.records.end(), part.value().begin(), part.value().end());
        }
        return image;
    }

    /// After a kill's recovery the peer vouches for what the log holds, but only the disk
    /// knows whether that is durable: the durable image (what a power loss now leaves) is
    /// recovered on a copy, and that becomes the observer's durable view — so that a
    /// recovery that did not sync what it found shows as a promise the disk does not keep
    /// (§10.11, property::advertise_durable). Returns why the copy cannot be opened (a power
    /// loss now would leave a directory file_log refuses), empty when it opened.
    std::string observe_durable_image() {
        durable_image_fs copy;
        copy.restore(disk_.durable_copy());
        file_log_options o = log_options_;
        o.filesystem = &copy;
        std::string why;
        auto opened = file_log::open(o, &why);
        if (!opened) return "a power loss now would leave a directory file_log refuses: " + why;
        durable_ = read_all(opened.value());
        durable_epochs_ = opened.value().stored_epochs();
        return {};
    }

    /// Opens the log on what the disk holds: empty, or why it failed.
    std::string reopen() {
        std::string why;
        auto opened = file_log::open(log_options_, &why);
        if (!opened) return why;
        log_.emplace(std::move(opened).value());
        visible_ = read_all(*log_);
        durable_ = visible_;
        durable_epochs_ = log_->stored_epochs();
        unsynced_.clear();
        requested_.clear();
        in_flight_ = 0;
        job_operations_ = 0;
        last_log_op_.reset();
        cover_ = {};
        return {};
    }

    /// An operation issued: its faults go to the next flush (a terminal one is armed in
    /// file_log at once: its next non-empty flush fails), then the observer hears of it.
    void issue(storage_op_kind kind, storage_op op, epochs value = {}) {
        const bool had_error = static_cast<bool>(cover_.error);
        plan_.take(kind, cover_);
        if (cover_.error && !had_error)
            log_->inject_failure_for_testing(
                cover_.error.category() == std::system_category() ? cover_.error.value() : EIO);
        observe({kind, storage_event::phase::issued, op, log_->stored_epochs(), value});
    }

    sim_time draw_latency() {
        const auto base = random_.between(options_.sync_latency_min, options_.sync_latency_max);
        sim_time latency = static_cast<sim_time>(static_cast<double>(base) * options_.slow_factor);
        if (options_.stall_probability > 0.0 && random_.chance(options_.stall_probability))
            latency += options_.stall_latency;
        return latency;
    }

    void start_flush_if_idle() {
        if (job_ || requested_.empty()) return;
        job_.emplace(log_->begin_flush());
        in_flight_ = requested_.size();      // the requests this job answers
        job_operations_ = unsynced_.size();  // and the operations it writes
        ++flushes_;
        const sim_time delay = std::exchange(cover_, {}).delay;
        event_ = events_.schedule_at(events_.now() + draw_latency() + delay,
                                     [this] { complete_flush(); });
    }

    void cancel_flush() {
        if (event_ != 0) events_.cancel(event_);
        event_ = 0;
    }

    void cancel_checkpoint() {
        if (checkpoint_event_ != 0) events_.cancel(checkpoint_event_);
        checkpoint_event_ = 0;
    }

    void start_checkpoint_if_idle() {
        if (checkpoint_job_ || !log_->has_checkpoint_work()) return;
        checkpoint_job_.emplace(log_->begin_checkpoint());
        ++checkpoints_;
        checkpoint_event_ = events_.schedule_at(events_.now() + draw_latency(),
                                                [this] { complete_checkpoint(); });
    }

    void complete_checkpoint() {
        checkpoint_event_ = 0;
        checkpoint_job_->run();
        log_->finish_checkpoint(std::move(*checkpoint_job_));
        checkpoint_job_.reset();
        start_checkpoint_if_idle();
    }

    void complete_flush() {
        event_ = 0;
        job_->run();
        const flush_result result = log_->finish_flush(std::move(*job_));
        job_.reset();
        std::vector<request> answered(requested_.begin(),
                                      requested_.begin() + static_cast<std::ptrdiff_t>(in_flight_));
        requested_.erase(requested_.begin(),
                         requested_.begin() + static_cast<std::ptrdiff_t>(in_flight_));
        in_flight_ = 0;
        for (const request& r : answered) {
            const storage_op_kind kind =
                r.kind == request_kind::sync ? storage_op_kind::sync : storage_op_kind::epoch_write;
            if (result.failed()) {
                observe({kind, storage_event::phase::failed, r.op, durable_epochs_, r.value});
                deliver({storage_completion::kind::failed, r.op, result.error});
            } else if (r.kind == request_kind::sync) {
                const std::uint8_t covered = persist_through(r.op);
                observe({kind, storage_event::phase::completed, r.op, {}, {}, covered});
                deliver({storage_completion::kind::log_durable, r.op, {}});
            } else {
                observe({kind, storage_event::phase::completed, r.op, durable_epochs_, r.value});
                durable_epochs_ = r.value;
                deliver({storage_completion::kind::epochs_durable, r.op, {}});
            }
        }
        start_flush_if_idle();
        start_checkpoint_if_idle();  // its records may have become durable with this flush
    }

    /// The operations ≤ `op` that the finished job wrote (not those issued while it ran);
    /// returns the storage_event::covered bits of their kinds.
    std::uint8_t persist_through(storage_op op) {
        std::uint8_t covered = 0;
        auto note = [&covered](storage_op_kind k) {
            covered = static_cast<std::uint8_t>(covered | (1u << static_cast<int>(k)));
        };
        while (job_operations_ > 0 && unsynced_.front().op <= op) {
            const pending_operation& p = unsynced_.front();
            switch (p.kind) {
                case operation_kind::append:
                    durable_.append(p.records);
                    note(storage_op_kind::append);
                    break;
                case operation_kind::truncate:
                    durable_.truncate_after(p.last_kept);
                    note(storage_op_kind::truncate);
                    break;
                case operation_kind::install_snapshot:
                    durable_ = log_image{p.snapshot, p.records};
                    note(storage_op_kind::install_snapshot);
                    break;
                case operation_kind::compact:
                    durable_.compact(p.snapshot->last_included, p.snapshot->state);
                    break;
            }
            unsynced_.pop_front();
            --job_operations_;
        }
        return covered;
    }

    void deliver(const storage_completion& completion) {
        if (!handler_) return;
        auto handler = handler_;  // the handler may replace itself
        handler(completion);
    }

    event_queue& events_;
    prng& random_;
    disk_options options_;
    file_log_options log_options_;
    durable_image_fs disk_;
    std::optional<file_log> log_;
    std::function<void(const storage_completion&)> handler_;

    std::optional<flush_job> job_;
    event_queue::event_id event_ = 0;
    std::optional<checkpoint_job> checkpoint_job_;
    event_queue::event_id checkpoint_event_ = 0;
    std::uint64_t checkpoints_ = 0;
    std::deque<request> requested_;   // syncs and epoch writes not yet answered, in order
    std::size_t in_flight_ = 0;       // how many of them the job in flight answers
    std::size_t job_operations_ = 0;  // how many of unsynced_ the job in flight writes
    std::uint64_t flushes_ = 0;

    log_image visible_;
    log_image durable_;
    std::deque<pending_operation> unsynced_;
    std::optional<storage_op> last_log_op_;
    epochs durable_epochs_;

    storage_fault_plan::outcome cover_;  // the faults of what the next flush carries
};

static_assert(zab::compactable_log<sim_file_log>);
static_assert(zab::tail_readable_log<sim_file_log>);
static_assert(zab::system_txn_indexed_log<sim_file_log>);

}  // namespace zab::testing
