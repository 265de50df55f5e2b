// zab/testing/protocol_observer.hpp — feeds a simulated run to the §10 invariant checker.
//
// The checker (invariant_checker.hpp) knows nothing of peers; this class watches a simulator
// and tells it the facts: every frame as it is *sent* (so an ACK is checked against the
// sender's durable disk at that instant, not later), every COMMIT as it arrives, and after
// every event what changed on each replica — crashes and restarts with what the disk
// recovered, durable epochs, the log, leaders established, transactions applied. Proposals
// go through `propose` so that the broadcast is recorded. Requires a state machine with
// `applied()`, `restores()`, `restored_at()` and `restored_count()`
// (recording_state_machine).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <vector>

#include "zab/testing/peer_internals.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/quorum.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/core/roles.hpp"
#include "zab/testing/invariant_checker.hpp"
#include "zab/testing/recording_state_machine.hpp"
#include "zab/testing/sim_log.hpp"
#include "zab/testing/sim_network.hpp"
#include "zab/testing/trace_hash.hpp"

namespace zab::testing {

template <typename Simulator>
class protocol_observer {
public:
    protocol_observer(Simulator& sim, invariant_checker& checker)
        : sim_{sim},
          checker_{checker},
          seen_(sim.nodes().size() + 1),
          initial_config_{sim.config()} {
        // Added next to any other observer (the test's own, the simulator's crash points).
        network_observer_ =
            sim.network().add_observer([this](const network_event& e) { on_network(e); });
        message_observer_ =
            sim.add_message_observer([this](peer_id receiver, peer_id sender, const wire::message& m) {
                on_delivery(receiver, sender, m);
            });
        sim.add_checker([this](Simulator&) { poll(); });
        poll();
    }

    protocol_observer(const protocol_observer&) = delete;
    protocol_observer& operator=(const protocol_observer&) = delete;
    /// Stops observing frames (the checker it added stays: destroy it with the simulator).
    ~protocol_observer() {
        sim_.network().remove_observer(network_observer_);
        sim_.remove_message_observer(message_observer_);
    }

    /// Proposes at `id` and records the broadcast (§10: B_e).
    result<zxid> propose(peer_id id, byte_view txn) {
        poll();
        auto proposed = sim_.propose(id, txn);
        if (proposed) {
            ++proposals_;
            // The epoch the proposer leads, not the zxid's: §10.9 checks that they agree.
            const auto* p = sim_.peer_of(id);
            const epoch_t led = p && zab::testing::internals(*p).leading ? zab::testing::internals(*p).leading->epoch
                                                          : proposed.value().epoch();
            checker_.broadcast(id, led, txn_id{proposed.value(), digest(txn)});
        }
        return proposed;
    }

    std::uint64_t proposals() const noexcept { return proposals_; }

private:
    struct node_seen {
        std::uint64_t incarnation = 0;
        bool up = false;
        std::size_t applied = 0;
        std::uint64_t restores = 0;
        epochs durable;
        std::size_t log_size = 0;
        zxid log_last;
        zxid log_snapshot;
        epoch_t established_epoch = 0;
        zxid last_broadcast;  // the leader's newest proposal reported (B_e, §10)
        zxid accounted;       // the last txn delivered (or restored) to the checker
        /// The system transactions in this replica's history as the observer last saw its
        /// log, kept once compacted into a snapshot (dropped when truncated away or when a
        /// restored image replaced the history): for a machine that does not see them, what
        /// its opaque image covers (report_established).
        std::map<zxid, std::uint64_t> held_system;
    };

    static std::uint64_t digest(byte_view bytes) {
        trace_hash h;
        h.add(bytes);
        return h.value();
    }

    static std::vector<txn_id> ids(const std::vector<log_record>& records) {
        std::vector<txn_id> out;
        out.reserve(records.size());
        for (const auto& r : records) out.push_back({r.id, digest(r.txn.view())});
        return out;
    }

    /// The record `z` in `records` (in zxid order: binary search), or null.
    static const log_record* find_record(const std::vector<log_record>& records, zxid z) {
        const auto it = std::lower_bound(records.begin(), records.end(), z,
                                         [](const log_record& r, zxid id) { return r.id < id; });
        return it != records.end() && it->id == z ? &*it : nullptr;
    }

    static zxid snapshot_base(const std::optional<log_snapshot>& s) {
        return s ? s->last_included : zxid{};
    }

    /// The leader's initial history as its log holds it. A log compacted in the very step
    /// the NEWLEADER quorum formed (options::snapshot_every) holds part of that history only
    /// in its snapshot: with the recording state machine the snapshot names its txns, so
    /// they are reported (and committed, §5.5) too rather than left as an opaque prefix.
    template <typename Node>
    void report_established(const Node& n, const node_seen& seen, epoch_t epoch) {
        const auto snapshot = n.log->snapshot();
        std::vector<txn_id> history;
        zxid base = snapshot_base(snapshot);
        using machine_type = std::remove_cvref_t<decltype(*n.machine)>;
        // (A machine without system transactions records none in its image: its snapshot
        // stays an opaque prefix.)
        if constexpr (system_txn_machine<machine_type> &&
                      requires(byte_view b) { machine_type::decode_snapshot(b); }) {
            if (snapshot) {
                auto unwrapped = unwrap_snapshot(snapshot->state.view());
                const byte_view state = unwrapped ? unwrapped.value().state : byte_view{};
                if (auto held = machine_type::decode_snapshot(state)) {
                    for (const auto& a : held.value())
                        history.push_back({a.id, digest(a.txn.view())});
                    base = zxid{};
                }
            }
        }
        if constexpr (!system_txn_machine<machine_type>) {
            // An opaque image of a machine without system transactions: what the leader
            // applied itself since its machine was last restored names that part of the
            // history (its own transactions from its applied sequence, the system ones
            // known committed, in zxid order); only the restored prefix stays opaque.
            const auto& m = *n.machine;
            if (snapshot && m.restored_at() < base) {
                const zxid opaque = m.restored_at();
                // The system transactions of its history: those known committed, and those
                // it held in its log before this step compacted them (a compaction in the
                // very step it established hides them from `records()`), which its whole
                // history commits now (§5.5).
                auto system = system_txns_.upper_bound(opaque);
                auto name_system_below = [&](zxid bound) {
                    for (; system != system_txns_.end() && system->first < bound; ++system) {
                        const auto held = seen.held_system.find(system->first);
                        const bool in_history =
                            committed_system_.contains(system->first) ||
                            (held != seen.held_system.end() && held->second == system->second);
                        if (!in_history) continue;
                        history.push_back({system->first, system->second});
                        committed_system_.insert(system->first);
                    }
                };
                const auto& applied = m.applied();
                for (std::size_t i = m.restored_count(); i < applied.size(); ++i) {
                    if (applied[i].id > base) break;
                    name_system_below(applied[i].id);
                    history.push_back({applied[i].id, digest(applied[i].txn.view())});
                }
                name_system_below(zxid::from_value(base.value() + 1));
                base = opaque;
            }
        }
        for (const auto& t : ids(n.log->records())) history.push_back(t);
        checker_.established(n.id, epoch, history, base);
        // Its whole history is committed now (§5.5): so are the reconfigurations in it.
        if (snapshot)
            if (auto unwrapped = unwrap_snapshot(snapshot->state.view());
                unwrapped && unwrapped.value().config)
                committed_configs_.insert_or_assign(
                    zxid::from_value(unwrapped.value().config->version()),
                    *unwrapped.value().config);
        for (const auto& r : n.log->records()) note_committed(r);
    }

    /// The configurations a commit of `z` at `leader` must find a quorum of (§9), from what
    /// this observer saw committed and the leader's log, not from the core's bookkeeping: the
    /// last configuration committed below z (or the initial one), and every reconfiguration
    /// in the leader's log above that and up to z (proposed, not committed yet). A
    /// reconfiguration committed (by COMMIT, or in a leader's history at its establishment)
    /// joins `committed_configs_`.
    std::vector<configuration> configs_for_commit(peer_id leader, zxid z) const {
        std::vector<configuration> in_force;
        auto below = committed_configs_.lower_bound(z);
        zxid base;
        if (below == committed_configs_.begin()) {
            in_force.push_back(initial_config_);
        } else {
            --below;
            base = below->first;
            in_force.push_back(below->second);
        }
        for (const auto& r : sim_.at(leader).log->records()) {
            if (r.id <= base) continue;
            if (r.id > z) break;
            if (auto c = reconfiguration_in(r)) in_force.push_back(std::move(*c));
        }
        return in_force;
    }
    static std::optional<configuration> reconfiguration_in(const log_record& r) {
        if (!is_system_txn(r.txn.view())) return std::nullopt;
        auto request = decode_reconfig(r.txn.view());
        if (!request) return std::nullopt;
        auto c = configuration::make(request.value().members, r.id.value());
        if (!c) return std::nullopt;
        return std::move(c.value());
    }
    void note_committed(const log_record& r) {
        if (is_system_txn(r.txn.view())) committed_system_.insert(r.id);
        if (auto c = reconfiguration_in(r)) committed_configs_.insert_or_assign(r.id, std::move(*c));
    }

    /// A system transaction seen in a leader's proposals or a replica's log (one zxid names
    /// one transaction, §10.9): what a machine that does not see them applied is told from.
    void note_system(const log_record& r) {
        if (!is_system_txn(r.txn.view())) return;
        system_txns_.emplace(r.id, digest(r.txn.view()));
        system_records_.emplace(r.id, r);
    }

    /// `t` joins D_server; the leader of its epoch reports its commit too (§6.1).
    template <typename Node>
    void deliver(const Node& n, node_seen& seen, const txn_id& t) {
        // A leader applies its own epoch's proposals when it commits them (§6.1) —
        // perhaps in the very step it steps down, so the epoch it led is what counts.
        if (seen.established_epoch != 0 && t.id.epoch() == seen.established_epoch) {
            checker_.committed(t);
            report_commit_holders(n.id, t);
        }
        checker_.delivered(n.id, t);
        seen.accounted = t.id;
    }

    /// For a machine without zab::system_txn_machine: the system transactions the core
    /// applied at `n` after the last one accounted for and below `bound` (up to it with
    /// `inclusive`) are delivered there as the core applied them, in zxid order among the
    /// machine's own — the §10 checks see the same D_s whatever the machine models. The
    /// core applies only committed ones: those known committed, or of the epoch `n` led —
    /// while they are still its history: one its leadership proposed but never committed,
    /// truncated away when it rejoined as a follower, was never applied there.
    template <typename Node>
    void deliver_unseen_system(const Node& n, node_seen& seen, zxid bound, bool inclusive) {
        for (auto it = system_txns_.upper_bound(seen.accounted); it != system_txns_.end(); ++it) {
            if (inclusive ? it->first > bound : it->first >= bound) break;
            if (committed_system_.contains(it->first) ||
                (seen.established_epoch != 0 && it->first.epoch() == seen.established_epoch &&
                 in_history(n, it->first, it->second)))
                deliver(n, seen, txn_id{it->first, it->second});
        }
    }

    /// Whether `n`'s log holds the transaction `z` with `digest`, or its snapshot covers `z`.
    template <typename Node>
    static bool in_history(const Node& n, zxid z, std::uint64_t txn_digest) {
        if (const auto* r = find_record(n.log->records(), z)) return digest(r->txn.view()) == txn_digest;
        const auto& snapshot = n.log->snapshot();
        return snapshot && snapshot->last_included >= z;
    }

    /// §6.1: which voters hold `t` durably as `leader` commits it (binary search: logs are
    /// in zxid order), and whether they are a quorum of every configuration in force (§9).
    void report_commit_holders(peer_id leader, const txn_id& t) {
        const auto in_force = configs_for_commit(leader, t.id);
        std::vector<std::shared_ptr<const quorum_verifier>> verifiers;
        for (const auto& c : in_force) verifiers.push_back(make_verifier(c));
        const quorum_system quorums{std::move(verifiers)};
        peer_set holders;
        std::vector<peer_id> listed;
        for (const auto& n : sim_.nodes()) {
            if (!quorums.is_voter(n.id)) continue;
            const auto& records = n.log->durable_records();
            const auto* held = find_record(records, t.id);
            const bool in_log = held != nullptr && digest(held->txn.view()) == t.digest;
            const auto& snapshot = n.log->durable_snapshot();
            if (in_log || (snapshot && snapshot->last_included >= t.id)) {
                holders.insert(n.id);
                listed.push_back(n.id);
            }
        }
        checker_.committed_on(leader, t, listed, quorums.contains_quorum(holders));
        if (const auto* logged = find_record(sim_.at(leader).log->records(), t.id)) {
            note_committed(*logged);
        } else if (const auto held = system_records_.find(t.id);
                   held != system_records_.end() && digest(held->second.txn.view()) == t.digest) {
            note_committed(held->second);
        }
    }

    /// What changed on each replica since the last event.
    void poll() {
        for (auto& n : sim_.nodes()) {
            node_seen& seen = seen_[n.id];
            if (seen.up && (!n.peer || n.incarnation != seen.incarnation)) {
                checker_.crashed(n.id);
                seen.up = false;
            }
            if (n.peer && !seen.up) {
                seen = node_seen{};
                seen.up = true;
                seen.incarnation = n.incarnation;
                seen.durable = n.log->durable_epochs();
                checker_.restarted(n.id, ids(n.log->records()), seen.durable,
                                   snapshot_base(n.log->snapshot()));
            }
            if (!n.peer) continue;
            const auto& ctx = zab::testing::internals(*n.peer);
            if (ctx.leading && ctx.leading->established() &&
                seen.established_epoch != ctx.leading->epoch) {
                seen.established_epoch = ctx.leading->epoch;
                report_established(n, seen, ctx.leading->epoch);
            }
            // Proposals made at the leader by any path (a client's `submit`, a forwarded
            // REQUEST): each is in `outstanding` after the step that made it.
            if (ctx.leading && ctx.leading->established()) {
                for (const auto& p : ctx.leading->outstanding) {
                    if (p.record.id <= seen.last_broadcast) continue;
                    note_system(p.record);
                    seen.last_broadcast = p.record.id;
                    checker_.broadcast(n.id, ctx.leading->epoch,
                                       txn_id{p.record.id, digest(p.record.txn.view())});
                }
            }
            const auto& machine = *n.machine;
            using machine_type = std::remove_cvref_t<decltype(machine)>;
            constexpr bool sees_system = system_txn_machine<machine_type>;
            if constexpr (!sees_system) {
                const auto& records = n.log->records();
                for (auto it = std::upper_bound(records.begin(), records.end(), seen.log_last,
                                                [](zxid z, const log_record& r) { return z < r.id; });
                     it != records.end(); ++it)
                    note_system(*it);
            }
            if (machine.restores() != seen.restores) {
                // Transactions may have been applied after the restore in the same step:
                // they are delivered below, after the restored prefix.
                seen.restores = machine.restores();
                seen.held_system.clear();  // the image replaced the history
                checker_.state_restored(n.id, machine.restored_at());
                seen.applied = machine.restored_count();
                seen.accounted = machine.restored_at();
            }
            const auto& applied = machine.applied();
            for (; seen.applied < applied.size(); ++seen.applied) {
                const auto& a = applied[seen.applied];
                if constexpr (!sees_system) deliver_unseen_system(n, seen, a.id, false);
                deliver(n, seen, txn_id{a.id, digest(a.txn.view())});
            }
            if constexpr (!sees_system) deliver_unseen_system(n, seen, ctx.last_applied, true);
            if (n.log->durable_epochs() != seen.durable) {
                seen.durable = n.log->durable_epochs();
                checker_.epochs_changed(n.id, seen.durable);
            }
            const auto& records = n.log->records();
            const zxid last = records.empty() ? zxid{} : records.back().id;
            const zxid base = snapshot_base(n.log->snapshot());
            if (records.size() != seen.log_size || last != seen.log_last ||
                base != seen.log_snapshot) {
                // What is above the snapshot and not in the log was truncated away.
                for (auto it = seen.held_system.upper_bound(base); it != seen.held_system.end();) {
                    if (find_record(records, it->first) == nullptr) it = seen.held_system.erase(it);
                    else ++it;
                }
                for (const auto& r : records)
                    if (is_system_txn(r.txn.view()))
                        seen.held_system.emplace(r.id, digest(r.txn.view()));
                seen.log_size = records.size();
                seen.log_last = last;
                seen.log_snapshot = base;
                checker_.logged(n.id, ids(records), base);
            }
        }
    }

    /// Frames as they are sent: promises checked against the sender's disk at that instant.
    void on_network(const network_event& e) {
        if (e.what == network_event::kind::connect) {
            checker_.connection_reset(e.from, e.to);
            checker_.connection_reset(e.to, e.from);
            return;
        }
        if (e.what != network_event::kind::send) return;
        auto decoded = decode(e.frame.view());
        if (!decoded) return;
        const auto& n = sim_.at(e.from);
        if (!n.peer) return;
        const auto& ctx = zab::testing::internals(*n.peer);
        const auto& log = *n.log;
        const zxid base = snapshot_base(log.durable_snapshot());
        std::visit(
            [&](const auto& m) {
                using T = std::decay_t<decltype(m)>;
                if constexpr (std::is_same_v<T, wire::notification>) {
                    if (m.state == peer_state::looking && m.leader == e.from)
                        checker_.advertised(e.from, m.leader_zxid, m.leader_epoch,
                                            ids(log.durable_records()), log.durable_epochs(), base);
                } else if constexpr (std::is_same_v<T, wire::follower_info> ||
                                     std::is_same_v<T, wire::observer_info>) {
                    checker_.accepted_epoch_sent(e.from, m.accepted_epoch, log.durable_epochs());
                } else if constexpr (std::is_same_v<T, wire::leader_info>) {
                    checker_.accepted_epoch_sent(e.from, m.new_epoch, log.durable_epochs());
                } else if constexpr (std::is_same_v<T, wire::ack_epoch>) {
                    if (ctx.learning)
                        checker_.accepted_epoch_sent(e.from, ctx.learning->epoch,
                                                     log.durable_epochs());
                    if (m.current_epoch)
                        checker_.advertised(e.from, m.last_logged, *m.current_epoch,
                                            ids(log.durable_records()), log.durable_epochs(), base);
                } else if constexpr (std::is_same_v<T, wire::ack>) {
                    if (m.acked.is_epoch_marker())
                        checker_.newleader_acked(e.from, m.acked.epoch(), ids(log.durable_records()),
                                                 log.durable_epochs(), base);
                    else
                        checker_.acked(e.from, m.acked, ids(log.durable_records()), base);
                } else if constexpr (std::is_same_v<T, wire::proposal>) {
                    // A system transaction a leader proposed and committed, applied and
                    // compacted away within one step is in no log or outstanding queue
                    // when the observer next looks: its PROPOSAL frames still name it.
                    note_system(log_record{m.id, shared_bytes::copy_of(m.txn)});
                } else if constexpr (std::is_same_v<T, wire::commit>) {
                    if (!ctx.leading || !ctx.leading->established()) return;  // sync history
                    std::vector<zxid> below;
                    for (const auto& p : ctx.leading->outstanding)
                        if (p.record.id < m.id) below.push_back(p.record.id);
                    checker_.commit_sent(e.from, e.to, m.id, below);
                }
            },
            decoded.value().msg);
    }

    /// A COMMIT arriving at a follower: it must name one of its uncommitted proposals (the
    /// oldest, or a later one covering the run up to it).
    void on_delivery(peer_id receiver, peer_id sender, const wire::message& m) {
        const auto* c = std::get_if<wire::commit>(&m);
        if (c == nullptr) return;
        const auto* p = sim_.peer_of(receiver);
        // A replica whose disk failed handles nothing more (docs/design.md: terminal).
        if (p == nullptr || p->failed() || !zab::testing::internals(*p).learning ||
            zab::testing::internals(*p).learning->leader != sender)
            return;
        const auto& s = *zab::testing::internals(*p).learning;
        if (s.at != learner_state::stage::awaiting_uptodate &&
            s.at != learner_state::stage::broadcasting)
            return;  // sync history: PROPOSAL+COMMIT pairs, checked by the log's contiguity
        std::optional<zxid> oldest;
        bool named_pending = false;
        for (const auto& r : s.unapplied)
            if (r.id > s.known_committed) {
                if (!oldest) oldest = r.id;
                named_pending = named_pending || r.id == c->id;
            }
        checker_.commit_received(receiver, c->id, oldest, named_pending);
    }

    Simulator& sim_;
    invariant_checker& checker_;
    std::vector<node_seen> seen_;
    configuration initial_config_;  ///< the cluster's configuration at start
    /// Reconfigurations seen committed, by zxid (§9): the configurations in force.
    std::map<zxid, configuration> committed_configs_;
    std::map<zxid, std::uint64_t> system_txns_;  // zxid → digest
    /// The same transactions whole: a reconfiguration committed after its leader compacted
    /// it away is still known committed (report_commit_holders).
    std::map<zxid, log_record> system_records_;
    std::set<zxid> committed_system_;
    std::uint64_t proposals_ = 0;
    std::uint64_t network_observer_ = 0;
    std::uint64_t message_observer_ = 0;
};

}  // namespace zab::testing
