// zab/testing/explorer_network.hpp — the explorer's network: TCP's guarantees, every step a
// choice.
//
// The same model as sim_network (one connection per pair, FIFO and lossless while it lasts,
// frames in flight lost when it breaks, `connected` ... frames ... `disconnected` at each
// end), without time or randomness: what reaches each node from each other node waits in a
// FIFO channel, and the explorer (explorer.hpp) decides which channel's head is delivered
// next. Connection notices travel in the same channel as the frames, so an end hears of a
// break after the frames that arrived before it, as with sim_network's ordered notices. A
// connection that breaks between two up nodes is re-established at once (its `connected`
// queued behind the `disconnected`): the explorer's choice is when each end hears of it.
// With `defer_redials(true)` (the fair, healed run of a liveness check), a connection that a
// node closes itself is re-dialed only when either end next ticks (`redial`), as a real
// transport waits its reconnect backoff: a node that refuses a peer's every connection
// (a learner of a leader that is no longer leading) is then not a loop without time, but a
// retry per tick until a timeout ends it.
//
// It emits sim_network's `network_event`s (send, connect) so that protocol_observer checks
// each frame against its sender's disk at the instant it is sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/types.hpp"
#include "zab/testing/sim_network.hpp"
#include "zab/testing/trace_hash.hpp"

namespace zab::testing {

class explorer_network;

/// One node's side of the explorer's network: models `zab::transport`.
class explorer_transport {
public:
    void send(peer_id to, connection_id c, const shared_bytes& frame);
    void close(peer_id to, connection_id c);

private:
    friend class explorer_network;
    explorer_transport(explorer_network& network, peer_id self) : network_{&network}, self_{self} {}
    explorer_network* network_;
    peer_id self_;
};

static_assert(zab::transport<explorer_transport>);

/// What waits at the head of a channel.
struct channel_item {
    enum class kind : std::uint8_t { connected, disconnected, frame };
    kind what;
    connection_id connection;
    shared_bytes frame;  ///< kind::frame only
};

class explorer_network {
public:
    /// Nodes 1..nodes, all up, every pair connected (the `connected` notices queued).
    explicit explorer_network(std::size_t nodes) : nodes_(nodes + 1) {
        for (peer_id id = 1; id <= nodes; ++id)
            nodes_[id].transport.reset(new explorer_transport{*this, id});
        channels_.resize((nodes + 1) * (nodes + 1));
        current_.assign((nodes + 1) * (nodes + 1), 0);
        awaiting_redial_.assign((nodes + 1) * (nodes + 1), false);
        for (peer_id a = 1; a <= nodes; ++a)
            for (peer_id b = a + 1; b <= nodes; ++b) establish(a, b);
    }

    explorer_network(const explorer_network&) = delete;
    explorer_network& operator=(const explorer_network&) = delete;

    explorer_transport& transport(peer_id id) { return *nodes_.at(id).transport; }
    std::size_t size() const noexcept { return nodes_.size() - 1; }

    /// What waits from `from` toward `to`, oldest first.
    const std::deque<channel_item>& channel(peer_id from, peer_id to) const {
        return channels_[index(from, to)];
    }

    /// Takes the head of the channel `from` → `to` (which must not be empty).
    channel_item take(peer_id from, peer_id to) {
        auto& c = channels_[index(from, to)];
        ZAB_ASSERT(!c.empty(), "explorer_network: take from an empty channel");
        channel_item item = std::move(c.front());
        c.pop_front();
        return item;
    }

    /// Breaks the connection between `a` and `b` (a reset): both ends hear of it, frames in
    /// flight are lost, and a new connection follows at once if both are up.
    void break_connection(peer_id a, peer_id b) {
        if (current(a, b) != 0) break_pair(a, b);
    }

    /// A crash: its connections break, nothing more reaches it (its channels are emptied).
    void node_down(peer_id id) {
        auto& n = nodes_.at(id);
        if (!n.up) return;
        n.up = false;
        for (peer_id other = 1; other < nodes_.size(); ++other)
            if (other != id && current(id, other) != 0) break_pair(id, other);
        for (peer_id other = 1; other < nodes_.size(); ++other)
            channels_[index(other, id)].clear();
    }

    /// A restart: it connects to every node that is up.
    void node_up(peer_id id) {
        auto& n = nodes_.at(id);
        if (n.up) return;
        n.up = true;
        for (peer_id other = 1; other < nodes_.size(); ++other)
            if (other != id && nodes_[other].up) establish(std::min(id, other), std::max(id, other));
    }

    bool is_up(peer_id id) const { return nodes_.at(id).up; }

    /// From now on, a connection a node closes is re-dialed at `redial` of either end, not at
    /// once (see the file comment). Off again: the pending ones are dialed now.
    void defer_redials(bool on) {
        defer_redials_ = on;
        if (!on)
            for (peer_id id = 1; id < nodes_.size(); ++id) redial(id);
    }

    /// The connections of `id` closed since, dialed again if both ends are up.
    void redial(peer_id id) {
        for (peer_id other = 1; other < nodes_.size(); ++other) {
            if (other == id) continue;
            const std::size_t pair = index(std::min(id, other), std::max(id, other));
            if (!awaiting_redial_[pair]) continue;
            awaiting_redial_[pair] = false;
            if (nodes_[id].up && nodes_[other].up && current(id, other) == 0)
                establish(std::min(id, other), std::max(id, other));
        }
    }
    connection_id current(peer_id a, peer_id b) const { return current_[index(std::min(a, b), std::max(a, b))]; }

    /// Connections made or broken so far: a step that changed it touched other nodes' links.
    std::uint64_t structure_changes() const noexcept { return structure_changes_; }
    std::uint64_t frames_sent() const noexcept { return frames_sent_; }

    /// The channels' contents into `h`: every item's kind, its connection's rank among the
    /// pair's connections (ids themselves depend on the path) and a frame's bytes.
    void digest(trace_hash& h) const {
        for (peer_id from = 1; from < nodes_.size(); ++from)
            for (peer_id to = 1; to < nodes_.size(); ++to) {
                if (from == to) continue;
                const auto& c = channels_[index(from, to)];
                h.add(c.size());
                const connection_id now = current(from, to);
                for (const auto& item : c) {
                    h.add(static_cast<std::uint64_t>(item.what));
                    h.add(item.connection == now ? 1 : 0);
                    if (item.what == channel_item::kind::frame) h.add(item.frame.view());
                }
            }
    }

    // --- what protocol_observer attaches to (sim_network's calls) -------------------------

    std::uint64_t add_observer(std::function<void(const network_event&)> observer) {
        const std::uint64_t id = next_observer_++;
        observers_.emplace_back(id, std::move(observer));
        return id;
    }
    void remove_observer(std::uint64_t id) {
        std::erase_if(observers_, [id](const auto& o) { return o.first == id; });
    }

private:
    friend class explorer_transport;

    struct node_state {
        bool up = true;
        std::unique_ptr<explorer_transport> transport;
    };

    std::size_t index(peer_id from, peer_id to) const {
        ZAB_ASSERT(from >= 1 && from < nodes_.size() && to >= 1 && to < nodes_.size(),
                   "explorer_network: unknown node");
        return from * nodes_.size() + to;
    }
    connection_id& current_of(peer_id a, peer_id b) {
        return current_[index(std::min(a, b), std::max(a, b))];
    }

    void emit(network_event::kind what, peer_id from, peer_id to, connection_id c,
              const shared_bytes& frame = {}) {
        if (observers_.empty()) return;
        const network_event e{what, 0, from, to, c, network_reason::none, frame};
        for (const auto& [id, observer] : observers_) observer(e);
    }

    void establish(peer_id a, peer_id b) {
        const connection_id c = next_connection_++;
        current_of(a, b) = c;
        ++structure_changes_;
        emit(network_event::kind::connect, a, b, c);
        channels_[index(a, b)].push_back({channel_item::kind::connected, c, {}});
        channels_[index(b, a)].push_back({channel_item::kind::connected, c, {}});
    }

    void break_pair(peer_id a, peer_id b, bool redial_now = true) {
        const connection_id c = current(a, b);
        current_of(a, b) = 0;
        ++structure_changes_;
        for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
            auto& channel = channels_[index(from, to)];
            std::erase_if(channel, [c](const channel_item& i) {
                return i.what == channel_item::kind::frame && i.connection == c;
            });
            if (nodes_[to].up) channel.push_back({channel_item::kind::disconnected, c, {}});
        }
        if (!nodes_[a].up || !nodes_[b].up) return;
        if (redial_now) establish(std::min(a, b), std::max(a, b));
        else awaiting_redial_[index(std::min(a, b), std::max(a, b))] = true;
    }

    void send(peer_id from, peer_id to, connection_id c, const shared_bytes& frame) {
        if (from == to || to >= nodes_.size() || !nodes_[from].up) return;
        if (c == 0 || current(from, to) != c) return;  // stale: dropped, as by sim_network
        ++frames_sent_;
        emit(network_event::kind::send, from, to, c, frame);
        channels_[index(from, to)].push_back({channel_item::kind::frame, c, frame});
    }

    void close(peer_id from, peer_id to, connection_id c) {
        if (from == to || to >= nodes_.size() || !nodes_[from].up || c == 0) return;
        if (current(from, to) == c) break_pair(from, to, !defer_redials_);
    }

    std::vector<node_state> nodes_;
    std::vector<std::deque<channel_item>> channels_;  // [from * size + to]
    std::vector<connection_id> current_;              // [low * size + high]
    std::vector<bool> awaiting_redial_;               // [low * size + high], defer_redials_
    bool defer_redials_ = false;
    connection_id next_connection_ = 1;
    std::uint64_t structure_changes_ = 0;
    std::uint64_t frames_sent_ = 0;
    std::vector<std::pair<std::uint64_t, std::function<void(const network_event&)>>> observers_;
    std::uint64_t next_observer_ = 1;
};

inline void explorer_transport::send(peer_id to, connection_id c, const shared_bytes& frame) {
    network_->send(self_, to, c, frame);
}

inline void explorer_transport::close(peer_id to, connection_id c) {
    network_->close(self_, to, c);
}

}  // namespace zab::testing
