// zab/core/peer_context.hpp — the state the phase policies share, and what they may ask for.
//
// A peer is built from four phase policies (docs/design.md, "The shape"); they do not talk to each
// other directly but read and change this one context. It holds no I/O: `send` encodes the
// message into a frame and queues it in the outbox (outbox.hpp); the peer hands the queue to
// the transport at the end of the step (docs/design.md rule 2). The storage writes it issues
// are numbered and tracked until durable by its durability tracker (durability.hpp, rule 3).
// It is not a template, so a policy is an ordinary class.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <deque>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/client.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/config.hpp"
#include "zab/core/durability.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/metrics.hpp"
#include "zab/core/options.hpp"
#include "zab/core/outbox.hpp"
#include "zab/core/quorum.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/core/roles.hpp"
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
        handed_over,         ///< the established leader handed its leadership over (§6.4)
        newer_configuration, ///< a leader whose configuration is newer than this replica's (§9)
    };
    std::uint64_t sequence = 0;  ///< 1 for this peer object's first decision, then 2, …
    vote decided;                ///< the vote returned (state = what this peer became)
    basis how = basis::looking_quorum;
    std::vector<std::pair<peer_id, vote>> counted;  ///< the votes that formed the quorum
    /// The configuration the votes were counted in (the decider's committed one, §9).
    configuration counted_in;
    std::uint64_t tick = 0;      ///< when
};

/// Counters a peer keeps; they only grow. For tests, traces and the metrics hook.
/// Why a valid message was not acted on: `peer_counters::ignored`, and a debug log line.
/// None of these is the sender's fault: they are the traffic of a role or a connection that
/// just ended, which both sides learn of by the usual paths.
enum class ignore_reason : std::uint8_t {
    not_from_my_leader,  ///< a leader's message from a peer this replica does not follow now
    not_leading,         ///< a learner's message while this replica does not lead
    unknown_learner,     ///< a learner's message from a peer without a learner link
    not_serving,         ///< an answer to a forwarded request before UPTODATE
    follows_another,     ///< FOLLOWERINFO/OBSERVERINFO while following someone else
    ack_before_newleader,///< an ACK from a learner not yet past NEWLEADER (the link is dropped)
    out_of_stage,        ///< not what the link's or the learner's stage expects now
    bad_acknowledgement, ///< acknowledges what was never sent, or goes back
    wrong_learner_type,  ///< a learner of another type than the configuration says
};
inline constexpr std::size_t ignore_reason_count = 9;

constexpr std::string_view to_string(ignore_reason reason) noexcept {
    switch (reason) {
        case ignore_reason::not_from_my_leader: return "not from the leader this replica follows";
        case ignore_reason::not_leading: return "this replica does not lead";
        case ignore_reason::unknown_learner: return "not from a learner of this leader";
        case ignore_reason::not_serving: return "an answer before UPTODATE";
        case ignore_reason::follows_another: return "this replica follows another leader";
        case ignore_reason::ack_before_newleader: return "an ACK before NEWLEADER";
        case ignore_reason::out_of_stage: return "not expected at this stage";
        case ignore_reason::bad_acknowledgement: return "acknowledges what was never sent";
        case ignore_reason::wrong_learner_type: return "not the learner type configured";
    }
    return "?";
}

struct peer_counters {
    std::uint64_t frames_received = 0;
    std::uint64_t frames_sent = 0;
    /// ACKs and COMMITs not sent because a later one to the same peer left in the same
    /// release, right after them, and covers them (peer_context::send_cumulative).
    std::uint64_t frames_coalesced = 0;
    std::uint64_t bad_frames = 0;         ///< undecodable, wrong group: connection closed
    std::uint64_t stale_frames = 0;       ///< from a connection that is no longer current
    std::uint64_t strangers = 0;          ///< frames from a peer not in the configuration
    std::uint64_t unexpected_messages = 0;///< valid but not acceptable in the current state
    /// `unexpected_messages` by reason (`ignored_for`).
    std::array<std::uint64_t, ignore_reason_count> ignored{};
    std::uint64_t ignored_for(ignore_reason reason) const noexcept {
        return ignored[static_cast<std::size_t>(reason)];
    }
    std::uint64_t notifications_sent = 0;
    std::uint64_t notifications_received = 0;
    std::uint64_t elections_started = 0;
    std::uint64_t elections_decided = 0;
    std::uint64_t elections_won = 0;        ///< decisions to lead (the rest follow or observe)
    std::uint64_t notification_timeouts = 0;
    std::uint64_t establish_timeouts = 0;  ///< discovery/sync not done within init_limit
    std::uint64_t transactions_applied = 0;
    std::uint64_t proposals = 0;            ///< proposed as leader
    std::uint64_t proposal_batches = 0;     ///< PROPOSALS frames made (peer::submit_batch)
    std::uint64_t commits = 0;              ///< committed as leader
    std::uint64_t syncs_diff = 0;           ///< learner syncs planned, by kind (leader side)
    std::uint64_t syncs_trunc = 0;
    std::uint64_t syncs_snap = 0;
    std::uint64_t syncs_restarted = 0;      ///< leader: syncs whose history a compaction took (resynced)
    std::uint64_t snapshot_chunks_sent = 0;  ///< SNAP chunks queued (leader side)
    std::uint64_t snapshot_bytes_sent = 0;   ///< snapshot bytes in them
    std::uint64_t learners_refused = 0;     ///< ahead of the leader, or a stale epoch (§4)
    /// Options every replica must share (§4.2, options::agreed_fingerprint, read_lease_ticks):
    std::uint64_t learners_refused_options = 0;  ///< leader: a learner's fingerprint differs
    std::uint64_t lease_options_mismatches = 0;  ///< leader: a learner's lease options differ
    std::uint64_t leaders_refused_options = 0;   ///< learner: the leader's fingerprint differs
    /// A leader or learner announced a protocol version older than oldest_protocol_version
    /// (§0.2): refused, both versions logged.
    std::uint64_t protocol_refusals = 0;
    std::uint64_t learners_dropped = 0;     ///< leader: learner links it closed, for any reason
    std::uint64_t learners_silent = 0;      ///< leader: of those, silent for sync_limit (§6.2)
    std::uint64_t leader_step_downs = 0;    ///< no quorum within sync_limit (§6.2)
    std::uint64_t leaderships_abandoned = 0;///< unestablished, a quorum voted elsewhere (ZK-3109)
    std::uint64_t leader_silences = 0;      ///< learner: nothing from the leader for sync_limit
    std::uint64_t requests_forwarded = 0;   ///< learner: client writes and syncs sent to the leader
    std::uint64_t forwarded_batches = 0;    ///< learner: REQUESTS frames among them (§6.1)
    std::uint64_t requests_refused = 0;     ///< leader: forwarded writes refused (a REPLY error)
    std::uint64_t syncs_answered = 0;       ///< leader: syncs confirmed by a quorum round (§7)
    std::uint64_t learners_over_backlog = 0;///< leader: learners dropped for their backlog
    std::uint64_t learner_sync_failures = 0;///< leader: learner links ended before synced
    std::uint64_t sync_buffer_overflows = 0;///< learner: syncs given up (max_sync_buffer_bytes)
    std::uint64_t compactions = 0;          ///< log compactions (options::snapshot_every)
    std::uint64_t compactions_postponed = 0;///< leader: held back while a sync read the log
    std::uint64_t snapshots_handed_off = 0; ///< snapshots serialized by the driver
    std::uint64_t unissued_completions = 0; ///< durability reports for ops never issued (ignored)
    std::uint64_t transfers_handed_over = 0;///< leader: leadership handed to a caught-up voter (§6.4)
    std::uint64_t transfers_timed_out = 0;  ///< leader: the target did not catch up in time
    std::uint64_t handovers_followed = 0;   ///< a HANDOVER from this replica's leader adopted
    std::uint64_t learners_promoted = 0;    ///< leader: promotions to voter proposed (§9)
    std::uint64_t disk_stalls = 0;          ///< storage writes made no progress for disk_stall_ticks (§6.5)
    std::uint64_t invitations_sent = 0;     ///< leader: LEADING notifications to absent members (§9)
    std::uint64_t removal_witnessed = 0;    ///< removed: answers telling a laggard of the change (§9)
    std::uint64_t lease_syncs_served = 0;   ///< leader: lease syncs answered under its lease (§7.1)
    std::uint64_t lease_sync_fallbacks = 0; ///< leader: lease syncs that took a quorum round instead
};

/// The log, as the policies see it: the peer adapts the user's `log_store` to this, so the
/// policies need not be templates. Same contract as the concept (concepts.hpp).
class storage_port {
public:
    virtual ~storage_port() = default;
    virtual void append(storage_op op, std::span<const log_record> records) = 0;
    virtual void truncate_after(storage_op op, zxid z) = 0;
    virtual void install_snapshot(storage_op op, zxid z, const shared_bytes& state,
                                  std::span<const log_record> following) = 0;
    virtual void make_durable(storage_op op) = 0;
    virtual void write_epochs(storage_op op, epochs e) = 0;
    virtual result<std::vector<log_record>> read(zxid after, std::size_t max) const = 0;
    /// The last `max` records after the snapshot: zab::tail_readable_log's `read_last`, or
    /// for a log without it the whole log read forward, the last `max` kept.
    virtual result<std::vector<log_record>> read_last(std::size_t max) const = 0;
    virtual std::optional<log_snapshot> snapshot() const = 0;
    /// zab::compactable_log's `compact`; false for a log that cannot compact.
    virtual bool compact(zxid z, const shared_bytes& state) = 0;
    /// Whether the log models zab::compactable_log.
    virtual bool compactable() const = 0;
};

/// A snapshot for compaction, to be serialized by the driver off the peer's thread
/// (peer::ready().snapshot): run `serialize` anywhere, then report the bytes with
/// `peer.on_snapshot_ready(at, bytes)` on the peer's thread.
struct snapshot_work {
    zxid at;
    deferred_snapshot serialize;
};

/// The state machine, as the policies see it.
class machine_port {
public:
    virtual ~machine_port() = default;
    /// zab::deferred_snapshot_machine's `snapshot_later`; nothing for a machine without it.
    virtual std::optional<deferred_snapshot> snapshot_later() const = 0;
    /// Applies `z`; returns what a zab::result_machine's `apply` returned (else nothing).
    virtual shared_bytes apply(zxid z, byte_view txn) = 0;
    /// zab::system_txn_machine's `apply_system`; nothing for a machine without it.
    virtual void apply_system(zxid z, byte_view txn) = 0;
    virtual shared_bytes snapshot() const = 0;
    virtual result<void> restore(zxid z, byte_view state) = 0;
    /// The machine's own `last_applied()`: behind the core's when the last transactions
    /// applied were zab's own and the machine does not see those (reconfig.hpp).
    virtual zxid last_applied() const = 0;
};

/// State shared by the phase policies of one peer.
class peer_context {
public:
    peer_context(peer_id self, configuration config, options opts)
        : self_{self},
          config_{std::move(config)},
          initial_config_version_{config_.version()},
          quorums_{quorum_system::of(config_)},
          election_quorums_{quorums_},
          options_{opts} {}

    // --- identity and configuration (docs/protocol.md §9) -------------------------------
    peer_id self() const noexcept { return self_; }
    /// The committed configuration: the last reconfiguration this replica applied (or
    /// restored from a snapshot), else the one it was started with.
    const configuration& config() const noexcept { return config_; }
    /// Reconfigurations in this replica's log that it does not know committed yet, in zxid
    /// order: each stays in force beside the committed one until it is applied (or truncated
    /// away). At most one at a leader (it refuses a second), possibly more at a learner that
    /// has not heard the COMMIT of one before the next.
    const std::vector<configuration>& pending_configs() const noexcept { return pending_; }
    /// Every active configuration's verifier: the committed one, and each pending one.
    const quorum_system& quorums() const noexcept { return quorums_; }
    /// Moves whenever `quorums()` is rebuilt (a configuration logged, committed or truncated
    /// away): a read lease counted with an older quorum system is void (§7.1).
    std::uint64_t quorums_generation() const noexcept { return quorums_generation_; }
    /// What Fast Leader Election counts votes with: the committed configuration alone (§9
    /// step 7). FLE only proposes a leader — discovery's epoch and NEWLEADER quorums, which
    /// need every active configuration, decide — and a pending configuration's new voters
    /// may not know of it yet, so they would never vote: it must not hold the election up.
    const quorum_system& election_quorums() const noexcept { return election_quorums_; }
    const options& opts() const noexcept { return options_; }
    /// `id`'s type in the active configurations: a voter if it votes in any, an observer if
    /// it is a member of some but votes in none, nothing for a stranger.
    std::optional<learner_type> member_type(peer_id id) const {
        if (quorums_.is_voter(id)) return learner_type::participant;
        if (config_.contains(id)) return learner_type::observer;
        for (const auto& c : pending_)
            if (c.contains(id)) return learner_type::observer;
        return std::nullopt;
    }
    /// The voters of every active configuration, ascending, each once.
    std::vector<peer_id> all_voters() const {
        std::vector<peer_id> ids = config_.voters();
        for (const auto& c : pending_)
            for (peer_id id : c.voters()) ids.push_back(id);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        return ids;
    }
    /// Every member, voter or observer, of every active configuration, ascending, each once.
    std::vector<peer_id> all_members() const {
        std::vector<peer_id> ids;
        for (const member& m : config_.members()) ids.push_back(m.id);
        for (const auto& c : pending_)
            for (const member& m : c.members()) ids.push_back(m.id);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        return ids;
    }
    /// Whether this replica's vote counts: a voter of an active configuration whose voting
    /// is not suspended.
    bool self_votes() const { return !voting_suspended && quorums_.is_voter(self_); }
    /// What this replica joins a leader as (FOLLOWERINFO or OBSERVERINFO): a follower if it
    /// votes in an active configuration, an observer if it is a member that does not, or
    /// while its voting is suspended (ZOOKEEPER-261, options::non_voter_until_synced). A
    /// replica that is no member yet (started to join, §9) follows without a vote: it is
    /// synced and acknowledges proposals, and none of its acknowledgements counts until a
    /// reconfiguration makes it a voter.
    learner_type self_type() const {
        if (voting_suspended) return learner_type::observer;
        return joins_as(self_);
    }
    /// What a replica whose view of the membership is mine joins its leader as (a replica
    /// outside every configuration, a joiner, as a follower without a vote).
    learner_type joins_as(peer_id id) const {
        if (promoted_learner(id)) return learner_type::participant;
        return member_type(id).value_or(learner_type::participant);
    }
    /// An observer of an active configuration marked to be promoted (member::promote): it
    /// follows without a vote until the leader makes it a voter.
    bool promoted_learner(peer_id id) const {
        if (quorums_.is_voter(id)) return false;
        if (const member* m = config_.find(id); m != nullptr && m->promote) return true;
        for (const auto& c : pending_)
            if (const member* m = c.find(id); m != nullptr && m->promote) return true;
        return false;
    }
    /// This replica was removed from the group by a committed reconfiguration (§9): it has
    /// left every role and takes no part in the protocol any more.
    bool removed = false;
    /// Set when the committed configuration changed in this step (the peer reacts at its end).
    bool config_changed = false;
    /// A voter that has not been synced since its disk was wiped (options::
    /// non_voter_until_synced): it votes for nobody and joins as an observer until then.
    bool voting_suspended = false;
    /// Leaders this replica refused to follow because their options::agreed_fingerprint
    /// differs from its own (§4.5, discovery.hpp): FLE counts a vote for one as a vote for
    /// nobody (election.hpp can_win), so the others elect a leader it can follow. One is
    /// forgotten when its connection goes (a restart may have fixed its options).
    peer_set refused_leaders;
    /// Storage writes have been pending without progress for options::disk_stall_ticks
    /// (§6.5); cleared when they progress again.
    bool disk_stalled = false;
    /// Lease reads (§7.1): this replica's promise to the leaders it followed — it takes no
    /// part in electing anyone before this tick (options::read_lease_ticks after the last
    /// frame from its leader; after a start, when it may have promised before the crash).
    std::uint64_t promised_until_tick = 0;

    // --- durable quantities (docs/protocol.md §2, §11.3) ---------------------------------------
    /// Epochs as durable on this replica: never ahead of what a crash would recover.
    epochs durable_epochs;
    /// Last zxid in the durable log: what this peer advertises (votes, ACKEPOCH).
    zxid last_logged;
    /// Last zxid known committed, and last applied to the state machine.
    zxid last_committed;
    zxid last_applied;

    // --- role -----------------------------------------------------------------------------
    peer_state state = peer_state::looking;
    /// The phase this replica is in, derived from its role's state (never stored apart).
    phase current_phase() const noexcept {
        if (state == peer_state::looking) return phase::election;
        if (leading) return leading->established() ? phase::broadcast : phase::discovery;
        if (!learning) return phase::discovery;
        using stage = learner_state::stage;
        switch (learning->at) {
            case stage::awaiting_leader_info:
            case stage::awaiting_sync: return phase::discovery;
            case stage::syncing:
            case stage::awaiting_uptodate: return phase::synchronization;
            case stage::broadcasting: return phase::broadcast;
        }
        return phase::discovery;
    }
    /// The settled vote while not LOOKING (what this peer answers LOOKING peers with).
    vote current_vote;
    /// The current time in ticks since this peer object started.
    std::uint64_t now_tick = 0;
    /// Role state: exactly one is engaged while LEADING / FOLLOWING or OBSERVING.
    std::optional<leader_state> leading;
    std::optional<learner_state> learning;
    /// This replica's last synchronization as a learner (peer_status::last_sync).
    std::optional<sync_summary> last_sync;

    // --- sending --------------------------------------------------------------------------
    /// Encodes `m` and queues it for `to`; it leaves at the end of the step, on the connection
    /// to `to` that is current now (if that connection is gone by then, it is dropped, as on a
    /// broken TCP link).
    void send(peer_id to, const wire::message& m) { send_after(to, m, 0, 0); }

    /// Like `send`, but held until log operation `log_op` and epoch write `epoch_op` are
    /// durable (0: no condition). Messages to one peer leave in the order queued, so a held
    /// message also holds back everything queued after it for that peer (docs/design.md rule 2:
    /// a message that promises durability waits for the completion that covers it).
    void send_after(peer_id to, const wire::message& m, storage_op log_op, storage_op epoch_op) {
        send_frame_after(to, encode(frame_context{options_.group_id, config_.version()}, m),
                         log_op, epoch_op);
        if (std::holds_alternative<wire::notification>(m)) ++counters.notifications_sent;
    }

    /// Queues an already encoded frame (a PROPOSAL is encoded once for every follower).
    void send_frame_after(peer_id to, shared_bytes frame, storage_op log_op = 0,
                          storage_op epoch_op = 0) {
        outbox_.queue(to, std::move(frame), log_op, epoch_op);
    }

    /// Like `send_after`, for an ACK of a proposal or a COMMIT to a serving follower: each
    /// covers every earlier one of its kind on the FIFO connection (§6.1). When the release
    /// that hands it to the transport would send a later one of the same kind to the same
    /// peer with no other frame to that peer between them, only the later one is sent — the
    /// same information at the same moment, in one frame instead of many (a follower whose
    /// fsync made a run of proposals durable acknowledges the run once).
    void send_cumulative(peer_id to, const wire::message& m, storage_op log_op = 0,
                         storage_op epoch_op = 0) {
        ZAB_ASSERT(std::holds_alternative<wire::commit>(m) ||
                       (std::holds_alternative<wire::ack>(m) &&
                        !std::get<wire::ack>(m).acked.is_epoch_marker()),
                   "send_cumulative: only proposal ACKs and COMMITs cover earlier ones");
        if (!connected(to)) return;  // not encoded for nothing
        outbox_.queue(to, encode(frame_context{options_.group_id, config_.version()}, m), log_op,
                      epoch_op, static_cast<std::uint8_t>(type_of(m)));
    }

    /// The connection to `peer` that is up now, if any.
    std::optional<connection_id> connection_to(peer_id peer) const {
        return outbox_.connection_to(peer);
    }
    bool connected(peer_id peer) const { return connection_to(peer).has_value(); }
    /// The peers with a connection up now, in the order they connected.
    std::vector<peer_id> connected_peers() const { return outbox_.connected_peers(); }

    /// Frames queued for `peer` and not handed to the transport yet (held for durability,
    /// or queued since the last release).
    std::size_t queued_frames(peer_id peer) const noexcept { return outbox_.queued_for(peer); }

    /// Asks the transport to close the current connection to `peer` (a bad message, or a
    /// learner the leader drops). The peer forgets it at once, with the frames queued for it.
    void close(peer_id peer) { outbox_.close(peer); }

    /// Leader: forgets learner `id` and closes its connection (a protocol violation, or
    /// silence; `why` says which). It may come back on a new connection with a new
    /// FOLLOWERINFO.
    void drop_learner(peer_id id, const char* why) {
        if (leading) ++counters.learners_dropped;
        forget_learner(id, why);
        close(id);
    }

    /// Leader: forgets everything learner `id` said on its current connection — its link,
    /// its acknowledgements of outstanding proposals and of NEWLEADER. The only way a link
    /// ends (dropped, disconnected, replaced by a new connection or a new FOLLOWERINFO):
    /// what a learner vouched for holds only as long as the history it vouched from. A
    /// learner that comes back is synced again, and that sync may TRUNC away a proposal it
    /// had acknowledged; counting the old ACK with the leader's own would commit a write
    /// that only the leader holds durably (§10.7; issue 15 defect 1).
    /// A link that ends before its learner was synced counts as a failed sync (`why`):
    /// repeated failures are logged at warning level and reported by `peer::learners()`.
    void forget_learner(peer_id id, const char* why) {
        if (!leading) return;
        for (const auto& link : leading->links)
            if (link.id == id && link.at != learner_link::stage::broadcasting)
                note_sync_failure(id, why);
        // Its acknowledgements go with its link (learner_link::last_acked): a later
        // connection's count from nothing (issue 15 defect 1).
        std::erase_if(leading->links, [&](const learner_link& k) { return k.id == id; });
        leading->newleader_acks.erase(id);
    }

    /// Leader: learner `id`'s sync trouble (failures in a row), created on first use.
    learner_sync_trouble& sync_trouble_of(peer_id id) {
        for (auto& [learner, trouble] : leading->sync_trouble)
            if (learner == id) return trouble;
        return leading->sync_trouble.emplace_back(id, learner_sync_trouble{}).second;
    }

    /// Syncs in a row that fail before this is reported as a learner that cannot sync.
    static constexpr std::uint64_t sync_failures_reported = 3;

    void note_sync_failure(peer_id id, const char* why) {
        auto& trouble = sync_trouble_of(id);
        ++trouble.failures;
        trouble.last_reason = why;
        ++counters.learner_sync_failures;
        if (trouble.failures >= sync_failures_reported) {
            log(log_level::warn, "peer {}: learner {} failed to sync {} times in a row; last: {}",
                self_, id, trouble.failures, why);
            if (metrics) {
                metric_event e = event(metric_event_kind::learner_stuck_syncing);
                e.learner = id;
                e.count = trouble.failures;
                e.reason = why;
                metrics->on_event(e);
            }
        }
    }

    // --- metrics (zab/core/metrics.hpp) ---------------------------------------------------
    /// The sink, or null (the default): then nothing below does more than test it.
    metrics_sink* metrics = nullptr;
    /// An event of `kind` stamped with this replica's id, role, established leader and tick.
    metric_event event(metric_event_kind kind) const {
        metric_event e;
        e.kind = kind;
        e.self = self_;
        e.role = state;
        e.leader = established_leader();
        e.tick = now_tick;
        return e;
    }
    /// The leader this replica leads with a quorum or follows past UPTODATE; 0 otherwise.
    peer_id established_leader() const noexcept {
        if (leading && leading->established()) return self_;
        if (learning && learning->at == learner_state::stage::broadcasting) return learning->leader;
        return 0;
    }
    void observe(histogram_kind h, double value) {
        if (metrics) metrics->observe(h, value);
    }
    /// Leader: proposal `id` was made (counted; timed for commit_seconds with a sink).
    void note_proposed(zxid id) {
        ++counters.proposals;
        if (metrics) proposal_times_.emplace_back(id, metrics->now());
    }
    /// Leader: proposal `id` committed (counted; its commit_seconds observed with a sink).
    /// Commits come in zxid order, so the times of earlier proposals (of a leadership that
    /// ended) go too.
    void note_committed(zxid id) {
        ++counters.commits;
        while (!proposal_times_.empty() && proposal_times_.front().first <= id) {
            if (proposal_times_.front().first == id && metrics)
                metrics->observe(histogram_kind::commit_seconds,
                                 metrics->now() - proposal_times_.front().second);
            proposal_times_.pop_front();
        }
    }
    /// A new leadership: proposals timed under an earlier one will never commit here.
    void forget_proposal_times() noexcept { proposal_times_.clear(); }

    /// Storage failed outside a completion (a read of the log): the peer stops at the end
    /// of the step, as at a failed fsync (docs/design.md rule 6). A read error never stands for a
    /// shorter history (issue 15 defect 7).
    void storage_error(std::error_code error, const char* what) {
        log(log_level::error, "peer {}: {}: {}", self_, what, error.message());
        if (!storage_error_) storage_error_ = error;
    }
    /// Whether a read of the log failed in this step (the peer stops at its end).
    bool storage_error_pending() const noexcept { return static_cast<bool>(storage_error_); }
    /// zab's own structural invariants, checked at the end of every step in every build: a
    /// broken one is a bug of zab and stops the process (docs/design.md rule 6); input from
    /// the network, the disk or the caller is checked where it arrives and never reaches
    /// here. The O(window) checks run only with ZAB_EXPENSIVE_INVARIANTS (the test builds).
    void check_invariants() const {
        ZAB_ASSERT(!(leading && learning), "a replica holds a leader's and a learner's state");
        ZAB_ASSERT((state == peer_state::leading) == leading.has_value(),
                   "LEADING exactly while it holds a leader's state");
        ZAB_ASSERT((state == peer_state::following || state == peer_state::observing) ==
                       learning.has_value(),
                   "FOLLOWING/OBSERVING exactly while it holds a learner's state");
        // acceptedEpoch >= currentEpoch (§10.10) is the invariant checker's: its broken
        // variant (broken_variants_test.cpp) must reach the checker, not stop here.
        ZAB_ASSERT(written_epochs.accepted >= durable_epochs.accepted &&
                       written_epochs.current >= durable_epochs.current,
                   "a durable epoch above the one written");
        durability_.check();
        if (leading) check_leader(*leading);
        if (learning) ZAB_ASSERT(learning->leader != self_, "a learner of itself");
#if defined(ZAB_EXPENSIVE_INVARIANTS)
        if (learning)  // learner_state::holds_unapplied searches it by halves
            for (std::size_t i = 1; i < learning->unapplied.size(); ++i)
                ZAB_ASSERT(learning->unapplied[i - 1].id < learning->unapplied[i].id,
                           "a learner's unapplied proposals out of zxid order");
#endif
    }

    /// The message being handled (set by the peer before it dispatches one), for log lines.
    wire::message_type handling = wire::message_type::notification;
    /// The configuration version in its frame's header: the sender's committed one (§9).
    std::uint64_t frame_config_version = 0;

    /// A valid message this replica does not act on in its state (its role or link ended,
    /// or the sender is behind): counted and logged with the reason. What follows (a drop, a
    /// close) is the caller's.
    void ignore(peer_id from, ignore_reason why) {
        ++counters.unexpected_messages;
        ++counters.ignored[static_cast<std::size_t>(why)];
        log(log_level::debug, "peer {}: ignored a {} from {}: {}", self_, to_string(handling),
            from, to_string(why));
    }

    /// Learner: the leader sent something that breaks the protocol; count it and look for a
    /// leader again (never an assertion: docs/design.md rule 6).
    void leader_misbehaved(const char* what) {
        ++counters.unexpected_messages;
        log(log_level::warn, "peer {}: {} from leader {}; back to LOOKING", self_, what,
            learning ? learning->leader : peer_id{0});
        request_election(what);
    }

    // --- storage --------------------------------------------------------------------------
    /// Appends a record to this step's batch (one append and one sync per step: group
    /// commit, docs/design.md rule 2). Returns the operation that will make it durable.
    storage_op append(log_record record) {
        ZAB_ASSERT(record.id > last_zxid_visible, "appends must follow the log");
        if (batch_.empty()) batch_op_ = durability_.next_log_op();
        last_zxid_visible = record.id;
        note_logged(record);
        batch_.push_back(std::move(record));
        return batch_op_;
    }

    /// Removes every record after `z` (TRUNC, §5.3).
    storage_op truncate_after(zxid z) {
        flush_batch();
        const storage_op op = durability_.next_op();
        last_zxid_visible = std::min(last_zxid_visible, z);
        forget_logged_after(z);
        storage_->truncate_after(op, z);
        note_log_op(op);
        return op;
    }

    /// Replaces the log by a snapshot at `z` and the history after it, as one atomic
    /// operation (SNAP, §5.3, §11.1, §11.5).
    storage_op install_snapshot(zxid z, const shared_bytes& state,
                                std::span<const log_record> following) {
        flush_batch();
        const storage_op op = durability_.next_op();
        last_zxid_visible = following.empty() ? z : following.back().id;
        // The old log goes whole: so do its reconfigurations. The snapshot is committed
        // state (a leader sends what it applied), so its configuration is the committed one
        // from now on, as peer::create takes it at a restart — not only once the state
        // machine restores from it at UPTODATE: a sync cut short before then leaves this
        // log holding that configuration, and a replica that went on counting the quorums
        // of the one before it could elect, and establish, a leader the newer one removed
        // (combination sweep seed 1483: removed server 5, synced by SNAP by a leader never
        // established, then established epoch 8 with servers 2 and 3 beside server 4).
        pending_.clear();
        if (auto unwrapped = unwrap_snapshot(state.view());
            unwrapped && unwrapped.value().config &&
            unwrapped.value().config->version() > config_.version())
            set_committed_config(std::move(*unwrapped.value().config));
        rebuild_quorums();
        for (const auto& record : following) note_logged(record);
        storage_->install_snapshot(op, z, state, following);
        note_log_op(op);
        return op;
    }

    /// Writes both epochs atomically. Durable once `epochs_durable(op)`.
    storage_op write_epochs(epochs written) {
        const storage_op op = durability_.next_op();
        written_epochs = written;
        durability_.epochs_issued(op, written, now_tick);
        storage_->write_epochs(op, written);
        return op;
    }

    /// The last epoch write issued (0: none).
    storage_op last_epoch_op() const noexcept { return durability_.last_epoch_op(); }

    /// The last log operation issued (or allocated to this step's batch).
    storage_op last_log_op() const noexcept { return durability_.last_log_op(); }

    /// The counter every epoch's first transaction has (§1: 1, unless a test starts
    /// counters elsewhere) — for the contiguity checks (zxid::continued_by).
    std::uint32_t first_counter() const noexcept { return opts().test_only.initial_counter + 1; }

    /// The protocol version this replica announces (§0.2): protocol_version, unless a test
    /// makes it speak as a previous release (options::test_hooks::protocol).
    std::uint32_t protocol() const noexcept {
        return opts().test_only.protocol != 0 ? opts().test_only.protocol : protocol_version;
    }

    /// What the peer speaks with a peer that announced `theirs` (§0.2): the lower of the two.
    std::uint32_t negotiated(std::uint32_t theirs) const noexcept {
        return opts().test_only.no_version_negotiation ? protocol() : std::min(protocol(), theirs);
    }

    /// The decoder's limits: the frame versions of this replica's protocol (a previous
    /// release read frame version 5 only).
    codec_limits frame_limits() const noexcept {
        codec_limits limits;
        if (protocol() < protocol_forwarded_batches) limits.newest_frame_version = 5;
        return limits;
    }

    /// The last storage operation issued (0: none yet).
    storage_op last_issued_op() const noexcept { return durability_.last_issued_op(); }
    bool log_durable(storage_op op) const noexcept { return durability_.log_durable(op); }
    bool epochs_durable(storage_op op) const noexcept { return durability_.epochs_durable(op); }

    /// The last zxid appended (durable or not), and the epochs last written (durable or not).
    zxid last_zxid_visible;
    epochs written_epochs;

    /// Reads from the log (sync planning, applying a restarted replica's committed history).
    result<std::vector<log_record>> read_log(zxid after, std::size_t max) const {
        return storage_->read(after, max);
    }
    /// The last `max` records after the log's snapshot, ascending (a leader's window, §5.1).
    result<std::vector<log_record>> read_log_last(std::size_t max) const {
        return storage_->read_last(max);
    }
    std::optional<log_snapshot> log_snapshot_in_effect() const { return storage_->snapshot(); }

    // --- state machine --------------------------------------------------------------------
    /// Applies a committed transaction (docs/design.md rule 5): in zxid order, exactly once.
    void apply(const log_record& record) {
        ZAB_ASSERT(record.id > last_applied, "applying out of order");
        shared_bytes result;  // for the writer, if it is in flight here (§6.6)
        const double started = metrics ? metrics->now() : 0.0;
        if (is_system_txn(record.txn.view())) {
            activate(record);  // a reconfiguration: the core's, not the application's
            machine_->apply_system(record.id, record.txn.view());
        } else {
            result = machine_->apply(record.id, record.txn.view());
        }
        if (metrics) metrics->observe(histogram_kind::apply_seconds, metrics->now() - started);
        last_applied = record.id;
        last_committed = std::max(last_committed, record.id);
        ++counters.transactions_applied;
        ++applied_since_compaction_;
        applied_bytes_since_compaction_ += record.txn.size();
        clients.applied(record.id, std::move(result));
    }
    /// Applies every logged record after `last_applied` up to `upto` (committed by the
    /// leader's word), reading them back from the log.
    void apply_from_log(zxid upto) {
        flush_batch();  // records appended in this step must be readable
        // A snapshot in the log (a SNAP whose sync was interrupted before UPTODATE, §11.4)
        // stands for every record up to it, all committed: the state machine reloads from
        // it rather than skipping what the snapshot replaced.
        if (auto snapshot = storage_->snapshot();
            snapshot && last_applied < snapshot->last_included && snapshot->last_included <= upto) {
            if (!restore_machine(snapshot->last_included, snapshot->state.view())) {
                zab::log(log_level::error, "peer {}: the log's snapshot at {} does not restore",
                         self_, snapshot->last_included);
                request_election("the log's snapshot does not restore");
                return;
            }
        }
        while (last_applied < upto) {
            // Read only what is to be applied (counters are contiguous within an epoch, §10.13):
            // one record per COMMIT, not a chunk of 256 copied and thrown away.
            std::size_t wanted = 256;
            if (upto.epoch() == last_applied.epoch())
                wanted = std::min<std::size_t>(wanted, upto.counter() - last_applied.counter());
            auto chunk = storage_->read(last_applied, wanted);
            if (!chunk) return storage_error(chunk.error(), "reading committed records to apply");
            if (chunk.value().empty()) {
                // Committed by the leader's word, and logged: a log that ends before it
                // lost records it reported durable.
                log(log_level::error, "peer {}: the log ends at {}, before committed {}", self_,
                    last_applied, upto);
                return storage_error(make_error_code(errc::corrupt),
                                     "the log lacks committed records");
            }
            for (const auto& record : chunk.value()) {
                if (record.id > upto) return;
                apply(record);
            }
        }
    }

    /// Learner: applies everything the leader said is committed, and forgets the pending
    /// proposals that are now applied.
    void apply_known_committed() {
        apply_from_log(learning->known_committed);
        while (!learning->unapplied.empty() && learning->unapplied.front().id <= last_applied)
            learning->unapplied.pop_front();
    }

    /// The state machine's snapshot as of `last_applied`, with what the core keeps beside it
    /// (reconfig.hpp): the committed configuration once a reconfiguration was applied (a log
    /// compacted past the reconfiguration, or a learner synced by SNAP, still knows the
    /// members), and the machine's own label when it is behind `last_applied` (a machine
    /// that does not see zab's transactions, after one: restored, it gets its own label back).
    shared_bytes machine_snapshot() const {
        return wrap_machine_state(machine_label(), machine_->snapshot());
    }
    /// The same, serialized later on any thread (zab::deferred_snapshot_machine).
    std::optional<deferred_snapshot> machine_snapshot_later() const {
        auto later = machine_->snapshot_later();
        if (!later) return later;
        auto config = snapshot_config();
        auto label = machine_label();
        if (!config && !label) return later;
        return deferred_snapshot{[inner = std::move(*later), config = std::move(config), label]() {
            return wrap_snapshot(config, label, inner().view());
        }};
    }

private:
    std::optional<configuration> snapshot_config() const {
        if (config_.version() == initial_config_version_) return std::nullopt;
        return config_;
    }
    /// The machine's own label for a snapshot at `last_applied`, when it differs.
    std::optional<zxid> machine_label() const {
        const zxid own = machine_->last_applied();
        if (own == last_applied) return std::nullopt;
        return own;
    }
    shared_bytes wrap_machine_state(std::optional<zxid> label, shared_bytes state) const {
        auto config = snapshot_config();
        if (!config && !label) return state;
        return wrap_snapshot(config, label, state.view());
    }

public:
    // --- membership bookkeeping (§9) ----------------------------------------------------
    /// A record entered this replica's log (appended, or in a SNAP's history): a
    /// reconfiguration in it is in force, beside the committed configuration, from now on.
    void note_logged(const log_record& record) {
        if (!is_system_txn(record.txn.view()) || record.id <= last_applied) return;
        // At or below the committed configuration: committed already, never pending again
        // (a SNAP's history from the start re-logs reconfigurations this replica activated
        // from its log before the sync; taking one as pending and then as committed would
        // move the configuration back).
        if (record.id.value() <= config_.version()) return;
        auto request = decode_reconfig(record.txn.view());
        if (!request) {
            log(log_level::warn, "peer {}: the system transaction {} is no reconfiguration; ignored",
                self_, record.id);
            return;
        }
        auto config = configuration::make(std::move(request.value().members), record.id.value());
        if (!config) return;
        std::erase_if(pending_, [&](const configuration& c) { return c.version() >= record.id.value(); });
        // A leader proposes a reconfiguration only with none outstanding: every earlier one
        // in the log it extends was committed then (by a COMMIT, or by that leader's
        // establishment, §5.5). So of the reconfigurations in a log only the last can be
        // pending.
        if (!pending_.empty()) {
            set_committed_config(std::move(pending_.back()));
            pending_.clear();
        }
        pending_.push_back(std::move(config.value()));
        rebuild_quorums();
    }
    /// Another member's frame says its committed configuration is `version` (the frame
    /// header's): if that is the zxid of a reconfiguration pending here, it committed (one
    /// zxid names one transaction, §10.9), and so did every one before it in this log. A
    /// replica restarted with a fresh state machine learns so without waiting to be synced,
    /// so that the quorums of a configuration since replaced do not hold it back.
    void learn_committed_version(std::uint64_t version) {
        if (pending_.empty() || version <= config_.version()) return;
        const auto it = std::find_if(pending_.begin(), pending_.end(),
                                     [&](const configuration& c) { return c.version() == version; });
        if (it == pending_.end()) return;
        set_committed_config(*it);
        pending_.erase(pending_.begin(), it + 1);
        rebuild_quorums();
    }

    /// The log was cut after `z` (TRUNC, or a SNAP replacing it): reconfigurations above it
    /// are gone.
    void forget_logged_after(zxid z) {
        if (std::erase_if(pending_, [&](const configuration& c) { return c.version() > z.value(); }) > 0)
            rebuild_quorums();
    }
    /// A committed reconfiguration is applied: its configuration is the committed one.
    void activate(const log_record& record) {
        auto request = decode_reconfig(record.txn.view());
        auto config = request ? configuration::make(std::move(request.value().members),
                                                    record.id.value())
                              : result<configuration>{make_error_code(errc::malformed)};
        std::erase_if(pending_, [&](const configuration& c) { return c.version() <= record.id.value(); });
        if (record.id.value() <= config_.version()) {
            rebuild_quorums();  // known committed already (a later one was logged after it)
            return;
        }
        if (!config) {
            log(log_level::warn, "peer {}: committed system transaction {} is no valid "
                "reconfiguration; ignored", self_, record.id);
            rebuild_quorums();
            return;
        }
        log(log_level::info, "peer {}: configuration {} in force: {}", self_, record.id,
            describe(config.value()));
        set_committed_config(std::move(config.value()));
        rebuild_quorums();
    }
    /// "1 (voter), 4 (observer)".
    static std::string describe(const configuration& config) {
        std::string out;
        for (const member& m : config.members())
            out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", m.id,
                               m.type == learner_type::participant ? "voter" : "observer");
        return out;
    }
    /// The configuration this step started with, when `config_changed` is set.
    const configuration& previous_config() const noexcept { return previous_config_; }
    /// Bytes of transactions applied since the last compaction: about how much history
    /// follows the log's snapshot.
    std::uint64_t history_bytes_after_snapshot() const noexcept {
        return applied_bytes_since_compaction_;
    }
    result<void> restore_machine(zxid z, byte_view state) {
        auto unwrapped = unwrap_snapshot(state);
        if (!unwrapped) return unwrapped.error();
        // The machine gets back the label it had when the snapshot was taken; the core's
        // position is the snapshot's zxid (reconfig.hpp, issue 34 defect 1).
        auto restored = machine_->restore(unwrapped.value().machine_at(z), unwrapped.value().state);
        if (restored) {
            // Never back: the configuration may be newer already (taken from a later
            // frame, or committed before the snapshot was sent).
            if (unwrapped.value().config &&
                unwrapped.value().config->version() > config_.version())
                set_committed_config(std::move(*unwrapped.value().config));
            std::erase_if(pending_, [&](const configuration& c) { return c.version() <= z.value(); });
            rebuild_quorums();
            applied_since_compaction_ = 0;
            applied_bytes_since_compaction_ = 0;
            last_applied = z;
            last_committed = std::max(last_committed, z);
            clients.applied_through(z);
        }
        return restored;
    }

    /// Compaction (options::snapshot_every, snapshot_every_bytes): once that many
    /// transactions, or transaction bytes, were applied since the last one, the state
    /// machine's snapshot at `last_applied` replaces the log's records up to it. Applied
    /// means committed, so the snapshot holds only committed transactions (§2: a snapshot is
    /// of committed state). With a machine that hands over
    /// views (zab::deferred_snapshot_machine), the view goes to the driver, which serializes
    /// it elsewhere and reports `snapshot_ready`; one is out at a time, and the next is asked
    /// for once it is back and another period has passed. Otherwise the snapshot is taken
    /// here, on the peer's thread: O(state). A log that refuses (it cannot compact, or the
    /// zxid is not one of its records) is asked again after another period.
    void maybe_compact() {
        const std::uint64_t every = opts().snapshot_every;
        const std::uint64_t every_bytes = opts().snapshot_every_bytes;
        const bool by_count = every != 0 && applied_since_compaction_ >= every;
        const bool by_bytes = every_bytes != 0 && applied_bytes_since_compaction_ >= every_bytes;
        if (!by_count && !by_bytes) return;
        if (snapshot_work_outstanding_) return;  // one at a time: asked again once it is done
        // A learner whose sync reads the history from the log would lose it to this
        // compaction and have to start over (issue 34 defect 2): wait for its stream, for up
        // to `compaction_postponement_max` periods; past that the log compacts anyway and
        // the learner is synced again, by SNAP (zab_synchronization::stream_history).
        const bool overdue =
            (every != 0 && applied_since_compaction_ >= every * compaction_postponement_max) ||
            (every_bytes != 0 &&
             applied_bytes_since_compaction_ >= every_bytes * compaction_postponement_max);
        if (!overdue && syncing_from_log()) {
            ++counters.compactions_postponed;
            return;
        }
        applied_since_compaction_ = 0;
        applied_bytes_since_compaction_ = 0;
        const auto in_effect = storage_->snapshot();
        if (in_effect && in_effect->last_included >= last_applied) return;
        if (storage_->compactable()) {
            if (auto later = machine_snapshot_later()) {
                snapshot_work_ = snapshot_work{last_applied, std::move(*later)};
                snapshot_work_outstanding_ = true;
                ++counters.snapshots_handed_off;
                return;
            }
        }
        const double started = metrics ? metrics->now() : 0.0;
        const shared_bytes state = machine_snapshot();
        if (metrics) observe(histogram_kind::snapshot_seconds, metrics->now() - started);
        compact_with(last_applied, state);
    }

    /// How many compaction periods a sync that streams from the log can hold compaction
    /// back (maybe_compact).
    static constexpr std::uint64_t compaction_postponement_max = 4;

    /// Leader: a learner is being synced from this log's records rather than from the
    /// in-memory window — its history streams from below the window, or will once the SNAP
    /// of the log's snapshot it is receiving is out.
    bool syncing_from_log() const {
        if (!leading) return false;
        for (const auto& link : leading->links) {
            if (link.at == learner_link::stage::streaming_history &&
                link.history_queued < leading->committed_base)
                return true;
            if (link.at == learner_link::stage::streaming_snapshot &&
                link.snapshot_base < leading->committed_base)
                return true;
        }
        return false;
    }

    /// The log compacts with `state` at `at` (counted; its size observed with a sink).
    void compact_with(zxid at, const shared_bytes& state) {
        if (!storage_->compact(at, state)) return;
        ++counters.compactions;
        observe(histogram_kind::snapshot_bytes, static_cast<double>(state.size()));
    }

    /// The driver serialized the snapshot handed out for `at` (peer::ready().snapshot).
    /// The log takes it if `at` is still a record above its snapshot: a SNAP installed since,
    /// for one, replaced the history it stood for, and the log then refuses it.
    void snapshot_ready(zxid at, const shared_bytes& state) {
        snapshot_work_outstanding_ = false;
        const auto in_effect = storage_->snapshot();
        if (in_effect && in_effect->last_included >= at) return;
        compact_with(at, state);
    }

    /// Snapshot work for the driver, taken once (peer::ready()).
    std::optional<snapshot_work> take_snapshot_work() { return std::exchange(snapshot_work_, {}); }

    // --- elections --------------------------------------------------------------------------
    /// An election policy reports its result here. The peer leaves LOOKING after the
    /// policy's call returns (never inside it).
    void decide(election_decision decision) {
        decision.sequence = ++decisions_;
        decision.counted_in = config_;
        decision.tick = now_tick;
        pending_decision_ = std::move(decision);
    }

    /// Any policy may ask the peer to drop its role and look for a leader again; the peer
    /// does it at the end of the current step.
    void request_election(const char* why) {
        if (!election_requested_) election_reason_ = why;
        election_requested_ = true;
    }
    /// Whether this step asked for an election (a handler stops reading a batch then).
    bool election_requested() const noexcept { return election_requested_; }

    /// The last decision this peer object made, if any.
    const std::optional<election_decision>& last_decision() const noexcept {
        return last_decision_;
    }

    peer_counters counters;
    /// Client requests in flight on this peer and their completions (client.hpp).
    client_table clients;

private:
    template <transport, log_store, state_machine, typename>
    friend class peer;

    void note_log_op(storage_op op) {
        durability_.log_issued(op, last_zxid_visible, now_tick);
        sync_needed_ = true;
    }

    void flush_batch() {
        if (batch_.empty()) return;
        observe(histogram_kind::append_records, static_cast<double>(batch_.size()));
        storage_->append(batch_op_, batch_);
        batch_.clear();
        note_log_op(batch_op_);
    }

    /// End of step: the batch and one sync go to the log.
    void flush_storage() {
        flush_batch();
        if (sync_needed_) {
            storage_->make_durable(durability_.newest_pending_log_op());
            sync_needed_ = false;
        }
    }

    /// Log operation `op` and every earlier one are durable: so is what they wrote (§2).
    void log_became_durable(storage_op op) {
        if (auto last = durability_.log_completed(op, now_tick)) last_logged = *last;
    }
    void epochs_became_durable(storage_op op) {
        if (auto written = durability_.epochs_completed(op, now_tick)) durable_epochs = *written;
    }

    void check_leader(const leader_state& leader) const {
        ZAB_ASSERT(leader.self_acked_count <= leader.outstanding.size(),
                   "the leader's own acknowledgements run past its outstanding proposals");
        ZAB_ASSERT(leader.outstanding.empty() ||
                       leader.outstanding.back().record.id == leader.last_proposed,
                   "the newest outstanding proposal is not the last one proposed");
        ZAB_ASSERT(leader.committed.size() <= leader_state::committed_window_max,
                   "the committed window grew past its bound");
        ZAB_ASSERT(!leader.reached(leader_state::stage::writing_epoch) ||
                       leader.accepted_write != 0,
                   "the leader's epoch closed without writing acceptedEpoch");
        ZAB_ASSERT(!leader.reached(leader_state::stage::writing_current_epoch) ||
                       leader.current_write != 0,
                   "the leader's epoch quorum in without writing currentEpoch");
        for (std::size_t i = 0; i < leader.links.size(); ++i) {
            const learner_link& link = leader.links[i];
            ZAB_ASSERT(link.id != self_, "a learner link to the leader itself");
            for (std::size_t j = i + 1; j < leader.links.size(); ++j)
                ZAB_ASSERT(leader.links[j].id != link.id, "two links to one learner");
            ZAB_ASSERT(link.snapshot_acknowledged <= link.snapshot_queued,
                       "a learner acknowledged more of a snapshot than was queued");
            ZAB_ASSERT(!link.history_unacked.empty() || link.history_unacked_bytes == 0,
                       "unacknowledged history bytes without unacknowledged records");
        }
#if defined(ZAB_EXPENSIVE_INVARIANTS)
        for (std::size_t i = 1; i < leader.outstanding.size(); ++i)
            ZAB_ASSERT(leader.outstanding[i - 1].record.id < leader.outstanding[i].record.id,
                       "outstanding proposals out of zxid order");
        for (std::size_t i = 1; i < leader.committed.size(); ++i)
            ZAB_ASSERT(leader.committed[i - 1].id < leader.committed[i].id,
                       "the committed window out of zxid order");
        for (const learner_link& link : leader.links) {
            std::uint64_t bytes = 0;
            for (const auto& [id, size] : link.history_unacked) bytes += size;
            ZAB_ASSERT(bytes == link.history_unacked_bytes,
                       "a learner's unacknowledged history bytes miscounted");
        }
#endif
    }

    void set_committed_config(configuration config) {
        if (!config_changed) previous_config_ = config_;
        config_changed = true;
        config_ = std::move(config);
    }
    void rebuild_quorums() {
        using broken = options::test_hooks::reconfig_rule;
        const broken rule = options_.test_only.broken_reconfig;
        std::vector<std::shared_ptr<const quorum_verifier>> verifiers;
        if (rule == broken::effective_at_proposal && !pending_.empty()) {
            verifiers.push_back(make_verifier(pending_.back()));
        } else {
            verifiers.push_back(make_verifier(config_));
            if (rule != broken::old_quorum_only)
                for (const auto& c : pending_)
                    verifiers.push_back(make_verifier(c));
        }
        quorums_ = quorum_system{std::move(verifiers)};
        election_quorums_ = quorum_system::of(config_);
        ++quorums_generation_;
    }

    peer_id self_;
    configuration config_;
    std::uint64_t initial_config_version_ = 0;
    configuration previous_config_;
    std::vector<configuration> pending_;
    quorum_system quorums_;
    quorum_system election_quorums_;
    std::uint64_t quorums_generation_ = 0;
    options options_;
    storage_port* storage_ = nullptr;
    std::uint64_t applied_since_compaction_ = 0;
    std::uint64_t applied_bytes_since_compaction_ = 0;
    std::optional<snapshot_work> snapshot_work_;  ///< handed out by the next take
    bool snapshot_work_outstanding_ = false;      ///< handed out, not yet ready
    machine_port* machine_ = nullptr;

    /// Connections, queued frames and closes, for peer::release_frames (outbox.hpp).
    zab::outbox outbox_;
    /// Storage operation numbers, what is durable, the disk-stall clock (durability.hpp).
    durability_tracker durability_;
    std::vector<log_record> batch_;
    storage_op batch_op_ = 0;
    bool sync_needed_ = false;
    /// Leader, with a metrics sink: each outstanding proposal's `metrics->now()` when made.
    std::deque<std::pair<zxid, double>> proposal_times_;

    std::error_code storage_error_;  ///< a read failed in this step: the peer stops
    std::optional<election_decision> pending_decision_;
    std::optional<election_decision> last_decision_;
    std::uint64_t decisions_ = 0;
    bool election_requested_ = false;
    const char* election_reason_ = "";
};

}  // namespace zab
