// examples/kv/output_budget.hpp — the replies kv_server holds for all its client
// connections, bounded in total (kv_server --max-output-bytes; issue 34 defect 11).
//
// Each connection's unsent replies are bounded (--output-soft-limit: it stops reading and
// executing; --output-hard-limit: it is closed), but not their sum: 40 connections that
// each send one MGET of 60 MB of values and never read the reply hold 2.4 GB. So the
// server adds up what every connection holds and, before a reply is added, asks for room:
// - if it fits under the limit, it is added;
// - else the connections holding most are closed first (Redis's maxmemory-clients), as
//   long as each holds at least what the asking connection would hold with the reply (a
//   client is only ever evicted for one that holds less than it);
// - if it still does not fit, the reply is refused (kv_server answers a clear error
//   instead: the client may read what it has and ask again).
// So the total stays below the limit plus the small replies that are never refused (a
// write's +OK), whatever the clients send.
//
// No sockets: `make_room` names the connections to close through its callback, and the
// server reports each connection's holding (`set`) and its closing (`forget`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace zab::kv {

class output_budget {
public:
    explicit output_budget(std::size_t limit_bytes) : limit_{limit_bytes} {}

    std::size_t limit() const noexcept { return limit_; }
    /// Bytes held over all connections, as last reported.
    std::size_t held() const noexcept { return held_; }
    /// What connection `id` holds, as last reported.
    std::size_t held_by(std::uint64_t id) const {
        const auto it = by_id_.find(id);
        return it == by_id_.end() ? 0 : it->second;
    }

    /// Connection `id` now holds `bytes` of unsent replies.
    void set(std::uint64_t id, std::size_t bytes) {
        const auto it = by_id_.find(id);
        if (it != by_id_.end()) {
            if (it->second == bytes) return;
            held_ -= it->second;
            by_size_.erase({it->second, id});
            if (bytes == 0) {
                by_id_.erase(it);
                return;
            }
            it->second = bytes;
        } else {
            if (bytes == 0) return;
            by_id_.emplace(id, bytes);
        }
        held_ += bytes;
        by_size_.emplace(bytes, id);
    }
    /// Connection `id` closed.
    void forget(std::uint64_t id) { set(id, 0); }

    /// Room for `extra` more bytes for connection `id` (its holding reported first with
    /// `set`): true if they fit, after `evict(other_id)` closed the connections holding most
    /// while each held at least `held_by(id) + extra` (`evict` must `forget` it). False: the
    /// reply does not fit; nothing was added.
    template <typename Evict>
    bool make_room(std::uint64_t id, std::size_t extra, Evict&& evict) {
        const std::size_t own = held_by(id) + extra;
        while (held_ + extra > limit_) {
            auto biggest = by_size_.rbegin();
            if (biggest != by_size_.rend() && biggest->second == id) ++biggest;
            if (biggest == by_size_.rend() || biggest->first < own) return false;
            const std::uint64_t victim = biggest->second;
            evict(victim);
            if (held_by(victim) != 0) forget(victim);  // whatever `evict` did
            ++evicted_;
        }
        return true;
    }

    /// Connections closed by `make_room`.
    std::uint64_t evicted() const noexcept { return evicted_; }

private:
    std::size_t limit_;
    std::size_t held_ = 0;
    std::uint64_t evicted_ = 0;
    std::map<std::uint64_t, std::size_t> by_id_;
    std::set<std::pair<std::size_t, std::uint64_t>> by_size_;  ///< (bytes, id), most last
};

}  // namespace zab::kv
