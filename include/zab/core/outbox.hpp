// zab/core/outbox.hpp — what a peer hands its transport at the end of a step, and when.
//
// Owns the connections that are up (one per peer), the encoded frames queued on them, the
// closes asked for, and the release that hands frames over: in the order queued per
// destination, each once the storage operations it waits for are durable (docs/design.md
// rule 2; docs/protocol.md §2, §6.1: an ACK promises durability). A frame held for durability
// holds back everything queued after it for its destination. A cumulative frame (an ACK of a
// proposal or a COMMIT, §6.1) that a later one of its kind would follow at once to the same
// peer is left out. It encodes nothing and sends nothing itself: peer_context queues, and
// peer::release_frames gives `release` the transport's send.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/durability.hpp"
#include "zab/core/types.hpp"

namespace zab {

class outbox {
public:
    /// A frame waiting to leave.
    struct queued_frame {
        peer_id to;
        connection_id connection;  ///< the connection to `to` that was current when queued
        shared_bytes frame;
        storage_op log_op;         ///< held until this log operation is durable (0: none)
        storage_op epoch_op;       ///< held until this epoch write is durable (0: none)
        std::uint8_t covers_earlier;  ///< the wire type of a cumulative frame, else 0
    };

    // --- connections ------------------------------------------------------------------
    /// The connection to `peer` that is up now, if any.
    std::optional<connection_id> connection_to(peer_id peer) const {
        for (const auto& [id, connection] : connections_)
            if (id == peer) return connection;
        return std::nullopt;
    }
    /// The peers with a connection up now, in the order they connected.
    std::vector<peer_id> connected_peers() const {
        std::vector<peer_id> ids;
        for (const auto& [id, connection] : connections_) ids.push_back(id);
        return ids;
    }
    /// `connection` is now the one to `peer` (new, or replacing the one before).
    void set_connection(peer_id peer, connection_id connection) {
        bool found = false;
        for (auto& [id, current] : connections_)
            if (id == peer) {
                current = connection;
                found = true;
                break;
            }
        if (!found) connections_.emplace_back(peer, connection);
        drop_frames_of_gone_connections(peer);
    }
    /// The connection to `peer` went down.
    void erase_connection(peer_id peer) {
        std::erase_if(connections_, [&](const auto& entry) { return entry.first == peer; });
        drop_frames_of_gone_connections(peer);
    }
    /// The current connection to `peer` is to be closed: it is forgotten at once, with every
    /// frame queued for `peer`; the transport closes it at the next release.
    void close(peer_id peer) {
        if (auto connection = connection_to(peer)) closes_.emplace_back(peer, *connection);
        std::erase_if(connections_, [&](const auto& entry) { return entry.first == peer; });
        std::erase_if(frames_, [&](const auto& f) { return f.to == peer; });
        forget_held_frames();
    }
    /// The closes asked for since the last call, in order (for the transport).
    std::vector<std::pair<peer_id, connection_id>> take_closes() {
        return std::exchange(closes_, {});
    }

    // --- frames -----------------------------------------------------------------------
    /// Queues `frame` for `to` on its current connection, held until log operation `log_op`
    /// and epoch write `epoch_op` are durable; `covers_earlier`: the wire type of a frame
    /// that covers every earlier one of its type (0: none). Without a connection the frame
    /// is lost, as TCP would lose it.
    void queue(peer_id to, shared_bytes frame, storage_op log_op, storage_op epoch_op,
               std::uint8_t covers_earlier = 0) {
        const auto connection = connection_to(to);
        if (!connection) return;
        frames_.push_back({to, *connection, std::move(frame), log_op, epoch_op, covers_earlier});
    }

    /// Frames queued and not handed over (held for durability, or queued since the release).
    std::size_t size() const noexcept { return frames_.size(); }
    /// Those for `peer`.
    std::size_t queued_for(peer_id peer) const noexcept {
        return static_cast<std::size_t>(std::count_if(
            frames_.begin(), frames_.end(), [&](const auto& f) { return f.to == peer; }));
    }
    /// The destinations with more than `limit` frames queued, ascending, with their counts
    /// (a leader's learners over their backlog).
    std::vector<std::pair<peer_id, std::size_t>> destinations_over(std::size_t limit) const {
        if (frames_.size() <= limit) return {};
        std::map<peer_id, std::size_t> queued;
        for (const auto& f : frames_) ++queued[f.to];
        std::vector<std::pair<peer_id, std::size_t>> over;
        for (const auto& [id, count] : queued)
            if (count > limit) over.emplace_back(id, count);
        return over;
    }
    /// Every frame goes unsent (the replica stopped).
    void clear_frames() {
        frames_.clear();
        forget_held_frames();
    }

    /// Hands every queued frame whose durability `storage` reports to `send`, in order per
    /// destination; a frame whose connection is gone is dropped. Returns how many cumulative
    /// frames were left out because a later one covered them.
    ///
    /// A frame is held while its durability is missing or an earlier frame to the same
    /// destination is held. Held frames are compacted to the front in order. If nothing
    /// became durable since the last release, every frame it held is still held (durability
    /// only grows, and the first held frame of each destination is held by its own
    /// durability), so only the frames queued since are looked at: a learner's ACKs waiting
    /// for one fsync are not rescanned on every step.
    template <typename Send>
    std::uint64_t release(const durability_tracker& storage, Send&& send) {
        ZAB_ASSERT(held_frames_ <= frames_.size(),
                   "frames left the outbox without forgetting the held ones");
        if (held_at_log_op_ != storage.durable_log_op() ||
            held_at_epoch_op_ != storage.durable_epoch_op())
            forget_held_frames();
        auto& blocked = held_destinations_;
        std::size_t kept = held_frames_;
        std::uint64_t coalesced = 0;
        // Per destination, the cumulative frame released last and not sent yet: sent before
        // the next frame to that destination, replaced by the next one of its kind, or sent
        // at the end.
        auto& waiting = cumulative_waiting_;
        const auto send_waiting = [&](peer_id to) {
            for (auto w = waiting.begin(); w != waiting.end(); ++w)
                if (w->to == to) {
                    send(std::as_const(*w));
                    waiting.erase(w);
                    return;
                }
        };
        for (std::size_t i = kept; i < frames_.size(); ++i) {
            auto& f = frames_[i];
            ZAB_ASSERT(std::max(f.log_op, f.epoch_op) <= storage.last_issued_op(),
                       "a frame waits for a storage operation never numbered");
            const bool held = std::find(blocked.begin(), blocked.end(), f.to) != blocked.end() ||
                              !storage.log_durable(f.log_op) || !storage.epochs_durable(f.epoch_op);
            if (held) {
                if (std::find(blocked.begin(), blocked.end(), f.to) == blocked.end())
                    blocked.push_back(f.to);
                if (kept != i) frames_[kept] = std::move(f);
                ++kept;
                continue;
            }
            if (connection_to(f.to) != f.connection) continue;  // that link is gone
            if (f.covers_earlier != 0) {
                const auto w = std::find_if(waiting.begin(), waiting.end(),
                                            [&](const auto& x) { return x.to == f.to; });
                if (w != waiting.end() && w->covers_earlier == f.covers_earlier &&
                    w->connection == f.connection) {
                    *w = std::move(f);  // the earlier one says less, and would leave now too
                    ++coalesced;
                    continue;
                }
                send_waiting(f.to);
                waiting.push_back(std::move(f));
                continue;
            }
            send_waiting(f.to);
            send(std::as_const(f));
        }
        for (const auto& w : waiting) send(w);
        waiting.clear();
        frames_.erase(frames_.begin() + static_cast<std::ptrdiff_t>(kept), frames_.end());
        held_frames_ = kept;
        held_at_log_op_ = storage.durable_log_op();
        held_at_epoch_op_ = storage.durable_epoch_op();
        ZAB_ASSERT(blocked.size() <= kept, "a destination held without a frame held for it");
        return coalesced;
    }

private:
    /// `peer`'s connection ended or was replaced: the frames queued for any other connection
    /// to it than the current one can never be sent, so they go now. Kept, the held ones
    /// would hold back the new connection's frames (a destination's frames leave in order)
    /// and count against its backlog (issue 34, defect 7).
    void drop_frames_of_gone_connections(peer_id peer) {
        const auto current = connection_to(peer);
        const auto before = frames_.size();
        std::erase_if(frames_,
                      [&](const auto& f) { return f.to == peer && f.connection != current; });
        if (frames_.size() != before) forget_held_frames();
    }

    /// Frames left other than by release: the next release rescans them all.
    void forget_held_frames() noexcept {
        held_frames_ = 0;
        held_destinations_.clear();
    }

    std::vector<std::pair<peer_id, connection_id>> connections_;
    std::vector<std::pair<peer_id, connection_id>> closes_;
    std::vector<queued_frame> frames_;
    /// What the last `release` left: the first `held_frames_` of `frames_` were held with
    /// the durable marks below, and `held_destinations_` are their destinations. While
    /// neither mark moves, those frames stay held, so the next release only looks at the
    /// frames queued since. Frames are only ever appended between releases: anything that
    /// removes some must call `forget_held_frames()`.
    std::size_t held_frames_ = 0;
    storage_op held_at_log_op_ = 0;
    storage_op held_at_epoch_op_ = 0;
    std::vector<peer_id> held_destinations_;
    std::vector<queued_frame> cumulative_waiting_;  ///< release's, reused
};

}  // namespace zab
