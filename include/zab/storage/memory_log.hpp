// zab/storage/memory_log.hpp — zab::memory_log: a `zab::log_store` kept in memory.
//
// For tests, benchmarks of the protocol, and replicas whose durability comes from elsewhere.
// "Durable" here means "in this process's memory": a process that dies loses everything, so
// a cluster of memory_logs survives the crash of a minority only, never a power loss of all
// (docs/protocol.md §2 assumes a disk). It offers the same flush interface as zab::file_log, so
// a driver (the Asio runtime node) treats both alike:
//
//     auto job = log.begin_flush();     // takes the requested completions
//     job.run();                         // nothing to write
//     flush_result r = log.finish_flush(std::move(job));
//
// Every member runs on the peer's thread.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/core/zxid.hpp"
#include "zab/storage/flush_job.hpp"
#include "zab/storage/log_image.hpp"

namespace zab {

class memory_log {
public:
    /// The completions a flush reports; `run()` has nothing to do.
    class job {
    public:
        void run() noexcept { ran_ = true; }

    private:
        friend class memory_log;
        std::optional<storage_op> log_durable_;
        std::optional<storage_op> epochs_durable_;
        bool ran_ = false;
    };

    /// An empty log with epochs {0, 0}.
    memory_log() = default;
    /// A log that starts with `contents` and `stored` (a test's recovered state).
    memory_log(log_image contents, epochs stored)
        : image_{std::move(contents)}, epochs_{stored}, system_txns_{image_.system_txns()} {}

    // --- zab::log_store ------------------------------------------------------------------

    void append(storage_op, std::span<const log_record> records) {
        image_.append(records);
        for (const auto& record : records)
            if (is_system_txn(record.txn.view())) system_txns_.push_back(record.id);
    }
    void truncate_after(storage_op, zxid last_kept) {
        image_.truncate_after(last_kept);
        system_txns_.erase(std::upper_bound(system_txns_.begin(), system_txns_.end(), last_kept),
                           system_txns_.end());
    }
    void install_snapshot(storage_op, zxid last_included, const shared_bytes& state,
                          std::span<const log_record> following) {
        image_ = log_image::installed(last_included, state, following);
        system_txns_ = image_.system_txns();
    }
    /// Compaction (zab::compactable_log): the records up to `last_included` are replaced by
    /// `state`, so memory stays bounded on a long run. False when `last_included` is not a
    /// record above the snapshot.
    bool compact(zxid last_included, const shared_bytes& state) {
        if (!image_.compact(last_included, state)) return false;
        system_txns_.erase(system_txns_.begin(), std::upper_bound(system_txns_.begin(),
                                                                  system_txns_.end(), last_included));
        return true;
    }
    /// The next flush reports every log operation ≤ op durable.
    void make_durable(storage_op op) { requested_sync_ = op; }
    /// Visible at once; the next flush reports `op` durable.
    void write_epochs(storage_op op, epochs e) {
        epochs_ = e;
        pending_epochs_ = op;
    }
    zxid last_zxid() const { return image_.last_zxid(); }
    epochs stored_epochs() const { return epochs_; }
    std::optional<log_snapshot> snapshot() const { return image_.snapshot; }
    result<std::vector<log_record>> read(zxid after, std::size_t max) const {
        return image_.read(after, max);
    }
    /// zab::tail_readable_log: the last `max` records.
    result<std::vector<log_record>> read_last(std::size_t max) const { return image_.read_last(max); }
    /// zab::system_txn_indexed_log: the zxids of its system transactions, kept as they come
    /// and go (not found by looking at every record).
    std::vector<zxid> system_txns() const { return system_txns_; }

    // --- flushing (the interface of zab::file_log) -----------------------------------------

    job begin_flush() {
        ZAB_ASSERT(!job_outstanding_, "begin_flush: the previous flush job is not finished");
        job_outstanding_ = true;
        job j;
        j.log_durable_ = std::exchange(requested_sync_, std::nullopt);
        j.epochs_durable_ = std::exchange(pending_epochs_, std::nullopt);
        return j;
    }
    flush_result finish_flush(job&& j) {
        ZAB_ASSERT(job_outstanding_ && j.ran_, "finish_flush: no job of this log has run");
        job_outstanding_ = false;
        flush_result r;
        r.log_durable = j.log_durable_;
        r.epochs_durable = j.epochs_durable_;
        return r;
    }
    bool has_pending_work() const noexcept {
        return requested_sync_.has_value() || pending_epochs_.has_value();
    }

    /// Everything the log holds (for tests and for comparing replicas).
    const log_image& contents() const noexcept { return image_; }

private:
    log_image image_;
    epochs epochs_;
    std::vector<zxid> system_txns_;  ///< of image_'s records, ascending
    std::optional<storage_op> requested_sync_;
    std::optional<storage_op> pending_epochs_;
    bool job_outstanding_ = false;
};

static_assert(compactable_log<memory_log>);
static_assert(tail_readable_log<memory_log>);
static_assert(system_txn_indexed_log<memory_log>);

}  // namespace zab
