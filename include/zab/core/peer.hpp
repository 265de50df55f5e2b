// zab/core/peer.hpp — zab::peer: one replica's protocol core, with no I/O (DESIGN.md rule 1).
//
// Inputs are events, each one step: start, tick, connection up/down, a received frame, a
// storage completion. Outputs leave through the three concepts at the end of the step
// (DESIGN.md rule 2). The phase policies (`Policies`) hold the code of each phase and share
// the peer's state through one `peer_context`. Messages are dispatched by kind to the policy
// that owns them; election notifications are answered in every state (DESIGN.md rule 4).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/config.hpp"
#include "zab/core/election.hpp"
#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/options.hpp"
#include "zab/core/peer_context.hpp"

namespace zab {

/// The phase policies a peer is built from. Swap one by naming another type, e.g.
/// `zab::policies<zab::fixed_leader_election>`.
template <election_policy Election = fast_leader_election>
struct policies {
    using election = Election;
};

using default_policies = policies<>;

/// One replica. Not thread-safe: drive it from one thread or strand. Never blocks, never
/// calls back into the caller from inside a call (DESIGN.md rule 2).
template <transport Transport, log_store Log, state_machine StateMachine,
          typename Policies = default_policies>
class peer {
public:
    using election_type = typename Policies::election;

    /// Creates a peer over the user's transport, log and state machine (which must outlive
    /// it). Errors: `errc::invalid_options` for inconsistent options, a `self` that is not a
    /// member, or a fixed leader that is not a voter; `errc::corrupt` when the log's stored
    /// epochs break `accepted >= current` (PROTOCOL.md §2 start-up checks).
    static result<std::unique_ptr<peer>> create(peer_id self, configuration config, options opts,
                                                Transport& transport, Log& log,
                                                StateMachine& state_machine) {
        if (auto ok = opts.validate(); !ok) return ok.error();
        if (!config.contains(self)) {
            zab::log(log_level::error, "peer {} is not a member of the configuration", self);
            return make_error_code(errc::invalid_options);
        }
        if (opts.fixed_leader != 0 && !config.is_voter(opts.fixed_leader)) {
            zab::log(log_level::error, "fixed leader {} is not a voter", opts.fixed_leader);
            return make_error_code(errc::invalid_options);
        }
        const epochs stored = log.stored_epochs();
        if (stored.accepted < stored.current) {
            zab::log(log_level::error,
                     "peer {}: stored accepted epoch {} is below current epoch {}; refusing to "
                     "start (PROTOCOL.md §2)",
                     self, stored.accepted, stored.current);
            return make_error_code(errc::corrupt);
        }
        return std::unique_ptr<peer>{
            new peer{self, std::move(config), opts, transport, log, state_machine}};
    }

    peer(const peer&) = delete;
    peer& operator=(const peer&) = delete;

    // --- events (each is one step) ------------------------------------------------------

    /// Starts the peer: it enters LOOKING.
    void start() {
        if (failed()) return;
        enter_looking();
        end_step();
    }

    /// `ticks` ticks of time passed (normally 1; a driver that slept until `next_deadline()`
    /// passes the whole gap).
    void tick(std::uint64_t ticks = 1) {
        if (failed()) return;
        ctx_.now_tick += ticks;
        election_.on_tick();
        if (establish_deadline_ && ctx_.now_tick >= *establish_deadline_) {
            // §4: discovery and synchronization must finish within initLimit, on the leader
            // (a quorum of followers) and on each learner (its leader answering); otherwise
            // back to election. This is also what frees a learner whose chosen leader never
            // took the lead (it decided to follow someone else: FLE is not unanimous, §3).
            ++ctx_.counters.establish_timeouts;
            zab::log(log_level::info, "peer {}: not established within {} ticks, back to LOOKING",
                     ctx_.self(), ctx_.opts().init_limit_ticks);
            enter_looking();
        }
        end_step();
    }

    /// A connection to `from` is up. It replaces any previous one (whose traffic is stale).
    void on_connected(peer_id from, connection_id connection) {
        if (failed()) return;
        if (!ctx_.config().contains(from) || from == ctx_.self()) {
            ++ctx_.counters.strangers;
            transport_.close(from, connection);
            return;
        }
        set_connection(from, connection);
        election_.on_connected(from);
        end_step();
    }

    /// The connection to `from` is gone, with whatever was in flight on it.
    void on_disconnected(peer_id from, connection_id connection) {
        if (failed()) return;
        if (current_connection(from) != connection) return;  // an older connection
        erase_connection(from);
        // §0: a learner that loses its leader goes back to election.
        if ((ctx_.state == peer_state::following || ctx_.state == peer_state::observing) &&
            from == ctx_.current_vote.leader) {
            zab::log(log_level::info, "peer {}: lost leader {}, back to LOOKING", ctx_.self(),
                     from);
            enter_looking();
        }
        end_step();
    }

    /// A frame arrived from `from` on `connection`. Anything wrong with it is the sender's
    /// problem: the connection is closed and a counter moves (DESIGN.md rule 6).
    void on_receive(peer_id from, connection_id connection, const shared_bytes& frame) {
        if (failed()) return;
        ++ctx_.counters.frames_received;
        if (current_connection(from) != connection) {
            ++ctx_.counters.stale_frames;
            return;
        }
        auto decoded = decode(frame.view());
        if (!decoded) {
            reject(from, connection, decoded.error().message());
            return;
        }
        if (decoded.value().header.group_id != ctx_.opts().group_id) {
            reject(from, connection, "frame of another group");
            return;
        }
        std::visit([&](const auto& m) { dispatch(from, connection, m); }, decoded.value().msg);
        end_step();
    }

    /// Log operation `op` (and every earlier one) is durable.
    void on_log_durable(storage_op op) {
        if (failed()) return;
        durable_log_op_ = std::max(durable_log_op_, op);
        end_step();
    }

    /// The epoch write `op` is durable.
    void on_epochs_durable(storage_op op) {
        if (failed()) return;
        durable_epoch_op_ = std::max(durable_epoch_op_, op);
        end_step();
    }

    /// An fsync or truncation failed: the replica stops for good (DESIGN.md rule 6). Every
    /// later event is ignored; `failed()` reports the error.
    void on_storage_failed(std::error_code error) {
        if (failed()) return;
        zab::log(log_level::error, "peer {}: storage failed ({}); replica stopped", ctx_.self(),
                 error.message());
        failure_ = error;
        ctx_.outbox_.clear();
    }

    // --- what a driver needs ------------------------------------------------------------

    /// The tick at which `tick()` next has work, if any: a driver may sleep until then.
    std::optional<std::uint64_t> next_deadline() const {
        if (failed()) return std::nullopt;
        auto deadline = election_.next_deadline();
        if (establish_deadline_ && (!deadline || *establish_deadline_ < *deadline))
            deadline = establish_deadline_;
        return deadline;
    }

    // --- observation --------------------------------------------------------------------

    peer_id id() const noexcept { return ctx_.self(); }
    peer_state state() const noexcept { return ctx_.state; }
    phase current_phase() const noexcept { return ctx_.current_phase; }
    const vote& current_vote() const noexcept { return ctx_.current_vote; }
    epochs durable_epochs() const noexcept { return ctx_.durable_epochs; }
    zxid last_logged() const noexcept { return ctx_.last_logged; }
    zxid last_committed() const noexcept { return ctx_.last_committed; }
    zxid last_applied() const noexcept { return ctx_.last_applied; }
    std::uint64_t now_tick() const noexcept { return ctx_.now_tick; }
    const peer_counters& counters() const noexcept { return ctx_.counters; }
    const std::optional<election_decision>& last_decision() const noexcept {
        return ctx_.last_decision();
    }
    const election_type& election() const noexcept { return election_; }
    const peer_context& context() const noexcept { return ctx_; }
    bool failed() const noexcept { return static_cast<bool>(failure_); }
    std::error_code failure() const noexcept { return failure_; }

    /// Feeds the peer's protocol state into `hasher` (anything with `add(std::uint64_t)`):
    /// the simulator's determinism check compares these digests run against run.
    template <typename Hasher>
    void digest(Hasher& hasher) const {
        const vote& v = ctx_.current_vote;
        for (std::uint64_t x :
             {std::uint64_t{ctx_.self()}, std::uint64_t(ctx_.state),
              std::uint64_t(ctx_.current_phase), v.leader, v.leader_zxid.value(),
              std::uint64_t{v.leader_epoch}, v.round, std::uint64_t{ctx_.durable_epochs.accepted},
              std::uint64_t{ctx_.durable_epochs.current}, ctx_.last_logged.value(),
              ctx_.last_committed.value(), ctx_.last_applied.value(), ctx_.now_tick,
              ctx_.counters.frames_received, ctx_.counters.frames_sent,
              static_cast<std::uint64_t>(failed())})
            hasher.add(x);
    }

private:
    peer(peer_id self, configuration config, options opts, Transport& transport, Log& log,
         StateMachine& state_machine)
        : ctx_{self, std::move(config), opts},
          transport_{transport},
          log_{log},
          state_machine_{state_machine},
          election_{ctx_} {
        // What this replica recovered is what it advertises (PROTOCOL.md §2): after a crash the
        // log holds exactly its durable records.
        ctx_.durable_epochs = log_.stored_epochs();
        ctx_.last_logged = log_.last_zxid();
        ctx_.last_applied = state_machine_.last_applied();
        ctx_.last_committed = ctx_.last_applied;
    }

    void enter_looking() {
        establish_deadline_.reset();
        ctx_.state = peer_state::looking;
        ctx_.current_phase = phase::election;
        election_.start();
    }

    // Election notifications go to the election policy in every state (§3.4 step 7).
    void dispatch(peer_id from, connection_id, const notification& n) {
        election_.on_notification(from, n);
    }

    // Discovery, synchronization and broadcast messages have no handler in this build's
    // policies: a peer sending them is not speaking our protocol version. Close the link.
    template <typename Message>
    void dispatch(peer_id from, connection_id connection, const Message&) {
        ++ctx_.counters.unexpected_messages;
        zab::log(log_level::warn, "peer {}: unexpected {} from {}; closing the connection",
                 ctx_.self(), to_string(message_type_v<Message>), from);
        transport_.close(from, connection);
        erase_connection(from);
    }

    void reject(peer_id from, connection_id connection, const std::string& why) {
        ++ctx_.counters.bad_frames;
        zab::log(log_level::warn, "peer {}: bad frame from {}: {}; closing the connection",
                 ctx_.self(), from, why);
        transport_.close(from, connection);
        erase_connection(from);
    }

    /// Ends a step: applies an election result, then hands queued frames to the transport.
    void end_step() {
        if (auto decision = std::exchange(ctx_.pending_decision_, std::nullopt)) {
            ctx_.state = decision->decided.state;
            ctx_.current_vote = decision->decided;
            ctx_.current_phase = phase::discovery;
            establish_deadline_ = ctx_.now_tick + ctx_.opts().init_limit_ticks;
            ++ctx_.counters.elections_decided;
            zab::log(log_level::info, "peer {}: {} (leader {}, decided by {} votes)", ctx_.self(),
                     ctx_.state, ctx_.current_vote.leader, decision->counted.size());
            ctx_.last_decision_ = std::move(decision);
        }
        for (auto& [to, frame] : ctx_.outbox_) {
            if (auto connection = current_connection(to)) {
                transport_.send(to, *connection, frame);
                ++ctx_.counters.frames_sent;
            }
        }
        ctx_.outbox_.clear();
    }

    std::optional<connection_id> current_connection(peer_id peer) const {
        for (const auto& [id, connection] : ctx_.connections_)
            if (id == peer) return connection;
        return std::nullopt;
    }
    void set_connection(peer_id peer, connection_id connection) {
        for (auto& [id, c] : ctx_.connections_)
            if (id == peer) {
                c = connection;
                return;
            }
        ctx_.connections_.emplace_back(peer, connection);
    }
    void erase_connection(peer_id peer) {
        std::erase_if(ctx_.connections_, [&](const auto& entry) { return entry.first == peer; });
    }

    peer_context ctx_;
    Transport& transport_;
    Log& log_;
    StateMachine& state_machine_;
    election_type election_;
    /// While deciding → established: the tick by which the role must be established (§4).
    std::optional<std::uint64_t> establish_deadline_;
    storage_op durable_log_op_ = 0;
    storage_op durable_epoch_op_ = 0;
    std::error_code failure_;
};

}  // namespace zab
