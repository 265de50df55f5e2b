// zab::file_log under power loss, over zab::testing::durable_image_fs (issue #6: "crash tests
// that can see a missing fsync").
//
// The kill test (file_log_kill_test.cpp) cannot tell a synced byte from one in the page
// cache: a killed process loses neither. Here the file system is in memory and keeps the
// durable image apart, so a power loss really loses what was not synced.
//
// Each seed drives one workload on one replica's log: appends, sync requests, TRUNCs,
// compactions (checkpoints), snapshot installs and epoch writes, flushed now and then. The
// power fails between flushes, in the middle of a flush job, or in the middle of the
// recovery that follows (durable_image_fs::fail_after), and the crash is either plain (the
// durable image, nothing else) or seeded (each un-synced page kept, dropped or torn; each
// un-synced directory operation kept or dropped). The workload remembers what file_log
// reported: `log_durable` and `epochs_durable` of each finish_flush, and which checkpoint a
// successful flush carried. After each power loss it reopens the log and checks:
//   - the records after the snapshot are, byte for byte, one of the states the log passed
//     through since the last state reported durable — the durable state itself, or a state
//     an operation issued after it left on the way (a prefix of an append, a TRUNC half
//     done): nothing reported durable is lost, nothing truncated or never written shows up;
//   - the snapshot is the one last known durable or one issued after it, and its records
//     agree with it (an installed snapshot's own history; a checkpoint's record is there);
//   - the epochs are the last reported durable or a later write;
//   - a second open finds the same log and changes nothing on disk (recovery idempotent).
// Then the workload goes on from the recovered log.
//
// The mutation test: for every zab::sync_site, the same workload with that site's syncs
// skipped (they succeed, the durable image does not move) must fail within a bounded number
// of seeds — or the site is listed as redundant with the argument why. A loop over the enum,
// so a new sync site cannot be forgotten.
//
// Last, zab::testing::sim_file_log (file_log on the simulator's disk) is run under random
// completions and crashes, and shown to notice a skipped fdatasync too.
//
// ZAB_POWER_LOSS_SEEDS multiplies the number of seeds (a longer hunt); ZAB_POWER_LOSS_SEED
// runs that one seed only; ZAB_POWER_LOSS_VERBOSE=1 prints each sweep's counts and what each
// mutation run found; ZAB_POWER_LOSS_TRACE=1 prints every step, flush, power loss and open.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "storage_test_support.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/testing/durable_image_fs.hpp"
#include "zab/testing/event_queue.hpp"
#include "zab/testing/random.hpp"
#include "zab/testing/sim_file_log.hpp"
#include "zab/testing/sim_log.hpp"

using namespace storage_test;
using zab::storage_op;
using zab::sync_site;
using zab::testing::durable_image_fs;
using zab::testing::prng;

namespace {

std::uint64_t environment_number(const char* name, std::uint64_t fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    return std::strtoull(text, nullptr, 10);
}

/// Bytes that follow from `key` alone: mostly small, some empty, a fifth up to `max` — or
/// exactly `max` when `largest`.
shared_bytes bytes_of(std::uint64_t key, std::size_t max, bool largest = false) {
    const std::uint64_t h = mix(key);
    const std::uint64_t kind = h % 10;
    const std::size_t size = largest    ? max
                             : kind < 5 ? static_cast<std::size_t>(mix(h) % 120)
                             : kind < 8 ? static_cast<std::size_t>(120 + mix(h) % 600)
                                        : static_cast<std::size_t>(mix(h) % (max + 1));
    std::vector<std::byte> out(size);
    std::uint64_t x = h;
    for (std::size_t i = 0; i < size; ++i) {
        if (i % 8 == 0) x = mix(x);
        out[i] = static_cast<std::byte>(x >> (8 * (i % 8)));
    }
    return shared_bytes{std::move(out)};
}

constexpr std::size_t max_record_bytes = 1500;
constexpr std::size_t max_state_bytes = 6000;

/// Windows and segments of a few pages, so that a crash finds un-synced bytes spread over
/// pages, segments roll often, and TRUNCs and checkpoints span several files.
file_log_options power_loss_options(durable_image_fs& fs) {
    file_log_options o;
    o.directory = "/volume/data";
    o.cluster_id = 5;
    o.replica_id = 1;
    o.max_record_bytes = max_record_bytes;
    o.group_commit_window_bytes = 2000;
    o.segment_bytes = 5000;
    o.snapshots_kept = 2;
    o.filesystem = &fs;
    return o;
}

/// A record of the workload: its payload follows from (id, salt), and the salt is new for
/// every append, so a zxid written again after a TRUNC has other bytes. About one in five
/// (of 8 bytes or more) begins like a system transaction, for the log's index of them
/// (file_log::system_txns); its size, and so every layout on disk, stays the same.
log_record make_record(zxid id, std::uint64_t salt, bool largest = false) {
    const std::uint64_t key = id.value() * 1000003u + salt;
    shared_bytes payload = bytes_of(key, max_record_bytes, largest);
    if (payload.size() < zab::system_txn_magic.size() || mix(key + 1) % 5 != 0) return {id, payload};
    std::vector<std::byte> bytes(payload.view().begin(), payload.view().end());
    std::copy(zab::system_txn_magic.begin(), zab::system_txn_magic.end(), bytes.begin());
    return {id, shared_bytes{std::move(bytes)}};
}

/// The zxids among `records` that are system transactions: what the log's index must say.
std::vector<zxid> system_ids(const std::vector<log_record>& records) {
    std::vector<zxid> out;
    for (const log_record& r : records)
        if (zab::is_system_txn(r.txn.view())) out.push_back(r.id);
    return out;
}

/// The states one log operation may leave after a crash: the first `length` records of
/// `records`, for every length in [min_length, max_length]. `final_length` is the state once
/// the operation is done.
struct operation_span {
    storage_op op = 0;
    std::uint64_t install = 0;  ///< which snapshot install these records follow
    std::vector<log_record> records;
    std::size_t min_length = 0;
    std::size_t max_length = 0;
    std::size_t final_length = 0;
};

struct snapshot_entry {
    enum class kind { none, installed, checkpoint };
    kind what = kind::none;
    std::uint64_t install = 0;
    storage_op op = 0;  ///< installed: its log operation (0 for one found at recovery)
    zxid last_included;
    shared_bytes state;
};

struct epoch_entry {
    storage_op op = 0;
    zab::epochs value;
};

/// What a reopened log holds.
struct recovered_state {
    std::optional<zab::log_snapshot> snapshot;
    std::vector<zab::log_record> records;
    zab::epochs stored;
    bool fresh = false;

    bool operator==(const recovered_state& o) const {
        const bool same_snapshot =
            snapshot.has_value() == o.snapshot.has_value() &&
            (!snapshot || (snapshot->last_included == o.snapshot->last_included &&
                           snapshot->state == o.snapshot->state));
        if (!same_snapshot || !(stored == o.stored) || records.size() != o.records.size())
            return false;
        for (std::size_t i = 0; i < records.size(); ++i)
            if (records[i].id != o.records[i].id || !(records[i].txn == o.records[i].txn))
                return false;
        return true;
    }
};

struct workload_profile {
    std::size_t steps = 60;
    double mid_job_crash = 0.12;   ///< a flush has the power fail inside it
    /// A crash inside a flush is a kill -9 of the process instead (the page cache survives;
    /// the reopened log vouches for what it finds), half the time followed by a power loss
    /// right after the reopen (issue 34, defect 3).
    double kill_instead = 0.3;
    double recovery_crash = 0.15;  ///< an open has the power fail inside it
    double seeded_crash = 0.6;     ///< a power loss keeps, drops or tears (else plain)
};

/// One seed's workload. `run()` returns the first problem found, or nothing.
class power_loss_workload {
public:
    power_loss_workload(std::uint64_t seed, workload_profile profile,
                        std::optional<sync_site> skipped)
        : random_{seed}, profile_{profile}, options_{power_loss_options(fs_)} {
        fs_.make_durable_directories("/volume");
        if (skipped) fs_.skip_syncs(*skipped);
        spans_.push_back({0, 0, {}, 0, 0, 0});
        snapshots_.push_back({});
        epochs_.push_back({});
    }

    std::optional<std::string> run() {
        if (auto problem = recover()) return problem;
        for (step_ = 1; step_ <= profile_.steps; ++step_) {
            const std::uint64_t action = random_.below(100);
            if (trace_)
                fmt::print("step {}: action {} (last {}, snapshot {})\n", step_, action,
                           log_->last_zxid(),
                           log_->snapshot() ? log_->snapshot()->last_included : zxid{});
            std::optional<std::string> problem;
            if (action < 35)
                append();
            else if (action < 48)
                log_->make_durable(last_log_op_);
            else if (action < 70)
                problem = flush();
            else if (action < 76)
                truncate();
            else if (action < 81)
                compact();
            else if (action < 86)
                install();
            else if (action < 93)
                write_epochs();
            else
                problem = power_loss();
            if (!problem) problem = index_problem();
            if (problem) return fmt::format("step {}: {}", step_, *problem);
        }
        log_->make_durable(last_log_op_);
        if (auto problem = flush(false)) return fmt::format("final flush: {}", *problem);
        if (auto problem = power_loss()) return fmt::format("final power loss: {}", *problem);
        return std::nullopt;
    }

    const durable_image_fs& fs() const { return fs_; }

private:
    // --- the workload ----------------------------------------------------------------------

    void append() {
        const std::size_t n = 1 + random_.below(6);
        std::vector<log_record> batch;
        for (std::size_t i = 0; i < n; ++i) {
            const zxid id{epoch_, ++counter_};
            // The first append after a recovery is often of the largest record, so that it
            // often starts a new segment: the segment whose torn tail recovery cut is then
            // never written again, and only recovery's fdatasync makes the cut durable.
            const bool largest = i == 0 && std::exchange(recovered_, false) && random_.chance(0.5);
            batch.push_back(make_record(id, ++salt_, largest));
        }
        const storage_op op = new_log_op();
        log_->append(op, batch);
        operation_span span{op, install_, visible_, visible_.size(), 0, 0};
        span.records.insert(span.records.end(), batch.begin(), batch.end());
        span.max_length = span.final_length = span.records.size();
        spans_.push_back(std::move(span));
        visible_.insert(visible_.end(), batch.begin(), batch.end());
    }

    /// A TRUNC to a random point at or above the snapshot in effect (the protocol never
    /// truncates a committed record, §5.6). The zxids after it are used again, with other
    /// bytes, so a record that comes back from the dead is noticed.
    void truncate() {
        const std::size_t floor = below_snapshot();
        if (visible_.size() == floor) return;
        const std::size_t kept = floor + random_.below(visible_.size() - floor);
        const zxid last_kept = kept > 0
                                   ? visible_[kept - 1].id
                                   : (log_->snapshot() ? log_->snapshot()->last_included : zxid{});
        const storage_op op = new_log_op();
        log_->truncate_after(op, last_kept);
        spans_.push_back({op, install_, visible_, kept, visible_.size(), kept});
        visible_.resize(kept);
        counter_ = last_kept.epoch() == epoch_ ? last_kept.counter() : 0;
    }

    void compact() {
        const std::size_t floor = below_snapshot();
        if (visible_.size() == floor) return;
        const log_record& at = visible_[floor + random_.below(visible_.size() - floor)];
        const shared_bytes state = bytes_of(++salt_, max_state_bytes);
        if (!log_->compact(at.id, state)) return;  // e.g. an install waits for its flush
        snapshots_.push_back({snapshot_entry::kind::checkpoint, install_, 0, at.id, state});
        pending_checkpoint_ = snapshots_.size() - 1;
    }

    /// A SNAP: the snapshot's zxid may lie below the last record (a log the leader's
    /// snapshot replaces, §5.3), and records may follow it.
    void install() {
        const zxid last_included{epoch_,
                                 1 + static_cast<std::uint32_t>(random_.below(counter_ + 3))};
        counter_ = last_included.counter();
        const std::size_t n = random_.below(5);
        std::vector<log_record> following;
        for (std::size_t i = 0; i < n; ++i) {
            const zxid id{epoch_, ++counter_};
            following.push_back(make_record(id, ++salt_));
        }
        const shared_bytes state = bytes_of(++salt_, max_state_bytes);
        const storage_op op = new_log_op();
        log_->install_snapshot(op, last_included, state, following);
        install_ = ++installs_;
        snapshots_.push_back({snapshot_entry::kind::installed, install_, op, last_included, state});
        spans_.push_back({op, install_, following, n, n, n});
        visible_ = following;
        pending_checkpoint_.reset();  // an install replaces a checkpoint not yet flushed
    }

    /// A new acceptedEpoch (and sometimes currentEpoch). Records of the new epoch are
    /// appended only once it is reported durable, as the protocol does (ACKEPOCH, §4).
    void write_epochs() {
        const zab::epochs now = log_->stored_epochs();
        const zab::epochs next{now.accepted + 1,
                               random_.chance(0.5) ? now.accepted + 1 : now.current};
        const storage_op op = ++last_op_;
        log_->write_epochs(op, next);
        epochs_.push_back({op, next});
    }

    std::optional<std::string> flush(bool may_crash = true) {
        const bool crash = may_crash && random_.chance(profile_.mid_job_crash);
        // Often early in the job: most jobs are a few steps.
        if (crash) fs_.fail_after(random_.below(random_.chance(0.5) ? 6 : 24));
        zab::flush_job job = log_->begin_flush();
        job.run();
        const zab::flush_result result = log_->finish_flush(std::move(job));
        if (trace_)
            fmt::print("  flush{}: {}\n", fs_.powered_off() ? " (power failed)" : "",
                       result.failed() ? result.reason : std::string{"ok"});
        if (fs_.powered_off()) return died_in_job();
        if (result.failed()) return fmt::format("flush failed: {}", result.reason);
        if (result.log_durable) log_durable(*result.log_durable);
        if (result.epochs_durable) epochs_durable(*result.epochs_durable);
        // The checkpoint is a job of its own, due once its record is durable; the power may
        // fail inside it too, after the flush's completions were reported.
        if (pending_checkpoint_ && log_->has_checkpoint_work()) {
            zab::checkpoint_job checkpoint = log_->begin_checkpoint();
            checkpoint.run();
            log_->finish_checkpoint(std::move(checkpoint));
            if (trace_)
                fmt::print("  checkpoint{}: {}\n", fs_.powered_off() ? " (power failed)" : "",
                           log_->failed() ? log_->failure_reason() : std::string{"ok"});
            if (fs_.powered_off()) return died_in_job();
            if (log_->failed()) return fmt::format("checkpoint failed: {}", log_->failure_reason());
            snapshot_floor_ = std::max(snapshot_floor_, *std::exchange(pending_checkpoint_, {}));
        }
        fs_.cancel_fail_after();
        return std::nullopt;
    }

    // --- what was reported durable -----------------------------------------------------------

    /// Every log operation ≤ `op` is durable: states before the last of them are gone.
    void log_durable(storage_op op) {
        std::size_t last = 0;
        while (last + 1 < spans_.size() && spans_[last + 1].op <= op) ++last;
        operation_span& done = spans_[last];
        done.records.resize(done.final_length);
        done.min_length = done.max_length = done.final_length;
        spans_.erase(spans_.begin(), spans_.begin() + static_cast<std::ptrdiff_t>(last));
        for (std::size_t i = snapshot_floor_ + 1; i < snapshots_.size(); ++i)
            if (snapshots_[i].what == snapshot_entry::kind::installed && snapshots_[i].op <= op)
                snapshot_floor_ = i;
    }

    void epochs_durable(storage_op op) {
        for (std::size_t i = epoch_floor_; i < epochs_.size(); ++i)
            if (epochs_[i].op == op) {
                epoch_floor_ = i;
                if (epochs_[i].value.accepted > epoch_) {
                    epoch_ = epochs_[i].value.accepted;
                    counter_ = 0;
                }
            }
    }

    // --- power loss and recovery -------------------------------------------------------------

    /// The process died inside a job: a power loss, or a kill -9 (then the reopened log is
    /// the durable model, as after any recovery, and a power loss may follow at once).
    std::optional<std::string> died_in_job() {
        if (!random_.chance(profile_.kill_instead)) return power_loss();
        if (trace_) fmt::print("  kill -9\n");
        log_.reset();
        fs_.kill();
        if (auto problem = recover()) return problem;
        if (random_.chance(0.5)) return power_loss();
        return std::nullopt;
    }

    std::optional<std::string> power_loss() {
        if (trace_) fmt::print("  power loss\n");
        log_.reset();
        if (random_.chance(profile_.seeded_crash)) {
            fs_.power_loss(random_);
        } else {
            fs_.power_loss();
        }
        return recover();
    }

    /// Opens the log (the power may fail inside the recovery, and again), checks what it
    /// holds, opens it a second time, and continues the workload from it.
    std::optional<std::string> recover() {
        for (int attempt = 0;; ++attempt) {
            if (attempt < 3 && random_.chance(profile_.recovery_crash))
                fs_.fail_after(random_.below(12));
            std::string why;
            auto opened = file_log::open(options_, &why);
            if (trace_) fmt::print("  open: {}\n", opened ? std::string{"ok"} : why);
            if (!opened && fs_.powered_off()) {
                if (random_.chance(profile_.seeded_crash))
                    fs_.power_loss(random_);
                else
                    fs_.power_loss();
                continue;
            }
            fs_.cancel_fail_after();
            if (!opened) return fmt::format("open failed: {}", why);
            log_.emplace(std::move(opened).value());
            break;
        }
        recovered_state first;
        if (auto problem = read_state(first)) return problem;
        if (auto problem = check(first)) return problem;

        log_.reset();
        // A second open syncs again what the first made durable (file_log syncs at every
        // open, issue 34 defect 3) and changes nothing else.
        const auto syncs = [this] {
            std::uint64_t n = 0;
            for (std::uint64_t count : fs_.stats().syncs) n += count;
            return n;
        };
        const std::uint64_t operations = fs_.stats().operations - syncs();
        std::string why;
        auto again = file_log::open(options_, &why);
        if (!again) return fmt::format("second open failed: {}", why);
        log_.emplace(std::move(again).value());
        recovered_state second;
        if (auto problem = read_state(second)) return problem;
        if (!(second == first)) return std::string{"a second open found another log"};
        if (fs_.stats().operations - syncs() != operations)
            return fmt::format("a second open changed the disk ({} operations)",
                               fs_.stats().operations - syncs() - operations);
        restart_model(first);
        recovered_ = true;
        return std::nullopt;
    }

    std::optional<std::string> read_state(recovered_state& out) {
        out.snapshot = log_->snapshot();
        out.stored = log_->stored_epochs();
        out.fresh = log_->fresh();
        zxid after = out.snapshot ? out.snapshot->last_included : zxid{};
        for (;;) {
            auto part = log_->read(after, 7);
            if (!part)
                return fmt::format("read after {} failed: {}", after, part.error().message());
            if (part.value().empty()) break;
            after = part.value().back().id;
            out.records.insert(out.records.end(), part.value().begin(), part.value().end());
        }
        if (log_->last_zxid() != (out.records.empty()
                                      ? (out.snapshot ? out.snapshot->last_included : zxid{})
                                      : out.records.back().id))
            return std::string{"last_zxid() disagrees with the records read"};
        if (log_->system_txns() != system_ids(out.records))
            return std::string{"the reopened log's index of system transactions disagrees with "
                               "its records"};
        const std::size_t tail = std::min<std::size_t>(out.records.size(), 3);
        auto last = log_->read_last(3);
        if (!last || last.value().size() != tail ||
            !std::equal(last.value().begin(), last.value().end(), out.records.end() - static_cast<std::ptrdiff_t>(tail),
                        [](const log_record& a, const log_record& b) {
                            return a.id == b.id && a.txn == b.txn;
                        }))
            return std::string{"read_last(3) is not the last records read"};
        return std::nullopt;
    }

    /// After every step: the index of system transactions (file_log::system_txns) is that of
    /// the records the log holds now — through appends, TRUNCs, compactions and installs.
    std::optional<std::string> index_problem() const {
        if (!log_ || log_->failed()) return std::nullopt;
        const zxid floor = log_->snapshot() ? log_->snapshot()->last_included : zxid{};
        std::vector<zxid> expected = system_ids(visible_);
        std::erase_if(expected, [&](zxid id) { return id <= floor; });  // compacted away
        if (log_->system_txns() != expected)
            return std::string{"the index of system transactions disagrees with the records"};
        return std::nullopt;
    }

    /// The checks of the file comment.
    std::optional<std::string> check(const recovered_state& r) const {
        bool epochs_allowed = false;
        for (std::size_t i = epoch_floor_; i < epochs_.size(); ++i)
            epochs_allowed = epochs_allowed || epochs_[i].value == r.stored;
        if (!epochs_allowed)
            return fmt::format("recovered epochs {}/{}, but {}/{} were reported durable",
                               r.stored.accepted, r.stored.current,
                               epochs_[epoch_floor_].value.accepted,
                               epochs_[epoch_floor_].value.current);
        bool snapshot_known = false;
        for (std::size_t i = snapshot_floor_; i < snapshots_.size(); ++i) {
            const snapshot_entry& s = snapshots_[i];
            const bool same = (s.what == snapshot_entry::kind::none)
                                  ? !r.snapshot
                                  : r.snapshot && r.snapshot->last_included == s.last_included &&
                                        r.snapshot->state == s.state;
            if (!same) continue;
            snapshot_known = true;
            for (const operation_span& span : spans_)
                if (span.install == s.install && matches(r, s, span)) return std::nullopt;
        }
        const std::string snapshot =
            r.snapshot ? fmt::format("{}", r.snapshot->last_included) : std::string{"none"};
        if (!snapshot_known)
            return fmt::format("recovered snapshot {} is not the one last known durable", snapshot);
        const operation_span& durable = spans_.front();
        return fmt::format(
            "recovered {} records after snapshot {} ({} .. {}); the durable "
            "state has {} records ({} .. {}): records lost or resurrected",
            r.records.size(), snapshot, r.records.empty() ? zxid{} : r.records.front().id,
            r.records.empty() ? zxid{} : r.records.back().id, durable.final_length,
            durable.final_length ? durable.records.front().id : zxid{},
            durable.final_length ? durable.records[durable.final_length - 1].id : zxid{});
    }

    /// Whether `r` is a state `span` may leave, seen after snapshot `s`.
    static bool matches(const recovered_state& r, const snapshot_entry& s,
                        const operation_span& span) {
        std::size_t below = 0;  // records of the span the snapshot covers
        if (s.what != snapshot_entry::kind::none)
            while (below < span.records.size() && span.records[below].id <= s.last_included)
                ++below;
        if (s.what == snapshot_entry::kind::checkpoint &&
            (below == 0 || span.records[below - 1].id != s.last_included))
            return false;  // a checkpoint is of a record the log holds
        const std::size_t length = below + r.records.size();
        if (length < std::max(span.min_length, below) || length > span.max_length) return false;
        for (std::size_t i = 0; i < r.records.size(); ++i)
            if (r.records[i].id != span.records[below + i].id) return false;
        for (std::size_t i = 0; i < r.records.size(); ++i)
            if (!(r.records[i].txn == span.records[below + i].txn)) return false;
        return true;
    }

    /// The recovered log is the new durable state.
    void restart_model(const recovered_state& r) {
        install_ = ++installs_;
        visible_ = r.records;
        spans_.assign(1,
                      {0, install_, visible_, visible_.size(), visible_.size(), visible_.size()});
        snapshots_.clear();
        if (r.snapshot)
            snapshots_.push_back({snapshot_entry::kind::installed, install_, 0,
                                  r.snapshot->last_included, r.snapshot->state});
        else
            snapshots_.push_back({snapshot_entry::kind::none, install_, 0, zxid{}, {}});
        snapshot_floor_ = 0;
        epochs_.assign(1, {0, r.stored});
        epoch_floor_ = 0;
        epoch_ = r.stored.accepted;
        const zxid last = log_->last_zxid();
        counter_ = last.epoch() == epoch_ ? last.counter() : 0;
        last_log_op_ = 0;
        pending_checkpoint_.reset();
    }

    std::size_t below_snapshot() const {
        const auto snapshot = log_->snapshot();
        if (!snapshot) return 0;
        std::size_t n = 0;
        while (n < visible_.size() && visible_[n].id <= snapshot->last_included) ++n;
        return n;
    }

    storage_op new_log_op() { return last_log_op_ = ++last_op_; }

    prng random_;
    workload_profile profile_;
    durable_image_fs fs_;
    file_log_options options_;
    std::optional<file_log> log_;
    std::size_t step_ = 0;
    bool recovered_ = false;  // no append since the last recovery

    std::uint32_t epoch_ = 0;    // the acceptedEpoch reported durable: new records use it
    std::uint32_t counter_ = 0;  // of the last zxid used in epoch_
    std::uint64_t salt_ = 0;
    storage_op last_op_ = 0;
    storage_op last_log_op_ = 0;
    std::uint64_t install_ = 0;
    std::uint64_t installs_ = 0;

    std::vector<log_record> visible_;    // every record since the install (compacted included)
    std::vector<operation_span> spans_;  // spans_[0] ends in the state reported durable
    std::vector<snapshot_entry> snapshots_;
    std::size_t snapshot_floor_ = 0;
    std::optional<std::size_t> pending_checkpoint_;
    bool trace_ = environment_number("ZAB_POWER_LOSS_TRACE", 0) != 0;
    std::vector<epoch_entry> epochs_;
    std::size_t epoch_floor_ = 0;
};

}  // namespace

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t default_seeds = 300;  // ASan and UBSan: about 10x slower per seed
#else
constexpr std::uint64_t default_seeds = 1000;
#endif

/// Seeds of one sweep: ZAB_POWER_LOSS_SEEDS multiplies them for a longer hunt.
std::uint64_t sweep_seeds() {
    return default_seeds * environment_number("ZAB_POWER_LOSS_SEEDS", 1);
}

/// Runs seeds [first, first + count) (or only ZAB_POWER_LOSS_SEED), requiring each to pass.
void sweep(std::uint64_t first, std::uint64_t count, workload_profile profile) {
    if (const std::uint64_t only = environment_number("ZAB_POWER_LOSS_SEED", 0); only != 0) {
        first = only;
        count = 1;
    }
    zab::testing::durable_image_stats total;
    for (std::uint64_t seed = first; seed < first + count; ++seed) {
        power_loss_workload workload{seed, profile, std::nullopt};
        const auto problem = workload.run();
        INFO("seed " << seed << " (ZAB_POWER_LOSS_SEED=" << seed << " replays it)");
        REQUIRE(problem.value_or("") == "");
        const auto& stats = workload.fs().stats();
        total.operations += stats.operations;
        total.power_losses += stats.power_losses;
        for (std::size_t i = 0; i < zab::sync_site_count; ++i) total.syncs[i] += stats.syncs[i];
    }
    if (environment_number("ZAB_POWER_LOSS_VERBOSE", 0) != 0) {
        fmt::print("{} seeds: {} disk operations, {} power losses; syncs:", count, total.operations,
                   total.power_losses);
        for (std::size_t i = 0; i < zab::sync_site_count; ++i)
            fmt::print(" {} {}", zab::sync_site_name(static_cast<sync_site>(i)), total.syncs[i]);
        fmt::print("\n");
    }
}

}  // namespace

TEST_CASE("file_log keeps what it reported durable through plain power losses",
          "[file_log][power_loss]") {
    workload_profile profile;
    profile.seeded_crash = 0.0;
    sweep(1, sweep_seeds(), profile);
}

TEST_CASE(
    "file_log keeps what it reported durable when a crash keeps, drops or tears "
    "un-synced pages and directory operations",
    "[file_log][power_loss]") {
    workload_profile profile;
    profile.seeded_crash = 1.0;
    sweep(100'001, sweep_seeds(), profile);
}

TEST_CASE("file_log recovers when the power fails inside flushes and recoveries",
          "[file_log][power_loss]") {
    workload_profile profile;
    profile.mid_job_crash = 0.5;
    profile.recovery_crash = 0.4;
    profile.steps = 40;
    sweep(200'001, sweep_seeds(), profile);
}

namespace {

/// Sync sites whose syncs no crash can show to be needed, with the reason. Each is still
/// swept with its syncs skipped, and the sweep must then pass: if it fails, the site is
/// needed after all and belongs in the mutation test proper.
std::optional<std::string_view> redundant(sync_site site) {
    switch (site) {
        case sync_site::identity_directory:
        case sync_site::recovery_removal_directory:
            // The directory fsync at the end of every open (recovery_directory) follows it
            // with nothing in between that a crash could expose.
            return "the open's own directory fsync follows it";
        case sync_site::synced_watermark_directory:
            // Without it the synced file may be missing after a power loss: the next open
            // then takes the directory for one of an earlier release and writes it anew. It
            // guards only the detection of a lost synced tail, a fault no power loss makes.
            return "it guards the detection of a lost synced tail, not the data";
        case sync_site::snapshot_retire_directory:
            // It makes the unlinks of what a durable snapshot replaced durable: segments of
            // older generations (recovery ignores any generation older than the snapshot's)
            // and segments a checkpoint covers (recovery drops them, in any subset, because
            // the checkpoint is durable before the first unlink). Files that come back are
            // unlinked again by recovery; any later directory fsync makes the unlinks
            // durable anyway. It saves recovery that work, nothing more.
            return "the unlinked files are ones recovery ignores and removes again";
        default: return std::nullopt;
    }
}

struct mutation_outcome {
    std::optional<std::uint64_t> failing_seed;
    std::string problem;
    std::uint64_t seeds_run = 0;
    std::uint64_t syncs_skipped = 0;  ///< over every seed run
};

mutation_outcome hunt(sync_site site, std::uint64_t seeds) {
    workload_profile profile;  // plain and seeded crashes, in and between flushes
    profile.mid_job_crash = 0.3;
    profile.recovery_crash = 0.3;
    mutation_outcome outcome;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
        power_loss_workload workload{seed, profile, site};
        auto problem = workload.run();
        ++outcome.seeds_run;
        outcome.syncs_skipped +=
            workload.fs().stats().syncs_skipped[static_cast<std::size_t>(site)];
        if (problem) {
            outcome.failing_seed = seed;
            outcome.problem = std::move(*problem);
            return outcome;
        }
    }
    return outcome;
}

}  // namespace

TEST_CASE(
    "skipping the syncs of any one sync site loses data that file_log reported "
    "durable (the crash tests can see a missing fsync)",
    "[file_log][power_loss][mutation]") {
    const bool verbose = environment_number("ZAB_POWER_LOSS_VERBOSE", 0) != 0;
    // The same bound in every build: the seed that shows a site needed is the same under
    // ASan (a failure stops the hunt, so only a site found late costs time).
    constexpr std::uint64_t bound = 6000;
    for (std::size_t i = 0; i < zab::sync_site_count; ++i) {
        const auto site = static_cast<sync_site>(i);
        const auto why_redundant = redundant(site);
        const mutation_outcome outcome = hunt(site, why_redundant ? sweep_seeds() : bound);
        if (verbose)
            fmt::print(
                "{:<30} {} after {} seeds ({} syncs skipped){}{}\n", zab::sync_site_name(site),
                outcome.failing_seed ? "FAILS" : "passes", outcome.seeds_run, outcome.syncs_skipped,
                outcome.failing_seed ? ": seed " : "",
                outcome.failing_seed ? fmt::format("{}: {}", *outcome.failing_seed, outcome.problem)
                                     : std::string{});
        INFO("sync site " << zab::sync_site_name(site));
        CHECK(outcome.syncs_skipped > 0);  // the workload reaches the site
        if (why_redundant) {
            INFO("listed as redundant: " << *why_redundant << "; but seed "
                                         << outcome.failing_seed.value_or(0)
                                         << " fails: " << outcome.problem);
            CHECK_FALSE(outcome.failing_seed);
        } else {
            INFO("no failure in " << outcome.seeds_run << " seeds with its syncs skipped");
            CHECK(outcome.failing_seed);
        }
    }
}

// --- zab::testing::sim_file_log: file_log on the simulator's disk ----------------------------

namespace {

/// Appends, syncs, compactions and crashes at random virtual instants. After every crash the
/// records the delivered completions promised (sim_file_log's durable image, above the
/// recovered snapshot) are a prefix of the recovered log, which is itself a prefix of what
/// was appended; every completion came at least the disk's minimum latency after its request.
std::optional<std::string> simulated_run(std::uint64_t seed, std::optional<sync_site> skipped) {
    using zab::testing::event_queue;
    using zab::testing::sim_file_log;
    using zab::testing::sim_time;
    using zab::testing::storage_completion;
    event_queue events;
    prng random{seed};
    zab::testing::disk_options disk;
    file_log_options small = zab::testing::sim_file_log_options();
    small.max_record_bytes = max_record_bytes;
    small.group_commit_window_bytes = 2000;
    small.segment_bytes = 5000;
    sim_file_log log{events, random, disk, small};
    if (skipped) log.disk().skip_syncs(*skipped);
    std::vector<std::pair<storage_op, sim_time>> issued;  // syncs and epoch writes
    std::optional<std::string> problem;
    log.set_completion_handler([&](const storage_completion& c) {
        const auto it = std::find_if(issued.begin(), issued.end(),
                                     [&](const auto& i) { return i.first == c.op; });
        if (c.what == storage_completion::kind::failed)
            problem = fmt::format("op {} failed: {}", c.op, log.log().failure_reason());
        else if (it == issued.end() || events.now() < it->second + disk.sync_latency_min)
            problem = fmt::format("completion of op {} at {} came too early or unasked", c.op,
                                  events.now());
    });
    storage_op op = 0;
    std::uint64_t salt = seed << 20;
    log.write_epochs(++op, {1, 1});
    issued.emplace_back(op, events.now());
    while (events.run_next() && log.durable_epochs() != zab::epochs{1, 1}) {}
    std::vector<log_record> appended = log.records();
    for (int step = 0; step < 60 && !problem; ++step) {
        const std::uint64_t action = random.below(100);
        if (action < 45) {
            std::vector<log_record> batch;
            const std::size_t n = 1 + random.below(4);
            for (std::size_t i = 0; i < n; ++i) {
                const zxid last = std::max(log.last_zxid(), zxid{1, 0});
                batch.push_back(
                    make_record(batch.empty() ? last.next() : batch.back().id.next(), ++salt));
            }
            appended.insert(appended.end(), batch.begin(), batch.end());
            log.append(++op, batch);
        } else if (action < 65) {
            log.make_durable(op);
            issued.emplace_back(op, events.now());
        } else if (action < 70) {
            const auto& durable = log.durable_records();
            if (!durable.empty())
                log.compact(durable[random.below(durable.size())].id,
                            bytes_of(++salt, max_state_bytes));
        } else if (action < 90) {
            events.run_until(events.now() + random.below(3 * disk.sync_latency_max));
        } else {
            const std::vector<log_record> durable = log.durable_records();
            const auto durable_snapshot = log.durable_snapshot();
            if (const std::string failure = log.crash_and_recover(); !failure.empty())
                return fmt::format("step {}: recovery failed: {}", step, failure);
            issued.clear();
            const auto& recovered = log.records();
            const zxid base = log.snapshot() ? log.snapshot()->last_included : zxid{};
            std::vector<log_record> promised;
            for (const auto& r : durable)
                if (r.id > base) promised.push_back(r);
            if (durable_snapshot && base < durable_snapshot->last_included)
                return fmt::format("step {}: the snapshot went back from {} to {}", step,
                                   durable_snapshot->last_included, base);
            const auto same = [](const log_record& a, const log_record& b) {
                return a.id == b.id && a.txn == b.txn;
            };
            if (recovered.size() < promised.size() ||
                !std::equal(promised.begin(), promised.end(), recovered.begin(), same))
                return fmt::format("step {}: {} records promised durable, {} recovered", step,
                                   promised.size(), recovered.size());
            const auto first = std::find_if(appended.begin(), appended.end(),
                                            [&](const log_record& r) { return r.id > base; });
            if (static_cast<std::size_t>(appended.end() - first) < recovered.size() ||
                !std::equal(recovered.begin(), recovered.end(), first, same))
                return fmt::format("step {}: the recovered log is not what was appended", step);
            if (log.stored_epochs() != zab::epochs{1, 1})
                return fmt::format("step {}: the epochs were lost", step);
            appended.erase(first + static_cast<std::ptrdiff_t>(recovered.size()), appended.end());
            op = 0;
        }
    }
    return problem;
}

}  // namespace

TEST_CASE(
    "sim_file_log: file_log on the simulator's disk completes after the disk's "
    "latency, and a crash keeps what its completions promised",
    "[file_log][power_loss][sim_file_log]") {
    const std::uint64_t seeds = std::max<std::uint64_t>(1, sweep_seeds() / 5);
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
        INFO("seed " << seed);
        REQUIRE(simulated_run(seed, std::nullopt).value_or("") == "");
    }
    // And the check sees a missing fdatasync.
    std::uint64_t seed = 1;
    while (seed <= 200 && !simulated_run(seed, sync_site::segment_data)) ++seed;
    CHECK(seed <= 200);
}

// --- issue #15: a torn last write step is never taken for corruption ------------------------

namespace {

/// Makes `bytes` the durable content of file `name` of the log's directory (the crash image
/// a test wants recovery to find), then cuts the power.
void set_crash_image(durable_image_fs& fs, const std::string& directory, const std::string& name,
                     const std::vector<std::byte>& bytes) {
    int dir = -1, fd = -1;
    REQUIRE(fs.open_directory(directory, dir) == 0);
    REQUIRE(fs.open_file(dir, name, zab::open_mode::create_or_truncate, fd) == 0);
    REQUIRE(fs.write_at(fd, bytes, 0) == 0);
    REQUIRE(fs.sync_data(fd, sync_site::segment_data) == 0);
    REQUIRE(fs.sync_directory(dir, sync_site::segment_created_directory) == 0);
    fs.close(fd);
    fs.close(dir);
    fs.power_loss();
}

}  // namespace

TEST_CASE("file_log power loss in the last write step: a torn tail at every position, or with "
          "any sector of it lost while later ones landed, is cut; every synced record is kept",
          "[file_log][power_loss]") {
    // Records of 300 bytes take 320 on disk: 15 fill a segment of 5000 bytes, a batch of 5
    // is one write step (1600 bytes, window 2000).
    const bool new_segment = GENERATE(false, true);
    INFO((new_segment ? "the last batch starts a new segment" : "the last batch extends one"));
    durable_image_fs fs;
    fs.make_durable_directories("/volume");
    const file_log_options options = power_loss_options(fs);
    const std::uint32_t synced = new_segment ? 15 : 20;
    const std::string name = "log.0000000000000002";
    const std::string path = options.directory + "/" + name;
    std::vector<std::byte> written;  // the last segment with the whole batch
    std::size_t step_start = 0;      // where the un-synced step begins in it
    {
        file_log log = open_new(options);
        for (std::uint32_t first = 1; first <= synced; first += 5) {
            log.append(first, records(1, first, first + 4, 300));
            log.make_durable(first);
            flush_ok(log);
        }
        step_start = new_segment ? 0 : fs.contents(path)->size();
        // The batch reaches the page cache only, and so does the watermark update after it.
        fs.skip_syncs(sync_site::segment_data);
        fs.skip_syncs(sync_site::synced_watermark);
        log.append(100, records(1, synced + 1, synced + 5, 300));
        flush_ok(log);
        fs.skip_syncs(sync_site::segment_data, false);
        fs.skip_syncs(sync_site::synced_watermark, false);
        written = *fs.contents(path);
    }
    const std::size_t first_record = new_segment ? zab::storage_format::segment_header_size : step_start;
    // A job that extends a segment reserves room after its records (zeros): the image of
    // interest ends with the batch.
    REQUIRE(written.size() == (new_segment ? first_record + 5 * 320 : options.segment_bytes));
    REQUIRE(std::all_of(written.begin() + static_cast<std::ptrdiff_t>(first_record + 5 * 320),
                        written.end(), [](std::byte b) { return b == std::byte{0}; }));
    written.resize(first_record + 5 * 320);
    // How many records of the batch lie whole in [first_record, end).
    const auto whole_before = [&](std::size_t end) {
        return end < first_record ? 0u : static_cast<std::uint32_t>((end - first_record) / 320);
    };
    const auto check_recovers = [&](std::uint32_t batch_kept) {
        std::string why;
        auto opened = file_log::open(options, &why);
        INFO("open failed: " << why);
        REQUIRE(opened.has_value());
        REQUIRE(opened.value().last_zxid() == zxid{1, synced + batch_kept});
        require_records(read_all(opened.value()), ids(1, 1, synced + batch_kept), 300);
    };

    SECTION("cut at every byte of the step") {
        for (std::size_t end = step_start; end <= written.size(); ++end) {
            INFO("cut at " << end);
            set_crash_image(fs, options.directory, name,
                            {written.begin(), written.begin() + static_cast<std::ptrdiff_t>(end)});
            check_recovers(whole_before(end));
        }
    }
    SECTION("one sector of the step lost (garbage or zeros), the later ones landed") {
        prng random{new_segment ? 7u : 8u};
        for (std::size_t from = step_start; from < written.size();
             from = (from / durable_image_fs::sector_bytes + 1) * durable_image_fs::sector_bytes) {
            const std::size_t to = std::min(
                written.size(), (from / durable_image_fs::sector_bytes + 1) *
                                    durable_image_fs::sector_bytes);
            for (const bool zeros : {false, true}) {
                INFO("sector [" << from << ", " << to << ") " << (zeros ? "zeros" : "garbage"));
                auto image = written;
                for (std::size_t i = from; i < to; ++i)
                    image[i] = zeros ? std::byte{0} : static_cast<std::byte>(random.below(256));
                set_crash_image(fs, options.directory, name, image);
                // A damaged header takes the segment; else the records before the sector stay.
                check_recovers(from < first_record ? 0 : whole_before(from));
            }
        }
    }
}

// --- issue 34, defect 3: kill -9, then power loss ------------------------------------------

TEST_CASE("file_log kill -9 between a write and its sync, then power loss: what the reopened "
          "log vouched for survives (issue 34, defect 3)",
          "[file_log][power_loss]") {
    durable_image_fs fs;
    fs.make_durable_directories("/volume");
    const file_log_options options = power_loss_options(fs);
    SECTION("records written, not yet fdatasynced") {
        {
            file_log log = open_new(options);
            log.append(1, records(1, 1, 10, 300));
            flush_ok(log);
            // Killed between the step's write and its fdatasync (and so before the
            // watermark's update): the records are whole and CRC-valid, in the page cache.
            fs.skip_syncs(sync_site::segment_data);
            fs.skip_syncs(sync_site::synced_watermark);
            log.append(2, records(1, 11, 14, 300));
            flush_ok(log);
        }
        fs.skip_syncs(sync_site::segment_data, false);
        fs.skip_syncs(sync_site::synced_watermark, false);
        fs.kill();
        {
            // The restarted replica advertises <1, 14> (its vote, ACKEPOCH; a DIFF then has
            // nothing for it to make durable before its NEWLEADER ACK).
            file_log log = open_log(options);
            REQUIRE(log.last_zxid() == zxid{1, 14});
        }
        fs.power_loss();
        file_log log = open_log(options);
        REQUIRE(log.last_zxid() == zxid{1, 14});
        require_records(read_all(log), ids(1, 1, 14), 300);
    }
    SECTION("an epoch file renamed into place, the directory not yet synced") {
        {
            file_log log = open_new(options);
            fs.skip_syncs(sync_site::epoch_rename_directory);
            log.write_epochs(1, {12, 11});
            flush_ok(log);
        }
        fs.skip_syncs(sync_site::epoch_rename_directory, false);
        fs.kill();
        {
            file_log log = open_log(options);
            REQUIRE(log.stored_epochs() == epochs{12, 11});  // promised in its next ACKEPOCH
        }
        fs.power_loss();
        REQUIRE(open_log(options).stored_epochs() == epochs{12, 11});
    }
    REQUIRE(fs.stats().kills == 1);
}
