// zab/runtime/node.hpp — zab::asio::node: one replica of a zab group, driven by Boost.Asio.
//
// A node owns a `zab::peer` and the transport to the other replicas (plaintext TCP by default,
// or TLS: the `Transport` parameter), and drives the peer
// on the application's executor: a steady timer makes ticks, transport events become
// `on_connected` / `on_disconnected` / `on_receive`, the log's flushes become durability
// completions, and the client API completes Asio operations from the peer's completions.
//
// Threading contract:
// - `executor` must not run two handlers at once: an io_context run by one thread, or a
//   strand. Every handler of the node, the transport, and every call into the log's
//   `log_store` members and into the state machine (`apply`, `snapshot`, `restore`) runs
//   on it. Nothing else of the node is thread-safe.
// - `async_propose`, `async_sync`, `async_lease_sync`, `async_transfer_leadership` and
//   `async_reconfigure` may be called from any thread: they copy what they need and post to
//   the executor. Every other member must be called on the executor.
// - Local reads (`machine()`) must run on the executor too, e.g. inside
//   `boost::asio::dispatch(node.get_executor(), …)`: that is where `apply` writes.
// - What blocks: a flush job's `run()` (write + fdatasync). With `disk_executor` (say a
//   `boost::asio::thread_pool` of one thread that the application owns) jobs run there and
//   the node's executor never waits for the disk; without it they run on the node's
//   executor, which then blocks for each fsync (simple, and slower). The node starts no
//   thread of its own. A log's checkpoint jobs (a compaction's snapshot file,
//   zab::checkpointing_log) go to the same executor: give it two threads for a checkpoint
//   never to delay a flush job.
//
// Membership (docs/protocol.md §9). `async_reconfigure` changes it; after every step the node
// hands the transport every member of the committed and pending configurations with its peer
// address (`member::address`, "host:port" or "[v6]:port"; a member without one keeps its
// `node_options::transport.peers` entry), so that replicas added later are reached and
// removed ones are no longer dialed (`tcp_transport::update_members`).
//
// Joining. A replica started outside the configuration (its id not a member of
// `node_options::config`, nor of the configuration its log recovered) joins the group: it
// needs `options::non_voter_until_synced`, follows the leader without a vote, and is made a
// member by an `async_reconfigure` on the group. Its id must be above every member id it
// knows (the configuration's and `transport.peers`'): the higher id of each pair dials the
// lower, and the members, who do not know the joiner yet, never dial it. `start()` refuses
// a lower one with `invalid_options`, naming the id to pick.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/config.hpp"
#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/metrics.hpp"
#include "zab/core/options.hpp"
#include "zab/core/peer.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/net/tcp_transport.hpp"
#include "zab/runtime/flushable_log.hpp"
#include "zab/runtime/node_types.hpp"

namespace zab::asio {

/// `Transport` carries the frames between replicas: `tcp_transport` (plaintext, the default),
/// `tls_transport` (mutual TLS, include/zab/net/tls_transport.hpp, target zab::asio_tls), or
/// the application's own: a `zab::transport` constructible from (executor,
/// tcp_transport_options, transport_handler, extra...) — the extra arguments are the node
/// constructor's last ones, e.g. a `tls_security` — with `start()`, `stop()`, `conflicts()`,
/// `local_port()` and `counters()` as `basic_transport` has them, and optionally
/// `update_members(members, config_version, config_digest)` (without it, the member list is
/// the one it was constructed with: replicas added later are not reached).
template <flushable_log Log, state_machine StateMachine, typename Policies = default_policies,
          zab::transport Transport = tcp_transport>
class node {
public:
    using peer_type = peer<Transport, Log, StateMachine, Policies>;
    using transport_type = Transport;
    /// Every client operation completes with this signature, exactly once.
    using completion_signature = void(boost::system::error_code, reply);

    /// Does nothing yet (`start()` does). `log` and `machine` must outlive the node; the log
    /// holds what the replica recovered. See the threading contract above for the executors.
    /// `transport_arguments` go to the transport's constructor after its handler (for
    /// `tls_transport`: the `tls_security` with the replica's credentials).
    template <typename... TransportArguments>
    node(boost::asio::any_io_executor executor, node_options options, Log& log,
         StateMachine& machine, std::optional<boost::asio::any_io_executor> disk_executor = {},
         TransportArguments&&... transport_arguments)
        : executor_{executor},
          disk_{std::move(disk_executor)},
          options_{with_log_identity(std::move(options), log)},
          log_{log},
          machine_{machine},
          transport_{executor, transport_options_of(options_), make_handler(),
                     std::forward<TransportArguments>(transport_arguments)...},
          timer_{executor} {}

    node(const node&) = delete;
    node& operator=(const node&) = delete;

    /// Stops (see `stop()`).
    ~node() { stop(); }

    /// Creates the peer (its option, configuration and recovery checks: see peer::create),
    /// binds the peer port and starts dialing, then starts the protocol and the clock.
    /// Errors: those of `peer::create` (`invalid_options` for a self that is not a member)
    /// and the transport's `start`; `invalid_argument` when started twice or after `stop()`.
    result<void> start() {
        if (started_ || stopped_) return make_error_code(errc::invalid_argument);
        zab::options peer_options = options_.peer;
        if (auto problem = identity_problem(); !problem.empty()) {
            zab::log(log_level::error, "invalid options: {}", problem);
            return make_error_code(errc::invalid_options);
        }
        if (options_.cluster_id != 0) peer_options.group_id = options_.cluster_id;
        if (options_.tick <= std::chrono::milliseconds::zero()) {
            zab::log(log_level::error, "invalid options: tick must be positive");
            return make_error_code(errc::invalid_options);
        }
        // Every replica logs every proposal: a transaction the log cannot store as one
        // record would stop the whole group (issue 15 defect 5). Checked here, once.
        if constexpr (requires { log_.options().max_record_bytes; }) {
            if (peer_options.max_txn_bytes > log_.options().max_record_bytes) {
                zab::log(log_level::error,
                         "invalid options: max_txn_bytes ({}) exceeds the log's "
                         "max_record_bytes ({})",
                         peer_options.max_txn_bytes, log_.options().max_record_bytes);
                return make_error_code(errc::invalid_options);
            }
        }
        auto created = peer_type::create(options_.transport.self, options_.config, peer_options,
                                         transport_, log_, machine_);
        if (!created) return created.error();
        if (auto problem = joiner_id_problem(*created.value()); !problem.empty()) {
            zab::log(log_level::error, "invalid options: {}", problem);
            return make_error_code(errc::invalid_options);
        }
        if (auto listening = transport_.start(); !listening) return listening.error();
        created.value()->set_metrics(options_.metrics);
        started_ = true;
        peer_ = std::move(created).value();
        tick_length_ = options_.tick;
        clock_origin_ = std::chrono::steady_clock::now();
        peer_->start();
        after_step();
        arm_timer();
        return success();
    }

    /// Graceful stop: the peer stops serving clients (every operation in flight completes:
    /// `outcome_unknown` for a write already handed to the leader, `shutting_down` for the
    /// rest), the clock and the transport stop, and what the log has pending is flushed on
    /// this thread (unless a job is running on the disk executor: it finishes on its own,
    /// and its completions are dropped). After it returns nothing of the node runs again;
    /// later client calls complete with `shutting_down`. Idempotent.
    void stop() {
        if (stopped_) return;
        stopped_ = true;
        if (peer_) {
            peer_->shutdown();
            deliver_completions(peer_->ready().completions);
        }
        // peer::shutdown completed every request in flight (client_table::abandon).
        ZAB_ASSERT(pending_.empty(), "node::stop: a client request outlived the peer's shutdown");
        for (parked_request& p : parked_)
            complete(std::move(p.request.handler), executor_, errc::shutting_down,
                     reply_for({}, p.leader_hint));
        parked_.clear();
        for (queued_write& w : std::exchange(writes_queued_, {}))  // never handed to the peer
            complete(std::move(w.handler), executor_, errc::shutting_down, {});
        timer_.cancel();
        transport_.stop();
        if (started_ && !flushing_ && log_.has_pending_work()) {
            auto job = log_.begin_flush();
            job.run();
            if (auto r = log_.finish_flush(std::move(job)); r.failed())
                zab::log(log_level::error, "node {}: final flush failed: {}",
                         options_.transport.self, r.reason);
        }
        *alive_ = false;
    }

    /// Writes `txn` through this replica (any role; §6.1): completes with the zxid once the
    /// write is applied here, or with a `zab::errc` error code — `not_leader` (with the
    /// leader in the reply when known), `backpressure`, `zxid_exhausted`, `storage_failed`,
    /// `shutting_down` when it was never proposed; `outcome_unknown` when it may or may not
    /// commit. On success `reply::response` is what `apply` returned here (`response_unknown`:
    /// the write reached this replica inside a snapshot; §6.6). Any completion token: a
    /// callback, `use_future`, `use_awaitable`, `deferred`. Waits for a leader as
    /// `node_options::leader_wait` says (see `call_options`).
    template <typename CompletionToken>
    auto async_propose(byte_view txn, CompletionToken&& token) {
        return async_propose(std::vector<std::byte>(txn.begin(), txn.end()),
                             call_options{options_.leader_wait},
                             std::forward<CompletionToken>(token));
    }

    /// As above, taking the transaction's bytes over rather than copying them.
    template <typename CompletionToken>
    auto async_propose(std::vector<std::byte> txn, CompletionToken&& token) {
        return async_propose(std::move(txn), call_options{options_.leader_wait},
                             std::forward<CompletionToken>(token));
    }

    /// As above, with this call's options (e.g. how long to wait for a leader).
    template <typename CompletionToken>
    auto async_propose(byte_view txn, call_options how, CompletionToken&& token) {
        return async_propose(std::vector<std::byte>(txn.begin(), txn.end()), how,
                             std::forward<CompletionToken>(token));
    }

    /// As above, taking the transaction's bytes over.
    template <typename CompletionToken>
    auto async_propose(std::vector<std::byte> txn, call_options how, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, completion_signature>(
            [executor = executor_, alive = alive_, how, this](auto handler,
                                                              std::vector<std::byte> bytes) {
                boost::asio::post(executor, [executor, alive, how, this, h = std::move(handler),
                                             bytes = std::move(bytes)]() mutable {
                    if (!*alive) return complete(std::move(h), executor, errc::shutting_down, {});
                    queue_write(handler_type{std::move(h)}, std::move(bytes), how);
                });
            },
            token, std::move(txn));
    }

    /// A linearizable point (§7): completes once the leader confirmed, with a quorum round
    /// after this call, that it still leads, and this replica applied everything committed
    /// before; a local read after it sees every write completed anywhere before the call.
    /// Errors as `async_propose` (never `outcome_unknown`: a lost sync fails `not_leader`).
    /// Waits for a leader as `node_options::leader_wait` says (see `call_options`).
    template <typename CompletionToken>
    auto async_sync(CompletionToken&& token) {
        return async_sync(call_options{options_.leader_wait},
                          std::forward<CompletionToken>(token));
    }

    /// As above, with this call's options.
    template <typename CompletionToken>
    auto async_sync(call_options how, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, completion_signature>(
            [executor = executor_, alive = alive_, how, this](auto handler) {
                boost::asio::post(executor, [executor, alive, how, this,
                                             h = std::move(handler)]() mutable {
                    if (!*alive) return complete(std::move(h), executor, errc::shutting_down, {});
                    start_request(std::move(h), [this] { return peer_->sync(); }, how);
                });
            },
            token);
    }

    /// A linearizable point like `async_sync`, without a quorum round while the leader holds
    /// its read lease (docs/protocol.md §7.1; `options::read_lease_ticks`): at that leader it
    /// completes at once, at a follower after one round trip to it; anywhere else, and with
    /// lease reads off, it is `async_sync`. Linearizable only while the replicas' clocks keep
    /// `options::max_clock_drift_ppm` (the node counts ticks on the steady clock). Errors as
    /// `async_sync`.
    template <typename CompletionToken>
    auto async_lease_sync(CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, completion_signature>(
            [executor = executor_, alive = alive_, this](auto handler) {
                boost::asio::post(executor, [executor, alive, this,
                                             h = std::move(handler)]() mutable {
                    if (!*alive) return complete(std::move(h), executor, errc::shutting_down, {});
                    start_request(std::move(h), [&] { return peer_->lease_sync(); });
                });
            },
            token);
    }

    /// Hands this replica's leadership to voter `target` (0: the synced voter that
    /// acknowledged the most) without an election (docs/protocol.md §6.4): writes are refused
    /// with `transferring` meanwhile, the target leads the next epoch. Completes with the last
    /// zxid committed before the hand-off; errors as `peer::transfer_leadership` (`not_leader`,
    /// `invalid_argument`, `backpressure`, `timed_out` when the target did not catch up).
    template <typename CompletionToken>
    auto async_transfer_leadership(peer_id target, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, completion_signature>(
            [executor = executor_, alive = alive_, this](auto handler, peer_id to) {
                boost::asio::post(executor, [executor, alive, this, to,
                                             h = std::move(handler)]() mutable {
                    if (!*alive) return complete(std::move(h), executor, errc::shutting_down, {});
                    start_request(std::move(h), [&] { return peer_->transfer_leadership(to); });
                });
            },
            token, target);
    }

    /// Changes the group's membership (docs/protocol.md §9; the core's `peer::reconfigure`),
    /// from any replica: `request.members` is the whole new member list (a `member::address`
    /// on each lets every replica reach the new ones), `request.expected_version` the
    /// committed version it must replace (compare-and-set; `status().config.version()`).
    /// Completes with the new configuration's version (`reply.id`) once it committed and this
    /// replica applied it. Errors: `invalid_argument` (no valid configuration: no voter, a
    /// duplicate id, id 0, a bad address), `reconfig_in_progress` (another one is not
    /// committed yet), `version_mismatch`, `new_config_no_quorum` (the new configuration's
    /// voters synced with the leader are no quorum of it: start the new replicas first, with
    /// options::non_voter_until_synced, and let them sync), `not_leader`, `transferring`,
    /// `backpressure`, `not_a_member` (this replica was removed), `shutting_down`,
    /// `storage_failed`; `outcome_unknown` when it may or may not have committed.
    template <typename CompletionToken>
    auto async_reconfigure(reconfig_request request, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, completion_signature>(
            [executor = executor_, alive = alive_, this](auto handler, reconfig_request change) {
                boost::asio::post(executor, [executor, alive, this, change = std::move(change),
                                             h = std::move(handler)]() mutable {
                    if (!*alive) return complete(std::move(h), executor, errc::shutting_down, {});
                    start_request(std::move(h),
                                  [&] { return peer_->reconfigure(std::move(change)); });
                });
            },
            token, std::move(request));
    }

    /// Member `id`'s peer address as this replica knows it: from the configurations in force
    /// (`member::address`), else `node_options::transport.peers`; nullopt if neither says.
    std::optional<tcp_endpoint> address_of(peer_id id) const {
        if (const auto it = addresses_.find(id); it != addresses_.end() && !it->second.host.empty())
            return it->second;
        if (const auto it = options_.transport.peers.find(id); it != options_.transport.peers.end())
            return it->second;
        return std::nullopt;
    }

    /// Member `id`'s client address (`member::client_address`) as the configurations in
    /// force say; empty when they carry none.
    std::string client_address_of(peer_id id) const {
        const auto it = client_addresses_.find(id);
        return it == client_addresses_.end() ? std::string{} : it->second;
    }

    /// The executor the node runs on.
    boost::asio::any_io_executor get_executor() const noexcept { return executor_; }

    /// The replicated state, for local reads (on the node's executor). Sequentially
    /// consistent; after `async_sync` completes, linearizable.
    const StateMachine& machine() const noexcept { return machine_; }

    /// The log the node drives, to read (its `stats()`, say) on the node's executor; writing
    /// to it behind the node's back breaks the peer's view of it.
    const Log& log() const noexcept { return log_; }

    /// Role, epoch, leader, zxids, followers' lag (on the node's executor).
    node_status status() const {
        node_status s;
        s.conflicts = transport_.conflicts();
        if (!peer_) return s;
        const peer_status p = peer_->status();
        s.role = p.role;
        s.established = p.established;
        s.epoch = p.durable_epochs.current;
        s.leader = p.leader;
        s.last_logged = p.last_logged;
        s.last_committed = p.last_committed;
        s.last_applied = p.last_applied;
        s.failure = p.failure;
        s.config = peer_->configuration_in_force();
        s.reconfig_pending = p.reconfig_in_progress;
        s.removed = p.removed;
        s.last_sync = p.last_sync;
        for (const learner_status& l : p.learners)
            s.followers.push_back({l.id, l.type, l.stage == learner_link::stage::broadcasting,
                                   l.last_acked, l.lag});
        return s;
    }

    /// Reports to `sink` from now on (node_options::metrics); nullptr stops. On the executor.
    void set_metrics(metrics_sink* sink) noexcept {
        options_.metrics = sink;
        if (peer_) peer_->set_metrics(sink);
    }

    /// The peer (for observation: status, counters), or nullptr before `start()`.
    const peer_type* protocol_peer() const noexcept { return peer_.get(); }
    const Transport& transport() const noexcept { return transport_; }
    /// For `reload_credentials` (certificate rotation), on the node's executor.
    Transport& transport() noexcept { return transport_; }

private:
    using handler_type = boost::asio::any_completion_handler<completion_signature>;

    /// A client request handed to the peer; `retry` (with a leader wait) hands it over again.
    struct pending_request {
        handler_type handler;
        std::function<request_id()> retry;
        std::chrono::steady_clock::time_point wait_until;
    };
    /// A write handed to the node, not yet to the peer (queue_write).
    struct queued_write {
        handler_type handler;
        std::shared_ptr<const std::vector<std::byte>> bytes;
        call_options how;
    };
    /// A request refused for want of a leader, waiting for one (call_options::leader_wait).
    struct parked_request {
        pending_request request;
        std::optional<std::pair<peer_id, epoch_t>> refused_under;  ///< leadership() then
        peer_id leader_hint = 0;
    };

    /// `options` with the log's cluster id when none of the three ids was given.
    static node_options with_log_identity(node_options options, const Log& log) {
        if constexpr (requires { log.options().cluster_id; }) {
            if (options.cluster_id == 0 && options.peer.group_id == 0 &&
                options.transport.cluster_id == 0)
                options.cluster_id = log.options().cluster_id;
        }
        return options;
    }

    /// Why the cluster ids given do not agree, naming the fields; empty when they do.
    std::string identity_problem() const {
        const std::uint64_t group = options_.peer.group_id;
        const std::uint64_t transport = options_.transport.cluster_id;
        const std::uint64_t id = options_.cluster_id != 0 ? options_.cluster_id : transport;
        if (options_.cluster_id != 0 && transport != 0 && transport != id)
            return fmt::format("transport.cluster_id {} is not cluster_id {}", transport, id);
        if (group != 0 && group != id)
            return fmt::format("peer.group_id {} is not the cluster id {}", group, id);
        if (options_.cluster_id == 0 && group != transport)
            return fmt::format("peer.group_id {} and transport.cluster_id {} differ: set "
                               "node_options::cluster_id once",
                               group, transport);
        if constexpr (requires { log_.options().cluster_id; }) {
            if (log_.options().cluster_id != id)
                return fmt::format("the log belongs to cluster {}, not to cluster {}",
                                   log_.options().cluster_id, id);
        }
        return {};
    }

    transport_handler make_handler() {
        transport_handler h;
        h.on_connected = [this](peer_id from, connection_id c) {
            deliver([&] { peer_->on_connected(from, c); });
        };
        h.on_disconnected = [this](peer_id from, connection_id c) {
            deliver([&] { peer_->on_disconnected(from, c); });
        };
        h.on_receive = [this](peer_id from, connection_id c, const shared_bytes& frame) {
            deliver([&] { peer_->on_receive(from, c, frame); });
        };
        return h;
    }

    /// One event into the peer, then what every step needs.
    template <typename Event>
    void deliver(Event event) {
        if (!peer_ || stopped_) return;
        catch_up_clock();
        event();
        after_step();
    }

    /// With lease reads on (§7.1), the peer's clock is brought up to the steady clock before
    /// every event, not only when the timer fires: a frame from the leader must be stamped
    /// with the time it arrived (a follower's promise runs from it), and a lease checked
    /// against the time it is used.
    void catch_up_clock() {
        if (options_.peer.read_lease_ticks == 0 || !peer_) return;
        if (const std::uint64_t ticks = ticks_due()) peer_->tick(ticks);
    }

    /// The ticks the steady clock counted since the peer was last given some (now given).
    std::uint64_t ticks_due() {
        const auto elapsed = std::chrono::steady_clock::now() - clock_origin_;
        const auto due = static_cast<std::uint64_t>(elapsed / tick_length_);
        if (due <= ticks_given_) return 0;
        return due - std::exchange(ticks_given_, due);
    }

    /// The driver contract (zab/core/driver.hpp), after every call into the peer.
    /// Requests waiting for a leader that were handed over again (retry_parked) may be
    /// refused at once: a second pass delivers that, and parks them until the next change.
    void after_step() {
        for (int pass = 0; pass < 2; ++pass) {
            if (!peer_ || stopped_) return;
            peer_ready ready = peer_->ready();
            deliver_completions(std::move(ready.completions));
            if (ready.flush_due) maybe_flush();
            if constexpr (checkpointing_log<Log>) maybe_checkpoint();
            if (ready.snapshot) serialize_snapshot(std::move(*ready.snapshot));
            follow_membership();
            if (pass == 0 && !retry_parked()) return;
        }
    }

    /// Why this replica may not start as a joiner, if it is one (see the file comment):
    /// its id is not above every member id it knows. Empty otherwise.
    std::string joiner_id_problem(const peer_type& created) const {
        const peer_id self = options_.transport.self;
        const configuration& in_force = created.configuration_in_force();
        const auto& pending = created.pending_configurations();
        const bool is_member = in_force.contains(self) ||
                            std::any_of(pending.begin(), pending.end(),
                                        [&](const configuration& c) { return c.contains(self); });
        if (is_member || created.status().removed) return {};
        peer_id highest = 0;
        for (const member& m : in_force.members()) highest = std::max(highest, m.id);
        for (const configuration& c : pending)
            for (const member& m : c.members()) highest = std::max(highest, m.id);
        for (const auto& [id, endpoint] : options_.transport.peers)
            if (id != self) highest = std::max(highest, id);
        if (self > highest) return {};
        return fmt::format(
            "replica {} is not a member of configuration {} and so joins the group, but member "
            "{} has a higher id: the higher id of each pair dials the lower, and the members do "
            "not know a joiner yet, so none would reach it. Start it with an id above {} (e.g. "
            "{})",
            self, zxid::from_value(in_force.version()), highest, highest, highest + 1);
    }

    /// Hands the transport the members of the committed and pending configurations, with
    /// their addresses, whenever those configurations change (a version compared, §9).
    void follow_membership() {
        const configuration& in_force = peer_->configuration_in_force();
        const auto& pending = peer_->pending_configurations();
        std::vector<std::uint64_t> versions{in_force.version()};
        for (const configuration& c : pending) versions.push_back(c.version());
        if (versions == followed_versions_) return;
        followed_versions_ = std::move(versions);
        std::map<peer_id, tcp_endpoint> members;
        std::map<peer_id, std::string> clients;
        const auto take = [&](const configuration& c) {
            for (const member& m : c.members()) {
                if (!m.client_address.empty()) clients[m.id] = m.client_address;
                tcp_endpoint& where = members[m.id];
                if (const auto parsed = parse_endpoint(m.address)) {
                    where = *parsed;
                } else if (where.host.empty()) {
                    if (!m.address.empty())
                        zab::log(log_level::warn, "node {}: member {}'s address '{}' is not "
                                 "host:port; using transport.peers' entry", options_.transport.self,
                                 m.id, m.address);
                    if (const auto it = options_.transport.peers.find(m.id);
                        it != options_.transport.peers.end())
                        where = it->second;
                }
            }
        };
        take(in_force);
        for (const configuration& c : pending) take(c);  // the newer address wins
        addresses_ = members;
        client_addresses_ = std::move(clients);
        if constexpr (requires(Transport& t) {
                          t.update_members(members, std::uint64_t{}, std::uint64_t{});
                      }) {
            transport_.update_members(members, in_force.version(), in_force.digest());
        }
    }

    /// Snapshot work the peer handed out (a zab::deferred_snapshot_machine's view) is
    /// serialized on the disk executor (between flush jobs), or, without one, in a later turn
    /// of the node's executor, and handed back to the peer.
    void serialize_snapshot(snapshot_work work) {
        auto job = std::make_shared<snapshot_work>(std::move(work));
        auto result = std::make_shared<shared_bytes>();
        auto took = std::make_shared<double>(0.0);
        auto finish = [this, alive = alive_, job, result, took]() {
            if (!*alive || !peer_ || stopped_) return;
            if (options_.metrics) options_.metrics->observe(histogram_kind::snapshot_seconds, *took);
            peer_->on_snapshot_ready(job->at, std::move(*result));
            after_step();
        };
        auto serialize = [job, result, took] {
            *took = timed([&] { *result = job->serialize(); });
        };
        if (disk_) {
            boost::asio::post(*disk_, [serialize, executor = executor_, finish]() mutable {
                serialize();
                boost::asio::post(executor, std::move(finish));
            });
        } else {
            boost::asio::post(executor_, [serialize, finish]() mutable {
                serialize();
                finish();
            });
        }
    }

    /// Starts a client request: `call` hands it to the peer and returns its id. With a
    /// leader wait (`how`), `call` is kept to hand the request over again once a leader is
    /// established (see call_options).
    template <typename Handler, typename Call>
    void start_request(Handler handler, Call call, call_options how = {}) {
        if (!peer_ || stopped_)
            return complete(handler_type{std::move(handler)}, executor_, errc::shutting_down, {});
        catch_up_clock();
        pending_request request{handler_type{std::move(handler)}, {}, {}};
        if (how.leader_wait > std::chrono::milliseconds::zero()) {
            request.retry = call;
            request.wait_until = std::chrono::steady_clock::now() + how.leader_wait;
        }
        // The peer completes nothing from inside the call: the completion (even an
        // immediate refusal) is taken in after_step, once the handler is registered.
        const request_id id = call();
        pending_.emplace(id, std::move(request));
        after_step();
    }

    /// A write waits in `writes_queued_` for the end of this turn of the executor: the writes
    /// handed over meanwhile go to the peer in one `submit_batch` (one PROPOSALS frame per
    /// follower at the leader), in the order they were asked for.
    void queue_write(handler_type handler, std::vector<std::byte> bytes, call_options how) {
        writes_queued_.push_back({std::move(handler),
                                  std::make_shared<const std::vector<std::byte>>(std::move(bytes)), how});
        if (writes_queued_.size() == 1)
            boost::asio::post(executor_, [this, alive = alive_] {
                if (*alive) submit_queued_writes();
            });
    }

    void submit_queued_writes() {
        std::vector<queued_write> writes = std::exchange(writes_queued_, {});
        if (!peer_ || stopped_) {
            for (auto& w : writes) complete(std::move(w.handler), executor_, errc::shutting_down, {});
            return;
        }
        catch_up_clock();
        std::vector<byte_view> txns;
        txns.reserve(writes.size());
        for (const auto& w : writes) txns.emplace_back(w.bytes->data(), w.bytes->size());
        // The peer completes nothing from inside the call: the completions (even immediate
        // refusals) are taken in after_step, once every handler is registered.
        const request_id first = peer_->submit_batch(txns);
        for (std::size_t i = 0; i < writes.size(); ++i) {
            pending_request request{std::move(writes[i].handler), {}, {}};
            if (writes[i].how.leader_wait > std::chrono::milliseconds::zero()) {
                request.retry = [this, owned = writes[i].bytes] {
                    return peer_->submit(byte_view{owned->data(), owned->size()});
                };
                request.wait_until = std::chrono::steady_clock::now() + writes[i].how.leader_wait;
            }
            pending_.emplace(first + i, std::move(request));
        }
        after_step();
    }

    void deliver_completions(std::vector<client_completion> completions) {
        for (auto& c : completions) {
            const auto it = pending_.find(c.id);
            ZAB_ASSERT(it != pending_.end(), "a completion for a request the node never made");
            pending_request request = std::move(it->second);
            pending_.erase(it);
            if (may_wait_for_leader(c, request)) {
                parked_.push_back({std::move(request), leadership(), c.leader_hint});
                continue;
            }
            reply r = reply_for(c.outcome ? c.outcome.value() : zxid{}, c.leader_hint);
            r.response = std::move(c.response);
            r.response_unknown = c.response_unknown;
            const std::error_code error = c.outcome ? std::error_code{} : c.outcome.error();
            complete(std::move(request.handler), executor_, error, std::move(r));
        }
    }

    /// A refusal that leaves the request unproposed because there is no established leader
    /// (§6.1: `not_leader` and `transferring` are definite), for a request that may still
    /// wait for one.
    bool may_wait_for_leader(const client_completion& c, const pending_request& request) const {
        if (stopped_ || c.outcome || !request.retry) return false;
        const std::error_code e = c.outcome.error();
        return (e == make_error_code(errc::not_leader) || e == make_error_code(errc::transferring)) &&
               std::chrono::steady_clock::now() < request.wait_until;
    }

    /// The leadership this replica is established under, or nullopt while it is not.
    std::optional<std::pair<peer_id, epoch_t>> leadership() const {
        if (!peer_ || !peer_->established()) return std::nullopt;
        return std::pair{peer_->current_vote().leader, peer_->durable_epochs().current};
    }

    /// Hands the parked requests to the peer again once this replica is established under
    /// another leadership than the one that refused them. True if any was handed over.
    bool retry_parked() {
        if (parked_.empty()) return false;
        const auto now = leadership();
        if (!now) return false;
        bool any = false;
        for (auto it = parked_.begin(); it != parked_.end();) {
            if (it->refused_under == now) {
                ++it;
                continue;
            }
            pending_request request = std::move(it->request);
            it = parked_.erase(it);
            const request_id id = request.retry();
            pending_.emplace(id, std::move(request));
            any = true;
        }
        return any;
    }

    /// Parked requests whose wait is over fail `not_leader` (on the node's ticks).
    void expire_parked() {
        const auto now = std::chrono::steady_clock::now();
        for (auto it = parked_.begin(); it != parked_.end();) {
            if (now < it->request.wait_until) {
                ++it;
                continue;
            }
            complete(std::move(it->request.handler), executor_, errc::not_leader,
                     reply_for({}, it->leader_hint));
            it = parked_.erase(it);
        }
    }

    /// A reply naming `leader` (0: none known) with the addresses the configuration gives.
    reply reply_for(zxid id, peer_id leader) const {
        reply r;
        r.id = id;
        r.leader = leader;
        if (leader != 0) {
            r.leader_address = address_of(leader);
            r.leader_client_address = client_address_of(leader);
        }
        return r;
    }

    /// Completes `handler` on its associated executor, never from inside the call: first a
    /// post to the node's executor (`fallback`), then a dispatch to the handler's.
    template <typename Handler>
    static void complete(Handler handler, const boost::asio::any_io_executor& fallback,
                         std::error_code error, reply r) {
        boost::asio::post(fallback, [h = std::move(handler), error, r = std::move(r)]() mutable {
            boost::asio::dispatch(
                boost::asio::append(std::move(h), boost::system::error_code{error}, std::move(r)));
        });
    }
    template <typename Handler>
    static void complete(Handler handler, const boost::asio::any_io_executor& fallback,
                         errc error, reply r) {
        complete(std::move(handler), fallback, make_error_code(error), std::move(r));
    }

    /// Hands what the log has pending to a flush job, unless one is running (group commit:
    /// everything appended meanwhile goes into the next job, started by the after_step that
    /// reports this one).
    void maybe_flush() {
        if (flushing_ || stopped_) return;
        flushing_ = true;
        auto job = std::make_shared<decltype(log_.begin_flush())>(log_.begin_flush());
        // Measured here, where the steady clock is (the core has none): fsync_seconds is the
        // job's run, writes and fdatasyncs, on whichever thread runs it.
        auto took = std::make_shared<double>(0.0);
        auto finish = [this, alive = alive_, job, took]() {
            if (!*alive) return;
            flushing_ = false;
            if (metrics_sink* sink = options_.metrics) {
                sink->observe(histogram_kind::fsync_seconds, *took);
                if constexpr (requires { job->records(); })
                    sink->observe(histogram_kind::flush_records, static_cast<double>(job->records()));
            }
            const flush_result r = log_.finish_flush(std::move(*job));
            if (!peer_) return;
            peer_->on_flushed(r);
            after_step();
        };
        if (disk_) {
            boost::asio::post(*disk_, [job, took, executor = executor_, finish]() mutable {
                *took = timed([&] { job->run(); });
                boost::asio::post(executor, std::move(finish));
            });
        } else {
            boost::asio::post(executor_, [job, took, finish]() mutable {
                *took = timed([&] { job->run(); });
                finish();
            });
        }
    }

    /// Hands a due checkpoint (a compaction's snapshot file) to a job of its own, on the disk
    /// executor beside the flush jobs (with a pool of two threads or more they run at once),
    /// so that it never delays an append's durability nor counts as a stalled write.
    void maybe_checkpoint() {
        if (checkpointing_ || stopped_ || !log_.has_checkpoint_work()) return;
        checkpointing_ = true;
        auto job = std::make_shared<decltype(log_.begin_checkpoint())>(log_.begin_checkpoint());
        auto finish = [this, alive = alive_, job]() {
            if (!*alive) return;
            checkpointing_ = false;
            log_.finish_checkpoint(std::move(*job));
            after_step();  // a failure is reported by the next flush; the next checkpoint
        };
        if (disk_) {
            boost::asio::post(*disk_, [job, executor = executor_, finish]() mutable {
                job->run();
                boost::asio::post(executor, std::move(finish));
            });
        } else {
            boost::asio::post(executor_, [job, finish]() mutable {
                job->run();
                finish();
            });
        }
    }

    /// Seconds `work` took on the steady clock.
    template <typename Work>
    static double timed(Work&& work) {
        const auto start = std::chrono::steady_clock::now();
        work();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

    /// The clock: ticks counted from the start on the steady clock, so a late timer gives
    /// the peer every tick that passed at once (no drift).
    void arm_timer() {
        timer_.expires_at(clock_origin_ + tick_length_ * static_cast<std::int64_t>(ticks_given_ + 1));
        timer_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
            if (error || !*alive || stopped_) return;
            if (const std::uint64_t ticks = ticks_due()) deliver([&] { peer_->tick(ticks); });
            if (!stopped_) expire_parked();
            arm_timer();
        });
    }

    boost::asio::any_io_executor executor_;
    std::optional<boost::asio::any_io_executor> disk_;
    node_options options_;
    Log& log_;
    StateMachine& machine_;
    Transport transport_;
    std::unique_ptr<peer_type> peer_;
    boost::asio::steady_timer timer_;
    std::chrono::steady_clock::time_point clock_origin_;
    std::chrono::steady_clock::duration tick_length_{};
    std::uint64_t ticks_given_ = 0;
    std::map<request_id, pending_request> pending_;
    std::vector<queued_write> writes_queued_;  ///< queue_write's, submitted at the turn's end
    /// A list: Boost 1.81's any_completion_handler move *assignment* recurses (it wraps the
    /// lvalue it was given), so parked requests must never be moved over one another, as a
    /// vector's erase would.
    std::list<parked_request> parked_;
    /// The versions of the configurations last handed to the transport (committed, then
    /// pending), and the members' addresses they gave (follow_membership).
    std::vector<std::uint64_t> followed_versions_;
    std::map<peer_id, tcp_endpoint> addresses_;
    std::map<peer_id, std::string> client_addresses_;
    /// False once stopped: posted work (timer, flush, client calls) checks it before
    /// touching the node, which may be gone by then.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    bool started_ = false;
    bool stopped_ = false;
    bool flushing_ = false;
    bool checkpointing_ = false;
};

}  // namespace zab::asio
