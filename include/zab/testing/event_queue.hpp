// zab/testing/event_queue.hpp — virtual time and the queue of things that happen in it.
//
// What it models: the passage of time in a simulated run. Nothing in the simulator reads a
// clock or sleeps; every delayed effect (a frame arriving, an fsync completing, a timer) is
// an event scheduled at a virtual instant, and running the queue jumps straight from one
// event to the next, so idle time costs nothing (docs/design.md rule 11). Events at the same
// instant run in the order they were scheduled: with one seed, the order of everything is
// fixed, which is what lets a failing seed replay exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "zab/core/assert.hpp"

namespace zab::testing {

/// Virtual time in microseconds since the start of the run.
using sim_time = std::uint64_t;

/// A deterministic discrete-event queue over virtual time.
///
/// An event is a callable scheduled at an instant no earlier than `now()`. `run_next` runs
/// the earliest one (ties: the one scheduled first) after advancing `now()` to its time.
/// Events may schedule and cancel other events. A cancelled event never runs.
class event_queue {
public:
    /// Identifies a scheduled event, for `cancel`. Ids are never reused; 0 is never an id.
    using event_id = std::uint64_t;

    /// The current virtual time: the time of the event running or last run.
    sim_time now() const noexcept { return now_; }

    /// Schedules `fn` to run at `at`. Precondition: `at >= now()`.
    event_id schedule_at(sim_time at, std::function<void()> fn) {
        ZAB_ASSERT(at >= now_, "event scheduled in the past");
        ZAB_ASSERT(fn != nullptr, "event without a function");
        const event_id id = next_id_++;
        events_.emplace(key{at, id}, std::move(fn));
        times_.emplace(id, at);
        return id;
    }

    /// Schedules `fn` to run `delay` microseconds from now.
    event_id schedule_after(sim_time delay, std::function<void()> fn) {
        ZAB_ASSERT(delay <= std::numeric_limits<sim_time>::max() - now_, "virtual time overflow");
        return schedule_at(now_ + delay, std::move(fn));
    }

    /// Cancels a pending event. Returns false if it already ran, was cancelled, or never was.
    bool cancel(event_id id) {
        const auto found = times_.find(id);
        if (found == times_.end()) return false;
        events_.erase(key{found->second, id});
        times_.erase(found);
        return true;
    }

    /// Runs the earliest pending event. Returns false, and changes nothing, if none is left.
    bool run_next() {
        if (events_.empty()) return false;
        auto first = events_.begin();
        const auto [at, id] = first->first;
        std::function<void()> fn = std::move(first->second);
        events_.erase(first);
        times_.erase(id);
        ZAB_ASSERT(at >= now_, "virtual time went backwards");
        now_ = at;
        ++events_run_;
        fn();
        return true;
    }

    /// Runs every event due at or before `deadline`, then sets `now()` to `deadline` (if it
    /// is later). Returns how many events ran. Events scheduled meanwhile also run if due.
    std::uint64_t run_until(sim_time deadline) {
        std::uint64_t count = 0;
        while (!events_.empty() && events_.begin()->first.first <= deadline) {
            run_next();
            ++count;
        }
        if (deadline > now_) now_ = deadline;
        return count;
    }

    /// The time of the earliest pending event, if any.
    std::optional<sim_time> next_time() const {
        if (events_.empty()) return std::nullopt;
        return events_.begin()->first.first;
    }

    /// How many events are pending.
    std::size_t size() const noexcept { return events_.size(); }
    bool empty() const noexcept { return events_.empty(); }

    /// How many events have run since construction.
    std::uint64_t events_run() const noexcept { return events_run_; }

private:
    // (time, id): ids grow with every schedule call, so equal times run in scheduling order.
    using key = std::pair<sim_time, event_id>;

    sim_time now_ = 0;
    event_id next_id_ = 1;
    std::uint64_t events_run_ = 0;
    std::map<key, std::function<void()>> events_;
    std::map<event_id, sim_time> times_;  // pending events only: lets `cancel` find the key
};

}  // namespace zab::testing
