// zab/testing/simulator.hpp — a deterministic cluster of real zab peers in virtual time.
//
// What it is: the production `zab::peer`, unchanged (docs/design.md rule 7), over a simulated
// network (sim_network: per-connection FIFO, delays, broken connections, partitions) and a
// simulated disk per replica (sim_log: slow fsync, crashes that keep, drop or tear un-synced
// writes). One seed drives every random choice (docs/design.md rule 11), so a run replays exactly
// from its seed; a hash over every delivered frame and every peer's state digest after
// every event checks that claim. Users can run their own state machine under it.
//
// Time: each replica has its own tick origin (a random phase, as real clocks have). A replica
// is woken only when its `next_deadline()` falls due, or when something arrives for it; it is
// first brought up to date with the ticks that passed, so idle time costs nothing.
//
// Writing a fault schedule — everything is called between events, from the test:
//   - replicas: crash (power loss) / kill (kill -9: the page cache kept) / restart / pause /
//     resume / wipe;
//   - crash points: crash_at(id, crash_point) crashes a replica (or, with id 0, whichever
//     gets there first) right after the first event that leaves it at a named moment —
//     NEWLEADER's four steps, acceptedEpoch issued or durable, ACKEPOCH handled by the
//     leader, currentEpoch durable, TRUNC issued or durable, snapshot install issued or
//     durable, a proposal appended before its ACK, its ACK counted, a COMMIT sent —
//     and crash_reached / crash_reports say whether each arm was reached;
//   - the network (network()): break_connection, partition, block_one_way, heal;
//     set_link_delay / set_pair_delay (one slow direction or pair); add_frame_fault, or here
//     break_link_at(from, to, message_type) and delay_frames(from, to, message_type, n, d)
//     (sim_network.hpp says what a frame fault means on a TCP-like link); network().inject
//     puts a forged frame on a connection, as if its other end had sent it (fuzzing);
//   - the disk (at(id).log): inject(storage_fault) per operation kind, terminal or transient,
//     once or until heal_storage_faults; set_slow(kind, extra); set_options (a slow or lying
//     disk); the same calls on sim_log and sim_file_log (sim_log.hpp).
// Observers add up: add_message_observer, network().add_observer, add_checker.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/testing/peer_internals.hpp"
#include "zab/core/assert.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/config.hpp"
#include "zab/core/options.hpp"
#include "zab/core/peer.hpp"
#include "zab/testing/event_queue.hpp"
#include "zab/testing/random.hpp"
#include "zab/testing/recording_state_machine.hpp"
#include "zab/testing/sim_log.hpp"
#include "zab/testing/sim_network.hpp"
#include "zab/testing/trace_hash.hpp"

namespace zab::testing {

/// Everything a simulated cluster is made of.
struct cluster_options {
    std::uint64_t seed = 1;
    std::size_t voters = 3;
    std::size_t observers = 0;
    /// Replicas outside the initial configuration (ids after the observers), started to join
    /// (options::non_voter_until_synced): a reconfiguration can add them (§9).
    std::size_t joiners = 0;
    zab::options peer;               ///< the core's options, for every replica
    sim_time tick_us = 100'000;      ///< length of a tick in virtual microseconds
    network_options network;
    disk_options disk;
};

/// Where inside a learner's NEWLEADER handling (§5.3, §11.1, §11.8) a crash can be aimed.
/// The learner's steps are events of their own (docs/design.md rule 2), so each point is a state
/// the learner sits in between two events.
enum class newleader_point : std::uint8_t {
    history_appended,  ///< NEWLEADER handled: the history is appended, not yet durable
    history_durable,   ///< history durable; currentEpoch written, not yet durable
    ack_sent,          ///< currentEpoch durable: the ACK of NEWLEADER is on its way
    ack_counted,       ///< the leader counted that ACK; UPTODATE not yet received
};
inline constexpr std::size_t newleader_point_count = 4;

constexpr std::string_view to_string(newleader_point p) noexcept {
    switch (p) {
        case newleader_point::history_appended: return "history appended";
        case newleader_point::history_durable: return "history durable";
        case newleader_point::ack_sent: return "ACK sent";
        case newleader_point::ack_counted: return "ACK counted";
    }
    return "?";
}

/// A named moment at which `simulator::crash_at` makes a replica lose power. Each is a state
/// the replica sits in between two events, recognised from outside the core: from the frames
/// it sends and that reach their receiver, the storage operations it issues and the
/// completions its disk delivers. The crash comes right after the first event that leaves
/// the replica there, so frames that event sent are in flight and lost with the crash.
/// (The first four are the NEWLEADER points of `newleader_point`, recognised from the
/// learner's state as before.)
enum class crash_point : std::uint8_t {
    newleader_history_appended = 0,  ///< newleader_point::history_appended
    newleader_history_durable = 1,   ///< newleader_point::history_durable
    newleader_ack_sent = 2,          ///< newleader_point::ack_sent
    newleader_ack_counted = 3,       ///< newleader_point::ack_counted
    /// It issued an epoch write that raises acceptedEpoch (discovery, §4), not yet durable.
    accepted_epoch_issued = 4,
    /// An epoch write raising its acceptedEpoch became durable; the ACKEPOCH (or, at a
    /// leader, the LEADERINFO) that event sent is lost with the crash.
    accepted_epoch_durable = 5,
    /// Its ACKEPOCH reached the leader and was handled there.
    ackepoch_received = 6,
    /// An epoch write raising its currentEpoch became durable (a learner's NEWLEADER step,
    /// or a leader's own at establishment).
    current_epoch_durable = 7,
    /// It handled a TRUNC: the truncation is issued, not yet durable.
    truncate_issued = 8,
    /// A sync covering its truncation completed while the history re-appended after it (if
    /// any was yet) is not durable: the moment between truncation and re-append.
    truncate_durable = 9,
    /// It issued a snapshot install (SNAP sync, at NEWLEADER), not yet durable.
    snapshot_install_issued = 10,
    /// A sync covering its snapshot install completed.
    snapshot_installed = 11,
    /// A learner appended a PROPOSAL it received; the ACK is not sent (it waits for the sync).
    proposal_appended = 12,
    /// Its ACK of a proposal reached the leader and was handled (counted) there.
    proposal_ack_received = 13,
    /// As leader, it sent a COMMIT: every COMMIT of that event is lost with the crash.
    commit_sent = 14,
};
inline constexpr std::size_t crash_point_count = 15;

constexpr crash_point to_crash_point(newleader_point p) noexcept {
    return static_cast<crash_point>(static_cast<std::uint8_t>(p));
}

constexpr std::string_view to_string(crash_point p) noexcept {
    switch (p) {
        case crash_point::newleader_history_appended: return "NEWLEADER history appended";
        case crash_point::newleader_history_durable: return "NEWLEADER history durable";
        case crash_point::newleader_ack_sent: return "NEWLEADER ACK sent";
        case crash_point::newleader_ack_counted: return "NEWLEADER ACK counted";
        case crash_point::accepted_epoch_issued: return "acceptedEpoch issued";
        case crash_point::accepted_epoch_durable: return "acceptedEpoch durable";
        case crash_point::ackepoch_received: return "ACKEPOCH received";
        case crash_point::current_epoch_durable: return "currentEpoch durable";
        case crash_point::truncate_issued: return "truncation issued";
        case crash_point::truncate_durable: return "truncation durable";
        case crash_point::snapshot_install_issued: return "snapshot install issued";
        case crash_point::snapshot_installed: return "snapshot installed";
        case crash_point::proposal_appended: return "proposal appended";
        case crash_point::proposal_ack_received: return "proposal ACK received";
        case crash_point::commit_sent: return "COMMIT sent";
    }
    return "?";
}

/// One crash armed with `simulator::crash_at`, and whether it was reached.
struct armed_crash_report {
    std::uint64_t arm = 0;     ///< the id crash_at returned
    peer_id target = 0;        ///< the replica armed; 0: whichever reached it first
    crash_point point{};
    bool fired = false;        ///< the point was reached and the replica crashed there
    peer_id crashed = 0;       ///< which replica (when fired)
    sim_time fired_at = 0;
    bool disarmed = false;     ///< `disarm` removed it before it was reached
};

/// A simulated cluster: replicas 1..voters vote, the next `observers` ids observe. Each
/// replica's disk is a `Log`: sim_log (a model of a log on a disk that can lose power), or
/// sim_file_log (zab::file_log itself on a simulated file system, zab/testing/
/// sim_file_log.hpp); both are built from (event_queue&, prng&, disk_options).
template <state_machine StateMachine = recording_state_machine,
          typename Policies = default_policies, typename Log = sim_log>
class simulator {
public:
    using log_type = Log;
    using peer_type = peer<sim_transport, Log, StateMachine, Policies>;

    /// One replica: its disk survives crashes; its peer object and state machine do not.
    struct node {
        peer_id id = 0;
        std::unique_ptr<Log> log;
        std::unique_ptr<StateMachine> machine;
        std::unique_ptr<peer_type> peer;     ///< null while crashed
        bool paused = false;
        std::deque<std::function<void()>> held;  ///< events that arrived while paused
        std::optional<event_queue::event_id> wake;
        sim_time tick_origin = 0;
        /// The replica's clock (§7.1's lease reads assume how far clocks may drift): from
        /// virtual time `clock_base_time`, when it read `clock_base_ticks`, it counts ticks at
        /// (1 + clock_ppm / 10^6) times the nominal rate. The rate survives restarts (it is
        /// the machine's); `set_clock_rate` and `jump_clock` change it.
        std::int64_t clock_ppm = 0;
        sim_time clock_base_time = 0;
        std::uint64_t clock_base_ticks = 0;
        std::uint64_t incarnation = 0;       ///< 1 for the first start, +1 per restart
        std::optional<zab::options> peer_options;  ///< this replica's own, if set (restart)
        metrics_sink* metrics = nullptr;     ///< set_metrics: kept across restarts
    };

    explicit simulator(cluster_options options)
        : options_{options},
          random_{options.seed},
          network_random_{random_.fork()},
          network_{events_, network_random_, options.network} {
        auto config = configuration::numbered(options.voters, options.observers);
        ZAB_ASSERT(config.has_value(), "invalid cluster size");
        config_ = config.value();
        const std::size_t replicas = config_.members().size() + options.joiners;
        happened_.resize(replicas + 1);
        // Frames sent, for the crash points (nothing recorded while none is armed).
        network_.add_observer([this](const network_event& e) {
            if (e.what == network_event::kind::send && !armed_.empty())
                happened(e.from).sent |= frame_bit(e.frame);
        });
        nodes_.reserve(replicas);
        for (peer_id id = 1; id <= replicas; ++id) {
            nodes_.push_back(node{});
            node& n = nodes_.back();
            n.id = id;
            if (!config_.contains(id)) {
                n.peer_options = options_.peer;
                n.peer_options->non_voter_until_synced = true;
            }
            // Each component draws from its own stream, so a draw added to one does not
            // shift every other component's choices.
            disk_random_.push_back(std::make_unique<prng>(random_.fork()));
            network_.add_node(id);
        }
        for (std::size_t i = 0; i < nodes_.size(); ++i) attach_disk(nodes_[i], *disk_random_[i]);
    }

    simulator(const simulator&) = delete;
    simulator& operator=(const simulator&) = delete;

    // --- lifecycle ------------------------------------------------------------------------

    /// Replica `id` reports to `sink` (zab/core/metrics.hpp) from now on, and after every
    /// restart; nullptr stops. A sink that measures time should read this simulator's `now()`
    /// (virtual microseconds).
    void set_metrics(peer_id id, metrics_sink* sink) {
        node& n = at(id);
        n.metrics = sink;
        if (n.peer) n.peer->set_metrics(sink);
    }

    /// Starts every replica.
    void start() {
        for (node& n : nodes_) boot(n);
    }

    /// Power loss at replica `id`: the peer object and its state machine are gone, its disk
    /// keeps what the crash model leaves, its connections break.
    void crash(peer_id id) {
        if (!power_off(id)) return;
        run_checkers();
    }

    /// kill -9 of replica `id`: as `crash`, but its disk keeps the page cache (Log::kill:
    /// what the process wrote survives un-synced, and the recovery that opens it must make
    /// it durable before vouching for it; issue 34, defect 3). Returns the Log's measure of
    /// what was un-synced when it died (0 as well when `id` was not running).
    std::uint64_t kill(peer_id id) {
        std::uint64_t unsynced = 0;
        if (!power_off(id, &unsynced)) return 0;
        run_checkers();
        return unsynced;
    }

    /// Arms a one-shot crash of learner `id` at `point` of its next NEWLEADER handling: it
    /// fires after the first event that leaves the learner there (a crash between two steps).
    std::uint64_t crash_at(peer_id id, newleader_point point) {
        return crash_at(id, to_crash_point(point));
    }
    /// Arms a one-shot crash of replica `id` (0: whichever replica reaches it first) at
    /// `point` (see crash_point): it fires after the first event that leaves the replica
    /// there. Returns the arm's id, for `crash_reached`.
    std::uint64_t crash_at(peer_id id, crash_point point) {
        const std::uint64_t arm = crash_reports_.size() + 1;
        crash_reports_.push_back({arm, id, point});
        armed_.push_back(arm);
        return arm;
    }
    /// Disarms every crash armed with `crash_at` that has not fired (their reports say so).
    void disarm() {
        for (const std::uint64_t arm : armed_) crash_reports_[arm - 1].disarmed = true;
        armed_.clear();
    }
    /// Whether the crash armed as `arm` was reached (and fired).
    bool crash_reached(std::uint64_t arm) const {
        return arm >= 1 && arm <= crash_reports_.size() && crash_reports_[arm - 1].fired;
    }
    /// Every crash armed so far, in arming order: fired, still armed, or disarmed.
    const std::vector<armed_crash_report>& crash_reports() const noexcept {
        return crash_reports_;
    }
    /// How many armed crashes fired at `point`.
    std::uint64_t crashes_at(newleader_point point) const noexcept {
        return crashes_at(to_crash_point(point));
    }
    std::uint64_t crashes_at(crash_point point) const noexcept {
        return crashes_at_[static_cast<std::size_t>(point)];
    }

    /// Where learner `id` is in its NEWLEADER handling right now, if inside it.
    std::optional<newleader_point> newleader_position(peer_id id) const {
        const node& n = at(id);
        if (!n.peer || !zab::testing::internals(*n.peer).learning) return std::nullopt;
        const auto& ctx = zab::testing::internals(*n.peer);
        const auto& s = *ctx.learning;
        if (s.at != learner_state::stage::awaiting_uptodate) return std::nullopt;
        if (s.newleader_pending)
            return ctx.log_durable(s.newleader_log_op) ? std::nullopt
                                                       : std::optional{newleader_point::history_appended};
        if (s.newleader_epoch_op == 0) return std::nullopt;
        if (!ctx.epochs_durable(s.newleader_epoch_op)) return newleader_point::history_durable;
        const node& leader = at(s.leader);
        if (leader.peer && zab::testing::internals(*leader.peer).leading) {
            for (const auto& link : zab::testing::internals(*leader.peer).leading->links)
                if (link.id == id && (link.at == learner_link::stage::awaiting_uptodate ||
                                      link.at == learner_link::stage::broadcasting))
                    return newleader_point::ack_counted;
        }
        return newleader_point::ack_sent;
    }

private:
    /// A power loss, or with `killed` a kill -9 (what the disk had un-synced goes there).
    bool power_off(peer_id id, std::uint64_t* killed = nullptr) {
        node& n = at(id);
        if (!n.peer) return false;
        trace_line(id, killed ? "KILL" : "CRASH", "");
        ++crashes_;
        // Its clients see the connection drop: whatever was in flight resolves now.
        n.peer->shutdown();
        drain_completions(n);
        n.peer.reset();
        n.machine.reset();
        n.held.clear();
        n.paused = false;
        cancel_wake(n);
        network_.node_down(id);
        if (killed) *killed = n.log->kill();
        else n.log->crash();
        return true;
    }

    template <typename Call>
    std::optional<request_id> client_call(peer_id id, Call call) {
        node& n = at(id);
        if (!n.peer || n.paused) return std::nullopt;
        catch_up(n);
        const request_id r = call(*n.peer);
        drain_completions(n);
        reschedule_wake(n);
        run_checkers();
        return r;
    }

    // What one replica did in the current event, as crash points see it (recorded only
    // while a crash is armed). Bit t of a frame mask: message_type t.
    struct happenings {
        std::uint64_t sent = 0;          // frames it sent
        std::uint64_t handled = 0;       // frames of its that a receiver handled
        std::uint64_t received = 0;      // frames it handled
        std::uint8_t issued = 0;         // storage_op_kind bits of operations it issued
        std::uint8_t durable = 0;        // storage_event::covered of its completed syncs
        bool accepted_raised_issued = false;
        bool accepted_raised_durable = false;
        bool current_raised_durable = false;
        bool any = false;
    };

    static constexpr std::uint64_t type_bit(wire::message_type t) noexcept {
        return std::uint64_t{1} << static_cast<unsigned>(t);
    }
    static constexpr std::uint8_t kind_bit(storage_op_kind k) noexcept {
        return static_cast<std::uint8_t>(1u << static_cast<unsigned>(k));
    }
    static std::uint64_t frame_bit(const shared_bytes& frame) {
        const auto header = decode_header(frame.view());
        return header ? type_bit(header.value().type) : 0;
    }

    happenings& happened(peer_id id) {
        happenings& h = happened_[id];
        h.any = true;
        journal_dirty_ = true;
        return h;
    }

    void on_storage_event(peer_id id, const storage_event& e) {
        if (armed_.empty()) return;
        happenings& h = happened(id);
        using phase = storage_event::phase;
        if (e.at == phase::issued) {
            h.issued = static_cast<std::uint8_t>(h.issued | kind_bit(e.kind));
            if (e.kind == storage_op_kind::epoch_write && e.value.accepted > e.previous.accepted)
                h.accepted_raised_issued = true;
        } else if (e.at == phase::completed) {
            h.durable = static_cast<std::uint8_t>(h.durable | e.covered);
            if (e.kind == storage_op_kind::epoch_write) {
                h.accepted_raised_durable |= e.value.accepted > e.previous.accepted;
                h.current_raised_durable |= e.value.current > e.previous.current;
            }
        }
    }

    // Whether replica `id` sits at `point` after the event that just ran.
    bool at_point(peer_id id, crash_point point) const {
        if (static_cast<std::size_t>(point) < newleader_point_count)
            return newleader_position(id) == static_cast<newleader_point>(point);
        const happenings& h = happened_[id];
        if (!h.any) return false;
        const peer_type* p = at(id).peer.get();
        const bool learning = p && zab::testing::internals(*p).learning;
        switch (point) {
            case crash_point::accepted_epoch_issued: return h.accepted_raised_issued;
            case crash_point::accepted_epoch_durable: return h.accepted_raised_durable;
            case crash_point::ackepoch_received:
                return (h.handled & type_bit(wire::message_type::ack_epoch)) != 0;
            case crash_point::current_epoch_durable: return h.current_raised_durable;
            case crash_point::truncate_issued:
                return (h.issued & kind_bit(storage_op_kind::truncate)) != 0;
            case crash_point::truncate_durable:
                return (h.durable & kind_bit(storage_op_kind::truncate)) != 0 &&
                       (h.durable & kind_bit(storage_op_kind::append)) == 0;
            case crash_point::snapshot_install_issued:
                return (h.issued & kind_bit(storage_op_kind::install_snapshot)) != 0;
            case crash_point::snapshot_installed:
                return (h.durable & kind_bit(storage_op_kind::install_snapshot)) != 0;
            case crash_point::proposal_appended:
                return learning &&
                       (h.received & (type_bit(wire::message_type::proposal) |
                                      type_bit(wire::message_type::proposal_batch))) != 0 &&
                       (h.issued & kind_bit(storage_op_kind::append)) != 0;
            case crash_point::proposal_ack_received:
                return (h.handled & type_bit(wire::message_type::ack)) != 0;
            case crash_point::commit_sent:
                return p && zab::testing::internals(*p).leading && (h.sent & type_bit(wire::message_type::commit)) != 0;
            default: return false;
        }
    }

    bool fire_armed_crashes() {
        bool fired = false;
        for (auto it = armed_.begin(); it != armed_.end();) {
            armed_crash_report& arm = crash_reports_[*it - 1];
            peer_id hit = 0;
            if (arm.target != 0) {
                if (at(arm.target).peer && at_point(arm.target, arm.point)) hit = arm.target;
            } else {
                for (const node& n : nodes_)
                    if (n.peer && at_point(n.id, arm.point)) {
                        hit = n.id;
                        break;
                    }
            }
            if (hit != 0) {
                trace_line(hit, "CRASH POINT", to_string(arm.point));
                ++crashes_at_[static_cast<std::size_t>(arm.point)];
                arm.fired = true;
                arm.crashed = hit;
                arm.fired_at = events_.now();
                power_off(hit);
                it = armed_.erase(it);
                fired = true;
            } else {
                ++it;
            }
        }
        return fired;
    }

public:

    /// Starts replica `id` again from what its disk recovered; with `own`, under those
    /// options from now on instead of the cluster's.
    void restart(peer_id id, std::optional<zab::options> own = std::nullopt) {
        node& n = at(id);
        if (n.peer) return;
        if (own) n.peer_options = own;
        ++restarts_;
        boot(n);
        run_checkers();
    }

    /// Stops delivering anything to `id` (a SIGSTOP): events wait until `resume`.
    void pause(peer_id id) {
        node& n = at(id);
        if (!n.peer || n.paused) return;
        trace_line(id, "PAUSE", "");
        ++pauses_;
        n.paused = true;
        cancel_wake(n);
    }

    void resume(peer_id id) {
        node& n = at(id);
        if (!n.paused) return;
        trace_line(id, "RESUME", "");
        n.paused = false;
        drain_held(id);
        if (n.peer) reschedule_wake(n);
    }

    // --- running --------------------------------------------------------------------------

    /// Runs one event and then every checker. False when nothing is left to run.
    bool step() {
        if (journal_dirty_) {
            std::fill(happened_.begin(), happened_.end(), happenings{});
            journal_dirty_ = false;
        }
        if (!events_.run_next()) return false;
        ++steps_;
        for (const node& n : nodes_)
            if (n.peer) n.peer->digest(hash_);
        run_checkers();
        // The checkers saw the state the event left; a crash armed for that state follows.
        if (!armed_.empty() && fire_armed_crashes()) run_checkers();
        return true;
    }

    /// Runs every checker now (after a change made from outside an event: a crash, a
    /// restart, a proposal).
    void run_checkers() {
        for (auto& check : checkers_) check(*this);
    }

    /// Runs until `done()` holds (checked after every event) or virtual time reaches
    /// `deadline`. Returns whether `done()` held.
    bool run_until(const std::function<bool()>& done, sim_time deadline) {
        while (!done()) {
            auto next = events_.next_time();
            if (!next || *next > deadline) {
                // Nothing left before the deadline: time still passes (a cluster that is all
                // crashed or paused has no events, and the clock must not stop for it).
                events_.run_until(deadline);
                return false;
            }
            step();
        }
        return true;
    }

    /// Runs every event up to virtual time `now() + duration`.
    void run_for(sim_time duration) {
        const sim_time deadline = events_.now() + duration;
        run_until([] { return false; }, deadline);
    }

    /// Adds a check run after every event (an invariant checker).
    void add_checker(std::function<void(simulator&)> check) {
        checkers_.push_back(std::move(check));
    }

    /// Switches the per-event trace on: one line per event, fixed columns.
    void set_trace(std::function<void(std::string_view)> sink) { trace_ = std::move(sink); }

    // --- observation ----------------------------------------------------------------------

    event_queue& events() noexcept { return events_; }
    sim_network& network() noexcept { return network_; }
    prng& random() noexcept { return random_; }
    const cluster_options& options() const noexcept { return options_; }
    const configuration& config() const noexcept { return config_; }
    sim_time now() const noexcept { return events_.now(); }
    std::vector<node>& nodes() noexcept { return nodes_; }
    const std::vector<node>& nodes() const noexcept { return nodes_; }
    node& at(peer_id id) {
        ZAB_ASSERT(id >= 1 && id <= nodes_.size(), "no such replica");
        return nodes_[id - 1];
    }
    const node& at(peer_id id) const {
        ZAB_ASSERT(id >= 1 && id <= nodes_.size(), "no such replica");
        return nodes_[id - 1];
    }
    /// The live peer object of `id`, or nullptr while it is crashed.
    peer_type* peer_of(peer_id id) { return at(id).peer.get(); }
    const peer_type* peer_of(peer_id id) const { return at(id).peer.get(); }

    /// A hash of every frame delivered and every peer's state after every event: equal for
    /// two runs of one seed, or the simulation is not deterministic.
    std::uint64_t trace_hash_value() const noexcept { return hash_.value(); }
    std::uint64_t steps() const noexcept { return steps_; }
    std::uint64_t crashes() const noexcept { return crashes_; }
    std::uint64_t restarts() const noexcept { return restarts_; }
    std::uint64_t pauses() const noexcept { return pauses_; }
    std::uint64_t frames_delivered() const noexcept { return frames_delivered_; }

    /// Every notification delivered, as (receiver, sender, vote): lets a checker confirm
    /// that a vote a peer counted was really sent to it.
    struct delivered_vote {
        peer_id receiver;
        peer_id sender;
        vote cast;
    };
    void set_notification_observer(std::function<void(const delivered_vote&)> observer) {
        notification_observer_ = std::move(observer);
    }

    using message_observer =
        std::function<void(peer_id receiver, peer_id sender, const wire::message&)>;

    /// Called with every frame delivered to a live replica, decoded: (receiver, sender, m),
    /// as the receiver is about to handle it. Replaces the observer an earlier call set
    /// (empty: removes it); those added with `add_message_observer` stay.
    void set_message_observer(message_observer observer) {
        std::erase_if(message_observers_, [](const auto& o) { return o.first == 0; });
        if (observer) message_observers_.insert(message_observers_.begin(), {0, std::move(observer)});
    }

    /// Adds a message observer (as `set_message_observer`'s) next to the others: every one
    /// is called, `set_message_observer`'s first, then the added ones in the order added.
    /// Returns the id `remove_message_observer` takes.
    std::uint64_t add_message_observer(message_observer observer) {
        const std::uint64_t id = next_message_observer_++;
        message_observers_.emplace_back(id, std::move(observer));
        return id;
    }

    /// Removes an observer `add_message_observer` returned (not from inside an observer).
    void remove_message_observer(std::uint64_t id) {
        std::erase_if(message_observers_, [id](const auto& o) { return o.first == id; });
    }

    // --- link faults (sim_network's, by message kind) ------------------------------------

    /// Breaks the connection `from` → `to` at the next `count` frames of kind `type` on that
    /// direction (0 for `from` or `to`: any): each such frame is lost with everything after
    /// it on its connection, the frames before it arrive (frame_action::break_connection).
    /// E.g. `break_link_at(2, 3, message_type::ack)`. Returns the fault's id in network().
    std::uint64_t break_link_at(peer_id from, peer_id to, wire::message_type type,
                                std::uint64_t count = 1) {
        return network_.add_frame_fault(
            {from, to, frames_of(type), frame_action::break_connection, 0, count});
    }

    /// Delays the next `count` frames of kind `type` from `from` to `to` (0: any) by `delay`
    /// each; the frames behind them wait (FIFO). E.g. "the next 5 PROPOSALs to 3 by 40 ms":
    /// `delay_frames(0, 3, message_type::proposal, 5, 40'000)`. Returns the fault's id.
    std::uint64_t delay_frames(peer_id from, peer_id to, wire::message_type type, std::uint64_t count,
                               sim_time delay) {
        return network_.add_frame_fault(
            {from, to, frames_of(type), frame_action::delay, delay, count});
    }

    /// Proposes `txn` at replica `id` (its clock brought up to date first), as an application
    /// on that replica would. `errc::not_leader` from a non-leader; `errc::shutting_down`
    /// while it is crashed or paused.
    result<zxid> propose(peer_id id, byte_view txn) {
        node& n = at(id);
        if (!n.peer || n.paused) return make_error_code(errc::shutting_down);
        catch_up(n);
        auto proposed = n.peer->propose(txn);
        drain_completions(n);
        reschedule_wake(n);
        run_checkers();
        return proposed;
    }

    /// Submits a client write at replica `id` (any role), as a client connected to it would:
    /// its one completion reaches the completion observer. Nothing while crashed or paused.
    std::optional<request_id> submit(peer_id id, byte_view txn) {
        return client_call(id, [&](peer_type& p) { return p.submit(txn); });
    }

    /// Client writes `txns` at replica `id` in one call (peer::submit_batch): the first of
    /// their consecutive request ids; each completion reaches the completion observer.
    std::optional<request_id> submit_batch(peer_id id, std::span<const byte_view> txns) {
        return client_call(id, [&](peer_type& p) { return p.submit_batch(txns); });
    }

    /// A client sync at replica `id` (§7); its completion reaches the completion observer.
    std::optional<request_id> sync(peer_id id) {
        return client_call(id, [&](peer_type& p) { return p.sync(); });
    }

    /// A client lease sync at replica `id` (§7.1): answered without a quorum round by a
    /// leader holding its read lease; its completion reaches the completion observer.
    std::optional<request_id> lease_sync(peer_id id) {
        return client_call(id, [&](peer_type& p) { return p.lease_sync(); });
    }

    // --- clocks (clock skew faults) -------------------------------------------------------

    /// Replica `id`'s clock counts ticks at (1 + ppm / 10^6) times the nominal rate from now
    /// on (ppm > -10^6), through restarts; 0 is the nominal rate. It never goes back: the
    /// ticks counted so far stay counted.
    void set_clock_rate(peer_id id, std::int64_t ppm) {
        ZAB_ASSERT(ppm > -1'000'000, "a clock rate must stay positive");
        node& n = at(id);
        rebase_clock(n);
        n.clock_ppm = ppm;
        trace_line(id, "CLOCK RATE", fmt::format("{:+} ppm", ppm));
        if (n.peer && !n.paused) reschedule_wake(n);
    }

    /// Replica `id`'s clock jumps `ticks` ahead at once (a clock stepped forward); it sees
    /// them at its next event.
    void jump_clock(peer_id id, std::uint64_t ticks) {
        node& n = at(id);
        rebase_clock(n);
        n.clock_base_ticks += ticks;
        trace_line(id, "CLOCK JUMP", fmt::format("+{} ticks", ticks));
        if (n.peer && !n.paused) reschedule_wake(n);
    }

    /// The tick replica `id`'s clock reads now (what its peer sees at its next event).
    std::uint64_t clock_of(peer_id id) const { return tick_now(at(id)); }

    /// Asks replica `id` to hand its leadership to `target` (0: the best voter; §6.4); the
    /// one completion (op `transfer`) reaches the completion observer.
    std::optional<request_id> transfer_leadership(peer_id id, peer_id target) {
        return client_call(id, [&](peer_type& p) { return p.transfer_leadership(target); });
    }

    /// Asks replica `id` to change the group's membership (§9); the one completion (op
    /// `write`, the new version once applied there) reaches the completion observer.
    std::optional<request_id> reconfigure(peer_id id, reconfig_request request) {
        return client_call(id, [&](peer_type& p) { return p.reconfigure(std::move(request)); });
    }

    /// Replica `id` stops serving clients (`peer::shutdown`): what was in flight completes.
    void stop_clients(peer_id id) {
        node& n = at(id);
        if (!n.peer) return;
        n.peer->shutdown();
        drain_completions(n);
    }

    /// Called with every client completion: (replica, completion), as the peer reports it.
    void set_completion_observer(std::function<void(peer_id, const client_completion&)> observer) {
        completion_observer_ = std::move(observer);
    }

    /// Replaces crashed replica `id`'s disk by an empty one (a wiped or replaced data
    /// directory, ZOOKEEPER-261). False if it is running.
    bool wipe(peer_id id) {
        node& n = at(id);
        if (n.peer) return false;
        trace_line(id, "WIPE", "");
        const std::size_t index = static_cast<std::size_t>(&n - nodes_.data());
        attach_disk(n, *disk_random_[index]);
        return true;
    }

private:
    /// A new, empty disk for `n`, its completions delivered to whichever peer runs there.
    void attach_disk(node& n, prng& random) {
        n.log = std::make_unique<Log>(events_, random, options_.disk);
        const peer_id id = n.id;
        n.log->set_operation_observer([this, id](const storage_event& e) { on_storage_event(id, e); });
        n.log->set_completion_handler([this, id](const storage_completion& c) {
            if (c.what == storage_completion::kind::failed)
                trace_line(id, "DISK FAILED", fmt::format("op {}: {}", c.op, c.error.message()));
            deliver(id, [c](peer_type& p) {
                switch (c.what) {
                    case storage_completion::kind::log_durable: p.on_log_durable(c.op); break;
                    case storage_completion::kind::epochs_durable:
                        p.on_epochs_durable(c.op);
                        break;
                    case storage_completion::kind::failed: p.on_storage_failed(c.error); break;
                }
            });
        });
    }

    void boot(node& n) {
        ++n.incarnation;
        n.machine = std::make_unique<StateMachine>();
        // The simulator runs snapshot work "off the peer's thread" (drain_completions).
        const zab::options peer_options = n.peer_options.value_or(options_.peer);
        auto created = peer_type::create(n.id, config_, peer_options, network_.transport(n.id),
                                         *n.log, *n.machine);
        ZAB_ASSERT(created.has_value(), "simulated peer failed to start");
        n.peer = std::move(created).value();
        n.peer->set_metrics(n.metrics);
        n.paused = false;
        // A random phase for this replica's clock, so ticks are not in lock-step.
        const sim_time phase = random_.below(options_.tick_us);
        n.tick_origin = events_.now() >= phase ? events_.now() - phase : 0;
        n.clock_base_time = n.tick_origin;
        n.clock_base_ticks = 0;
        const peer_id id = n.id;
        network_handler handler;
        handler.connected = [this, id](peer_id from, connection_id c) {
            hash_.add(0x01);
            hash_.add(from);
            hash_.add(c);
            trace_line(id, "CONNECTED", fmt::format("peer {} c{}", from, c));
            deliver(id, [from, c](peer_type& p) { p.on_connected(from, c); });
        };
        handler.disconnected = [this, id](peer_id from, connection_id c) {
            hash_.add(0x02);
            hash_.add(from);
            hash_.add(c);
            trace_line(id, "DISCONNECTED", fmt::format("peer {} c{}", from, c));
            deliver(id, [from, c](peer_type& p) { p.on_disconnected(from, c); });
        };
        handler.receive = [this, id](peer_id from, connection_id c, shared_bytes frame) {
            ++frames_delivered_;
            hash_.add(0x03);
            hash_.add(from);
            hash_.add(frame.view());
            observe_frame(id, from, c, frame);
            deliver(id, [this, id, from, c, frame](peer_type& p) {
                // Observed as the peer is about to handle it (a paused peer handles it late).
                if (!message_observers_.empty())
                    if (auto decoded = decode(frame.view()))
                        for (const auto& [unused, observer] : message_observers_)
                            observer(id, from, decoded.value().msg);
                if (!armed_.empty()) {
                    const std::uint64_t bit = frame_bit(frame);
                    happened(id).received |= bit;
                    // A sender that is no replica (a stranger's forged frame) has no journal.
                    if (from < happened_.size()) happened(from).handled |= bit;
                }
                p.on_receive(from, c, frame);
            });
        };
        network_.set_handler(n.id, std::move(handler));
        network_.node_up(n.id);
        trace_line(n.id, "START",
                   fmt::format("incarnation {}, log ends at {}, epochs {}/{}", n.incarnation,
                               n.log->last_zxid(), n.log->stored_epochs().accepted,
                               n.log->stored_epochs().current));
        n.peer->start();
        reschedule_wake(n);
    }

    /// What waited while `id` was paused is handed over one event at a time, in order, so
    /// every one of them is followed by the checkers like any other event; whatever arrives
    /// meanwhile queues behind them (`deliver`), so a connection's frames are handled in the
    /// order they arrived — a frame due at the instant of the resume used to overtake the
    /// held ones (seed 7310 of the file_log sweep: a COMMIT handled before an earlier one).
    void drain_held(peer_id id) {
        events_.schedule_at(events_.now(), [this, id] {
            node& m = at(id);
            if (m.paused || m.held.empty()) return;
            auto event = std::move(m.held.front());
            m.held.pop_front();
            if (m.peer) event();
            if (!at(id).held.empty()) drain_held(id);
            if (at(id).peer) reschedule_wake(at(id));
        });
    }

    /// Delivers an event to `id`'s peer: held while paused, dropped while crashed, and always
    /// preceded by the ticks that passed since the peer last saw time.
    template <typename Event>
    void deliver(peer_id id, Event event) {
        node& n = at(id);
        if (!n.peer) return;
        if (n.paused || !n.held.empty()) {
            n.held.push_back([this, id, event]() {
                node& m = at(id);
                if (!m.peer) return;
                catch_up(m);
                event(*m.peer);
                drain_completions(m);
            });
            return;
        }
        catch_up(n);
        event(*n.peer);
        drain_completions(n);
        reschedule_wake(n);
    }

    /// The driver contract (zab/core/driver.hpp) after every call into `n`'s peer: its
    /// completions go to the observer, its snapshot work to a simulated background thread;
    /// its log flushes by itself (sim_log and sim_file_log complete syncs as events), and
    /// `reschedule_wake` reads its next deadline.
    void drain_completions(node& n) {
        if (!n.peer) return;
        peer_ready ready = n.peer->ready();
        if (ready.snapshot) {
            // A deferred snapshot: a background thread serializes the view a
            // sync-latency later, while the replica goes on applying; a crash loses the work.
            const peer_id id = n.id;
            const std::uint64_t incarnation = n.incarnation;
            events_.schedule_after(options_.disk.sync_latency_max,
                                   [this, id, incarnation, work = std::move(*ready.snapshot)] {
                                       if (at(id).incarnation != incarnation) return;
                                       const shared_bytes bytes = work.serialize();
                                       deliver(id, [z = work.at, bytes](peer_type& p) {
                                           p.on_snapshot_ready(z, bytes);
                                       });
                                   });
        }
        for (const auto& c : ready.completions)
            if (completion_observer_) completion_observer_(n.id, c);
    }

    std::uint64_t tick_now(const node& n) const {
        const sim_time elapsed = events_.now() - n.clock_base_time;
        if (n.clock_ppm == 0) return n.clock_base_ticks + elapsed / options_.tick_us;
        const auto rate = static_cast<std::uint64_t>(1'000'000 + n.clock_ppm);
        return n.clock_base_ticks + elapsed * rate / (1'000'000 * options_.tick_us);
    }

    /// The virtual time at which `n`'s clock reads `tick` (now, if it already does).
    sim_time time_of_tick(const node& n, std::uint64_t tick) const {
        if (tick <= n.clock_base_ticks) return n.clock_base_time;
        const std::uint64_t ticks = tick - n.clock_base_ticks;
        if (n.clock_ppm == 0) return n.clock_base_time + ticks * options_.tick_us;
        const auto rate = static_cast<std::uint64_t>(1'000'000 + n.clock_ppm);
        return n.clock_base_time + (ticks * 1'000'000 * options_.tick_us + rate - 1) / rate;
    }

    /// Starts `n`'s clock afresh from what it reads now (before its rate or reading changes).
    void rebase_clock(node& n) {
        n.clock_base_ticks = tick_now(n);
        n.clock_base_time = events_.now();
    }

    void catch_up(node& n) {
        const std::uint64_t target = tick_now(n);
        if (target > n.peer->now_tick()) n.peer->tick(target - n.peer->now_tick());
    }

    void cancel_wake(node& n) {
        if (n.wake) events_.cancel(*n.wake);
        n.wake.reset();
    }

    void reschedule_wake(node& n) {
        cancel_wake(n);
        if (!n.peer || n.paused) return;
        const auto deadline = n.peer->next_deadline();
        if (!deadline) return;
        const sim_time due = time_of_tick(n, *deadline);
        const peer_id id = n.id;
        n.wake = events_.schedule_at(std::max(due, events_.now()), [this, id] {
            node& m = at(id);
            m.wake.reset();
            if (!m.peer || m.paused) return;
            catch_up(m);
            drain_completions(m);
            reschedule_wake(m);
        });
    }

    void observe_frame(peer_id receiver, peer_id sender, connection_id c,
                       const shared_bytes& frame) {
        if (!trace_ && !notification_observer_) return;
        auto decoded = decode(frame.view());
        if (!decoded) {
            trace_line(receiver, "RECV", fmt::format("from {} c{} undecodable", sender, c));
            return;
        }
        const wire::message& m = decoded.value().msg;
        if (const auto* n = std::get_if<wire::notification>(&m)) {
            if (notification_observer_) notification_observer_({receiver, sender, vote::from(*n)});
            trace_line(receiver, "RECV", fmt::format("from {} c{} NOTIFICATION {}", sender, c,
                                                     vote::from(*n)));
        } else {
            // The zxid a message names, when it names one.
            const auto named = std::visit(
                [](const auto& v) -> std::optional<zxid> {
                    if constexpr (requires { v.id; }) return v.id;
                    else if constexpr (requires { v.acked; }) return v.acked;
                    else if constexpr (requires { v.last; }) return v.last;
                    else if constexpr (requires { v.truncate_to; }) return v.truncate_to;
                    else if constexpr (requires { v.last_included; }) return v.last_included;
                    else if constexpr (requires { v.last_logged; }) return v.last_logged;
                    else if constexpr (requires { v.epoch_zxid; }) return v.epoch_zxid;
                    else return std::nullopt;
                },
                m);
            trace_line(receiver, "RECV",
                       named ? fmt::format("from {} c{} {} {}", sender, c, to_string(type_of(m)),
                                           *named)
                             : fmt::format("from {} c{} {}", sender, c, to_string(type_of(m))));
        }
    }

    void trace_line(peer_id id, std::string_view what, std::string_view detail) {
        if (!trace_) return;
        trace_(fmt::format("{:>12} n{:<3} {:<13} {}", events_.now(), id, what, detail));
    }

    cluster_options options_;
    event_queue events_;
    prng random_;
    prng network_random_;
    std::vector<std::unique_ptr<prng>> disk_random_;
    sim_network network_;
    configuration config_;
    std::vector<node> nodes_;
    std::vector<std::function<void(simulator&)>> checkers_;
    std::function<void(std::string_view)> trace_;
    std::function<void(const delivered_vote&)> notification_observer_;
    std::vector<std::pair<std::uint64_t, message_observer>> message_observers_;  // 0: set_'s
    std::uint64_t next_message_observer_ = 1;
    std::function<void(peer_id, const client_completion&)> completion_observer_;
    trace_hash hash_;
    std::uint64_t steps_ = 0;
    std::uint64_t crashes_ = 0;
    std::uint64_t restarts_ = 0;
    std::uint64_t pauses_ = 0;
    std::uint64_t frames_delivered_ = 0;
    std::vector<std::uint64_t> armed_;  // arms not yet fired, into crash_reports_
    std::vector<armed_crash_report> crash_reports_;
    std::array<std::uint64_t, crash_point_count> crashes_at_{};
    std::vector<happenings> happened_;  // per replica id, this event
    bool journal_dirty_ = false;
};

}  // namespace zab::testing
