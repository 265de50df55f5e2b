// zab/core/durability.hpp — which storage writes are issued, which are durable, and for how long
// the disk has made no progress.
//
// Owns the storage operation numbers (one counter for log operations and epoch writes), the
// log operations and epoch writes issued and not yet durable, the durable marks the
// completions move, and the disk-stall clock. It issues no I/O and knows no log: peer_context
// issues the writes and reports each one here (docs/protocol.md §2: what a replica advertises
// is only ever what a crash would recover; §6.5: disk-stall fencing measures `stalled_for`).
// A completion covers every earlier operation of its kind (concepts.hpp, log_store).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "zab/core/assert.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

class durability_tracker {
public:
    /// A new storage operation number: strictly above every one before it.
    storage_op next_op() {
        ZAB_ASSERT(last_op_ + 1 > last_op_, "storage operation numbers ran out");
        return ++last_op_;
    }
    /// A new operation number for a log operation not issued yet (this step's batch): it
    /// counts as the last log operation at once.
    storage_op next_log_op() { return last_log_op_ = next_op(); }

    /// Log operation `op`, leaving the log's last record at `last_after`, was issued at
    /// tick `now`. Log operations are issued in the order of their numbers.
    void log_issued(storage_op op, zxid last_after, std::uint64_t now) {
        ZAB_ASSERT(op != 0 && op <= last_op_, "a log operation issued under a number never given");
        ZAB_ASSERT(log_ops_.empty() || log_ops_.back().first < op,
                   "log operations issued out of the order of their numbers");
        write_issued(now);
        last_log_op_ = std::max(last_log_op_, op);
        log_ops_.emplace_back(op, last_after);
    }

    /// An epoch write `op` of `written` was issued at tick `now`.
    void epochs_issued(storage_op op, epochs written, std::uint64_t now) {
        ZAB_ASSERT(op != 0 && op <= last_op_, "an epoch write issued under a number never given");
        ZAB_ASSERT(op > last_epoch_op_, "epoch writes issued out of the order of their numbers");
        write_issued(now);
        last_epoch_op_ = op;
        epoch_writes_.emplace_back(op, written);
    }

    /// Log operation `op` and every earlier one are durable (at tick `now`): the last record
    /// of the newest log operation that became durable by it, if any did.
    std::optional<zxid> log_completed(storage_op op, std::uint64_t now) {
        ZAB_ASSERT(op <= last_op_, "a durability completion for a log operation never issued");
        return complete(log_ops_, durable_log_op_, op, now);
    }

    /// Epoch write `op` and every earlier one are durable (at tick `now`): the epochs of the
    /// newest write that became durable by it, if any did.
    std::optional<epochs> epochs_completed(storage_op op, std::uint64_t now) {
        ZAB_ASSERT(op <= last_op_, "a durability completion for an epoch write never issued");
        return complete(epoch_writes_, durable_epoch_op_, op, now);
    }

    /// The last storage operation issued (0: none yet).
    storage_op last_issued_op() const noexcept { return last_op_; }
    /// The last log operation issued (or numbered for this step's batch); 0: none.
    storage_op last_log_op() const noexcept { return last_log_op_; }
    /// The last epoch write issued (0: none).
    storage_op last_epoch_op() const noexcept { return last_epoch_op_; }
    /// The newest log operation issued and not durable yet (some must be).
    storage_op newest_pending_log_op() const {
        ZAB_ASSERT(!log_ops_.empty(), "no log operation pending");
        return log_ops_.back().first;
    }

    bool log_durable(storage_op op) const noexcept { return op <= durable_log_op_; }
    bool epochs_durable(storage_op op) const noexcept { return op <= durable_epoch_op_; }
    /// The durable marks: what the completions reported so far (0: none).
    storage_op durable_log_op() const noexcept { return durable_log_op_; }
    storage_op durable_epoch_op() const noexcept { return durable_epoch_op_; }

    /// Some log operation is issued and not durable yet.
    bool log_pending() const noexcept { return !log_ops_.empty(); }
    /// Some log or epoch write is issued and not durable yet.
    bool writes_pending() const noexcept { return !log_ops_.empty() || !epoch_writes_.empty(); }
    /// Ticks, as of `now`, since storage last made progress while writes are pending (0 when
    /// none are): what disk-stall fencing measures (§6.5).
    std::uint64_t stalled_for(std::uint64_t now) const noexcept {
        return writes_pending() ? now - progressed_tick_ : 0;
    }

    /// Its invariants (peer_context::check_invariants, every step).
    void check() const {
        ZAB_ASSERT(durable_log_op_ <= last_op_ && durable_epoch_op_ <= last_op_,
                   "durable beyond the operations issued");
        ZAB_ASSERT(last_log_op_ <= last_op_ && last_epoch_op_ <= last_op_,
                   "a last log or epoch operation above the last number given");
        ZAB_ASSERT(log_ops_.empty() || log_ops_.front().first > durable_log_op_,
                   "a log operation pending below the durable mark");
        ZAB_ASSERT(epoch_writes_.empty() || epoch_writes_.front().first > durable_epoch_op_,
                   "an epoch write pending below the durable mark");
    }

private:
    /// `op` and every earlier write of `pending`'s kind are durable: the durable mark moves
    /// to it, they leave `pending`, and the stall clock restarts. The newest one's value.
    template <typename Written>
    std::optional<Written> complete(std::deque<std::pair<storage_op, Written>>& pending,
                                    storage_op& durable, storage_op op, std::uint64_t now) {
        durable = std::max(durable, op);
        std::optional<Written> last;
        while (!pending.empty() && pending.front().first <= op) {
            last = pending.front().second;
            pending.pop_front();
        }
        progressed_tick_ = now;
        return last;
    }

    /// A write is issued: if none was pending, the stall clock starts now.
    void write_issued(std::uint64_t now) noexcept {
        if (!writes_pending()) progressed_tick_ = now;
    }

    storage_op last_op_ = 0;
    storage_op last_log_op_ = 0;
    storage_op last_epoch_op_ = 0;
    std::deque<std::pair<storage_op, zxid>> log_ops_;         ///< issued, not yet durable
    std::deque<std::pair<storage_op, epochs>> epoch_writes_;  ///< issued, not yet durable
    storage_op durable_log_op_ = 0;
    storage_op durable_epoch_op_ = 0;
    std::uint64_t progressed_tick_ = 0;  ///< the stall clock's start
};

}  // namespace zab
