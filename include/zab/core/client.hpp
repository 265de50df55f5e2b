// zab/core/client.hpp — the client's side of a peer: requests in flight and their outcomes.
//
// Every write or sync submitted to a peer gets a `request_id` and later exactly one
// `client_completion` (docs/protocol.md §6.1, §7). The rules that make outcomes honest:
// - a write succeeds only once it is applied on this peer, so a read here afterwards sees it;
// - a definite failure (`not_leader`, `backpressure`, `zxid_exhausted`, `shutting_down`) is
//   reported only when the transaction was never proposed and never will be;
// - a write that was handed to a leader (proposed here, or forwarded) and whose fate this
//   peer can no longer learn — the role ended first — completes with `outcome_unknown`;
// - a write that succeeds carries what `apply` returned for it here (zab::result_machine),
//   or says the result is unknown: it reached this peer inside a snapshot (§6.6).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// Names one client request on one peer (unique for the peer object's lifetime).
using request_id = std::uint64_t;

enum class client_op : std::uint8_t { write, sync, transfer };

/// The one outcome of a request. For a write: its zxid, once applied on this peer. For a
/// sync: the last zxid applied here when it completed (every write committed before the
/// sync reached the leader is applied by then, §7). For a leadership transfer: the last
/// zxid committed before the hand-off (§6.4).
struct client_completion {
    request_id id = 0;
    client_op op = client_op::write;
    result<zxid> outcome = make_error_code(errc::outcome_unknown);
    /// With `not_leader`: the leader this peer follows or last heard of, 0 if none.
    peer_id leader_hint = 0;
    /// A write that succeeded: what the state machine's `apply` returned for it on this
    /// peer (zab::result_machine); empty for a machine whose `apply` returns void.
    shared_bytes response;
    /// A write that succeeded (it is committed and applied here) but reached this peer
    /// inside a snapshot, so this peer never ran its `apply` and `response` is empty: the
    /// result is unknown, the write is not (unlike `errc::outcome_unknown`, §6.6).
    bool response_unknown = false;
};

/// The requests a peer has in flight, and the completions not yet taken by the driver.
///
/// Writes are kept in two queues ordered the way they arrive and leave in steady state —
/// by request id (ids only grow) and by zxid (assigned, and applied, in zxid order) — so a
/// write costs no allocation of its own: the queues grow by blocks, and a write that
/// finishes out of order leaves a marker that is dropped once it reaches the front (or when
/// markers outnumber the live entries).
class client_table {
public:
    request_id next_id() noexcept { return ++last_id_; }
    /// The id `next_id()` will return, without taking it.
    request_id peek_next_id() const noexcept { return last_id_ + 1; }

    /// Requests in flight (the bound `options::max_pending_requests` counts these).
    std::size_t in_flight() const noexcept { return live_writes_ + syncs_.size(); }

    /// A request that fails before it goes anywhere.
    void fail_now(request_id id, client_op op, errc e, peer_id hint = 0) {
        completions_.push_back({id, op, make_error_code(e), hint, {}, false});
    }

    /// A write handed to the leader: proposed here as `assigned`, or forwarded (nullopt
    /// until the leader's REPLY names its zxid). Ids are added in increasing order.
    void add_write(request_id id, std::optional<zxid> assigned) {
        ZAB_ASSERT(writes_.empty() || writes_.back().id < id, "client_table: write ids out of order");
        writes_.push_back({id, assigned, false});
        ++live_writes_;
        if (assigned) name(*assigned, id);
    }

    /// The leader proposed forwarded write `id` as `z`.
    void assign(request_id id, zxid z) {
        write_entry* w = find_write(id);
        if (w == nullptr || w->assigned) return;  // unknown, or already named
        w->assigned = z;
        name(z, id);
    }

    /// The leader refused forwarded write or sync `id`: definite.
    void refuse(request_id id, errc e, peer_id hint) {
        if (syncs_.erase(id) != 0) {  // a forwarded sync the leader would not hold
            fail_now(id, client_op::sync, e, hint);
            return;
        }
        write_entry* w = find_write(id);
        if (w == nullptr || w->assigned) return;
        finish_write(*w);
        fail_now(id, client_op::write, e, hint);
    }

    /// Transaction `z` was applied here; `result` is what `apply` returned. Only a write in
    /// flight keeps it (until the driver takes the completion): memory stays bounded by
    /// `max_pending_requests`.
    void applied(zxid z, shared_bytes result = {}) {
        if (by_zxid_.empty()) return;
        auto it = by_zxid_.begin();  // the front, in steady state: applied in zxid order
        if (it->first != z) {
            it = std::lower_bound(by_zxid_.begin(), by_zxid_.end(), z,
                                  [](const auto& e, zxid v) { return e.first < v; });
            if (it == by_zxid_.end() || it->first != z) return;
        }
        const request_id id = it->second;
        by_zxid_.erase(it);
        succeed(id, z, std::move(result), false);
    }

    /// The state machine was replaced by a snapshot at `z`: every write named ≤ z is in it,
    /// applied but not here, so its result is unknown.
    void applied_through(zxid z) {
        while (!by_zxid_.empty() && by_zxid_.front().first <= z) {
            const auto [named, id] = by_zxid_.front();
            by_zxid_.pop_front();
            succeed(id, named, {}, true);
        }
    }

    /// A sync in flight (to the leader, or the leader's own quorum round).
    void add_sync(request_id id) { syncs_.emplace(id); }

    /// Sync `id` is answered; `applied` is the last zxid applied here.
    void answer_sync(request_id id, zxid applied) {
        if (syncs_.erase(id) == 0) return;
        completions_.push_back({id, client_op::sync, applied, 0, {}, false});
    }

    /// A leadership transfer in progress at this leader (one at a time).
    void add_transfer(request_id id) { transfer_ = id; }
    std::optional<request_id> transfer() const noexcept { return transfer_; }

    /// The transfer in progress ended: handed over (the last committed zxid) or failed.
    void finish_transfer(result<zxid> outcome, peer_id hint = 0) {
        if (!transfer_) return;
        completions_.push_back({*std::exchange(transfer_, std::nullopt), client_op::transfer,
                                std::move(outcome), hint, {}, false});
    }

    /// The role ends (or the peer stops): writes handed to a leader may still commit, so
    /// their outcome is unknown; syncs and a transfer had no effect and fail definitely with
    /// `sync_error`.
    void abandon(errc sync_error, peer_id hint) {
        if (transfer_) finish_transfer(make_error_code(sync_error), hint);
        for (const write_entry& w : writes_)
            if (!w.finished)
                completions_.push_back({w.id, client_op::write,
                                        make_error_code(errc::outcome_unknown), hint, {}, false});
        for (const request_id id : syncs_) fail_now(id, client_op::sync, sync_error, hint);
        writes_.clear();
        live_writes_ = 0;
        by_zxid_.clear();
        syncs_.clear();
    }

    /// The completions since the last call, oldest first.
    std::vector<client_completion> take() { return std::exchange(completions_, {}); }
    bool has_completions() const noexcept { return !completions_.empty(); }

private:
    struct write_entry {
        request_id id;
        std::optional<zxid> assigned;
        bool finished;  ///< completed: a marker until it reaches the front
    };

    /// The write in flight with this id, if any.
    write_entry* find_write(request_id id) {
        const auto it = std::lower_bound(writes_.begin(), writes_.end(), id,
                                         [](const write_entry& w, request_id r) { return w.id < r; });
        return it == writes_.end() || it->id != id || it->finished ? nullptr : &*it;
    }

    void finish_write(write_entry& w) {
        w.finished = true;
        --live_writes_;
        while (!writes_.empty() && writes_.front().finished) writes_.pop_front();
        if (writes_.size() > 2 * live_writes_ + 64)  // markers behind a write that waits
            std::erase_if(writes_, [](const write_entry& e) { return e.finished; });
    }

    /// Write `id` is `z`: kept in zxid order (assigned in increasing order but for a REPLY
    /// that overtook an older one's).
    void name(zxid z, request_id id) {
        if (by_zxid_.empty() || by_zxid_.back().first < z) {
            by_zxid_.emplace_back(z, id);
            return;
        }
        const auto at = std::lower_bound(by_zxid_.begin(), by_zxid_.end(), z,
                                         [](const auto& e, zxid v) { return e.first < v; });
        if (at != by_zxid_.end() && at->first == z) {
            at->second = id;
            return;
        }
        by_zxid_.insert(at, {z, id});
    }

    void succeed(request_id id, zxid z, shared_bytes response, bool response_unknown) {
        if (write_entry* w = find_write(id)) finish_write(*w);
        completions_.push_back({id, client_op::write, z, 0, std::move(response), response_unknown});
    }

    request_id last_id_ = 0;
    std::deque<write_entry> writes_;  ///< ascending ids
    std::size_t live_writes_ = 0;     ///< entries of `writes_` not finished
    std::deque<std::pair<zxid, request_id>> by_zxid_;  ///< ascending zxids
    std::set<request_id> syncs_;
    std::optional<request_id> transfer_;
    std::vector<client_completion> completions_;
};

}  // namespace zab
