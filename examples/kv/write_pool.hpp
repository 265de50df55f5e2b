// examples/kv/write_pool.hpp — the writes one kv_server proposes at once, shared fairly by
// its client connections (issue 34 defect 14).
//
// zab bounds the uncommitted writes one replica forwards to the leader
// (options::max_forwarded_per_learner, 1,000) and refuses the next with `backpressure`
// (-BUSY): the bound is the replica's, not a connection's. A connection that proposes what
// it likes can take all of it, and a bystander on the same replica is then refused for
// another client's load. So kv_server proposes through one pool of slots, below zab's bound:
// a connection takes a slot per write and returns it when the write completes; when none is
// free it queues (once) and stops reading its socket (resp_session, `wants_input`) until
// the pool grants it one. A returned slot goes to the connection first in line, which then
// queues again at the back for its next: with k connections waiting each gets about 1/k of
// the slots as they free up, and a connection that asks for one slot waits at most one
// turn of the line — it is never refused.
//
// No sockets, no Asio: kv_server wakes the connection `release` and `forget` name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace zab::kv {

class write_pool {
public:
    /// `capacity`: slots in all; at least 1.
    explicit write_pool(std::size_t capacity) : capacity_{capacity < 1 ? 1 : capacity} {}

    /// A slot for one write of connection `id`: true if it may propose it now (a slot
    /// granted to it, or a free one while nobody waits). False: it is in line (queued once,
    /// however often it asks) and will be named by `release` or `forget` when a slot is
    /// granted to it.
    bool acquire(std::uint64_t id) {
        if (const auto g = granted_.find(id); g != granted_.end()) {
            if (--g->second == 0) granted_.erase(g);
            return true;
        }
        if (line_.empty() && in_use_ < capacity_) {
            ++in_use_;
            return true;
        }
        if (queued_.insert(id).second) line_.push_back(id);
        return false;
    }

    /// A write proposed with a slot completed: the slot goes to the connection first in
    /// line (returned: wake it, its next `acquire` succeeds), else back to the pool.
    std::optional<std::uint64_t> release() {
        if (in_use_ > 0) --in_use_;
        return grant_next();
    }

    /// Connection `id` closed: it leaves the line and the slots granted to it and not used
    /// go to the next in line. Returns the connections to wake. (Its writes in flight keep
    /// their slots until they complete: zab counts them until then.)
    std::vector<std::uint64_t> forget(std::uint64_t id) {
        if (queued_.erase(id) > 0) std::erase(line_, id);
        std::vector<std::uint64_t> woken;
        const auto g = granted_.find(id);
        if (g == granted_.end()) return woken;
        std::size_t unused = g->second;
        granted_.erase(g);
        for (; unused > 0; --unused) {
            --in_use_;
            if (auto next = grant_next()) woken.push_back(*next);
        }
        return woken;
    }

    std::size_t capacity() const noexcept { return capacity_; }
    /// Slots held by writes in flight or granted and not yet used.
    std::size_t in_use() const noexcept { return in_use_; }
    /// Connections in line for a slot.
    std::size_t waiting() const noexcept { return line_.size(); }

private:
    std::optional<std::uint64_t> grant_next() {
        if (line_.empty() || in_use_ >= capacity_) return std::nullopt;
        const std::uint64_t next = line_.front();
        line_.pop_front();
        queued_.erase(next);
        ++in_use_;
        ++granted_[next];
        return next;
    }

    std::size_t capacity_;
    std::size_t in_use_ = 0;
    std::deque<std::uint64_t> line_;  ///< connections waiting, first come first served
    std::set<std::uint64_t> queued_;  ///< the same, to queue each once
    std::map<std::uint64_t, std::size_t> granted_;  ///< slots granted, not yet acquired
};

}  // namespace zab::kv
