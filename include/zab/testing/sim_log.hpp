// zab/testing/sim_log.hpp — a `zab::log_store` on a simulated disk that can lose power.
//
// What it models: a log file, an optional snapshot standing in for every record up to its
// zxid, and the two epoch files of docs/protocol.md §2, on a disk whose fsync takes time and
// whose un-synced writes are at the mercy of a crash. Writes are visible at once (the page
// cache) and durable only when a sync completes (fsync). At a power loss each un-synced
// record is independently kept, dropped or torn, as in FoundationDB's AsyncFileNonDurable
// (docs/design.md rule 11). A torn record fails its checksum at recovery, so recovery stops
// there: the recovered log is the durable image plus a prefix of the un-synced writes. That
// prefix is what resurrects transactions that were never acknowledged, the situation behind
// most of ZooKeeper's data-loss bugs (§2).
//
// Truncations, snapshot installs and compactions are whole-file operations (a rename, a new
// segment): at a crash each un-synced one is applied as a whole or lost, and once one is lost
// nothing written after it survives. A lost compaction leaves the whole log (as file_log's
// checkpoint, which lands after the records it covers). So a snapshot install is atomic (§11.5): recovery finds the
// old log or the snapshot with the records that followed it, never a mix, and never an old
// record after the snapshot's zxid (ZOOKEEPER-2832/2872).
//
// Timing: completions are events on the event_queue, never calls from inside a member
// (docs/design.md rule 2). Log syncs complete in the order issued. Epoch writes complete in
// their own order, independently of log syncs: an epoch write issued after a sync may
// become durable first, which the protocol must survive (the concept allows it).
//
// `kill()` is kill -9 of the process instead of a power loss: the page cache survives, and
// the recovery that opens it makes it durable (issue 34, defect 3).
//
// Storage faults (`inject`, `set_slow`, `heal_storage_faults`; sim_file_log offers the same
// calls): an append, truncation, snapshot install, sync or epoch write can fail, once or
// until healed, terminally or transiently, and each kind can be slow. The log layer reports
// a write's fate only through the completion that covers it, so an append, truncation or
// install fault lands on the next sync issued after it; a sync or epoch-write fault on its
// own completion. See storage_fault_mode for what terminal and transient mean.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"
#include "zab/storage/log_image.hpp"
#include "zab/testing/event_queue.hpp"
#include "zab/testing/random.hpp"

namespace zab::testing {

/// The simulated disk. Latencies in microseconds of virtual time.
struct disk_options {
    /// A sync (fsync) or an epoch write takes a latency drawn uniformly from
    /// [sync_latency_min, sync_latency_max], multiplied by `slow_factor`.
    sim_time sync_latency_min = 200;
    sim_time sync_latency_max = 5000;
    /// Multiplies every latency: 10.0 is a disk ten times slower (> 0).
    double slow_factor = 1.0;
    /// At a crash, the fate of each un-synced record (relative weights; need not sum to 1).
    /// An un-synced truncation or snapshot install is applied (as a whole) with probability
    /// crash_keep / (sum), else lost; an un-synced epoch write is kept with that same
    /// probability, else dropped (a torn temporary file is never renamed into place).
    double crash_keep = 0.4;
    double crash_drop = 0.4;
    double crash_tear = 0.2;
    /// Multiplies the latency of epoch writes only: far below 1, an epoch write issued after
    /// a log sync becomes durable long before it; far above 1, long after. These are
    /// independent durable operations (the concept allows either order), and this knob is
    /// how a test makes the order adversarial (§11.8).
    double epoch_latency_factor = 1.0;
    /// With this probability a sync or an epoch write stalls for `stall_latency` more: a
    /// completion delivered late (a disk pausing under load).
    double stall_probability = 0.0;
    sim_time stall_latency = 200'000;
    /// A disk that lies (§11.8 "fsync fault injection: lie"): with this probability a sync
    /// reports `log_durable` while the writes it covers stay un-synced, at the mercy of the
    /// next crash. No correct protocol survives a lying disk: tests use it to show the
    /// invariant checker notices.
    double lie_probability = 0.0;
};

/// The kinds of storage operation a fault (`storage_fault`, `set_slow`) or a crash point can
/// aim at. Bit `1 << kind` in storage_event::covered.
enum class storage_op_kind : std::uint8_t {
    append = 0,
    truncate = 1,
    install_snapshot = 2,
    sync = 3,
    epoch_write = 4,
};
inline constexpr std::size_t storage_op_kind_count = 5;

constexpr std::string_view to_string(storage_op_kind k) noexcept {
    switch (k) {
        case storage_op_kind::append: return "append";
        case storage_op_kind::truncate: return "truncate";
        case storage_op_kind::install_snapshot: return "install";
        case storage_op_kind::sync: return "sync";
        case storage_op_kind::epoch_write: return "epoch write";
    }
    return "?";
}

/// What an injected storage error does. The core's rule is that a failed fsync puts the
/// replica in a terminal failed state and is never retried (fsyncgate: after a failed fsync
/// the kernel may have dropped the dirty pages, so a second fsync that succeeds proves
/// nothing). The two modes keep that rule:
enum class storage_fault_mode : std::uint8_t {
    /// The error is reported: the completion that covers the operation is kind::failed with
    /// the fault's error, the peer gets `on_storage_failed` and stops (docs/design.md: terminal).
    /// The operation's writes stay un-synced, at the mercy of the next crash.
    terminal = 0,
    /// The error happens before anything was handed to fsync — a write(2) of the layer's
    /// own buffers returned EIO or ENOSPC for a moment (ZOOKEEPER-4882) — so the log layer
    /// can and does retry it from memory, then syncs once. The peer never sees an error:
    /// the covering completion arrives `retry_delay` late, and nothing else changes. (An
    /// error from fsync itself is never transient: inject it as terminal.)
    transient = 1,
};

/// One storage fault: the next `times` operations of `kind` fail in `mode`.
struct storage_fault {
    storage_op_kind kind = storage_op_kind::sync;
    storage_fault_mode mode = storage_fault_mode::terminal;
    std::uint64_t times = 1;  ///< how many operations of `kind` fail; 0: every one until healed
    std::error_code error = std::make_error_code(std::errc::io_error);  ///< terminal only
    sim_time retry_delay = 20'000;  ///< transient only: how long the retries take
};

/// What the faults did so far (per storage_op_kind).
struct storage_fault_stats {
    std::array<std::uint64_t, storage_op_kind_count> terminal{};
    std::array<std::uint64_t, storage_op_kind_count> transient{};
    std::array<std::uint64_t, storage_op_kind_count> slowed{};
};

/// The fault plan of one simulated disk: shared by sim_log and sim_file_log, which expose
/// its calls. Draws no random number: a run without faults replays unchanged.
class storage_fault_plan {
public:
    void inject(const storage_fault& f) { rules_[index(f.kind)] = rule{f, f.times, true}; }

    void set_slow(storage_op_kind kind, sim_time extra) { slow_[index(kind)] = extra; }

    /// Every fault and every slowness gone.
    void heal() {
        rules_ = {};
        slow_ = {};
    }

    bool armed(storage_op_kind kind) const { return rules_[index(kind)].active; }

    /// What an operation of `kind` issued now suffers: accumulated into `into`, which the
    /// completion covering it applies.
    struct outcome {
        std::error_code error;      ///< terminal: the covering completion fails
        sim_time delay = 0;         ///< transient retries plus slowness
        std::uint8_t kinds = 0;     ///< kinds whose slowness is already counted
    };
    void take(storage_op_kind kind, outcome& into) {
        const std::size_t k = index(kind);
        if (slow_[k] != 0 && (into.kinds & (1u << k)) == 0) {
            into.kinds = static_cast<std::uint8_t>(into.kinds | (1u << k));
            into.delay += slow_[k];
            ++stats_.slowed[k];
        }
        rule& r = rules_[k];
        if (!r.active) return;
        if (r.fault.mode == storage_fault_mode::terminal) {
            if (!into.error) into.error = r.fault.error;
            ++stats_.terminal[k];
        } else {
            into.delay += r.fault.retry_delay;
            ++stats_.transient[k];
        }
        if (r.remaining != 0 && --r.remaining == 0) r.active = false;
    }

    const storage_fault_stats& stats() const noexcept { return stats_; }

private:
    struct rule {
        storage_fault fault;
        std::uint64_t remaining = 0;  // 0 with active: until healed
        bool active = false;
    };
    static std::size_t index(storage_op_kind k) { return static_cast<std::size_t>(k); }

    std::array<rule, storage_op_kind_count> rules_{};
    std::array<sim_time, storage_op_kind_count> slow_{};
    storage_fault_stats stats_;
};

/// One storage operation as the disk saw it (`set_operation_observer`): what a crash point
/// of the simulator watches from outside the core.
struct storage_event {
    enum class phase : std::uint8_t {
        issued = 0,     ///< the peer called append / truncate_after / install_snapshot / sync /
                        ///< write_epochs
        completed = 1,  ///< the completion was delivered (log_durable or epochs_durable)
        failed = 2,     ///< a kind::failed completion was delivered
    };
    storage_op_kind kind;
    phase at;
    storage_op op;
    epochs previous;  ///< epoch_write: the visible (issued) or durable (completed) epochs before
    epochs value;     ///< epoch_write: the epochs written
    std::uint8_t covered = 0;  ///< sync completed: bit 1 << kind of each kind it made durable
};

/// The storage-fault calls sim_log and sim_file_log share (both inherit them), so that one
/// fault schedule runs on either disk.
class storage_fault_calls {
public:
    /// Arms `fault` for the operations of its kind issued from now on (replacing an earlier
    /// fault of that kind). Faults survive crashes: the disk is still bad after a restart.
    void inject(const storage_fault& fault) { plan_.inject(fault); }

    /// Every completion covering an operation of `kind` arrives `extra` later (once per
    /// completion, however many such operations it covers); 0: back to normal.
    void set_slow(storage_op_kind kind, sim_time extra) { plan_.set_slow(kind, extra); }

    /// Disarms every storage fault and slowness (a disk replaced or recovered).
    void heal_storage_faults() { plan_.heal(); }

    const storage_fault_stats& fault_stats() const noexcept { return plan_.stats(); }

    /// Called for every operation issued and every completion delivered (see
    /// storage_event), before the completion handler. Empty: none.
    void set_operation_observer(std::function<void(const storage_event&)> observer) {
        observer_ = std::move(observer);
    }

protected:
    void observe(const storage_event& e) {
        if (observer_) observer_(e);
    }

    storage_fault_plan plan_;

private:
    std::function<void(const storage_event&)> observer_;
};

/// What the driver hands to the peer when a storage operation finishes.
struct storage_completion {
    enum class kind {
        log_durable,     ///< every log operation <= op is durable (the sync of `op`)
        epochs_durable,  ///< the epoch write `op` is durable
        failed,          ///< the sync or epoch write `op` failed: terminal for the replica
    };
    kind what;
    storage_op op;
    std::error_code error;  ///< set for `failed` only
};

/// What one crash did to the un-synced writes.
struct crash_report {
    sim_time time = 0;
    std::uint64_t records_kept = 0;         ///< un-synced records that are in the recovered log
    std::uint64_t records_dropped = 0;      ///< never reached the platter
    std::uint64_t records_torn = 0;         ///< partly written: fail their checksum
    std::uint64_t records_unreachable = 0;  ///< written whole, but after a cut: lost
    std::uint64_t truncates_applied = 0;
    std::uint64_t truncates_lost = 0;
    std::uint64_t snapshot_installs_applied = 0;
    std::uint64_t snapshot_installs_lost = 0;  ///< nothing written after it survives either
    std::uint64_t compactions_applied = 0;
    std::uint64_t compactions_lost = 0;
    std::uint64_t epoch_writes_kept = 0;
    std::uint64_t epoch_writes_dropped = 0;
    std::uint64_t completions_discarded = 0;  ///< syncs and epoch writes that never complete
};

struct disk_stats {
    std::uint64_t appends = 0;
    std::uint64_t records_appended = 0;
    std::uint64_t truncates = 0;
    std::uint64_t snapshot_installs = 0;
    std::uint64_t compactions = 0;
    std::uint64_t syncs = 0;
    std::uint64_t syncs_completed = 0;
    std::uint64_t syncs_failed = 0;
    std::uint64_t syncs_lied = 0;  ///< reported durable without writing (lie_probability)
    std::uint64_t epoch_writes = 0;
    std::uint64_t epoch_writes_completed = 0;
    std::uint64_t epoch_writes_failed = 0;
    std::uint64_t crashes = 0;
    std::uint64_t kills = 0;
    std::vector<crash_report> crash_reports;  ///< one per crash, in order
};

class sim_log : public storage_fault_calls {
public:
    sim_log(event_queue& events, prng& random, disk_options options = {})
        : events_{events}, random_{random}, options_{options} {
        check_options(options_);
    }

    sim_log(const sim_log&) = delete;
    sim_log& operator=(const sim_log&) = delete;
    /// Cancels its pending completions: the event_queue must outlive the sim_log.
    ~sim_log() { cancel_pending_completions(); }

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
        note_log_op(op);
        plan_.take(storage_op_kind::append, cover_);
        observe({storage_op_kind::append, storage_event::phase::issued, op, {}, {}});
        visible_.append(records);
        unsynced_.push_back(
            {op, operation_kind::append, zxid{}, {records.begin(), records.end()}, {}});
        ++stats_.appends;
        stats_.records_appended += records.size();
    }

    /// Removes the records after `last_kept`. The snapshot, if any, stays: a `last_kept`
    /// below the snapshot's zxid cannot be honoured without losing it, so it removes every
    /// record after the snapshot and `last_zxid()` becomes the snapshot's zxid. The peer
    /// never asks for that: a snapshot holds only committed transactions, and a TRUNC never
    /// reaches below a committed one (§5.6); the model must merely survive it.
    void truncate_after(storage_op op, zxid last_kept) {
        note_log_op(op);
        plan_.take(storage_op_kind::truncate, cover_);
        observe({storage_op_kind::truncate, storage_event::phase::issued, op, {}, {}});
        visible_.truncate_after(last_kept);
        unsynced_.push_back({op, operation_kind::truncate, last_kept, {}, {}});
        ++stats_.truncates;
    }

    /// Replaces the whole log by a snapshot at `last_included` followed by `following` (a
    /// SNAP sync, §5.3): every old record goes, whatever its zxid, and later appends continue
    /// after the last of `following`. One operation: a crash keeps all of it or none.
    /// Shares the bytes of `state` and of the records.
    void install_snapshot(storage_op op, zxid last_included, const shared_bytes& state,
                          std::span<const log_record> following) {
        note_log_op(op);
        plan_.take(storage_op_kind::install_snapshot, cover_);
        observe({storage_op_kind::install_snapshot, storage_event::phase::issued, op, {}, {}});
        visible_ = log_image::installed(last_included, state, following);
        unsynced_.push_back({op, operation_kind::install_snapshot, zxid{}, visible_.records,
                             visible_.snapshot});
        ++stats_.snapshot_installs;
    }

    /// Compaction (zab::compactable_log): `state` replaces the records up to `last_included`,
    /// a record above the snapshot (else false, nothing changed). Visible at once; durable
    /// with the next sync that covers the log operations issued before it; lost as a whole at
    /// a crash before that (the records it covers are then still there).
    bool compact(zxid last_included, const shared_bytes& state) {
        if (!visible_.compact(last_included, state)) return false;
        unsynced_.push_back({last_log_op_.value_or(0), operation_kind::compact, zxid{}, {},
                             log_snapshot{last_included, state}});
        ++stats_.compactions;
        return true;
    }

    /// Completes (`log_durable`, op) after a disk latency, never before an earlier sync.
    /// Covers the log operations issued before this call whose number is <= op.
    void make_durable(storage_op op) {
        ++stats_.syncs;
        const std::size_t covered = static_cast<std::size_t>(
            std::partition_point(unsynced_.begin(), unsynced_.end(),
                                 [op](const pending_operation& p) { return p.op <= op; }) -
            unsynced_.begin());
        // The faults of the writes it covers, and its own.
        auto outcome = std::exchange(cover_, {});
        plan_.take(storage_op_kind::sync, outcome);
        observe({storage_op_kind::sync, storage_event::phase::issued, op, {}, {}});
        pending_sync sync{op, synced_count_ + covered, outcome.error, 0};
        const sim_time at = std::max(events_.now() + draw_latency(1.0) + outcome.delay,
                                     last_sync_completion_);
        last_sync_completion_ = at;
        sync.event = events_.schedule_at(
            at, [this, generation = generation_] { complete_sync(generation); });
        pending_syncs_.push_back(std::move(sync));
    }

    /// Visible at once; completes (`epochs_durable`, op) after its own latency, in order with
    /// other epoch writes but independently of log syncs.
    void write_epochs(storage_op op, epochs e) {
        ++stats_.epoch_writes;
        storage_fault_plan::outcome outcome;
        plan_.take(storage_op_kind::epoch_write, outcome);
        observe({storage_op_kind::epoch_write, storage_event::phase::issued, op, visible_epochs_, e});
        visible_epochs_ = e;
        pending_epoch_write write{op, e, outcome.error, 0};
        const sim_time at =
            std::max(events_.now() + draw_latency(options_.epoch_latency_factor) + outcome.delay,
                     last_epoch_completion_);
        last_epoch_completion_ = at;
        write.event = events_.schedule_at(
            at, [this, generation = generation_] { complete_epoch_write(generation); });
        pending_epoch_writes_.push_back(std::move(write));
    }

    /// The last record's zxid, else the snapshot's, else zxid{}.
    zxid last_zxid() const { return visible_.last_zxid(); }

    epochs stored_epochs() const { return visible_epochs_; }

    std::optional<log_snapshot> snapshot() const { return visible_.snapshot; }

    /// `errc::compacted` when `after` lies below the snapshot: the records from `after` on
    /// are gone. From the snapshot's zxid on, the records after `after`.
    result<std::vector<log_record>> read(zxid after, std::size_t max) const {
        return visible_.read(after, max);
    }
    /// zab::tail_readable_log: the last `max` records.
    result<std::vector<log_record>> read_last(std::size_t max) const {
        return visible_.read_last(max);
    }
    /// zab::system_txn_indexed_log: the zxids of its system transactions (the model looks at
    /// every record; file_log and memory_log keep an index).
    std::vector<zxid> system_txns() const { return visible_.system_txns(); }

    // --- a driver that chooses the order (zab/testing/explorer.hpp) ----------------------

    /// Completes the oldest pending sync now, ahead of its scheduled time (its event is
    /// cancelled): for a driver that picks which durability operation finishes next instead
    /// of drawing latencies. Syncs still complete in the order issued. False if none pends.
    bool complete_next_sync_now() {
        if (pending_syncs_.empty()) return false;
        events_.cancel(pending_syncs_.front().event);
        complete_sync(generation_);
        return true;
    }

    /// The same for the oldest pending epoch write (independent of log syncs).
    bool complete_next_epoch_write_now() {
        if (pending_epoch_writes_.empty()) return false;
        events_.cancel(pending_epoch_writes_.front().event);
        complete_epoch_write(generation_);
        return true;
    }

    // --- fault injection -----------------------------------------------------------------

    /// Power loss. Every un-synced operation is resolved by the crash model into the new
    /// durable image; completions not yet delivered are never delivered. Afterwards the
    /// visible state is the recovered state, and operation numbering may start again.
    void crash() {
        crash_report report;
        report.time = events_.now();
        report.completions_discarded = pending_syncs_.size() + pending_epoch_writes_.size();
        std::vector<epochs> unfinished_epoch_writes;
        for (const auto& write : pending_epoch_writes_)
            unfinished_epoch_writes.push_back(write.value);
        cancel_pending_completions();
        ++generation_;
        recover_log(report);
        recover_epochs(unfinished_epoch_writes, report);
        visible_ = durable_;
        visible_epochs_ = durable_epochs_;
        unsynced_.clear();
        cover_ = {};
        synced_count_ = 0;
        last_log_op_.reset();
        last_sync_completion_ = 0;
        last_epoch_completion_ = 0;
        ++stats_.crashes;
        stats_.crash_reports.push_back(report);
    }

    /// kill -9 of the process (issue 34, defect 3): completions not yet delivered never are,
    /// and what it had handed to the disk stays in the page cache — a prefix of the
    /// un-synced log operations (whole ones: a write(2) the process made is whole in the
    /// cache) and of the epoch writes not yet complete (renamed in order). The recovery that
    /// opens it makes it durable before it vouches for any of it (file_log::open fdatasyncs
    /// the newest segment and the directory), so the kept prefix joins the durable image;
    /// the rest is gone. Returns how many un-synced log operations and epoch writes the
    /// process left: what a later power loss could have taken had the open not synced them.
    std::uint64_t kill() {
        const std::uint64_t unsynced = unsynced_.size() + pending_epoch_writes_.size();
        std::vector<epochs> unfinished;
        for (const auto& write : pending_epoch_writes_) unfinished.push_back(write.value);
        cancel_pending_completions();
        ++generation_;
        const std::size_t written = random_.below(unsynced_.size() + 1);
        for (std::size_t i = 0; i < written; ++i) apply(durable_, unsynced_[i]);
        const std::size_t renamed = random_.below(unfinished.size() + 1);
        if (renamed > 0) durable_epochs_ = unfinished[renamed - 1];
        visible_ = durable_;
        visible_epochs_ = durable_epochs_;
        unsynced_.clear();
        cover_ = {};
        synced_count_ = 0;
        last_log_op_.reset();
        last_sync_completion_ = 0;
        last_epoch_completion_ = 0;
        ++stats_.kills;
        return unsynced;
    }

    /// The next `sync` completes with kind::failed and `error`, making nothing durable.
    /// (`inject` of a terminal sync fault, once.)
    void fail_next_sync(std::error_code error) {
        inject({storage_op_kind::sync, storage_fault_mode::terminal, 1, error});
    }

    /// The next `write_epochs` completes with kind::failed and `error`; the durable epochs
    /// keep their old value. (`inject` of a terminal epoch-write fault, once.)
    void fail_next_epoch_write(std::error_code error) {
        inject({storage_op_kind::epoch_write, storage_fault_mode::terminal, 1, error});
    }

    // --- inspection ----------------------------------------------------------------------

    /// What a crash right now would keep for certain: the records after the durable
    /// snapshot, and that snapshot.
    const std::vector<log_record>& durable_records() const { return durable_.records; }
    const std::optional<log_snapshot>& durable_snapshot() const { return durable_.snapshot; }
    /// The last durable record's zxid, else the durable snapshot's, else zxid{}: what a
    /// replica restarted from this disk would recover as its last logged zxid.
    zxid durable_last_zxid() const { return durable_.last_zxid(); }
    /// Every record after the snapshot appended and not truncated, synced or not (what
    /// `read` sees).
    const std::vector<log_record>& records() const { return visible_.records; }
    epochs durable_epochs() const { return durable_epochs_; }
    const disk_stats& stats() const { return stats_; }
    /// Syncs and epoch writes issued and not yet completed.
    std::size_t pending_syncs() const { return pending_syncs_.size(); }
    std::size_t pending_epoch_writes() const { return pending_epoch_writes_.size(); }
    /// Log operations (appends, truncations, installs, compactions) no sync covers yet: what
    /// a crash now would put at the mercy of the crash model.
    std::size_t unsynced_operations() const { return unsynced_.size(); }

private:
    enum class operation_kind { append, truncate, install_snapshot, compact };

    struct pending_operation {
        storage_op op;
        operation_kind kind;
        zxid last_kept;                        // truncate only
        std::vector<log_record> records;       // append; install_snapshot: those after it
        std::optional<log_snapshot> snapshot;  // install_snapshot, compact
    };

    // The log as one state of the disk holds it: the snapshot in effect (if any) and the
    // records after it, ascending, every one above the snapshot's zxid.

    struct pending_sync {
        storage_op op;
        std::uint64_t covered_end;  // operations [0, covered_end) since the last crash
        std::error_code failure;
        event_queue::event_id event;
    };

    struct pending_epoch_write {
        storage_op op;
        epochs value;
        std::error_code failure;
        event_queue::event_id event;
    };

    enum class fate { keep, drop, tear };

    static void check_options(const disk_options& o) {
        ZAB_ASSERT(o.sync_latency_min <= o.sync_latency_max, "disk_options: latency min > max");
        ZAB_ASSERT(o.slow_factor > 0.0, "disk_options: slow_factor must be positive");
        ZAB_ASSERT(o.epoch_latency_factor >= 0.0, "disk_options: negative epoch_latency_factor");
        ZAB_ASSERT(o.stall_probability >= 0.0 && o.stall_probability <= 1.0 &&
                       o.lie_probability >= 0.0 && o.lie_probability <= 1.0,
                   "disk_options: probabilities must lie in [0, 1]");
        ZAB_ASSERT(o.crash_keep >= 0.0 && o.crash_drop >= 0.0 && o.crash_tear >= 0.0 &&
                       o.crash_keep + o.crash_drop + o.crash_tear > 0.0,
                   "disk_options: crash weights must be non-negative, not all zero");
    }


    static void apply(log_image& image, const pending_operation& operation) {
        switch (operation.kind) {
            case operation_kind::append:
                image.records.insert(image.records.end(), operation.records.begin(),
                                     operation.records.end());
                break;
            case operation_kind::truncate:
                image.truncate_after(operation.last_kept);
                break;
            case operation_kind::install_snapshot:
                image = log_image{operation.snapshot, operation.records};
                break;
            case operation_kind::compact:
                // The records it covers were applied before it (operations replay in order).
                image.compact(operation.snapshot->last_included, operation.snapshot->state);
                break;
        }
    }

    void note_log_op(storage_op op) {
        ZAB_ASSERT(!last_log_op_ || op >= *last_log_op_,
                   "log operations must be numbered in order");
        last_log_op_ = op;
    }

    sim_time draw_latency(double factor) {
        const auto base = random_.between(options_.sync_latency_min, options_.sync_latency_max);
        sim_time latency =
            static_cast<sim_time>(static_cast<double>(base) * options_.slow_factor * factor);
        // Draws only when the knob is on, so a run without it replays as before.
        if (options_.stall_probability > 0.0 && random_.chance(options_.stall_probability))
            latency += options_.stall_latency;
        return latency;
    }

    double crash_weight_total() const {
        return options_.crash_keep + options_.crash_drop + options_.crash_tear;
    }

    fate draw_fate() {
        const double u = random_.unit() * crash_weight_total();
        if (u < options_.crash_keep) return fate::keep;
        if (u < options_.crash_keep + options_.crash_drop) return fate::drop;
        return fate::tear;
    }

    bool draw_survives() { return random_.unit() * crash_weight_total() < options_.crash_keep; }

    void deliver(const storage_completion& completion) {
        if (!handler_) return;
        auto handler = handler_;  // the handler may replace itself
        handler(completion);
    }

    static constexpr std::uint8_t bit_of(operation_kind k) {
        switch (k) {
            case operation_kind::append: return 1u << static_cast<int>(storage_op_kind::append);
            case operation_kind::truncate: return 1u << static_cast<int>(storage_op_kind::truncate);
            case operation_kind::install_snapshot:
                return 1u << static_cast<int>(storage_op_kind::install_snapshot);
            case operation_kind::compact: return 0;
        }
        return 0;
    }

    void complete_sync(std::uint64_t generation) {
        ZAB_ASSERT(generation == generation_ && !pending_syncs_.empty(), "stale sync completion");
        pending_sync sync = std::move(pending_syncs_.front());
        pending_syncs_.pop_front();
        if (sync.failure) {
            ++stats_.syncs_failed;
            observe({storage_op_kind::sync, storage_event::phase::failed, sync.op, {}, {}});
            deliver({storage_completion::kind::failed, sync.op, sync.failure});
            return;
        }
        if (options_.lie_probability > 0.0 && random_.chance(options_.lie_probability)) {
            ++stats_.syncs_lied;  // reported durable; the writes stay where they were
            observe({storage_op_kind::sync, storage_event::phase::completed, sync.op, {}, {}});
            deliver({storage_completion::kind::log_durable, sync.op, {}});
            return;
        }
        std::uint8_t covered = 0;
        while (synced_count_ < sync.covered_end) {
            ZAB_ASSERT(!unsynced_.empty(), "sync covers more than was written");
            covered = static_cast<std::uint8_t>(covered | bit_of(unsynced_.front().kind));
            apply(durable_, unsynced_.front());
            unsynced_.pop_front();
            ++synced_count_;
        }
        ++stats_.syncs_completed;
        observe({storage_op_kind::sync, storage_event::phase::completed, sync.op, {}, {}, covered});
        deliver({storage_completion::kind::log_durable, sync.op, {}});
    }

    void complete_epoch_write(std::uint64_t generation) {
        ZAB_ASSERT(generation == generation_ && !pending_epoch_writes_.empty(),
                   "stale epoch completion");
        pending_epoch_write write = std::move(pending_epoch_writes_.front());
        pending_epoch_writes_.pop_front();
        if (write.failure) {
            ++stats_.epoch_writes_failed;
            observe({storage_op_kind::epoch_write, storage_event::phase::failed, write.op,
                     durable_epochs_, write.value});
            deliver({storage_completion::kind::failed, write.op, write.failure});
            return;
        }
        observe({storage_op_kind::epoch_write, storage_event::phase::completed, write.op,
                 durable_epochs_, write.value});
        durable_epochs_ = write.value;
        ++stats_.epoch_writes_completed;
        deliver({storage_completion::kind::epochs_durable, write.op, {}});
    }

    void cancel_pending_completions() {
        for (const auto& s : pending_syncs_) events_.cancel(s.event);
        for (const auto& w : pending_epoch_writes_) events_.cancel(w.event);
        pending_syncs_.clear();
        pending_epoch_writes_.clear();
    }

    // Replays the un-synced operations in order on the durable image. Every record's fate is
    // drawn (independently), but recovery stops at the first record that is not kept and at
    // the first truncation or snapshot install that did not make it: what follows is
    // unreachable. A truncation or install is applied whole or not at all.
    void recover_log(crash_report& report) {
        bool cut = false;
        for (const auto& operation : unsynced_) {
            if (operation.kind != operation_kind::append) {
                const bool truncation = operation.kind == operation_kind::truncate;
                const bool applied = draw_survives() && !cut;
                if (applied) apply(durable_, operation);
                if (!applied) cut = true;
                if (truncation)
                    ++(applied ? report.truncates_applied : report.truncates_lost);
                else if (operation.kind == operation_kind::compact)
                    ++(applied ? report.compactions_applied : report.compactions_lost);
                else
                    ++(applied ? report.snapshot_installs_applied : report.snapshot_installs_lost);
                continue;
            }
            for (const auto& record : operation.records) {
                switch (draw_fate()) {
                    case fate::keep:
                        if (cut) {
                            ++report.records_unreachable;
                        } else {
                            durable_.records.push_back(record);
                            ++report.records_kept;
                        }
                        break;
                    case fate::drop:
                        ++report.records_dropped;
                        cut = true;
                        break;
                    case fate::tear:
                        ++report.records_torn;
                        cut = true;
                        break;
                }
            }
        }
    }

    // Epoch writes are atomic renames performed in order: a prefix of them lands.
    void recover_epochs(const std::vector<epochs>& unfinished, crash_report& report) {
        bool cut = false;
        for (const auto& value : unfinished) {
            if (!cut && draw_survives()) {
                durable_epochs_ = value;
                ++report.epoch_writes_kept;
            } else {
                cut = true;
                ++report.epoch_writes_dropped;
            }
        }
    }

    event_queue& events_;
    prng& random_;
    disk_options options_;
    std::function<void(const storage_completion&)> handler_;

    log_image visible_;
    log_image durable_;
    std::deque<pending_operation> unsynced_;  // log operations not yet covered by a sync
    std::uint64_t synced_count_ = 0;          // log operations made durable since the crash
    std::optional<storage_op> last_log_op_;
    std::deque<pending_sync> pending_syncs_;
    sim_time last_sync_completion_ = 0;

    epochs visible_epochs_;
    epochs durable_epochs_;
    std::deque<pending_epoch_write> pending_epoch_writes_;
    sim_time last_epoch_completion_ = 0;

    storage_fault_plan::outcome cover_;  // the faults of log operations not yet synced
    std::uint64_t generation_ = 0;  // bumped by crash(): completions from before never land
    disk_stats stats_;
};

static_assert(zab::compactable_log<sim_log>);
static_assert(zab::tail_readable_log<sim_log>);
static_assert(zab::system_txn_indexed_log<sim_log>);

}  // namespace zab::testing
