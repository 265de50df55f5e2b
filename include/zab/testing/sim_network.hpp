// zab/testing/sim_network.hpp — a simulated network with TCP's guarantees and TCP's failures.
//
// What it models: one connection per pair of nodes, as ZooKeeper's QuorumCnxManager keeps,
// carrying frames FIFO and without loss while it lasts (docs/protocol.md §0: Zab relies on
// that). What the protocol must survive is what TCP does when things go wrong: connections
// break and come back with a new identity, frames in flight are lost with them, nodes crash
// and restart, the network partitions, and one direction can stall while the other flows
// until a timeout kills the connection. Every delay is drawn from the seeded prng and every
// effect is an event on the event_queue (docs/design.md rules 2 and 11): same seed, same run.
//
// What each node sees on one connection, in this order: `connected`, then frames in the
// order they were sent (a prefix of them), then `disconnected`. Every `connected` is
// followed by exactly one `disconnected` unless the node crashes first. A crashed node sees
// nothing more of its old connections. Nothing is delivered from inside a call: `send` and
// `close` only schedule.
//
// Per-frame faults under this model (`add_frame_fault`). A TCP connection cannot lose,
// duplicate or reorder a frame and go on: what a lost segment becomes, once retransmission
// gives up, is a broken connection. So the faults a frame can suffer are:
//   - frame_action::break_connection ("drop"): every frame sent before it on that direction
//     arrives, it and everything after it on that connection are lost, and the connection
//     breaks there (both ends notice after the detection delay; a new one follows, if the
//     ends are reachable, after a reconnect delay);
//   - frame_action::delay: it arrives `delay` later than its drawn latency, and the frames
//     behind it on that direction wait for it (head-of-line blocking: FIFO holds).
// Duplication and reordering within a connection are not offered: TCP never shows them. What
// the protocol sees of them — a frame resent on a new connection after a break — is the
// core's own resend, which break_connection already provokes. Election notifications and
// broadcast frames share the one connection per pair, so a fault aimed at a message kind
// (`frames_of`) serves both.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/types.hpp"
#include "zab/testing/event_queue.hpp"
#include "zab/testing/random.hpp"

namespace zab::testing {

/// Timing of the simulated network, in microseconds of virtual time.
struct network_options {
    /// One-way latency of a frame (and of a connect or close notice): uniform in [min, max].
    /// Frames on one direction still arrive in order (a frame never overtakes an earlier one).
    sim_time delay_min = 100;
    sim_time delay_max = 2000;
    /// After a connection breaks (or a node comes up, or a partition heals), the time until a
    /// new connection between two reachable nodes is established: uniform in [min, max].
    sim_time reconnect_delay_min = 1000;
    sim_time reconnect_delay_max = 20000;
    /// How long an end takes to notice a connection that broke under it (a reset, a crash
    /// of the other node, a partition). Each end notices independently, after a delay
    /// uniform in [disconnect_detect_delay, 2 × disconnect_detect_delay].
    sim_time disconnect_detect_delay = 500;
    /// A direction blocked by `block_one_way` stalls; after this long, the connection breaks
    /// (TCP's retransmission timeout) and cannot re-form until `heal`.
    sim_time one_way_stall_timeout = 50000;
};

/// How the network reaches one node. An empty member means that kind of event is discarded.
struct network_handler {
    std::function<void(peer_id from, connection_id)> connected;
    std::function<void(peer_id from, connection_id)> disconnected;
    std::function<void(peer_id from, connection_id, shared_bytes frame)> receive;
};

/// Why a frame was dropped or a connection broke (for traces; values are stable).
enum class network_reason : std::uint8_t {
    none = 0,
    stale_connection = 1,  ///< sent on a connection that is not the current one
    sender_down = 2,       ///< sent by a node that is down
    unknown_peer = 3,      ///< sent to an unknown node or to itself
    lost_in_flight = 4,    ///< the connection broke before the frame arrived
    no_handler = 5,        ///< arrived at a node without a `receive` handler
    closed = 6,            ///< an end called `close`
    broken = 7,            ///< `break_connection`
    node_down = 8,         ///< an end crashed
    partitioned = 9,       ///< `partition` put the ends in different groups
    one_way_stall = 10,    ///< a blocked direction timed out
    frame_fault = 11,      ///< a frame fault (frame_action::break_connection) broke it
};

/// What a frame fault does to a frame it matches (see the file comment for the TCP model).
enum class frame_action : std::uint8_t {
    /// The frame is lost and the connection breaks where it stood: earlier frames on that
    /// direction arrive, it and every later frame on the connection are lost.
    break_connection = 0,
    /// The frame arrives `frame_fault::delay` late; the frames behind it wait for it.
    delay = 1,
};

/// A fault aimed at the frames one direction carries: "break the link 2→3 at the next ACK",
/// "delay the next 5 PROPOSALs to 3 by 40 ms". Matched as the frame is sent, on a current
/// connection (stale sends are dropped before any fault sees them).
struct frame_fault {
    peer_id from = 0;  ///< the sender it applies to; 0: any sender
    peer_id to = 0;    ///< the receiver it applies to; 0: any receiver
    /// Which frames it applies to (`frames_of(message_type)` for one message kind); empty:
    /// every frame.
    std::function<bool(byte_view frame)> matches;
    frame_action action = frame_action::break_connection;
    sim_time delay = 0;       ///< frame_action::delay: the added latency
    std::uint64_t count = 1;  ///< how many matching frames it acts on; 0: until removed
};

/// A frame_fault matcher: the frames whose header names message kind `type` (undecodable
/// frames match nothing).
/// PROPOSAL stands for the proposals the leader sends, one to a frame or batched (PROPOSALS):
/// a fault aimed at "the next PROPOSAL" takes whichever frame carries it.
inline std::function<bool(byte_view)> frames_of(wire::message_type type) {
    return [type](byte_view frame) {
        const auto header = decode_header(frame);
        if (!header.has_value()) return false;
        const wire::message_type t = header.value().type;
        return t == type ||
               (type == wire::message_type::proposal && t == wire::message_type::proposal_batch);
    };
}

/// One thing the network did, for the harness's trace and hash.
struct network_event {
    enum class kind : std::uint8_t {
        send = 0,                 ///< a frame entered a connection (from → to)
        deliver = 1,              ///< a frame reached `to`'s handler
        drop = 2,                 ///< a frame was lost (see `reason`)
        connect = 3,              ///< a connection was established (from < to)
        disconnect = 4,           ///< a connection broke (from < to; see `reason`)
        notify_connected = 5,     ///< `to` was told of the connection with `from`
        notify_disconnected = 6,  ///< `to` was told the connection with `from` is gone
    };
    kind what;
    sim_time time;
    peer_id from;
    peer_id to;
    connection_id connection;
    network_reason reason = network_reason::none;
    shared_bytes frame;  ///< for send, deliver, drop
};

struct network_stats {
    std::uint64_t frames_sent = 0;  ///< accepted on a current connection
    std::uint64_t frames_delivered = 0;
    std::uint64_t frames_dropped = 0;  ///< all losses: stale sends + lost in flight + other
    std::uint64_t frames_dropped_stale = 0;
    std::uint64_t frames_lost_in_flight = 0;
    std::uint64_t connections_made = 0;
    std::uint64_t connections_broken = 0;
    std::uint64_t closes = 0;  ///< connections broken by `close`
    std::uint64_t partitions = 0;
    std::uint64_t one_way_blocks = 0;
    std::uint64_t heals = 0;
    std::uint64_t nodes_down = 0;
    std::uint64_t nodes_up = 0;
    std::uint64_t frame_faults_fired = 0;  ///< frames a frame fault acted on
    std::uint64_t frames_delayed = 0;      ///< of which frame_action::delay
    std::uint64_t frames_injected = 0;     ///< forged frames queued by `inject`
};

class sim_network;

/// One node's view of the network: models `zab::transport`. Obtained from
/// `sim_network::transport(node)`; the reference stays valid as long as the network.
class sim_transport {
public:
    /// Queues `frame` on connection `c` to `to`. Dropped silently (and counted) if `c` is
    /// not the current connection, or this node is down.
    void send(peer_id to, connection_id c, const shared_bytes& frame);
    /// Breaks `c` if it is current: both ends (this one included) get `disconnected` later,
    /// and a new connection follows after a reconnect delay. A stale `c` is ignored.
    void close(peer_id to, connection_id c);

    peer_id self() const noexcept { return self_; }

private:
    friend class sim_network;
    sim_transport(sim_network& network, peer_id self) : network_{&network}, self_{self} {}

    sim_network* network_;
    peer_id self_;
};

static_assert(zab::transport<sim_transport>);

class sim_network {
public:
    sim_network(event_queue& events, prng& random, network_options options = {})
        : events_{events}, random_{random}, options_{options} {
        ZAB_ASSERT(options.delay_min <= options.delay_max, "network_options: delay min > max");
        ZAB_ASSERT(options.reconnect_delay_min <= options.reconnect_delay_max,
                   "network_options: reconnect delay min > max");
    }

    sim_network(const sim_network&) = delete;
    sim_network& operator=(const sim_network&) = delete;

    /// Adds a node that is up; it connects to every reachable up node after a reconnect
    /// delay. Set its handler before running the queue, or the `connected` is discarded.
    void add_node(peer_id node) {
        ZAB_ASSERT(!nodes_.contains(node), "add_node: node already present");
        auto& state = nodes_[node];
        state.transport.reset(new sim_transport{*this, node});
        for (const auto& [other, unused] : nodes_) {
            if (other != node) pairs_[key_of(node, other)];
        }
        for (const auto& [other, unused] : nodes_) maybe_connect(node, other);
    }

    /// Events for `node` go through `handler` from now on.
    void set_handler(peer_id node, network_handler handler) {
        node_at(node).handler = std::move(handler);
    }

    sim_transport& transport(peer_id node) { return *node_at(node).transport; }

    /// Crash: every connection of `node` breaks, the other ends notice after the detection
    /// delay, nothing more reaches or leaves `node`, and it makes no new connection.
    void node_down(peer_id node) {
        auto& state = node_at(node);
        if (!state.up) return;
        state.up = false;
        ++state.incarnation;  // notices already scheduled for it are never delivered
        ++stats_.nodes_down;
        for (auto& [key, pair] : pairs_) {
            if ((key.first == node || key.second == node) && pair.current != 0)
                break_pair(key, network_reason::node_down, std::nullopt);
        }
    }

    /// Restart: `node` connects again to every reachable up node after a reconnect delay.
    void node_up(peer_id node) {
        auto& state = node_at(node);
        if (state.up) return;
        state.up = true;
        ++state.incarnation;
        ++stats_.nodes_up;
        // Notices still scheduled for its previous life are discarded when due (incarnation):
        // they order nothing for this one.
        for (auto& [key, pair] : pairs_) {
            if (key.first != node && key.second != node) continue;
            auto& stream = pair.toward[index_of(key, node)];
            stream.last_delivery = 0;
            stream.disconnect_due = 0;
        }
        for (const auto& [other, unused] : nodes_) maybe_connect(node, other);
    }

    bool is_up(peer_id node) const { return node_at(node).up; }

    /// The current connection between `a` and `b` breaks (a reset): both ends notice, frames
    /// in flight are lost, and a new connection follows if they are still reachable.
    void break_connection(peer_id a, peer_id b) {
        ZAB_ASSERT(a != b, "break_connection: a node has no connection to itself");
        const auto key = key_of(a, b);
        if (pair_at(key).current != 0) break_pair(key, network_reason::broken, std::nullopt);
    }

    /// Splits the nodes into groups that cannot reach each other (symmetric). Nodes not
    /// listed form one more group together. Replaces any earlier partition; one-way blocks
    /// stay. Connections across groups break; none forms across them until `heal`.
    void partition(const std::vector<std::vector<peer_id>>& groups) {
        group_of_.clear();
        for (std::size_t g = 0; g < groups.size(); ++g) {
            for (const peer_id node : groups[g]) {
                ZAB_ASSERT(nodes_.contains(node), "partition: unknown node");
                const auto [entry, inserted] = group_of_.emplace(node, g);
                ZAB_ASSERT(inserted || entry->second == g, "partition: node in two groups");
            }
        }
        rest_group_ = groups.size();
        ++stats_.partitions;
        for (auto& [key, pair] : pairs_) {
            if (pair.current != 0 && !reachable(key.first, key.second))
                break_pair(key, network_reason::partitioned, std::nullopt);
            else
                maybe_connect(key.first, key.second);
        }
    }

    /// Frames from `from` to `to` are held back; the other direction flows. After
    /// `one_way_stall_timeout` the connection breaks, and it cannot re-form until `heal`.
    /// If `heal` comes first, the held frames are delivered, in order.
    void block_one_way(peer_id from, peer_id to) {
        ZAB_ASSERT(from != to, "block_one_way: needs two nodes");
        node_at(from);
        node_at(to);
        const auto [entry, inserted] = blocked_.emplace(std::pair{from, to}, next_block_serial_);
        if (!inserted) return;  // already blocked: the earlier stall timer stands
        const std::uint64_t serial = next_block_serial_++;
        ++stats_.one_way_blocks;
        const auto key = key_of(from, to);
        const connection_id c = pair_at(key).current;
        if (c == 0) return;
        events_.schedule_after(options_.one_way_stall_timeout, [this, key, from, to, serial, c] {
            const auto block = blocked_.find({from, to});
            if (block != blocked_.end() && block->second == serial && pair_at(key).current == c)
                break_pair(key, network_reason::one_way_stall, std::nullopt);
        });
    }

    /// Removes every partition and one-way block. Held frames flow again; reconnects follow.
    void heal() {
        group_of_.clear();
        ++stats_.heals;
        const auto was_blocked = std::exchange(blocked_, {});
        for (const auto& [direction, serial] : was_blocked) {
            const auto key = key_of(direction.first, direction.second);
            if (pair_at(key).current != 0) start_pump(key, direction.second);
        }
        for (const auto& [key, pair] : pairs_) maybe_connect(key.first, key.second);
    }

    /// Whether a connection between `a` and `b` could form now (ignoring whether they are up).
    bool reachable(peer_id a, peer_id b) const {
        if (a == b) return false;
        return group(a) == group(b) && !blocked_.contains({a, b}) && !blocked_.contains({b, a});
    }

    std::optional<connection_id> current_connection(peer_id a, peer_id b) const {
        if (a == b) return std::nullopt;
        const auto found = pairs_.find(key_of(a, b));
        if (found == pairs_.end() || found->second.current == 0) return std::nullopt;
        return found->second.current;
    }

    const network_stats& stats() const noexcept { return stats_; }
    const network_options& options() const noexcept { return options_; }

    /// Called synchronously for every send, delivery, drop, connect, disconnect and notice.
    /// It must not call back into the network. Replaces the observer an earlier
    /// `set_observer` gave (empty: removes it); those added with `add_observer` stay.
    void set_observer(std::function<void(const network_event&)> observer) {
        std::erase_if(observers_, [](const auto& o) { return o.first == 0; });
        if (observer) observers_.insert(observers_.begin(), {0, std::move(observer)});
    }

    /// Adds an observer (as `set_observer`'s) next to the others, called after them in the
    /// order added. Returns the id `remove_observer` takes.
    std::uint64_t add_observer(std::function<void(const network_event&)> observer) {
        const std::uint64_t id = next_observer_++;
        observers_.emplace_back(id, std::move(observer));
        return id;
    }

    /// Removes an observer `add_observer` returned (not from inside an observer).
    void remove_observer(std::uint64_t id) {
        std::erase_if(observers_, [id](const auto& o) { return o.first == id; });
    }

    // --- per-link latency and per-frame faults --------------------------------------------

    /// Frames (and connect and close notices) from `from` to `to` take a latency uniform in
    /// [min, max] instead of network_options' [delay_min, delay_max]: one slow direction.
    /// FIFO still holds. Stays until `clear_link_delays`.
    void set_link_delay(peer_id from, peer_id to, sim_time min, sim_time max) {
        ZAB_ASSERT(from != to && min <= max, "set_link_delay: two nodes and min <= max");
        node_at(from);
        node_at(to);
        link_delay_[{from, to}] = {min, max};
    }

    /// `set_link_delay` for both directions between `a` and `b`.
    void set_pair_delay(peer_id a, peer_id b, sim_time min, sim_time max) {
        set_link_delay(a, b, min, max);
        set_link_delay(b, a, min, max);
    }

    /// Every direction back to network_options' latency.
    void clear_link_delays() { link_delay_.clear(); }

    /// Arms `fault` (see frame_fault and the file comment). Returns its id.
    std::uint64_t add_frame_fault(frame_fault fault) {
        const std::uint64_t id = next_fault_++;
        faults_.push_back({id, std::move(fault)});
        fault_hits_[id] = 0;
        return id;
    }

    /// Disarms one fault (its hit count stays readable).
    void remove_frame_fault(std::uint64_t id) {
        std::erase_if(faults_, [id](const armed_fault& f) { return f.id == id; });
    }

    /// Disarms every frame fault.
    void clear_frame_faults() { faults_.clear(); }

    /// How many frames fault `id` has acted on so far (0 for an unknown id).
    std::uint64_t frame_fault_hits(std::uint64_t id) const {
        const auto found = fault_hits_.find(id);
        return found == fault_hits_.end() ? 0 : found->second;
    }

    /// Whether fault `id` is still armed (not exhausted, not removed).
    bool frame_fault_armed(std::uint64_t id) const {
        return std::any_of(faults_.begin(), faults_.end(),
                           [id](const armed_fault& f) { return f.id == id; });
    }

    // --- forged frames (test-only: fuzz/cluster_fuzzer.cpp) --------------------------------

    /// Puts `frame` on the current connection between `from` and `to`, toward `to`, as if
    /// `from` had sent it: what an impostor on that connection, or a member that lies, makes
    /// `to` receive. It takes its place in FIFO order behind what is in flight and arrives
    /// after a drawn latency, like any frame. No `send` event is emitted — observers that
    /// hold a sender to what it promises (protocol_observer, election_checker) must not
    /// take it for `from`'s own — and no frame fault applies; it arrives as a `deliver`.
    /// False (nothing queued) when there is no current connection, or `to` is down.
    bool inject(peer_id from, peer_id to, const shared_bytes& frame) {
        if (from == to || !nodes_.contains(from) || !nodes_.contains(to)) return false;
        if (!node_at(to).up) return false;
        const auto key = key_of(from, to);
        auto& pair = pair_at(key);
        if (pair.current == 0) return false;
        ++stats_.frames_injected;
        auto& stream = pair.toward[index_of(key, to)];
        const sim_time arrival = std::max(events_.now() + draw_delay(from, to), stream.last_delivery);
        stream.last_delivery = arrival;
        stream.in_flight.push_back({frame, arrival, false});
        start_pump(key, to);
        return true;
    }

private:
    friend class sim_transport;

    using pair_key = std::pair<peer_id, peer_id>;  // (lower id, higher id)

    struct node_state {
        bool up = true;
        std::uint64_t incarnation = 0;  // bumped at down and up: old notices are discarded
        network_handler handler;
        std::unique_ptr<sim_transport> transport;
    };

    struct in_flight_frame {
        shared_bytes frame;
        sim_time arrival;
        bool breaks = false;  // a frame fault: the connection breaks when it is due
    };

    struct armed_fault {
        std::uint64_t id;
        frame_fault fault;
    };

    struct delay_range {
        sim_time min, max;
    };

    // Everything delivered to one end of a pair, across connections, in delivery order.
    // What outlives a connection here is only what is still to be delivered from it: its
    // `disconnected` notice. Frames lost with a connection hold nothing back (issue 34 item
    // 9: a frame delayed by a cleared 60 s link delay used to make the first frames of the
    // next connection wait the delay out), nor does a `connected` never delivered.
    struct stream_state {
        sim_time last_delivery = 0;                 // nothing later on this stream arrives earlier
        sim_time disconnect_due = 0;                // the last `disconnected` scheduled
        std::deque<in_flight_frame> in_flight;      // frames of the current connection
        std::optional<event_queue::event_id> pump;  // delivers in_flight.front()
        // `connected` not yet delivered: its event, and the connection it announces.
        std::optional<std::pair<event_queue::event_id, connection_id>> connect_notice;
    };

    struct pair_state {
        connection_id current = 0;  // 0: no connection
        bool connect_pending = false;
        stream_state toward[2];  // [0]: toward key.first, [1]: toward key.second
    };

    static pair_key key_of(peer_id a, peer_id b) { return {std::min(a, b), std::max(a, b)}; }

    static std::size_t index_of(const pair_key& key, peer_id receiver) {
        return receiver == key.first ? 0 : 1;
    }

    node_state& node_at(peer_id node) {
        const auto found = nodes_.find(node);
        ZAB_ASSERT(found != nodes_.end(), "sim_network: unknown node");
        return found->second;
    }
    const node_state& node_at(peer_id node) const {
        const auto found = nodes_.find(node);
        ZAB_ASSERT(found != nodes_.end(), "sim_network: unknown node");
        return found->second;
    }
    pair_state& pair_at(const pair_key& key) {
        const auto found = pairs_.find(key);
        ZAB_ASSERT(found != pairs_.end(), "sim_network: unknown pair");
        return found->second;
    }

    std::size_t group(peer_id node) const {
        const auto found = group_of_.find(node);
        return found == group_of_.end() ? rest_group_ : found->second;
    }

    bool blocked(peer_id from, peer_id to) const { return blocked_.contains({from, to}); }

    void emit(network_event::kind what, peer_id from, peer_id to, connection_id c,
              network_reason reason = network_reason::none, shared_bytes frame = {}) {
        if (observers_.empty()) return;
        const network_event e{what, events_.now(), from, to, c, reason, std::move(frame)};
        for (const auto& [id, observer] : observers_) observer(e);
    }

    // The latency of one frame or notice from `from` to `to`: one draw, as before a link
    // delay was set, so a run without link delays replays unchanged.
    sim_time draw_delay(peer_id from, peer_id to) {
        if (!link_delay_.empty()) {
            const auto found = link_delay_.find({from, to});
            if (found != link_delay_.end())
                return random_.between(found->second.min, found->second.max);
        }
        return random_.between(options_.delay_min, options_.delay_max);
    }

    // The first armed fault that matches this frame acts on it (and counts it): what it does.
    std::optional<std::pair<frame_action, sim_time>> match_fault(peer_id from, peer_id to,
                                                                 const shared_bytes& frame) {
        for (auto it = faults_.begin(); it != faults_.end(); ++it) {
            const frame_fault& f = it->fault;
            if ((f.from != 0 && f.from != from) || (f.to != 0 && f.to != to)) continue;
            if (f.matches && !f.matches(frame.view())) continue;
            ++fault_hits_[it->id];
            ++stats_.frame_faults_fired;
            const std::pair action{f.action, f.delay};
            if (f.count != 0 && fault_hits_[it->id] >= f.count) faults_.erase(it);
            return action;
        }
        return std::nullopt;
    }

    void drop(peer_id from, peer_id to, connection_id c, network_reason reason,
              const shared_bytes& frame) {
        ++stats_.frames_dropped;
        if (reason == network_reason::stale_connection) ++stats_.frames_dropped_stale;
        if (reason == network_reason::lost_in_flight) ++stats_.frames_lost_in_flight;
        emit(network_event::kind::drop, from, to, c, reason, frame);
    }

    // Schedules a new connection between a and b if none exists or is pending and they could
    // connect now. Whether they still can is checked again when the delay has passed.
    void maybe_connect(peer_id a, peer_id b) {
        if (a == b) return;
        auto& pair = pair_at(key_of(a, b));
        if (pair.current != 0 || pair.connect_pending) return;
        if (!node_at(a).up || !node_at(b).up || !reachable(a, b)) return;
        pair.connect_pending = true;
        const sim_time delay =
            random_.between(options_.reconnect_delay_min, options_.reconnect_delay_max);
        events_.schedule_after(delay, [this, key = key_of(a, b)] {
            auto& p = pair_at(key);
            p.connect_pending = false;
            if (p.current == 0 && node_at(key.first).up && node_at(key.second).up &&
                reachable(key.first, key.second))
                establish(key);
        });
    }

    void establish(const pair_key& key) {
        auto& pair = pair_at(key);
        const connection_id c = next_connection_++;
        pair.current = c;
        ++stats_.connections_made;
        emit(network_event::kind::connect, key.first, key.second, c);
        for (const peer_id end : {key.first, key.second}) {
            ZAB_ASSERT(pair.toward[index_of(key, end)].in_flight.empty(),
                       "frames outlived a connection");
            notify(key, end, c, true, draw_delay(end == key.first ? key.second : key.first, end));
        }
    }

    // Schedules `connected` or `disconnected` for `receiver`, in order with everything else
    // delivered to it on this pair.
    void notify(const pair_key& key, peer_id receiver, connection_id c, bool is_connect,
                sim_time delay) {
        auto& stream = pair_at(key).toward[index_of(key, receiver)];
        const sim_time at = std::max(events_.now() + delay, stream.last_delivery);
        stream.last_delivery = at;
        if (!is_connect) stream.disconnect_due = at;
        const peer_id from = receiver == key.first ? key.second : key.first;
        const std::uint64_t incarnation = node_at(receiver).incarnation;
        const auto id = events_.schedule_at(at, [this, key, receiver, from, c, is_connect,
                                                 incarnation] {
            if (is_connect) {
                auto& pending = pair_at(key).toward[index_of(key, receiver)].connect_notice;
                if (pending && pending->second == c) pending.reset();
            }
            auto& node = node_at(receiver);
            if (!node.up || node.incarnation != incarnation) return;
            auto fn = is_connect ? node.handler.connected : node.handler.disconnected;
            if (!fn) return;
            emit(is_connect ? network_event::kind::notify_connected
                            : network_event::kind::notify_disconnected,
                 from, receiver, c);
            fn(from, c);
        });
        if (is_connect) stream.connect_notice = std::pair{id, c};
    }

    // Ends the current connection of `key`: frames in flight are lost, each end that is up
    // is told (the closer at once, the other after a network delay; after a detection delay
    // when the connection broke under both), then a reconnect is scheduled if possible.
    void break_pair(const pair_key& key, network_reason reason, std::optional<peer_id> closer) {
        auto& pair = pair_at(key);
        const connection_id c = pair.current;
        ZAB_ASSERT(c != 0, "break_pair without a connection");
        pair.current = 0;
        ++stats_.connections_broken;
        if (reason == network_reason::closed) ++stats_.closes;
        emit(network_event::kind::disconnect, key.first, key.second, c, reason);
        for (const peer_id receiver : {key.first, key.second}) {
            auto& stream = pair.toward[index_of(key, receiver)];
            if (stream.pump) events_.cancel(*stream.pump);
            stream.pump.reset();
            const peer_id sender = receiver == key.first ? key.second : key.first;
            for (const auto& in_flight : stream.in_flight)
                drop(sender, receiver, c, network_reason::lost_in_flight, in_flight.frame);
            stream.in_flight.clear();
            // What was to arrive on this connection is gone: only an earlier connection's
            // `disconnected` still orders what comes next (per-connection state ends here).
            stream.last_delivery = stream.disconnect_due;
        }
        for (const peer_id end : {key.first, key.second}) {
            auto& stream = pair.toward[index_of(key, end)];
            if (stream.connect_notice) {
                // It never learned of the connection (the handshake had not reached it, as a
                // TCP reset before the SYN-ACK): nothing to tell it of this one.
                ZAB_ASSERT(stream.connect_notice->second == c, "a notice outlived its connection");
                events_.cancel(stream.connect_notice->first);
                stream.connect_notice.reset();
                continue;
            }
            if (!node_at(end).up) continue;
            sim_time delay = 0;
            if (!closer)
                delay = random_.between(options_.disconnect_detect_delay,
                                        2 * options_.disconnect_detect_delay);
            else if (*closer != end)
                delay = draw_delay(*closer, end);
            notify(key, end, c, false, delay);
        }
        maybe_connect(key.first, key.second);
    }

    void send(peer_id from, peer_id to, connection_id c, const shared_bytes& frame) {
        if (from == to || !nodes_.contains(to))
            return drop(from, to, c, network_reason::unknown_peer, frame);
        if (!node_at(from).up) return drop(from, to, c, network_reason::sender_down, frame);
        const auto key = key_of(from, to);
        auto& pair = pair_at(key);
        if (c == 0 || pair.current != c)
            return drop(from, to, c, network_reason::stale_connection, frame);
        ++stats_.frames_sent;
        emit(network_event::kind::send, from, to, c, network_reason::none, frame);
        auto& stream = pair.toward[index_of(key, to)];
        sim_time delay = draw_delay(from, to);
        bool breaks = false;
        if (!faults_.empty()) {
            if (const auto f = match_fault(from, to, frame)) {
                if (f->first == frame_action::delay) {
                    delay += f->second;
                    ++stats_.frames_delayed;
                } else {
                    breaks = true;
                }
            }
        }
        const sim_time arrival = std::max(events_.now() + delay, stream.last_delivery);
        stream.last_delivery = arrival;
        stream.in_flight.push_back({frame, arrival, breaks});
        start_pump(key, to);
    }

    void close(peer_id from, peer_id to, connection_id c) {
        if (from == to || !nodes_.contains(to) || !node_at(from).up || c == 0) return;
        const auto key = key_of(from, to);
        if (pair_at(key).current == c) break_pair(key, network_reason::closed, from);
    }

    // Makes sure the front frame toward `receiver` has a delivery scheduled, unless the
    // direction is blocked (then it waits for `heal`).
    void start_pump(const pair_key& key, peer_id receiver) {
        auto& stream = pair_at(key).toward[index_of(key, receiver)];
        const peer_id sender = receiver == key.first ? key.second : key.first;
        if (stream.pump || stream.in_flight.empty() || blocked(sender, receiver)) return;
        const sim_time at = std::max(stream.in_flight.front().arrival, events_.now());
        const connection_id c = pair_at(key).current;
        stream.pump = events_.schedule_at(at, [this, key, receiver, c] { pump(key, receiver, c); });
    }

    // Delivers the front frame toward `receiver` (one frame per event, so that anything else
    // due at the same instant can interleave), then schedules the next one.
    void pump(const pair_key& key, peer_id receiver, connection_id c) {
        auto& pair = pair_at(key);
        auto& stream = pair.toward[index_of(key, receiver)];
        stream.pump.reset();
        ZAB_ASSERT(pair.current == c && !stream.in_flight.empty(), "pump outlived its connection");
        const peer_id sender = receiver == key.first ? key.second : key.first;
        if (blocked(sender, receiver)) return;  // held back; `heal` restarts the pump
        if (stream.in_flight.front().breaks)  // lost, with everything after it
            return break_pair(key, network_reason::frame_fault, std::nullopt);
        in_flight_frame next = std::move(stream.in_flight.front());
        stream.in_flight.pop_front();
        ZAB_ASSERT(next.arrival <= events_.now(), "frame delivered early");
        start_pump(key, receiver);
        auto& node = node_at(receiver);
        ZAB_ASSERT(node.up, "a current connection to a node that is down");
        if (!node.handler.receive)
            return drop(sender, receiver, c, network_reason::no_handler, next.frame);
        ++stats_.frames_delivered;
        emit(network_event::kind::deliver, sender, receiver, c, network_reason::none, next.frame);
        auto receive = node.handler.receive;  // the handler may replace itself
        receive(sender, c, std::move(next.frame));
    }

    event_queue& events_;
    prng& random_;
    network_options options_;
    std::map<peer_id, node_state> nodes_;
    std::map<pair_key, pair_state> pairs_;
    std::map<peer_id, std::size_t> group_of_;                       // empty: no partition
    std::size_t rest_group_ = 0;                                    // the group of nodes not listed
    std::map<std::pair<peer_id, peer_id>, std::uint64_t> blocked_;  // (from, to) → serial
    std::uint64_t next_block_serial_ = 1;
    connection_id next_connection_ = 1;
    network_stats stats_;
    std::vector<std::pair<std::uint64_t, std::function<void(const network_event&)>>>
        observers_;  // id 0: set_observer's
    std::uint64_t next_observer_ = 1;
    std::map<std::pair<peer_id, peer_id>, delay_range> link_delay_;  // (from, to)
    std::vector<armed_fault> faults_;
    std::map<std::uint64_t, std::uint64_t> fault_hits_;
    std::uint64_t next_fault_ = 1;
};

inline void sim_transport::send(peer_id to, connection_id c, const shared_bytes& frame) {
    network_->send(self_, to, c, frame);
}

inline void sim_transport::close(peer_id to, connection_id c) { network_->close(self_, to, c); }

}  // namespace zab::testing
