// zab/core/peer_context.hpp — the state the phase policies share, and what they may ask for.
//
// A peer is built from four phase policies (DESIGN.md, "The shape"); they do not talk to each
// other directly but read and change this one context. It holds no I/O: `send` encodes the
// message into a frame and queues it; the peer hands the queue to the transport at the end
// of the step (DESIGN.md rule 2). It is not a template, so a policy is an ordinary class.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/config.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/options.hpp"
#include "zab/core/quorum.hpp"
#include "zab/core/types.hpp"
#include "zab/core/vote.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// How an election was decided, with the votes that decided it: the evidence an invariant
/// checker verifies (a quorum of votes equal to the proposal, checkLeader, §3.4).
struct election_decision {
    enum class basis : std::uint8_t {
        looking_quorum,      ///< a quorum of LOOKING-branch votes equal to my proposal (§3.4.4)
        settled_this_round,  ///< FOLLOWING/LEADING votes of my round, with checkLeader (§3.4.6)
        settled_any_round,   ///< `outofelection`: joining an established ensemble (§3.4.6)
        fixed,               ///< the leader was given by configuration
    };
    std::uint64_t sequence = 0;  ///< 1 for this peer object's first decision, then 2, …
    vote decided;                ///< the vote returned (state = what this peer became)
    basis how = basis::looking_quorum;
    std::vector<std::pair<peer_id, vote>> counted;  ///< the votes that formed the quorum
    std::uint64_t tick = 0;      ///< when
};

/// Counters a peer keeps; they only grow. For tests, traces and the metrics hook.
struct peer_counters {
    std::uint64_t frames_received = 0;
    std::uint64_t frames_sent = 0;
    std::uint64_t bad_frames = 0;         ///< undecodable, wrong group: connection closed
    std::uint64_t stale_frames = 0;       ///< from a connection that is no longer current
    std::uint64_t strangers = 0;          ///< frames from a peer not in the configuration
    std::uint64_t unexpected_messages = 0;///< valid but not acceptable in the current state
    std::uint64_t notifications_sent = 0;
    std::uint64_t notifications_received = 0;
    std::uint64_t elections_started = 0;
    std::uint64_t elections_decided = 0;
    std::uint64_t notification_timeouts = 0;
    std::uint64_t establish_timeouts = 0;  ///< discovery/sync not done within init_limit
};

/// State shared by the phase policies of one peer.
class peer_context {
public:
    peer_context(peer_id self, configuration config, options opts)
        : self_{self},
          config_{std::move(config)},
          quorums_{quorum_system::majority(config_)},
          options_{opts} {}

    // --- identity and configuration -----------------------------------------------------
    peer_id self() const noexcept { return self_; }
    const configuration& config() const noexcept { return config_; }
    const quorum_system& quorums() const noexcept { return quorums_; }
    const options& opts() const noexcept { return options_; }
    learner_type self_type() const noexcept {
        return config_.type_of(self_).value_or(learner_type::observer);
    }

    // --- durable quantities (PROTOCOL.md §2, §11.3) ---------------------------------------
    /// Epochs as durable on this replica: never ahead of what a crash would recover.
    epochs durable_epochs;
    /// Last zxid in the durable log: what this peer advertises (votes, FOLLOWERINFO).
    zxid last_logged;
    /// Last zxid known committed, and last applied to the state machine.
    zxid last_committed;
    zxid last_applied;

    // --- role -----------------------------------------------------------------------------
    peer_state state = peer_state::looking;
    phase current_phase = phase::election;
    /// The settled vote while not LOOKING (what this peer answers LOOKING peers with).
    vote current_vote;
    /// The current time in ticks since this peer object started.
    std::uint64_t now_tick = 0;

    // --- services for policies ------------------------------------------------------------
    /// Encodes `m` and queues it for `to`; it leaves at the end of the step, on the current
    /// connection to `to` if there is one (otherwise it is dropped, as on a broken TCP link).
    void send(peer_id to, const message& m) {
        outbox_.emplace_back(to, encode(frame_context{options_.group_id, config_.version()}, m));
        if (std::holds_alternative<notification>(m)) ++counters.notifications_sent;
    }

    /// True while a connection to `peer` is up.
    bool connected(peer_id peer) const {
        for (const auto& [id, connection] : connections_)
            if (id == peer) return true;
        return false;
    }

    /// An election policy reports its result here. The peer leaves LOOKING after the
    /// policy's call returns (never inside it).
    void decide(election_decision decision) {
        decision.sequence = ++decisions_;
        decision.tick = now_tick;
        pending_decision_ = std::move(decision);
    }

    /// The last decision this peer object made, if any.
    const std::optional<election_decision>& last_decision() const noexcept {
        return last_decision_;
    }

    peer_counters counters;

private:
    template <transport, log_store, state_machine, typename>
    friend class peer;

    peer_id self_;
    configuration config_;
    quorum_system quorums_;
    options options_;
    std::vector<std::pair<peer_id, shared_bytes>> outbox_;
    std::vector<std::pair<peer_id, connection_id>> connections_;
    std::optional<election_decision> pending_decision_;
    std::optional<election_decision> last_decision_;
    std::uint64_t decisions_ = 0;
};

}  // namespace zab
