// zab/core/peer.hpp — zab::peer: one replica's protocol core, with no I/O (docs/design.md rule 1).
//
// Inputs are events, each one step: start, tick, connection up/down, a received frame, a
// storage completion, a proposal. Outputs leave through the three concepts at the end of the step
// (docs/design.md rule 2). The phase policies (`Policies`) hold the code of each phase and share
// the peer's state through one `peer_context`. Messages are dispatched by kind to the policy
// that owns them; election notifications are answered in every state (docs/design.md rule 4).
#pragma once

#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/config.hpp"
#include "zab/core/broadcast.hpp"
#include "zab/core/discovery.hpp"
#include "zab/core/driver.hpp"
#include "zab/core/election.hpp"
#include "zab/core/synchronization.hpp"
#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/metrics.hpp"
#include "zab/core/options.hpp"
#include "zab/core/peer_context.hpp"
#include "zab/core/status.hpp"

namespace zab {

namespace testing {
struct peer_internals;  // zab/testing/peer_internals.hpp: tests' access to the core's state
}  // namespace testing

/// The phase policies a peer is built from (docs/design.md, "The shape"). Swap one by naming
/// another type, e.g. `zab::policies<zab::fixed_leader_election>`.
template <election_policy Election = fast_leader_election, typename Discovery = zab_discovery,
          typename Synchronization = zab_synchronization, typename Broadcast = zab_broadcast>
struct policies {
    using election = Election;
    using discovery = Discovery;
    using synchronization = Synchronization;
    using broadcast = Broadcast;
};

using default_policies = policies<>;

/// One replica. Not thread-safe: drive it from one thread or strand. Never blocks, never
/// calls back into the caller from inside a call (docs/design.md rule 2).
template <transport Transport, log_store Log, state_machine StateMachine,
          typename Policies = default_policies>
class peer {
public:
    using election_type = typename Policies::election;
    using discovery_type = typename Policies::discovery;
    using synchronization_type = typename Policies::synchronization;
    using broadcast_type = typename Policies::broadcast;

    /// Creates a peer over the user's transport, log and state machine (which must outlive
    /// it). `config` is the group's configuration as this replica knows it at start; a log
    /// that holds reconfigurations (or a snapshot taken after one) overrides it (§9). A
    /// replica that is not a member of `config` joins the group (§9): it needs
    /// options::non_voter_until_synced, follows the leader without a vote, and votes once a
    /// reconfiguration makes it a voter. Errors: `errc::invalid_options` for inconsistent
    /// options, a `self` that is not a member without non_voter_until_synced, or a fixed
    /// leader that is not a voter; `errc::corrupt` when the log's stored epochs break
    /// `accepted >= current`, or its snapshot does not restore (§2), or its reconfigurations
    /// cannot be read.
    static result<std::unique_ptr<peer>> create(peer_id self, configuration config, options opts,
                                                Transport& transport, Log& log,
                                                StateMachine& state_machine) {
        if (auto ok = opts.validate(); !ok) return ok.error();
        if (!config.contains(self) && !opts.non_voter_until_synced) {
            zab::log(log_level::error,
                     "peer {} is not a member of the configuration (a replica joining the "
                     "group needs non_voter_until_synced)",
                     self);
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
                     "start (docs/protocol.md §2)",
                     self, stored.accepted, stored.current);
            return make_error_code(errc::corrupt);
        }
        // §2: no record of epoch e is logged before e was durably promised. A log that ends
        // in a later epoch than the accepted one was not written by this protocol.
        if (const zxid last = log.last_zxid(); last.epoch() > stored.accepted) {
            zab::log(log_level::error,
                     "peer {}: the log ends at {}, of an epoch above the accepted epoch {}; "
                     "refusing to start (docs/protocol.md §2)",
                     self, last, stored.accepted);
            return make_error_code(errc::corrupt);
        }
        // A snapshot in the log is committed state: a state machine behind it starts from it.
        std::optional<configuration> snapshot_config;
        // Where the core's applied state starts: the machine's own `last_applied()`, or the
        // snapshot's zxid when the machine holds exactly that snapshot's state under its own
        // label (only zab's transactions, which it does not see, lie between: reconfig.hpp).
        zxid applied = state_machine.last_applied();
        if (auto snapshot = log.snapshot()) {
            auto unwrapped = unwrap_snapshot(snapshot->state.view());
            if (!unwrapped) {
                zab::log(log_level::error, "peer {}: the log's snapshot at {} has a damaged "
                         "configuration", self, snapshot->last_included);
                return make_error_code(errc::corrupt);
            }
            snapshot_config = unwrapped.value().config;
            // Restored with its own label (reconfig.hpp): a machine that does not see zab's
            // transactions may be behind the snapshot's zxid by a reconfiguration.
            const zxid machine_at = unwrapped.value().machine_at(snapshot->last_included);
            if (state_machine.last_applied() < machine_at &&
                !state_machine.restore(machine_at, unwrapped.value().state)) {
                zab::log(log_level::error, "peer {}: the log's snapshot at {} does not restore",
                         self, snapshot->last_included);
                return make_error_code(errc::corrupt);
            }
            applied = state_machine.last_applied();
            if (applied == machine_at && applied < snapshot->last_included)
                applied = snapshot->last_included;
        }
        std::unique_ptr<peer> created{
            new peer{self, std::move(config), opts, transport, log, state_machine, applied}};
        if (auto recovered = created->recover_membership(std::move(snapshot_config)); !recovered)
            return recovered.error();
        return created;
    }

    peer(const peer&) = delete;
    peer& operator=(const peer&) = delete;

    // --- events (each is one step) ------------------------------------------------------

    /// Starts the peer: it enters LOOKING.
    void start() {
        if (failed() || started_) return;
        started_ = true;
        enter_looking();
        end_step();
    }

    /// `ticks` ticks of time passed (normally 1; a driver that slept until `next_deadline()`
    /// passes the whole gap).
    void tick(std::uint64_t ticks = 1) {
        if (failed()) return;
        ctx_.now_tick += ticks;
        if (election_started_) election_.on_tick();
        if (ctx_.leading) broadcast_.leader_tick();
        if (ctx_.learning) broadcast_.learner_tick();
        if (ctx_.leading) promote_caught_up_learners();
        watch_disk();
        give_up_late_transfer();
        if (const auto deadline = establish_deadline(); deadline && ctx_.now_tick >= *deadline) {
            // §4: discovery and synchronization must finish within initLimit, on the leader
            // (a quorum of followers) and on each learner (its leader answering); otherwise
            // back to election. This also frees a learner whose chosen leader never took the
            // lead (FLE is not unanimous, §3).
            ++ctx_.counters.establish_timeouts;
            ctx_.request_election("not established within init_limit");
        }
        end_step();
    }

    /// A connection to `from` is up. It replaces any previous one (whose traffic is stale).
    void on_connected(peer_id from, connection_id connection) {
        if (failed()) return;
        // Replicas that are no member yet are let in: they may be joining (§9). What they
        // say counts toward nothing until a reconfiguration makes them voters.
        if (from == ctx_.self()) {
            ++ctx_.counters.strangers;
            transport_.close(from, connection);
            return;
        }
        // A learner's earlier connection is gone: so is what it had been told, and what it
        // acknowledged, on it.
        ctx_.forget_learner(from, "a new connection");
        set_connection(from, connection);
        if (election_started_) election_.on_connected(from);
        if (ctx_.learning) discovery_.learner_on_connected(from);
        end_step();
    }

    /// The connection to `from` is gone, with whatever was in flight on it.
    void on_disconnected(peer_id from, connection_id connection) {
        if (failed()) return;
        if (ctx_.connection_to(from) != connection) return;  // an older connection
        erase_connection(from);
        ctx_.refused_leaders.erase(from);  // §4.5: it may come back with other options
        ctx_.forget_learner(from, "its connection was lost");
        // §0: a learner that loses its leader goes back to election — except a learner handed
        // to a leader that has not answered yet (§6.4): its FOLLOWERINFO may have arrived
        // before the HANDOVER that makes that peer lead, so it asks again once reconnected.
        if (ctx_.learning && from == ctx_.learning->leader) {
            if (ctx_.learning->handed_over &&
                ctx_.learning->at == learner_state::stage::awaiting_leader_info)
                ctx_.learning->info_sent = false;
            else
                ctx_.request_election("lost the leader");
        }
        end_step();
    }

    /// A frame arrived from `from` on `connection`. Anything wrong with it is the sender's
    /// problem: the connection is closed and a counter moves (docs/design.md rule 6).
    void on_receive(peer_id from, connection_id connection, const shared_bytes& frame) {
        if (failed()) return;
        ++ctx_.counters.frames_received;
        if (ctx_.connection_to(from) != connection) {
            ++ctx_.counters.stale_frames;
            return;
        }
        auto decoded = decode(frame.view(), ctx_.frame_limits());
        if (!decoded) {
            reject(from, decoded.error().message());
            end_step();
            return;
        }
        if (decoded.value().header.group_id != ctx_.opts().group_id) {
            reject(from, "frame of another group");
            end_step();
            return;
        }
        if (ctx_.learning && from == ctx_.learning->leader) {
            ctx_.learning->last_heard_tick = ctx_.now_tick;
            // §7.1: a serving learner's promise runs from the last frame heard from its leader
            // (only its answers to heartbeats count toward the lease: those sent after UPTODATE).
            if (const std::uint32_t promise = ctx_.opts().read_lease_ticks; promise != 0 && serving_learner())
                ctx_.promised_until_tick = ctx_.now_tick + promise;
        }
        if (ctx_.leading)
            if (auto* link = find_link(from)) link->last_heard_tick = ctx_.now_tick;
        ctx_.handling = type_of(decoded.value().msg);
        ctx_.frame_config_version = decoded.value().header.config_version;
        ctx_.learn_committed_version(ctx_.frame_config_version);
        std::visit([&](const auto& m) { dispatch(from, m, frame); }, decoded.value().msg);
        end_step();
    }

    /// Log operation `op` (and every earlier one) is durable.
    void on_log_durable(storage_op op) {
        if (failed() || !issued(op, "log operation")) return;
        ctx_.log_became_durable(op);
        watch_disk();
        end_step();
    }

    /// The epoch write `op` (and every earlier epoch write) is durable.
    void on_epochs_durable(storage_op op) {
        if (failed() || !issued(op, "epoch write")) return;
        ctx_.epochs_became_durable(op);
        watch_disk();
        end_step();
    }

    /// A flush job of a flushable log finished (`log.finish_flush(job)`, zab/core/driver.hpp):
    /// reports what it made durable, or its failure (logged with its reason).
    template <typename FlushResult>
    void on_flushed(const FlushResult& flushed) {
        if (flushed.failed()) {
            zab::log(log_level::error, "peer {}: {}", ctx_.self(), flushed.reason);
            return on_storage_failed(flushed.error);
        }
        if (flushed.log_durable) on_log_durable(*flushed.log_durable);
        if (flushed.epochs_durable) on_epochs_durable(*flushed.epochs_durable);
    }

    /// An fsync or truncation failed: the replica stops for good (docs/design.md rule 6). Every
    /// later event is ignored; `failed()` reports the error.
    void on_storage_failed(std::error_code error) {
        if (failed()) return;
        zab::log(log_level::error, "peer {}: storage failed ({}); replica stopped", ctx_.self(),
                 error.message());
        failure_ = error;
        if (ctx_.metrics) {
            metric_event e = ctx_.event(metric_event_kind::storage_failed);
            e.error = error;
            ctx_.metrics->on_event(e);
        }
        ctx_.outbox_.clear_frames();
        ctx_.clients.abandon(errc::storage_failed, 0);
    }

    /// Proposes a transaction at the established leader and returns its zxid at once
    /// (`errc::too_large`, `not_leader`, `backpressure` or `zxid_exhausted` otherwise). The low-level path:
    /// no completion follows; the state machine sees the transaction once committed. To
    /// write from any replica with an outcome, use `submit`.
    result<zxid> propose(byte_view txn) {
        if (failed()) return make_error_code(errc::storage_failed);
        auto proposed = broadcast_.propose(txn);
        end_step();
        return proposed;
    }

    /// Submits a client write on this replica, leader or learner (§6.1). Exactly one
    /// `client_completion` with the returned id follows (from `ready()`): the zxid
    /// once the write is applied here; a definite error (`too_large` above
    /// options::max_txn_bytes, `not_leader` with the known leader as hint, `backpressure`,
    /// `zxid_exhausted`, `storage_failed`) when it was never proposed; `outcome_unknown` when
    /// this replica lost its leader before learning.
    request_id submit(byte_view txn) {
        const request_id id = submit_application(txn);
        if (!failed()) end_step();
        return id;
    }

    /// Changes the group's membership (docs/protocol.md §9), on any replica: the leader
    /// proposes the new configuration as a transaction; from its proposal until its commit,
    /// it and every later proposal need a quorum of the old configuration and of the new
    /// one; it takes effect when committed, and its zxid is the new version. One
    /// `client_completion` (op `write`) follows, as for `submit`: the zxid (the new version)
    /// once applied here; definite refusals `invalid_argument` (not a valid configuration:
    /// no voter, a duplicate id, id 0), `reconfig_in_progress`, `version_mismatch` (the
    /// request's expected_version is not the committed version), `new_config_no_quorum` (the
    /// new configuration's voters synced with the leader are no quorum of it: start the new
    /// members first, with non_voter_until_synced), `not_leader`, `transferring`,
    /// `backpressure`; or `outcome_unknown`. A leader that the new configuration leaves
    /// without a vote hands its leadership to the new configuration's voter that
    /// acknowledged the most (§6.4); a member it removes stops (`status().removed`).
    request_id reconfigure(reconfig_request request) {
        // A member list that is no configuration at all (a duplicate id, an address too long)
        // is refused here, where it is asked for, before anything is encoded (reason logged).
        if (!configuration::make(request.members)) {
            const request_id id = ctx_.clients.next_id();
            ctx_.clients.fail_now(id, client_op::write, errc::invalid_argument);
            if (!failed()) end_step();
            return id;
        }
        const shared_bytes txn = encode_reconfig(std::move(request));
        return submit_any(txn.view());
    }

    /// The committed configuration (§9) and the reconfiguration in progress, if any.
    const configuration& configuration_in_force() const noexcept { return ctx_.config(); }
    const std::vector<configuration>& pending_configurations() const noexcept {
        return ctx_.pending_configs();
    }

    /// Submits client writes `txns`, in order, as `submit` would each, in one step: their
    /// request ids are consecutive (the first is returned; 0 when `txns` is empty) and each
    /// gets its own `client_completion`. At an established leader, consecutive writes that
    /// may be proposed go out as batches: one PROPOSALS frame per follower (at most
    /// options::max_batch_bytes of transactions, 4 bytes of framing each), one log append,
    /// one ACK back from each follower. Elsewhere each is forwarded or refused as by
    /// `submit`. What a driver calls with the writes that arrived in one turn of its loop.
    request_id submit_batch(std::span<const byte_view> txns) {
        if (txns.empty()) return 0;
        const request_id first = ctx_.clients.peek_next_id();
        for (std::size_t i = 0; i < txns.size();) {
            if (const std::size_t forwarded = forwardable_run(txns.subspan(i)); forwarded >= 2) {
                broadcast_.learner_forward_batch(ctx_.clients.peek_next_id(), txns.subspan(i, forwarded));
                for (std::size_t k = 0; k < forwarded; ++k) ctx_.clients.next_id();
                i += forwarded;
                continue;
            }
            const std::size_t run = batchable_run(txns.subspan(i));
            if (run < 2) {
                submit_application(txns[i]);
                ++i;
                continue;
            }
            const auto batch = txns.subspan(i, run);
            auto proposed = broadcast_.propose_batch(batch);
            zxid id = proposed ? proposed.value() : zxid{};
            for (std::size_t k = 0; k < run; ++k) {
                const request_id request = ctx_.clients.next_id();
                if (proposed) {
                    ctx_.clients.add_write(request, id);
                    id = id.next();
                } else {
                    fail_refused(request, static_cast<errc>(proposed.error().value()));
                }
            }
            i += run;
        }
        if (!failed()) end_step();
        return first;
    }

private:
    /// How many of `txns`, from the first, may go out in one PROPOSALS batch now: this is an
    /// established leader taking requests, and the run is within the pending-request bound
    /// and the rest of zab_broadcast::batchable's (what is past them is refused one by one,
    /// as by `submit`).
    std::size_t batchable_run(std::span<const byte_view> txns) const {
        if (client_refusal()) return 0;
        return broadcast_.batchable(txns, ctx_.opts().max_pending_requests - ctx_.clients.in_flight());
    }

    /// How many of `txns`, from the first, this serving learner forwards in REQUESTS frames
    /// (§6.1): application writes within max_txn_bytes and the pending-request bound, when
    /// its leader speaks protocol 0x10001 (§0.2); 0 otherwise (each goes as `submit`'s).
    std::size_t forwardable_run(std::span<const byte_view> txns) const {
        if (client_refusal() || !serving_learner() ||
            ctx_.learning->leader_protocol < protocol_forwarded_batches)
            return 0;
        const std::size_t room = ctx_.opts().max_pending_requests - ctx_.clients.in_flight();
        std::size_t run = 0;
        for (const byte_view txn : txns) {
            if (run == room || txn.size() > ctx_.opts().max_txn_bytes || is_system_txn(txn)) break;
            ++run;
        }
        return run;
    }

    /// A write the leader refused with `reason`: definite, with the hint of who to ask instead.
    void fail_refused(request_id id, errc reason) {
        ctx_.clients.fail_now(id, client_op::write, reason,
                              ctx_.leading->transfer ? ctx_.leading->transfer->target : ctx_.self());
    }

    request_id submit_any(byte_view txn) {
        const request_id id = submit_one(txn);
        if (!failed()) end_step();
        return id;
    }

    /// `submit`'s work for one write, without ending the step.
    request_id submit_one(byte_view txn) {
        const request_id id = ctx_.clients.next_id();
        if (const auto refusal = client_refusal()) {
            ctx_.clients.fail_now(id, client_op::write, *refusal);
        } else if (txn.size() > ctx_.opts().max_txn_bytes) {
            ctx_.clients.fail_now(id, client_op::write, errc::too_large);
        } else if (ctx_.leading && ctx_.leading->established()) {
            auto proposed = broadcast_.propose(txn);
            if (proposed)
                ctx_.clients.add_write(id, proposed.value());
            else
                fail_refused(id, static_cast<errc>(proposed.error().value()));
        } else if (serving_learner()) {
            broadcast_.learner_forward_write(id, txn);
        } else {
            ctx_.clients.fail_now(id, client_op::write, errc::not_leader, leader_hint());
        }
        return id;
    }

    /// An application's write: zab's own transactions (reconfig.hpp's prefix) are refused.
    request_id submit_application(byte_view txn) {
        if (!is_system_txn(txn)) return submit_one(txn);
        const request_id id = ctx_.clients.next_id();
        ctx_.clients.fail_now(id, client_op::write, errc::invalid_argument);
        return id;
    }

public:
    /// Asks for a linearizable point (§7): its completion (zxid last applied here) comes once
    /// the leader confirmed with a quorum heartbeat round, after the sync reached it, that
    /// it still leads, and every write committed before is applied here. A read of the state
    /// machine after it sees every write that completed anywhere before `sync` was called.
    /// Errors: `not_leader` (no established leader to ask, or the role ended first),
    /// `backpressure`, `storage_failed`.
    request_id sync() { return sync_request(wire::request_kind::sync); }

    /// A linearizable point like `sync()`, without a quorum round when the leader holds its
    /// read lease (docs/protocol.md §7.1; options::read_lease_ticks): on such a leader it
    /// completes within the call (the zxid applied here, which is everything committed); at
    /// a learner the leader answers it at once, after the COMMITs it sent before; anywhere
    /// else — lease reads off, no lease (not renewed by a quorum recently enough, the quorum
    /// system just changed, a transfer under way) — it is a `sync()`. The read after it is
    /// linearizable only while the clocks keep options::max_clock_drift_ppm (§7.1).
    /// Counters: `lease_syncs_served`, `lease_sync_fallbacks` (at the leader). Errors as `sync`.
    request_id lease_sync() { return sync_request(wire::request_kind::lease_sync); }

private:
    request_id sync_request(wire::request_kind kind) {
        const request_id id = ctx_.clients.next_id();
        if (const auto refusal = client_refusal()) {
            ctx_.clients.fail_now(id, client_op::sync, *refusal);
        } else if (ctx_.leading && ctx_.leading->established()) {
            ctx_.clients.add_sync(id);
            if (kind == wire::request_kind::lease_sync && broadcast_.lease_answers(id))
                ctx_.clients.answer_sync(id, ctx_.last_applied);
            else
                broadcast_.leader_sync(id);
        } else if (serving_learner()) {
            broadcast_.learner_forward_sync(id, kind);
        } else {
            ctx_.clients.fail_now(id, client_op::sync, errc::not_leader, leader_hint());
        }
        if (!failed()) end_step();
        return id;
    }

public:
    /// Hands this established leader's leadership to voter `target` without an election
    /// (docs/protocol.md §6.4); 0 picks the synced voter that acknowledged the most. From
    /// now on new writes are refused with `transferring` (the hint names the target); syncs
    /// are still answered. Once the target holds every proposal and all are committed, every
    /// synced learner gets a HANDOVER after its last COMMIT and follows the target, and so
    /// does this replica; the target leads the next epoch through discovery and
    /// synchronization, as after an election. One `client_completion` (op `transfer`)
    /// follows: the last committed zxid once handed over; `timed_out` if the target does not
    /// catch up within options::transfer_timeout_ticks (writes resume); `not_leader` (not an
    /// established leader, or the role ended first); `invalid_argument` (the target is this
    /// replica or not a voter, or no synced voter to pick); `backpressure` (a transfer is in
    /// progress); `shutting_down`; `storage_failed`. A target that fails to establish itself
    /// within init_limit leaves the group to an ordinary election.
    request_id transfer_leadership(peer_id target = 0) {
        const request_id id = ctx_.clients.next_id();
        const auto fail = [&](errc e, peer_id hint) {
            ctx_.clients.fail_now(id, client_op::transfer, e, hint);
        };
        if (failed()) {
            fail(errc::storage_failed, 0);
        } else if (shutting_down_) {
            fail(errc::shutting_down, 0);
        } else if (!ctx_.leading || !ctx_.leading->established()) {
            fail(errc::not_leader, leader_hint());
        } else if (ctx_.leading->transfer) {
            fail(errc::backpressure, ctx_.leading->transfer->target);
        } else {
            if (target == 0) target = best_transfer_target();
            if (target == 0 || target == ctx_.self() || !ctx_.quorums().is_voter(target)) {
                fail(errc::invalid_argument, 0);
            } else {
                ctx_.leading->transfer = leader_state::leadership_transfer{
                    target, ctx_.now_tick + ctx_.opts().transfer_timeout_ticks};
                ctx_.clients.add_transfer(id);
                zab::log(log_level::info, "peer {}: transferring leadership to {}; writes paused",
                         ctx_.self(), target);
            }
        }
        if (!failed()) end_step();
        return id;
    }

    /// Stops serving clients: every request in flight completes now (`outcome_unknown` for
    /// writes already handed to a leader, `shutting_down` for syncs), and later `submit` and
    /// `sync` calls fail with `shutting_down`. The protocol role is left as it is: the driver
    /// stops delivering events after this.
    void shutdown() {
        shutting_down_ = true;
        ctx_.clients.abandon(errc::shutting_down, 0);
    }

    // --- what a driver needs (zab/core/driver.hpp) ---------------------------------------

    /// What the driver owes this peer after the call it just made: completions to deliver,
    /// whether the log wants a flush, snapshot work, the next deadline. Takes the completions
    /// and the snapshot work (each is handed out once).
    peer_ready ready() {
        peer_ready r;
        r.completions = ctx_.clients.take();
        if constexpr (requires(const Log& l) {
                          { l.has_pending_work() } -> std::same_as<bool>;
                      })
            r.flush_due = storage_.log.has_pending_work();
        r.snapshot = ctx_.take_snapshot_work();
        r.next_deadline = next_deadline();
        return r;
    }

    /// The snapshot handed out for `at` is serialized: the log compacts with it (if `at` is
    /// still a record above its snapshot).
    void on_snapshot_ready(zxid at, shared_bytes state) {
        if (failed()) return;
        ctx_.snapshot_ready(at, state);
        end_step();
    }

    /// The tick at which `tick()` next has work, if any: a driver may sleep until then.
    std::optional<std::uint64_t> next_deadline() const {
        if (failed()) return std::nullopt;
        std::optional<std::uint64_t> deadline;
        auto consider = [&](std::optional<std::uint64_t> d) {
            if (d && (!deadline || *d < *deadline)) deadline = d;
        };
        if (election_started_) consider(election_.next_deadline());
        consider(establish_deadline());
        // Disk-stall fencing (§6.5): when pending writes would count as stalled.
        if (ctx_.opts().disk_stall_ticks != 0 && !ctx_.disk_stalled &&
            ctx_.durability_.writes_pending())
            consider(std::max(ctx_.now_tick + 1,
                              ctx_.now_tick - ctx_.durability_.stalled_for(ctx_.now_tick) +
                                  ctx_.opts().disk_stall_ticks));
        // §7.1: a LOOKING replica whose promise keeps it out of the election.
        if (ctx_.state == peer_state::looking && !election_started_ &&
            ctx_.now_tick < ctx_.promised_until_tick)
            consider(ctx_.promised_until_tick);
        // Leaders ping every tick; learners check their leader's silence every tick.
        if (ctx_.leading || ctx_.learning) consider(ctx_.now_tick + 1);
        return deadline;
    }

    // --- observation --------------------------------------------------------------------

    /// Reports this replica's distributions and events to `sink` from now on (zab/core/
    /// metrics.hpp); nullptr (the default) stops reporting. The sink must outlive the peer or
    /// be replaced first; it is called on the peer's thread, inside its steps. Counters and
    /// gauges are not pushed: read them from `counters()` and `status()`.
    void set_metrics(metrics_sink* sink) noexcept {
        ctx_.metrics = sink;
        reported_role_ = ctx_.state;
        reported_leader_ = ctx_.established_leader();
    }

    peer_id id() const noexcept { return ctx_.self(); }
    peer_state state() const noexcept { return ctx_.state; }
    phase current_phase() const noexcept { return ctx_.current_phase(); }
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
    /// True for an established leader, and for a learner that received UPTODATE.
    bool established() const noexcept {
        return (ctx_.leading && ctx_.leading->established()) ||
               (ctx_.learning && ctx_.learning->at == learner_state::stage::broadcasting);
    }
    /// Leader: every learner connected now, with its sync stage, what it acknowledged, its
    /// lag, and how many of its syncs in a row have failed (and why the last one did). Empty
    /// unless LEADING.
    std::vector<learner_status> learners() const {
        std::vector<learner_status> out;
        if (!ctx_.leading) return out;
        const zxid committed = ctx_.last_committed;
        for (const auto& link : ctx_.leading->links) {
            const auto trouble = sync_trouble(link.id);
            learner_status l{link.id, link.type, link.at, link.last_acked, 0, trouble.failures,
                             trouble.last_reason};
            l.conflict = link.conflict;
            l.lease_counted = link.lease_agreed && !link.refused;
            l.protocol = link.protocol;
            if (!link.snapshot.empty()) {  // streaming (released once the last chunk is queued)
                l.snapshot_bytes = link.snapshot.size();
                l.snapshot_sent = link.snapshot_queued;
                l.snapshot_acknowledged = link.snapshot_acknowledged;
            }
            if (link.type == learner_type::participant &&
                committed.epoch() == ctx_.leading->epoch)
                l.lag = link.last_acked.epoch() == committed.epoch()
                            ? committed.counter() -
                                  std::min(committed.counter(), link.last_acked.counter())
                            : committed.counter();
            out.push_back(l);
        }
        return out;
    }

    /// Role, epochs, leader, zxids, a learner's stage, a leader's learners, failure.
    peer_status status() const {
        peer_status s;
        s.id = ctx_.self();
        s.role = ctx_.state;
        s.established = established();
        s.durable_epochs = ctx_.durable_epochs;
        if (s.established) s.leader = ctx_.current_vote.leader;
        s.last_logged = ctx_.last_logged;
        s.last_committed = ctx_.last_committed;
        s.last_sync = ctx_.last_sync;
        s.last_applied = ctx_.last_applied;
        s.learner_stage = learner_stage();
        if (ctx_.leading) s.leader_stage = ctx_.leading->at;
        s.learners = learners();
        s.failure = failure_;
        s.now_tick = ctx_.now_tick;
        s.config_version = ctx_.config().version();
        s.reconfig_in_progress = !ctx_.pending_configs().empty();
        s.removed = ctx_.removed;
        s.disk_stalled = ctx_.disk_stalled;
        if (ctx_.leading) s.outstanding_proposals = ctx_.leading->outstanding.size();
        s.log_bytes_since_snapshot = ctx_.history_bytes_after_snapshot();
        s.refused_leader = discovery_.refused_leader();
        s.protocol = ctx_.protocol();
        if (ctx_.learning) s.leader_protocol = ctx_.learning->leader_protocol;
        s.last_protocol_refusal = discovery_.last_protocol_refusal();
        return s;
    }
    /// Leader: learner `id`'s failed syncs in a row, connected or not (zero once synced).
    learner_sync_trouble sync_trouble(peer_id id) const {
        if (ctx_.leading)
            for (const auto& [learner, trouble] : ctx_.leading->sync_trouble)
                if (learner == id) return trouble;
        return {};
    }
    /// Learner: its own stage with its leader (nothing unless FOLLOWING or OBSERVING).
    std::optional<learner_state::stage> learner_stage() const {
        if (!ctx_.learning) return std::nullopt;
        return ctx_.learning->at;
    }
    const election_type& election() const noexcept { return election_; }
    bool failed() const noexcept { return static_cast<bool>(failure_); }
    std::error_code failure() const noexcept { return failure_; }

    /// Feeds the peer's protocol state into `hasher` (anything with `add(std::uint64_t)`):
    /// the simulator's determinism check compares these digests run against run.
    template <typename Hasher>
    void digest(Hasher& hasher) const {
        const vote& v = ctx_.current_vote;
        for (std::uint64_t x :
             {std::uint64_t{ctx_.self()}, std::uint64_t(ctx_.state),
              std::uint64_t(ctx_.current_phase()), v.leader, v.leader_zxid.value(),
              std::uint64_t{v.leader_epoch}, v.round, std::uint64_t{ctx_.durable_epochs.accepted},
              std::uint64_t{ctx_.durable_epochs.current}, ctx_.last_logged.value(),
              ctx_.last_committed.value(), ctx_.last_applied.value(), ctx_.now_tick,
              ctx_.counters.frames_received, ctx_.counters.frames_sent,
              static_cast<std::uint64_t>(failed())})
            hasher.add(x);
    }

private:
    friend struct testing::peer_internals;

    /// The user's log, seen through the non-template port the policies use.
    struct storage_adapter final : storage_port {
        explicit storage_adapter(Log& user_log) : log{user_log} {}
        void append(storage_op op, std::span<const log_record> records) override {
            log.append(op, records);
        }
        void truncate_after(storage_op op, zxid z) override { log.truncate_after(op, z); }
        void install_snapshot(storage_op op, zxid z, const shared_bytes& state,
                              std::span<const log_record> following) override {
            log.install_snapshot(op, z, state, following);
        }
        void make_durable(storage_op op) override { log.make_durable(op); }
        void write_epochs(storage_op op, epochs written) override { log.write_epochs(op, written); }
        result<std::vector<log_record>> read(zxid after, std::size_t max) const override {
            return log.read(after, max);
        }
        result<std::vector<log_record>> read_last(std::size_t max) const override {
            if constexpr (tail_readable_log<Log>) {
                return log.read_last(max);
            } else {
                // Forward from the snapshot, keeping the last `max`: the whole log is read.
                std::deque<log_record> last;
                const auto snapshot = log.snapshot();
                zxid after = snapshot ? snapshot->last_included : zxid{};
                for (;;) {
                    auto chunk = log.read(after, 1024);
                    if (!chunk) return chunk.error();
                    if (chunk.value().empty()) break;
                    after = chunk.value().back().id;
                    for (auto& record : chunk.value()) {
                        last.push_back(std::move(record));
                        if (last.size() > max) last.pop_front();
                    }
                }
                return std::vector<log_record>(std::make_move_iterator(last.begin()),
                                               std::make_move_iterator(last.end()));
            }
        }
        std::optional<log_snapshot> snapshot() const override { return log.snapshot(); }
        bool compact(zxid z, const shared_bytes& state) override {
            if constexpr (compactable_log<Log>)
                return log.compact(z, state);
            else
                return false;
        }
        bool compactable() const override { return compactable_log<Log>; }
        Log& log;
    };

    /// The user's state machine, seen through the port the policies use.
    struct machine_adapter final : machine_port {
        explicit machine_adapter(StateMachine& user_machine) : machine{user_machine} {}
        shared_bytes apply(zxid z, byte_view txn) override {
            if constexpr (result_machine<StateMachine>) {
                return machine.apply(z, txn);
            } else {
                machine.apply(z, txn);
                return {};
            }
        }
        void apply_system(zxid z, byte_view txn) override {
            if constexpr (system_txn_machine<StateMachine>) machine.apply_system(z, txn);
        }
        shared_bytes snapshot() const override { return machine.snapshot(); }
        std::optional<deferred_snapshot> snapshot_later() const override {
            if constexpr (deferred_snapshot_machine<StateMachine>)
                return machine.snapshot_later();
            else
                return std::nullopt;
        }
        result<void> restore(zxid z, byte_view state) override {
            return machine.restore(z, state);
        }
        zxid last_applied() const override { return machine.last_applied(); }
        StateMachine& machine;
    };

    peer(peer_id self, configuration config, options opts, Transport& transport, Log& log,
         StateMachine& state_machine, zxid applied)
        : ctx_{self, std::move(config), opts},
          transport_{transport},
          storage_{log},
          machine_{state_machine},
          election_{ctx_},
          discovery_{ctx_},
          synchronization_{ctx_},
          broadcast_{ctx_} {
        ctx_.storage_ = &storage_;
        ctx_.machine_ = &machine_;
        // What this replica recovered is what it advertises (docs/protocol.md §2): after a crash
        // the log holds exactly its durable records.
        ctx_.durable_epochs = ctx_.written_epochs = log.stored_epochs();
        ctx_.last_logged = ctx_.last_zxid_visible = log.last_zxid();
        ctx_.last_applied = applied;
        ctx_.last_committed = ctx_.last_applied;
        // §7.1: a replica that ever accepted an epoch may have promised a leader its support
        // just before it stopped, and nothing durable says when: it keeps a whole promise
        // from its start. (One that never accepted an epoch never answered a heartbeat that
        // counts toward a lease.)
        if (opts.read_lease_ticks != 0 && ctx_.durable_epochs.accepted != 0)
            ctx_.promised_until_tick = opts.read_lease_ticks;
        // ZOOKEEPER-261: a wiped voter has no durable current epoch until a leader syncs it.
        ctx_.voting_suspended = opts.non_voter_until_synced &&
                                ctx_.config().is_voter(self) && ctx_.durable_epochs.current == 0;
        if (ctx_.voting_suspended)
            zab::log(log_level::info,
                     "peer {}: never synced since its data was wiped: an observer until a "
                     "leader syncs it (ZOOKEEPER-261)",
                     self);
    }

    // --- roles --------------------------------------------------------------------------

    /// Enters LOOKING. The election starts once every log write this peer issued is durable:
    /// its vote must name exactly what a crash would recover (§2, §11.3).
    /// §6.5 disk-stall fencing: writes pending with no progress for disk_stall_ticks mark
    /// the disk stalled; a stalled leader steps down, and an election does not start while
    /// the disk is stalled (maybe_start_election), so a stalled replica that is LOOKING
    /// neither votes nor stands until its disk is back. (One that stalls inside an election
    /// keeps its vote: that vote is its durable history's, so it stays sound.)
    void watch_disk() {
        const std::uint32_t bound = ctx_.opts().disk_stall_ticks;
        if (bound == 0) return;
        const std::uint64_t stalled_for = ctx_.durability_.stalled_for(ctx_.now_tick);
        if (!ctx_.disk_stalled && stalled_for >= bound) {
            ctx_.disk_stalled = true;
            ++ctx_.counters.disk_stalls;
            if (ctx_.metrics) {
                metric_event e = ctx_.event(metric_event_kind::disk_stalled);
                e.count = stalled_for;
                ctx_.metrics->on_event(e);
            }
            zab::log(log_level::error,
                     "peer {}: disk stalled: storage writes pending for {} ticks without "
                     "completing{}",
                     ctx_.self(), stalled_for,
                     ctx_.leading ? "; stepping down" : "; acknowledging nothing meanwhile");
            if (ctx_.leading) {
                ++ctx_.counters.leader_step_downs;
                ctx_.request_election("disk stalled");
            }
        } else if (ctx_.disk_stalled && stalled_for < bound) {
            ctx_.disk_stalled = false;
            zab::log(log_level::warn, "peer {}: disk writes complete again; disk no longer stalled",
                     ctx_.self());
            if (ctx_.metrics) ctx_.metrics->on_event(ctx_.event(metric_event_kind::disk_recovered));
            maybe_start_election();
        }
    }

    void enter_looking() {
        ctx_.state = peer_state::looking;
        election_started_ = false;
        maybe_start_election();
    }

    void maybe_start_election() {
        if (!started_ || election_started_ || ctx_.state != peer_state::looking ||
            ctx_.durability_.log_pending() || ctx_.removed || ctx_.disk_stalled)
            return;
        // §7.1: a promise to the last leader holds this replica out of every election (it
        // neither votes nor stands, and follows nobody) until it expires.
        if (ctx_.now_tick < ctx_.promised_until_tick) return;
        election_started_ = true;
        election_.start();
        for (auto& [from, n] : std::exchange(held_notifications_, {}))
            election_.on_notification(from, n);
    }

    /// Why a client request cannot be taken at all right now, if so: a failed replica, a
    /// stopping one, or too many requests in flight (`max_pending_requests`).
    std::optional<errc> client_refusal() const {
        if (failed()) return errc::storage_failed;
        if (shutting_down_) return errc::shutting_down;
        if (ctx_.removed) return errc::not_a_member;
        if (ctx_.clients.in_flight() >= ctx_.opts().max_pending_requests) return errc::backpressure;
        return std::nullopt;
    }

    /// A learner that can forward client requests: its leader sent UPTODATE.
    bool serving_learner() const {
        return ctx_.learning && ctx_.learning->at == learner_state::stage::broadcasting;
    }

    /// The leader this peer follows or decided on, for `not_leader` answers (0: none).
    peer_id leader_hint() const {
        if (ctx_.learning) return ctx_.learning->leader;
        if (ctx_.state != peer_state::looking) return ctx_.current_vote.leader;
        return 0;
    }

    /// How a role ends: for an election (its connections go: their traffic is stale), or for
    /// a hand-off (§6.4: the connections carry the HANDOVER and then the new role's traffic).
    enum class leaving : std::uint8_t { for_election, for_handover };

    void leave_role(leaving why = leaving::for_election, peer_id hint = 0) {
        // Requests in flight can no longer be followed: writes handed to a leader may still
        // commit (outcome unknown); syncs had no effect (not_leader).
        ctx_.clients.abandon(errc::not_leader, hint);
        const bool close = why == leaving::for_election;
        if (ctx_.leading) {
            if (close)
                for (const auto& link : ctx_.leading->links) ctx_.close(link.id);
            ctx_.leading.reset();
        }
        if (ctx_.learning) {
            if (close) ctx_.close(ctx_.learning->leader);
            ctx_.learning.reset();
        }
    }

    // --- membership (docs/protocol.md §9) --------------------------------------------------

    /// At start: the configuration is the one the log stands for — the snapshot's, then every
    /// reconfiguration after it: committed if the state machine applied it already, or if
    /// the log holds a record of a later epoch (a leader of that epoch proposed it, so that
    /// leader was established with a history holding the reconfiguration, which committed
    /// it, §5.5); else in force beside the committed one until the leader's sync settles it.
    result<void> recover_membership(std::optional<configuration> snapshot_config) {
        const epoch_t last_epoch = storage_.log.last_zxid().epoch();
        if (snapshot_config) {
            ctx_.config_ = std::move(*snapshot_config);
            ctx_.config_changed = false;
        }
        const auto recover = [&](const log_record& record) {
            if (record.id <= ctx_.last_applied || record.id.epoch() < last_epoch) {
                ctx_.activate(record);
                ctx_.config_changed = false;
            } else {
                ctx_.note_logged(record);
            }
        };
        const auto read_failed = [&](std::error_code error) {
            // The log's own error, cause kept (an I/O error is no corruption): peer::create
            // returns it as it is.
            zab::log(log_level::error, "peer {}: reading the log for its reconfigurations: {}",
                     ctx_.self(), error.message());
            return error;
        };
        if constexpr (system_txn_indexed_log<Log>) {
            // The log knows where its reconfigurations are: only those records are read.
            for (const zxid id : storage_.log.system_txns()) {
                auto found = storage_.log.read(zxid::from_value(id.value() - 1), 1);
                if (!found) return read_failed(found.error());
                if (found.value().empty() || found.value().front().id != id ||
                    !is_system_txn(found.value().front().txn.view())) {
                    zab::log(log_level::error, "peer {}: the log names {} a system transaction, "
                             "but does not hold one there", ctx_.self(), id);
                    return make_error_code(errc::corrupt);
                }
                recover(found.value().front());
            }
        } else {
            const auto snapshot = storage_.log.snapshot();
            zxid after = snapshot ? snapshot->last_included : zxid{};
            for (;;) {
                auto chunk = storage_.log.read(after, 1024);
                if (!chunk) return read_failed(chunk.error());
                if (chunk.value().empty()) break;
                for (const auto& record : chunk.value()) {
                    after = record.id;
                    if (is_system_txn(record.txn.view())) recover(record);
                }
            }
        }
        ctx_.rebuild_quorums();
        if (!ctx_.member_type(ctx_.self()) && ctx_.config().version() != ctx_.initial_config_version_ &&
            !ctx_.opts().non_voter_until_synced) {
            // Removed by a committed reconfiguration before it stopped: it stays out.
            ctx_.removed = true;
            zab::log(log_level::warn, "peer {}: removed from the group by configuration {}; not "
                     "taking part", ctx_.self(), zxid::from_value(ctx_.config().version()));
        }
        return success();
    }

    /// The committed configuration changed in this step (§9): a leader left without a vote
    /// hands over to the new configuration's best voter; a replica the configuration no
    /// longer names stops; a learner whose type changed joins its leader again as what it
    /// is now.
    void on_config_changed() {
        if (!std::exchange(ctx_.config_changed, false)) return;
        const bool was_member = ctx_.previous_config().contains(ctx_.self());
        const bool is_member = ctx_.config().contains(ctx_.self());
        if (ctx_.leading && !ctx_.config().is_voter(ctx_.self())) {
            auto& leader = *ctx_.leading;
            if (!leader.transfer || !ctx_.config().is_voter(leader.transfer->target)) {
                const peer_id successor = best_transfer_target();
                if (successor == 0) {
                    ctx_.request_election("the new configuration leaves this leader without a "
                                          "vote, and none of its voters is synced");
                } else {
                    if (!leader.transfer)
                        leader.transfer = leader_state::leadership_transfer{successor, 0};
                    leader.transfer->target = successor;
                    leader.transfer->deadline = ctx_.now_tick + ctx_.opts().transfer_timeout_ticks;
                    leader.transfer->leaving = true;
                    zab::log(log_level::info, "peer {}: not a voter of configuration {}: handing "
                             "over to {}", ctx_.self(), zxid::from_value(ctx_.config().version()),
                             successor);
                }
            }
            return;  // removed (if so) once handed over
        }
        // Removed by the committed configuration, and named by no pending one (a SNAP's
        // history may add it back after the snapshot's configuration removed it).
        if (was_member && !is_member && !ctx_.member_type(ctx_.self()) && !ctx_.leading) {
            become_removed();
            return;
        }
        if (ctx_.learning && ctx_.learning->info_sent && ctx_.learning->joined_as != ctx_.self_type())
            ctx_.request_election("a reconfiguration changed what this replica is");
    }

    /// Learner promotion (§9): an established leader with no reconfiguration in progress
    /// proposes one that makes a member marked `promote` a voter, once its link is synced
    /// and within options::promotion_max_lag of the commit point (compare-and-set on the
    /// committed version, so it never races an operator's change). A refusal (the new
    /// configuration's voters not synced) is tried again at the next tick.
    void promote_caught_up_learners() {
        auto& leader = *ctx_.leading;
        if (!leader.established() || leader.transfer || !ctx_.pending_configs().empty() ||
            ctx_.election_requested_)  // stepping down at the end of this step
            return;
        const zxid committed = ctx_.last_committed;
        for (const member& m : ctx_.config().members()) {
            if (!m.promote || m.type != learner_type::observer) continue;
            const learner_link* link = leader.find_link(m.id);
            if (link == nullptr || link->type != learner_type::participant ||
                link->at != learner_link::stage::broadcasting)
                continue;
            const std::uint64_t lag =
                committed.epoch() != leader.epoch ? 0
                : link->last_acked.epoch() == leader.epoch
                    ? committed.counter() - std::min(committed.counter(), link->last_acked.counter())
                    : committed.counter();
            if (lag > ctx_.opts().promotion_max_lag) continue;
            std::vector<member> members = ctx_.config().members();
            for (member& n : members)
                if (n.id == m.id) {
                    n.type = learner_type::participant;
                    n.promote = false;
                }
            const shared_bytes txn = encode_reconfig({std::move(members), ctx_.config().version()});
            if (auto proposed = broadcast_.propose(txn.view()); proposed) {
                ++ctx_.counters.learners_promoted;
                zab::log(log_level::info, "peer {}: learner {} caught up (lag {}): promoting it "
                         "to voter as {}", ctx_.self(), m.id, lag, proposed.value());
            }
            return;  // one at a time
        }
    }

    /// §9 step 6: a removed replica that is still running answers a notification whose
    /// frame carries an older configuration version than its own, at most once per peer
    /// every notification_timeout_min_ticks. The answer's frame carries the version of the
    /// reconfiguration that removed it, which tells a replica holding that reconfiguration
    /// uncommitted that it committed (learn_committed_version). Without it the group can be
    /// stuck for good: when the COMMIT reached only the members it removed, the others still
    /// need those members for a quorum of the old configuration. Its vote is for nobody, as
    /// an observer's: it counts for nothing.
    void witness_removal(peer_id from) {
        if (ctx_.frame_config_version >= ctx_.config().version()) return;
        auto& last = removal_witnessed_[from];
        if (last != 0 && ctx_.now_tick < last + ctx_.opts().notification_timeout_min_ticks) return;
        last = std::max<std::uint64_t>(ctx_.now_tick, 1);
        ++ctx_.counters.removal_witnessed;
        ctx_.send(from, vote{0, zxid{}, 0, 0, peer_state::observing}.to_notification(
                            peer_state::observing));
    }

    /// A committed reconfiguration left this replica out: it leaves its role, closes its
    /// connections (but after a hand-off, whose HANDOVERs are still to go out on them) and
    /// takes no further part (its status says so); restart it to join again.
    void become_removed(bool close_connections = true) {
        if (ctx_.removed) return;
        zab::log(log_level::warn, "peer {}: removed from the group by configuration {}; stopping",
                 ctx_.self(), zxid::from_value(ctx_.config().version()));
        ctx_.removed = true;
        leave_role();
        if (close_connections)
            for (peer_id id : ctx_.connected_peers()) ctx_.close(id);
        ctx_.state = peer_state::looking;
        election_started_ = false;
        ctx_.clients.abandon(errc::not_a_member, 0);
    }

    // --- leadership transfer (docs/protocol.md §6.4) ---------------------------------------

    /// The synced voter that acknowledged the most (the lowest id among equals); 0 if none.
    peer_id best_transfer_target() const {
        const learner_link* best = nullptr;
        for (const auto& link : ctx_.leading->links)
            if (link.type == learner_type::participant && ctx_.config().is_voter(link.id) &&
                link.at == learner_link::stage::broadcasting &&
                (best == nullptr || link.last_acked > best->last_acked ||
                 (link.last_acked == best->last_acked && link.id < best->id)))
                best = &link;
        return best != nullptr ? best->id : 0;
    }

    /// The transfer's target holds every proposal, every proposal is committed and this
    /// replica's own log writes are durable: each
    /// synced learner gets the HANDOVER after its last COMMIT, the others are let go (they
    /// find the new leader by election), and this replica follows the target.
    void hand_over_if_ready() {
        auto& leader = *ctx_.leading;
        // Its own log durable too: as a follower it advertises what a crash would recover (§2).
        if (!leader.transfer || !leader.established() || !leader.outstanding.empty() ||
            ctx_.durability_.log_pending())
            return;
        const learner_link* target = leader.find_link(leader.transfer->target);
        if (target == nullptr || target->type != learner_type::participant ||
            !ctx_.quorums().is_voter(target->id) ||
            target->at != learner_link::stage::broadcasting)
            return;
        const bool proposed = leader.last_proposed.counter() != ctx_.opts().test_only.initial_counter;
        // Caught up: it acknowledged the last proposal, or was synced through it — its ACK
        // of NEWLEADER (it is broadcasting) vouches for everything queued before NEWLEADER
        // (§5.3): a target restarted and synced after the last write sends no other ACK.
        if (proposed && target->last_acked != leader.last_proposed &&
            target->synced_through != leader.last_proposed)
            return;
        const wire::handover handover{target->id, leader.max_committed(), leader.epoch,
                                      ctx_.current_vote.round};
        for (const auto& link : leader.links) {
            if (link.at == learner_link::stage::broadcasting)
                ctx_.send(link.id, handover);
            else
                ctx_.close(link.id);
        }
        ++ctx_.counters.transfers_handed_over;
        zab::log(log_level::info, "peer {}: leadership handed over to {} at {}", ctx_.self(),
                 handover.leader, handover.leader_zxid);
        ctx_.clients.finish_transfer(handover.leader_zxid);
        if (!ctx_.config().contains(ctx_.self())) {
            // Removed by the reconfiguration it just committed: the HANDOVER goes out, then it stops.
            leave_role(leaving::for_handover, handover.leader);
            become_removed(false);
            return;
        }
        adopt_handover(handover);
    }

    /// options::transfer_timeout_ticks passed and the target has not caught up: writes resume.
    void give_up_late_transfer() {
        if (!ctx_.leading || !ctx_.leading->transfer ||
            ctx_.now_tick < ctx_.leading->transfer->deadline)
            return;
        zab::log(log_level::warn,
                 "peer {}: leadership transfer to {} given up: it did not catch up within "
                 "transfer_timeout_ticks ({}); taking writes again",
                 ctx_.self(), ctx_.leading->transfer->target, ctx_.opts().transfer_timeout_ticks);
        ++ctx_.counters.transfers_timed_out;
        ctx_.clients.finish_transfer(make_error_code(errc::timed_out));
        if (ctx_.leading->transfer->leaving) {
            // A leader without a vote cannot take writes again: an election settles it (§9).
            ctx_.request_election("the hand-off after a reconfiguration timed out");
            return;
        }
        ctx_.leading->transfer.reset();
    }

    /// Leaves the current role for the one a HANDOVER names, as an election decision that
    /// every replica handed over reaches alike (the same vote): lead if named, else follow.
    void adopt_handover(wire::handover handover) {  // a copy: leaving the role frees the original
        election_decision decision;
        decision.how = election_decision::basis::handed_over;
        const peer_state role = handover.leader == ctx_.self() ? peer_state::leading
                                : ctx_.self_type() == learner_type::participant
                                    ? peer_state::following
                                    : peer_state::observing;
        decision.decided = vote{handover.leader, handover.leader_zxid, handover.leader_epoch,
                                handover.round, role};
        leave_role(leaving::for_handover, handover.leader);
        ctx_.decide(std::move(decision));
    }

    void enter_role(const election_decision& decision) {
        ctx_.state = decision.decided.state;
        ctx_.current_vote = decision.decided;
        const std::uint64_t deadline = ctx_.now_tick + ctx_.opts().init_limit_ticks;
        ++ctx_.counters.elections_decided;
        if (ctx_.state == peer_state::leading) {
            ++ctx_.counters.elections_won;
            ctx_.forget_proposal_times();
        }
        zab::log(log_level::info, "peer {}: {} (leader {}, decided by {} votes)", ctx_.self(),
                 ctx_.state, ctx_.current_vote.leader, decision.counted.size());
        auto held = std::exchange(held_learner_infos_, {});
        if (ctx_.state == peer_state::leading) {
            ctx_.leading.emplace();
            ctx_.leading->establish_deadline = deadline;
            discovery_.leader_start(decision);
            if (!synchronization_.leader_start()) ctx_.request_election("cannot read the log");
            for (const auto& h : held)
                if (ctx_.connection_to(h.id) == h.connection)
                    discovery_.leader_on_info(h.id, h.info);
        } else {
            for (const auto& h : held)
                if (ctx_.connection_to(h.id) == h.connection) ctx_.close(h.id);
            ctx_.learning.emplace();
            ctx_.learning->leader = decision.decided.leader;
            ctx_.learning->last_heard_tick = ctx_.now_tick;
            ctx_.learning->establish_deadline = deadline;
            ctx_.learning->handed_over = decision.how == election_decision::basis::handed_over;
            discovery_.learner_start();
        }
    }

    // --- dispatch -----------------------------------------------------------------------

    learner_link* find_link(peer_id id) { return ctx_.leading ? ctx_.leading->find_link(id) : nullptr; }

    /// The learner's stage, if `from` is its leader (messages from anyone else are stale).
    std::optional<learner_state::stage> from_my_leader(peer_id from) const {
        if (!ctx_.learning || ctx_.learning->leader != from) return std::nullopt;
        return ctx_.learning->at;
    }

    /// Whether this peer issued storage operation `op`. A completion for one it never issued
    /// (a log reporting work done before this peer existed, or a driver's bug) makes nothing
    /// durable: it is ignored, counted and logged, never taken for an unwritten record.
    bool issued(storage_op op, const char* what) {
        if (op <= ctx_.last_issued_op()) return true;
        ++ctx_.counters.unissued_completions;
        zab::log(log_level::warn,
                 "peer {}: ignored a durability report for {} {}: the last operation this peer "
                 "issued is {}",
                 ctx_.self(), what, op, ctx_.last_issued_op());
        return false;
    }

    /// Where the leader's PROPOSAL, COMMIT and INFORM go on a learner: into the sync it is
    /// receiving, or into the broadcast (from NEWLEADER on). Nothing, counted, when `from` is
    /// not its leader; nothing, and the leader is dropped, before the sync began.
    enum class learner_route { sync, broadcast, none };
    learner_route route_from_leader(peer_id from) {
        const auto at = from_my_leader(from);
        if (!at) {
            ctx_.ignore(from, ignore_reason::not_from_my_leader);
            return learner_route::none;
        }
        using stage = learner_state::stage;
        if (*at == stage::syncing) return learner_route::sync;
        if (*at == stage::awaiting_uptodate || *at == stage::broadcasting)
            return learner_route::broadcast;
        ctx_.leader_misbehaved(ctx_.handling == wire::message_type::proposal ||
                                       ctx_.handling == wire::message_type::proposal_batch
                                   ? "PROPOSAL before the sync began"
                               : ctx_.handling == wire::message_type::commit ? "COMMIT before the sync began"
                                                                        : "INFORM before the sync began");
        return learner_route::none;
    }

    // Election notifications go to the election policy in every state (§3.4 step 7).
    void dispatch(peer_id from, const wire::notification& notification, const shared_bytes&) {
        if (ctx_.removed) return witness_removal(from);
        if (!election_started_ && ctx_.state == peer_state::looking) {
            // Leaving a role (waiting for the log): keep only each sender's newest vote.
            std::erase_if(held_notifications_, [&](const auto& h) { return h.first == from; });
            held_notifications_.emplace_back(from, notification);
            return;
        }
        if (ctx_.leading) discovery_.leader_on_vote(from, notification);
        election_.on_notification(from, notification);
    }

    void dispatch(peer_id from, const wire::follower_info& m, const shared_bytes&) {
        on_learner_info(from, {learner_type::participant, m.accepted_epoch, m.protocol, m.agreed});
    }
    void dispatch(peer_id from, const wire::observer_info& m, const shared_bytes&) {
        on_learner_info(from, {learner_type::observer, m.accepted_epoch, m.protocol, m.agreed});
    }
    void on_learner_info(peer_id from, const learner_announcement& info) {
        if (!ctx_.leading && ctx_.state == peer_state::looking) {
            // Perhaps about to lead (still in its finalize wait): keep the newest one per
            // learner, as ZooKeeper's learner keeps retrying its connection for a while.
            std::erase_if(held_learner_infos_, [&](const auto& h) { return h.id == from; });
            held_learner_infos_.push_back({from, *ctx_.connection_to(from), info});
            return;
        }
        if (!ctx_.leading) {
            // It follows someone else: the learner must look again. Closing is what a
            // refused connection to ZooKeeper's leader port does.
            ctx_.ignore(from, ignore_reason::follows_another);
            ctx_.close(from);
            return;
        }
        discovery_.leader_on_info(from, info);
    }

    void dispatch(peer_id from, const wire::leader_info& m, const shared_bytes&) {
        if (!from_my_leader(from)) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        discovery_.learner_on_leader_info(m);
    }

    void dispatch(peer_id from, const wire::ack_epoch& m, const shared_bytes&) {
        if (!ctx_.leading) return ctx_.ignore(from, ignore_reason::not_leading);
        discovery_.leader_on_ack_epoch(from, m);
    }

    void dispatch(peer_id from, const wire::diff& m, const shared_bytes&) {
        if (!from_my_leader(from)) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        synchronization_.learner_on_diff(m);
    }
    void dispatch(peer_id from, const wire::trunc& m, const shared_bytes&) {
        if (!from_my_leader(from)) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        synchronization_.learner_on_trunc(m);
    }
    void dispatch(peer_id from, const wire::snap& m, const shared_bytes& frame) {
        if (!from_my_leader(from)) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        synchronization_.learner_on_snap(m, frame);
        sync_progress();
    }
    void dispatch(peer_id from, const wire::snap_ack& m, const shared_bytes&) {
        learner_link* link = find_link(from);
        if (link == nullptr) return ctx_.ignore(from, ignore_reason::unknown_learner);
        synchronization_.leader_on_snap_ack(*link, m);
        sync_progress();
    }
    void dispatch(peer_id from, const wire::sync_ack& m, const shared_bytes&) {
        learner_link* link = find_link(from);
        if (link == nullptr) return ctx_.ignore(from, ignore_reason::unknown_learner);
        synchronization_.leader_on_sync_ack(*link, m);
        sync_progress();
    }

    /// A SNAP chunk or a window of history went through: init_limit bounds the time between
    /// them, not the whole transfer, so a large state or a long history can still be synced
    /// (§4: initLimit exists to catch a peer that stopped, and one that keeps streaming has
    /// not).
    void sync_progress() {
        const std::uint64_t extended = ctx_.now_tick + ctx_.opts().init_limit_ticks;
        if (ctx_.leading && !ctx_.leading->established())
            ctx_.leading->establish_deadline = std::max(ctx_.leading->establish_deadline, extended);
        if (ctx_.learning && !serving_learner())
            ctx_.learning->establish_deadline = std::max(ctx_.learning->establish_deadline, extended);
    }

    /// §4: the tick by which this peer's role must be established (its leader with a
    /// NEWLEADER quorum, its learner with UPTODATE), while it is not yet; else nothing.
    std::optional<std::uint64_t> establish_deadline() const {
        if (ctx_.leading && !ctx_.leading->established()) return ctx_.leading->establish_deadline;
        if (ctx_.learning && !serving_learner()) return ctx_.learning->establish_deadline;
        return std::nullopt;
    }
    void dispatch(peer_id from, const wire::new_leader& m, const shared_bytes&) {
        if (!from_my_leader(from)) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        synchronization_.learner_on_new_leader(m);
    }
    void dispatch(peer_id from, const wire::up_to_date&, const shared_bytes&) {
        if (!from_my_leader(from)) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        synchronization_.learner_on_up_to_date();
    }

    void dispatch(peer_id from, const wire::ack& m, const shared_bytes&) {
        learner_link* link = find_link(from);
        if (link == nullptr) return ctx_.ignore(from, ignore_reason::unknown_learner);
        using stage = learner_link::stage;
        if (link->at == stage::awaiting_newleader_ack)
            synchronization_.leader_on_newleader_ack(*link, m);
        else if (link->at == stage::awaiting_uptodate || link->at == stage::broadcasting)
            broadcast_.leader_on_ack(*link, m);
        else {
            ctx_.ignore(from, ignore_reason::ack_before_newleader);
            ctx_.drop_learner(from, "an ACK before NEWLEADER");
        }
    }

    void dispatch(peer_id from, const wire::proposal& m, const shared_bytes& frame) {
        const log_record record{m.id, frame.slice(m.txn)};
        switch (route_from_leader(from)) {
            case learner_route::sync:
                synchronization_.learner_on_sync_proposal(record);
                sync_progress();
                break;
            case learner_route::broadcast: broadcast_.learner_on_proposal(record); break;
            case learner_route::none: break;
        }
    }

    void dispatch(peer_id from, const wire::proposal_batch& m, const shared_bytes& frame) {
        switch (route_from_leader(from)) {
            case learner_route::sync:
                for_each_batch_txn(m, [&](zxid id, byte_view txn) {
                    synchronization_.learner_on_sync_proposal(log_record{id, frame.slice(txn)});
                    return !ctx_.election_requested();
                });
                sync_progress();
                break;
            case learner_route::broadcast: broadcast_.learner_on_proposal_batch(m, frame); break;
            case learner_route::none: break;
        }
    }

    void dispatch(peer_id from, const wire::commit& m, const shared_bytes&) {
        switch (route_from_leader(from)) {
            case learner_route::sync: synchronization_.learner_on_sync_commit(m); break;
            case learner_route::broadcast: broadcast_.learner_on_commit(m); break;
            case learner_route::none: break;
        }
    }

    void dispatch(peer_id from, const wire::inform& m, const shared_bytes& frame) {
        const log_record record{m.id, frame.slice(m.txn)};
        switch (route_from_leader(from)) {
            case learner_route::sync:
                synchronization_.learner_on_sync_proposal(record);
                synchronization_.learner_on_sync_commit(wire::commit{m.id});
                break;
            case learner_route::broadcast: broadcast_.learner_on_inform(record); break;
            case learner_route::none: break;
        }
    }

    void dispatch(peer_id from, const wire::ping& m, const shared_bytes&) {
        if (ctx_.leading) {
            if (auto* link = find_link(from)) broadcast_.leader_on_ping(*link, m);
            return;
        }
        if (!from_my_leader(from)) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        broadcast_.learner_on_ping(m);
        // My NEWLEADER ACK is out: establishing now waits for the others' syncs, which
        // extend the leader's init_limit as they stream (sync_progress) but not mine. While
        // the leader is there, its own deadline bounds the wait; timing out on my own, I
        // would vote again and take its quorum away for good while a long SNAP to another
        // learner restarts with every election (combination sweep seed 14021).
        if (auto& learner = *ctx_.learning;
            learner.at == learner_state::stage::awaiting_uptodate && !learner.newleader_pending)
            learner.establish_deadline =
                std::max(learner.establish_deadline, ctx_.now_tick + ctx_.opts().init_limit_ticks);
    }

    // Client requests forwarded by learners, and the leader's answers (§6.1, §7).
    void dispatch(peer_id from, const wire::forwarded_request& m, const shared_bytes&) {
        if (!ctx_.leading) return ctx_.ignore(from, ignore_reason::not_leading);  // it will learn
        if (auto* link = find_link(from)) broadcast_.leader_on_request(*link, m);
    }
    void dispatch(peer_id from, const wire::forwarded_batch& m, const shared_bytes&) {
        if (!ctx_.leading) return ctx_.ignore(from, ignore_reason::not_leading);  // it will learn
        if (auto* link = find_link(from)) broadcast_.leader_on_request_batch(*link, m);
    }
    void dispatch(peer_id from, const wire::forwarded_reply& m, const shared_bytes&) {
        if (from_my_leader(from) != learner_state::stage::broadcasting)
            return ctx_.ignore(from, ignore_reason::not_serving);
        broadcast_.learner_on_reply(m);
    }
    void dispatch(peer_id from, const wire::reply_batch& m, const shared_bytes&) {
        if (from_my_leader(from) != learner_state::stage::broadcasting)
            return ctx_.ignore(from, ignore_reason::not_serving);
        broadcast_.learner_on_reply_batch(m);
    }
    void dispatch(peer_id from, const zab::wire::sync_answer& m, const shared_bytes&) {
        if (from_my_leader(from) != learner_state::stage::broadcasting)
            return ctx_.ignore(from, ignore_reason::not_serving);
        broadcast_.learner_on_sync_answer(m);
    }

    // HANDOVER: my leader hands its leadership to `m.leader` (§6.4). It comes after UPTODATE
    // and the last COMMIT on this connection, so this learner holds every committed
    // transaction of the epoch when it follows (or becomes) the new leader.
    void dispatch(peer_id from, const wire::handover& m, const shared_bytes&) {
        const auto at = from_my_leader(from);
        if (!at) return ctx_.ignore(from, ignore_reason::not_from_my_leader);
        if (*at != learner_state::stage::broadcasting)
            return ctx_.ignore(from, ignore_reason::out_of_stage);
        if (m.leader == from || !ctx_.quorums().is_voter(m.leader)) {
            ctx_.leader_misbehaved("a HANDOVER to itself or to a peer that is not a voter");
            return;
        }
        ++ctx_.counters.handovers_followed;
        zab::log(log_level::info, "peer {}: leader {} hands over to {}", ctx_.self(), from, m.leader);
        ctx_.learning->handover = m;  // adopted at the end of the step, once the log is durable
    }

    void reject(peer_id from, const std::string& why) {
        ++ctx_.counters.bad_frames;
        zab::log(log_level::warn, "peer {}: bad frame from {}: {}; closing the connection",
                 ctx_.self(), from, why);
        if (ctx_.leading) ctx_.drop_learner(from, "a bad frame");
        else ctx_.close(from);
        if (ctx_.learning && from == ctx_.learning->leader)
            ctx_.request_election("bad frame from the leader");
    }

    /// ZOOKEEPER-261: a voter that joined as an observer has been synced (UPTODATE, with its
    /// current epoch durable): it now holds the leader's committed history, so its vote and
    /// its acknowledgements may count again. It rejoins through a new election, which finds
    /// the leader settled and syncs it again by DIFF, this time as a follower.
    void rejoin_as_voter_once_synced() {
        if (!ctx_.voting_suspended || !established() || !ctx_.learning ||
            ctx_.durable_epochs.current == 0)
            return;
        ctx_.voting_suspended = false;
        zab::log(log_level::info, "peer {}: synced at epoch {}; rejoining as a voter", ctx_.self(),
                 ctx_.durable_epochs.current);
        ctx_.request_election("synced after its data was wiped: rejoining as a voter");
    }

    /// Ends a step: role changes, each phase's progress, then storage and frames go out.
    void end_step() {
        for (int round = 0; round < 4; ++round) {
            if (auto decision = std::exchange(ctx_.pending_decision_, std::nullopt)) {
                enter_role(*decision);
                ctx_.last_decision_ = std::move(decision);
            }
            if (ctx_.leading) {
                discovery_.leader_advance();
                synchronization_.leader_advance();
                broadcast_.leader_advance();
                hand_over_if_ready();
            }
            if (ctx_.learning) synchronization_.learner_advance();
            if (ctx_.learning && ctx_.learning->handover && !ctx_.durability_.log_pending())
                adopt_handover(*ctx_.learning->handover);
            on_config_changed();
            rejoin_as_voter_once_synced();
            if (ctx_.storage_error_) break;
            if (!std::exchange(ctx_.election_requested_, false)) {
                if (ctx_.pending_decision_) continue;  // a hand-off: the new role, now
                break;
            }
            zab::log(log_level::info, "peer {}: back to LOOKING: {}", ctx_.self(),
                     ctx_.election_reason_);
            leave_role();
            if (!ctx_.config().contains(ctx_.self()) &&
                ctx_.previous_config_.contains(ctx_.self())) {
                become_removed();  // a leader the reconfiguration removed, whose hand-off failed
                break;
            }
            enter_looking();
        }
        if (ctx_.storage_error_) return on_storage_failed(ctx_.storage_error_);
        if (!failed()) ctx_.maybe_compact();
        ctx_.flush_storage();
        maybe_start_election();
        release_frames();
        if (drop_learners_over_backlog()) release_frames();  // their closes, and the rest
        ctx_.check_invariants();
        if (ctx_.metrics) report_role_changes();
    }

    /// With a metrics sink, at the end of a step: the role and the established leader as they
    /// are now, if they differ from the last ones reported.
    void report_role_changes() {
        if (ctx_.state != reported_role_) {
            reported_role_ = ctx_.state;
            ctx_.metrics->on_event(ctx_.event(metric_event_kind::role_changed));
        }
        if (const peer_id leader = ctx_.established_leader(); leader != reported_leader_) {
            reported_leader_ = leader;
            ctx_.metrics->on_event(ctx_.event(metric_event_kind::leader_changed));
        }
    }

    /// A learner whose frames still held after the release exceed `max_learner_backlog`
    /// (waiting for durability it cannot get) is disconnected: it resyncs when it comes
    /// back, and nobody else waits for it. Frames the release handed to the transport do
    /// not count: a sync streams under flow control, and is never dropped for its length.
    bool drop_learners_over_backlog() {
        if (!ctx_.leading) return false;
        bool dropped = false;
        const std::size_t limit = ctx_.opts().max_learner_backlog;
        for (const auto& [id, count] : ctx_.outbox_.destinations_over(limit)) {
            zab::log(log_level::warn, "peer {}: learner {} has {} frames held (max {}); dropped",
                     ctx_.self(), id, count, ctx_.opts().max_learner_backlog);
            ++ctx_.counters.learners_over_backlog;
            ctx_.drop_learner(id, "too many frames held for it (max_learner_backlog)");
            dropped = true;
        }
        return dropped;
    }

    /// Hands the closes asked for, then every queued frame whose durability conditions hold,
    /// to the transport (outbox::release).
    void release_frames() {
        for (const auto& [to, connection] : ctx_.outbox_.take_closes())
            transport_.close(to, connection);
        ctx_.counters.frames_coalesced += ctx_.outbox_.release(
            ctx_.durability_, [&](const outbox::queued_frame& f) { send_released(f); });
    }

    void send_released(const outbox::queued_frame& f) {
        transport_.send(f.to, f.connection, f.frame);
        ++ctx_.counters.frames_sent;
    }

    void set_connection(peer_id peer, connection_id connection) {
        ctx_.outbox_.set_connection(peer, connection);
    }
    void erase_connection(peer_id peer) { ctx_.outbox_.erase_connection(peer); }

    peer_context ctx_;
    Transport& transport_;
    storage_adapter storage_;
    machine_adapter machine_;
    election_type election_;
    discovery_type discovery_;
    synchronization_type synchronization_;
    broadcast_type broadcast_;
    bool started_ = false;
    bool election_started_ = false;
    std::vector<std::pair<peer_id, wire::notification>> held_notifications_;
    std::map<peer_id, std::uint64_t> removal_witnessed_;  ///< witness_removal's last answers
    /// FOLLOWERINFO/OBSERVERINFO that arrived while LOOKING, for if this peer comes to lead.
    struct held_learner_info {
        peer_id id;
        connection_id connection;
        learner_announcement info;
    };
    std::vector<held_learner_info> held_learner_infos_;
    std::error_code failure_;
    bool shutting_down_ = false;
    /// What report_role_changes last reported (with a metrics sink).
    peer_state reported_role_ = peer_state::looking;
    peer_id reported_leader_ = 0;
};

}  // namespace zab
