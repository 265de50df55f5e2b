// zab/runtime/flushable_log.hpp — the logs the Asio runtime can drive: a `zab::log_store`
// whose disk work is taken out in flush jobs (zab::file_log, zab::memory_log).
#pragma once

#include <concepts>
#include <utility>

#include "zab/core/concepts.hpp"
#include "zab/storage/flush_job.hpp"

namespace zab::asio {

/// A log store with the flush interface of zab::file_log:
///   log.has_pending_work()        whether a flush would do or report anything;
///   auto job = log.begin_flush()  (the node's executor) takes what is pending;
///   job.run()                     (any one thread) does the blocking disk work;
///   log.finish_flush(std::move(job)) -> flush_result
///                                 (the node's executor) what became durable, or the failure.
/// At most one job is outstanding.
template <typename L>
concept flushable_log = log_store<L> && requires(L& log, const L& const_log) {
    { const_log.has_pending_work() } -> std::same_as<bool>;
    { log.begin_flush() };
    requires requires(decltype(log.begin_flush()) job) {
        job.run();
        { log.finish_flush(std::move(job)) } -> std::same_as<flush_result>;
    };
};

/// Optional: a flushable log whose compaction writes a checkpoint in jobs of its own
/// (zab::file_log), apart from the flush jobs so that O(state) bytes written never delay an
/// append's durability (issue 34, defect 4):
///   log.has_checkpoint_work()          whether a checkpoint job is due;
///   auto job = log.begin_checkpoint()  (the node's executor) takes it;
///   job.run()                          (any one thread, beside a flush job) writes it;
///   log.finish_checkpoint(std::move(job))  (the node's executor).
/// At most one checkpoint job is outstanding; a driver that never runs them leaves the
/// compactions in memory only (the log on disk keeps every record).
template <typename L>
concept checkpointing_log = flushable_log<L> && requires(L& log, const L& const_log) {
    { const_log.has_checkpoint_work() } -> std::same_as<bool>;
    { log.begin_checkpoint() };
    requires requires(decltype(log.begin_checkpoint()) job) {
        job.run();
        { log.finish_checkpoint(std::move(job)) } -> std::same_as<void>;
    };
};

}  // namespace zab::asio
