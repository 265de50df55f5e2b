// zab/testing/invariant_checker.hpp — checks the correctness properties of docs/protocol.md §10
// against the facts a run reports.
//
// The checker knows nothing of the peer's internals. The harness (the simulator, or a test by
// hand) tells it what happened, as plain facts: a leader broadcast a transaction, a server
// applied one, a server sent an ACK while its durable log held this, and so on. Each
// observation checks at once what it can, in time proportional to the observation (the
// checker runs after every event of long sweeps). Each property is checked on its own and a
// violation names the property it breaks, so a failing seed says *what* went wrong.
//
// Transactions are known by `txn_id`: zxid plus a digest of the bytes. Two transactions with
// the same zxid and different digests are different transactions.
//
// What the harness must report, and when:
//   - `preexisting`: transactions already in some log when the run starts (they were
//     broadcast by a leader the run did not see).
//   - `established` when a leader's NEWLEADER quorum forms, *before* it broadcasts; every
//     `broadcast` (PROPOSAL) of the leader; `committed` when a transaction is committed
//     (a quorum of durable logs holds it, or a leader sent COMMIT). The whole initial history
//     of an established leader counts as committed (§5.5): the checker records that itself.
//   - `delivered` for every transaction a state machine applies, `state_restored` when a
//     state machine is replaced by a snapshot, `crashed` at a power loss (the state machine
//     restarts empty), `restarted` with what the disk recovered.
//   - Durable state when something is promised: `epochs_changed`, `accepted_epoch_sent`,
//     `advertised`, `acked`, `newleader_acked`; the log after every change: `logged`.
//   - COMMIT traffic: `commit_sent`, `connection_reset`, `commit_received`.
// A log is reported as its records in zxid order, plus (optionally) the zxid of the snapshot
// it starts from. A transaction at or below that snapshot counts as in the log when some
// server applied it: a snapshot holds applied state, and only committed transactions are
// applied (docs/design.md rule 5).
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/core/concepts.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab::testing {

/// A transaction as the checker knows it: its zxid and a digest of its bytes.
struct txn_id {
    zxid id;
    std::uint64_t digest = 0;
    auto operator<=>(const txn_id&) const = default;
};

/// The properties checked, in the order of docs/protocol.md §10 (1–13), plus docs/design.md rule 5 and
/// the commit rule of §6.1.
enum class property {
    integrity,             ///< §10.1: every delivered txn was broadcast by some leader
    total_order,           ///< §10.2: a precedes b somewhere ⇒ a precedes b wherever b is
    agreement,             ///< §10.3: no two servers delivered txns the other lacks
    local_primary_order,   ///< §10.4: B_e's order is kept by every delivery
    global_primary_order,  ///< §10.5: txns of an earlier epoch are delivered first
    primary_integrity,     ///< §10.6: a leader holds every delivered older txn before proposing
    durability,            ///< §10.7: every committed txn is in each later leader's history
    prefix_consistency,    ///< §10.8: delivered sequences are prefixes of one another
    leadership,            ///< §10.9: one leader per epoch, one txn per zxid
    epoch_monotonicity,    ///< §10.10: epochs never go down, accepted ≥ current
    advertise_durable,     ///< §10.11: everything advertised is durable, and vice versa
    commit_order,          ///< §10.12: COMMITs in order, only after earlier ones, matching
    contiguity,            ///< §10.13: no holes within an epoch
    applied_committed,     ///< §11.10, docs/design.md rule 5: nothing applied before committed
    quorum_durable,        ///< §6.1: when a leader commits, a quorum of voters hold it durably
};

constexpr std::string_view to_string(property p) noexcept {
    switch (p) {
        case property::integrity: return "integrity";
        case property::total_order: return "total_order";
        case property::agreement: return "agreement";
        case property::local_primary_order: return "local_primary_order";
        case property::global_primary_order: return "global_primary_order";
        case property::primary_integrity: return "primary_integrity";
        case property::durability: return "durability";
        case property::prefix_consistency: return "prefix_consistency";
        case property::leadership: return "leadership";
        case property::epoch_monotonicity: return "epoch_monotonicity";
        case property::advertise_durable: return "advertise_durable";
        case property::commit_order: return "commit_order";
        case property::contiguity: return "contiguity";
        case property::applied_committed: return "applied_committed";
        case property::quorum_durable: return "quorum_durable";
    }
    return "?";
}

/// Where docs/protocol.md (or docs/design.md) states the property.
constexpr std::string_view citation(property p) noexcept {
    switch (p) {
        case property::integrity: return "§10.1";
        case property::total_order: return "§10.2";
        case property::agreement: return "§10.3";
        case property::local_primary_order: return "§10.4";
        case property::global_primary_order: return "§10.5";
        case property::primary_integrity: return "§10.6";
        case property::durability: return "§10.7";
        case property::prefix_consistency: return "§10.8";
        case property::leadership: return "§10.9";
        case property::epoch_monotonicity: return "§10.10";
        case property::advertise_durable: return "§10.11";
        case property::commit_order: return "§10.12";
        case property::contiguity: return "§10.13";
        case property::applied_committed: return "§11.10";
        case property::quorum_durable: return "§6.1";
    }
    return "?";
}

/// One broken property. `observation` is the number of the observation (1-based, in call
/// order) that revealed it.
struct violation {
    property what;
    std::string detail;
    std::uint64_t observation = 0;
};

struct invariant_checker_options {
    /// Counter of the first transaction of every epoch: 1, unless the initial-counter test
    /// hook of §1 (rollover tests) moves it.
    std::uint32_t first_counter = 1;
    /// Violations kept; later ones are only counted (a broken run can break a lot).
    std::size_t max_violations = 1000;
};

class invariant_checker {
public:
    invariant_checker() = default;
    explicit invariant_checker(invariant_checker_options options) : options_{options} {}

    // --- observations: history before the run ---------------------------------------------

    /// Transactions in some log before the run starts, broadcast by leaders the run did not
    /// see. They count as broadcast (integrity, §10.1), not as committed: the first leader
    /// whose initial history holds them commits them (§5.5).
    void preexisting(const std::vector<txn_id>& txns) {
        ++observations_;
        for (const auto& t : txns) {
            const auto known = broadcast_.emplace(t.id, t.digest).first;
            expect(known->second == t.digest, property::leadership, [&] {
                return fmt::format("two different preexisting txns with zxid {}: {} and {}", t.id,
                                   show(txn_id{t.id, known->second}), show(t));
            });
            zxid& highest = last_broadcast_[t.id.epoch()];
            highest = std::max(highest, t.id);
        }
    }

    // --- observations: leaders and their proposals ------------------------------------------

    /// `leader` got its NEWLEADER quorum for `epoch` (§5.5); `initial_history` is its history
    /// then, in zxid order, after the snapshot at `snapshot_base` if its log starts with one.
    void established(peer_id leader, epoch_t epoch, const std::vector<txn_id>& initial_history,
                     zxid snapshot_base = zxid{}) {
        ++observations_;
        // §10.9 leadership: at most one leader established per epoch.
        if (const auto earlier = leaders_.find(epoch); earlier != leaders_.end()) {
            fail_check(property::leadership,
                       fmt::format("epoch {} established twice: by server {}, then by server {}",
                                   epoch, earlier->second.leader, leader));
            return;
        }
        ++checks_;
        leader_record& record = leaders_[epoch];
        record.leader = leader;
        record.history = {snapshot_base, sorted(initial_history)};
        const auto& records = record.history.records;
        expect(records.empty() || records.back().id.epoch() < epoch, property::leadership, [&] {
            return fmt::format("the initial history of leader {} of epoch {} already holds {}",
                               leader, epoch, show(records.back()));
        });

        // §10.7 durability: every committed txn (and every delivered one) of an earlier epoch
        // is in the history. "Later leader" is meant in epochs: a leader of epoch e can be
        // established after a leader of e+1 committed (its NEWLEADER quorum counted an ACK
        // sent before that voter moved on); e+1's txns are not e's to hold — and leader e
        // can commit nothing new, as every voter of e+1 refuses epoch e (§4).
        std::vector<txn_id> lost;
        for (const auto& [id, digest] : committed_) {
            if (id.epoch() >= epoch) break;  // committed_ is ordered by zxid
            ++checks_;
            if (!contains(record.history, txn_id{id, digest})) lost.push_back({id, digest});
        }
        for (const auto& t : ever_delivered_) {
            if (t.id.epoch() >= epoch) break;  // ordered by zxid
            if (is_committed(t)) continue;  // checked above
            ++checks_;
            if (!contains(record.history, t)) lost.push_back(t);
        }
        if (!lost.empty()) {
            fail(property::durability,
                 fmt::format("leader {} of epoch {} was established without {} committed or "
                             "delivered txn(s): {}",
                             leader, epoch, lost.size(), show_some(lost)));
        }

        // §10.11: NEWLEADER ACKs (and restarts) that waited for this history.
        if (const auto pending = pending_claims_.find(epoch); pending != pending_claims_.end()) {
            for (const auto& claim : pending->second)
                check_history_durable(claim.server, epoch, record.history, claim.log.view(),
                                      claim.what);
            pending_claims_.erase(pending);
        }

        // §5.5: the NEWLEADER quorum commits the whole initial history.
        for (const auto& t : records) commit(t);
    }

    /// The leader of `epoch` proposed `t` (t joins B_epoch, §10).
    void broadcast(peer_id leader, epoch_t epoch, txn_id t) {
        ++observations_;
        // §10.9 leadership: only the established leader of an epoch proposes in it, with
        // zxids of that epoch, and one zxid names one txn.
        expect(t.id.epoch() == epoch, property::leadership, [&] {
            return fmt::format("server {} broadcast {} in epoch {}", leader, show(t), epoch);
        });
        const auto established_leader = leaders_.find(epoch);
        expect(established_leader != leaders_.end() && established_leader->second.leader == leader,
               property::leadership, [&] {
                   return fmt::format(
                       "server {} broadcast {} without being the established "
                       "leader of epoch {}",
                       leader, show(t), epoch);
               });
        const auto known = broadcast_.find(t.id);
        if (known != broadcast_.end()) {
            // Reported again (a proposal re-sent to a joining learner): nothing new.
            expect(known->second == t.digest, property::leadership, [&] {
                return fmt::format("two different txns broadcast with zxid {}: {} and {}", t.id,
                                   show(txn_id{t.id, known->second}), show(t));
            });
            return;
        }

        // §10.13 contiguity of B_e: a leader proposes counters first_counter, +1, +1, ...
        const auto last = last_broadcast_.find(epoch);
        if (last == last_broadcast_.end()) {
            expect(t.id.counter() == options_.first_counter, property::contiguity, [&] {
                return fmt::format("the first txn broadcast in epoch {} is {}, not counter {}",
                                   epoch, show(t), options_.first_counter);
            });
        } else {
            expect(last->second.epoch() == t.id.epoch() &&
                       last->second.counter() + 1 == t.id.counter(),
                   property::contiguity, [&] {
                       return fmt::format("leader {} broadcast {} right after {}", leader, show(t),
                                          last->second);
                   });
        }
        zxid& highest = last_broadcast_[epoch];
        highest = std::max(highest, t.id);

        // §10.6 primary integrity: before its first proposal, the leader of e holds every txn
        // of an earlier epoch that any server delivered.
        if (established_leader != leaders_.end() && established_leader->second.leader == leader &&
            !established_leader->second.broadcast_started) {
            established_leader->second.broadcast_started = true;
            std::vector<txn_id> missing;
            for (const auto& d : ever_delivered_) {
                if (d.id.epoch() >= epoch) break;
                ++checks_;
                if (!contains(established_leader->second.history, d)) missing.push_back(d);
            }
            if (!missing.empty()) {
                fail(property::primary_integrity,
                     fmt::format("leader {} of epoch {} broadcast {} without {} delivered txn(s) "
                                 "of earlier epochs in its history: {}",
                                 leader, epoch, show(t), missing.size(), show_some(missing)));
            }
        }
        broadcast_.emplace(t.id, t.digest);
    }

    /// `t` became committed: acknowledged by a quorum of durable logs, or a leader sent COMMIT.
    void committed(txn_id t) {
        ++observations_;
        commit(t);
    }

    /// `leader` committed `t` while the voters in `holders` held it durably (in their durable
    /// log, or below their durable snapshot), which `is_quorum` says is or is not a quorum.
    /// §6.1: a commit stands on a quorum of durable copies *now* — an acknowledgement that
    /// outlived the record it vouched for (a learner re-synced by TRUNC since) is caught
    /// here, whatever path let it count.
    void committed_on(peer_id leader, txn_id t, const std::vector<peer_id>& holders,
                      bool is_quorum) {
        ++observations_;
        expect(is_quorum, property::quorum_durable, [&] {
            return fmt::format("leader {} committed {} while only {} held it durably", leader,
                               show(t), fmt::join(holders, ", "));
        });
    }

    // --- observations: state machines ------------------------------------------------------

    /// `server` applied `t` to its state machine (t joins D_server).
    void delivered(peer_id server, txn_id t) {
        ++observations_;
        server_record& s = servers_[server];

        // docs/design.md rule 5, §11.10: only committed transactions reach the state machine.
        expect(is_committed(t), property::applied_committed, [&] {
            return fmt::format("server {} applied {}, which was never committed", server, show(t));
        });

        // §10.1 integrity: some leader broadcast exactly this txn.
        const auto proposal = broadcast_.find(t.id);
        expect(proposal != broadcast_.end() && proposal->second == t.digest, property::integrity,
               [&] {
                   return fmt::format("server {} applied {}, which no leader broadcast{}", server,
                                      show(t),
                                      proposal == broadcast_.end()
                                          ? std::string{}
                                          : fmt::format(" (the proposal was {})",
                                                        show(txn_id{t.id, proposal->second})));
               });

        check_against_reference(server, s, t);    // §10.2, §10.3, §10.8
        check_local_primary_order(server, s, t);  // §10.4

        // §10.5 global primary order: within one life of the state machine, the epochs of the
        // delivered txns never go down.
        expect(t.id.epoch() >= s.highest_epoch_delivered, property::global_primary_order, [&] {
            return fmt::format("server {} applied {} of epoch {} after a txn of epoch {}", server,
                               show(t), t.id.epoch(), s.highest_epoch_delivered);
        });

        // §10.6 primary integrity, checked from the other side: a leader of a later epoch
        // that already proposed must have held t. (A txn is checked the first time anyone
        // delivers it; later leaders check it at their first proposal.)
        if (ever_delivered_.insert(t).second) {
            for (auto it = leaders_.upper_bound(t.id.epoch()); it != leaders_.end(); ++it) {
                if (!it->second.broadcast_started) continue;
                expect(contains(it->second.history, t), property::primary_integrity, [&] {
                    return fmt::format(
                        "server {} applied {}, but leader {} of epoch {} had "
                        "already proposed without it in its history",
                        server, show(t), it->second.leader, it->first);
                });
            }
        }

        s.delivered[t.id] = t.digest;
        ++s.delivered_count;
        s.highest_epoch_delivered = std::max(s.highest_epoch_delivered, t.id.epoch());
    }

    /// `server`'s state machine was replaced by a snapshot taken at `last_included` (a SNAP
    /// sync, or a restart from a snapshot): its D_s is now the agreed prefix up to there.
    void state_restored(peer_id server, zxid last_included) {
        ++observations_;
        server_record& s = servers_[server];
        reset_delivered(s);
        std::size_t i = 0;
        for (; i < reference_.size() && reference_[i].id <= last_included; ++i)
            s.delivered[reference_[i].id] = reference_[i].digest;
        s.delivered_count = i;
        if (i > 0) s.highest_epoch_delivered = reference_[i - 1].id.epoch();
        // §10.1 integrity: a snapshot holds applied state, so its last txn was applied.
        if (!last_included.is_epoch_marker()) {
            expect(i > 0 && reference_[i - 1].id == last_included, property::integrity, [&] {
                return fmt::format("server {} restored a snapshot at {}, a txn no server applied",
                                   server, last_included);
            });
        }
    }

    /// Power loss: the state machine restarts empty and D_s must be re-delivered as the
    /// same prefix (§10: "D_s must survive"). Connections to and from the server are gone.
    void crashed(peer_id server) {
        ++observations_;
        server_record& s = servers_[server];
        reset_delivered(s);
        s.log_checked = 0;
        s.history_verified.reset();
        for (auto it = last_commit_sent_.begin(); it != last_commit_sent_.end();) {
            if (it->first.first == server || it->first.second == server) {
                it = last_commit_sent_.erase(it);
            } else {
                ++it;
            }
        }
    }

    /// `server` came back with `recovered_log` (after the snapshot at `snapshot_base`, if
    /// any) and `recovered_epochs` on its disk.
    void restarted(peer_id server, const std::vector<txn_id>& recovered_log,
                   epochs recovered_epochs, zxid snapshot_base = zxid{}) {
        ++observations_;
        server_record& s = servers_[server];
        observe_epochs(server, s, recovered_epochs, "recovered at restart");  // §10.10

        // §10.11, the reverse direction: the disk gives back nothing the server never wrote.
        const zxid recovered_last = last_of(snapshot_base, recovered_log);
        if (s.highest_logged) {
            expect(recovered_last <= *s.highest_logged, property::advertise_durable, [&] {
                return fmt::format(
                    "server {} recovered a log ending at {}, beyond anything it "
                    "ever logged ({})",
                    server, recovered_last, *s.highest_logged);
            });
        }
        s.highest_logged = std::max(s.highest_logged.value_or(zxid{}), recovered_last);

        // §10.11: a durable current epoch stands for a durable history (ZOOKEEPER-4643).
        check_or_defer_history(server, recovered_epochs.current, {snapshot_base, recovered_log},
                               "recovered at restart");

        s.log_checked = 0;
        check_contiguity(server, s, recovered_log);  // §10.13
    }

    // --- observations: durable state behind what is promised -------------------------------

    /// The durable epochs of `server`, whenever they change.
    void epochs_changed(peer_id server, epochs durable) {
        ++observations_;
        observe_epochs(server, servers_[server], durable, "written");  // §10.10
    }

    /// A message went out carrying or promising `accepted_epoch`: FOLLOWERINFO (the learner's
    /// acceptedEpoch), ACKEPOCH (the promise of LEADERINFO(e), §4 step 5) or a leader's
    /// LEADERINFO(e) (ZOOKEEPER-1291); `durable` is the epochs on disk at that instant.
    void accepted_epoch_sent(peer_id server, epoch_t accepted_epoch, epochs durable) {
        ++observations_;
        server_record& s = servers_[server];
        observe_epochs(server, s, durable, "when promising an epoch");  // §10.10
        // §10.11, §5.4: acceptedEpoch is durable before it is promised.
        expect(durable.accepted >= accepted_epoch, property::advertise_durable, [&] {
            return fmt::format("server {} promised accepted epoch {} with only {} durable", server,
                               accepted_epoch, durable.accepted);
        });
    }

    /// A vote or an ACKEPOCH went out claiming `(current_epoch, last_zxid)` about the sender's
    /// own state; `durable_log` and `durable_epochs` are its durable state at that instant.
    /// Not for votes that only relay a leader's (a FOLLOWING/LEADING peer's settled vote), nor
    /// for an ACKEPOCH that carries the "no promise" sentinel (§4 step 5).
    void advertised(peer_id server, zxid last_zxid, epoch_t current_epoch,
                    const std::vector<txn_id>& durable_log, epochs durable_epochs,
                    zxid snapshot_base = zxid{}) {
        ++observations_;
        server_record& s = servers_[server];
        observe_epochs(server, s, durable_epochs, "when advertising");  // §10.10

        // §10.11: a crash now would recover everything up to last_zxid, and the epoch. A
        // claim of (e, 0) says "I hold leader e's history": that is current epoch ≥ e.
        const zxid durable_last = last_of(snapshot_base, durable_log);
        if (last_zxid.is_epoch_marker() && last_zxid.epoch() > 0) {
            expect(durable_epochs.current >= last_zxid.epoch(), property::advertise_durable, [&] {
                return fmt::format("server {} advertised {} with durable current epoch {}", server,
                                   last_zxid, durable_epochs.current);
            });
        } else {
            expect(durable_last >= last_zxid, property::advertise_durable, [&] {
                return fmt::format(
                    "server {} advertised last zxid {} with a durable log ending "
                    "at {}",
                    server, last_zxid, durable_last);
            });
        }
        expect(durable_epochs.current >= current_epoch, property::advertise_durable, [&] {
            return fmt::format("server {} advertised current epoch {} with {} durable", server,
                               current_epoch, durable_epochs.current);
        });

        // §10.11, the reverse: history is never reported shorter than what the server has
        // vouched for (ZOOKEEPER-2845: advertising the applied zxid instead of the logged).
        if (s.highest_acked && contains(log_ref{snapshot_base, durable_log}, *s.highest_acked)) {
            expect(last_zxid >= s.highest_acked->id, property::advertise_durable, [&] {
                return fmt::format(
                    "server {} advertised last zxid {} although it acknowledged "
                    "{}, still in its durable log",
                    server, last_zxid, show(*s.highest_acked));
            });
        }
        expect(current_epoch >= s.highest_newleader_acked, property::advertise_durable, [&] {
            return fmt::format(
                "server {} advertised current epoch {} after acknowledging "
                "NEWLEADER of epoch {}",
                server, current_epoch, s.highest_newleader_acked);
        });

        // §10.11: the durable current epoch stands for a durable history (ZOOKEEPER-4643).
        const auto leader = leaders_.find(durable_epochs.current);
        if (leader != leaders_.end()) {
            check_history_durable(server, durable_epochs.current, leader->second.history,
                                  {snapshot_base, durable_log}, "when advertising");
        }
    }

    /// `server` sent ACK(z) for a proposal; `durable_log` is its durable log at that instant.
    void acked(peer_id server, zxid z, const std::vector<txn_id>& durable_log,
               zxid snapshot_base = zxid{}) {
        ++observations_;
        if (z.is_epoch_marker()) return;  // ACK of NEWLEADER/UPTODATE: see newleader_acked
        server_record& s = servers_[server];
        // §10.11, §6.1: log append + fsync before the ACK.
        const auto record = find(durable_log, z);
        const bool durable = record != nullptr || z <= snapshot_base;
        expect(durable, property::advertise_durable, [&] {
            return fmt::format(
                "server {} sent ACK({}) before {} was in its durable log (ending "
                "at {})",
                server, z, z, last_of(snapshot_base, durable_log));
        });
        if (record == nullptr) return;
        const auto proposal = broadcast_.find(z);
        if (proposal != broadcast_.end()) {
            expect(proposal->second == record->digest, property::advertise_durable, [&] {
                return fmt::format(
                    "server {} sent ACK({}) but its durable log holds {}, not the "
                    "proposal {}",
                    server, z, show(*record), show(txn_id{z, proposal->second}));
            });
        }
        if (!s.highest_acked || s.highest_acked->id < z) s.highest_acked = *record;
    }

    /// `server` sent the ACK of NEWLEADER(e); its durable log and epochs at that instant.
    void newleader_acked(peer_id server, epoch_t e, const std::vector<txn_id>& durable_log,
                         epochs durable_epochs, zxid snapshot_base = zxid{}) {
        ++observations_;
        server_record& s = servers_[server];
        observe_epochs(server, s, durable_epochs, "at NEWLEADER ACK");  // §10.10
        // §10.11, §5.4: history durable, then currentEpoch = e, then the ACK.
        expect(durable_epochs.current >= e, property::advertise_durable, [&] {
            return fmt::format(
                "server {} acknowledged NEWLEADER({}) with durable current epoch "
                "{}",
                server, e, durable_epochs.current);
        });
        s.highest_newleader_acked = std::max(s.highest_newleader_acked, e);
        // Every record of the log is vouched for by this ACK.
        if (!durable_log.empty() &&
            (!s.highest_acked || s.highest_acked->id < durable_log.back().id)) {
            s.highest_acked = durable_log.back();
        }
        // The whole history of leader e is durable here (ZOOKEEPER-3911). If the leader is not
        // established yet (this ACK may be what establishes it), checked when it is.
        check_or_defer_history(server, e, {snapshot_base, durable_log},
                               "at NEWLEADER ACK (ZOOKEEPER-3911)");
    }

    /// `server`'s log after an append or a truncation (records after the snapshot at
    /// `snapshot_base`, if any), durable or not.
    void logged(peer_id server, const std::vector<txn_id>& log_now, zxid snapshot_base = zxid{}) {
        ++observations_;
        server_record& s = servers_[server];
        check_contiguity(server, s, log_now);  // §10.13
        s.highest_logged =
            std::max(s.highest_logged.value_or(zxid{}), last_of(snapshot_base, log_now));
    }

    // --- observations: COMMIT traffic (§10.12) -----------------------------------------------

    /// `leader` sent COMMIT(z) on its connection to `to` (sync or broadcast);
    /// `outstanding_below` are the zxids < z it still had outstanding (uncommitted) then.
    void commit_sent(peer_id leader, peer_id to, zxid z,
                     const std::vector<zxid>& outstanding_below) {
        ++observations_;
        // §10.12: COMMITs on one connection strictly increase...
        const auto connection = std::pair{leader, to};
        const auto previous = last_commit_sent_.find(connection);
        expect(previous == last_commit_sent_.end() || previous->second < z, property::commit_order,
               [&] {
                   return fmt::format("leader {} sent COMMIT({}) to server {} after COMMIT({})",
                                      leader, z, to, previous->second);
               });
        zxid& highest = last_commit_sent_[connection];
        highest = std::max(highest, z);
        // ...and a COMMIT leaves nothing earlier outstanding (§6.1: commit strictly in order).
        std::vector<zxid> earlier;
        for (const zxid o : outstanding_below)
            if (o < z) earlier.push_back(o);
        expect(earlier.empty(), property::commit_order, [&] {
            return fmt::format(
                "leader {} sent COMMIT({}) to server {} while {} was still "
                "outstanding",
                leader, z, to, earlier.front());
        });
    }

    /// A new connection from `leader` to `to`: COMMIT order restarts on it.
    void connection_reset(peer_id leader, peer_id to) {
        ++observations_;
        last_commit_sent_.erase({leader, to});
    }

    /// `follower` received COMMIT(z); `oldest_pending` is its oldest logged-but-uncommitted
    /// proposal then.
    void commit_received(peer_id follower, zxid z, std::optional<zxid> oldest_pending,
                         bool z_pending) {
        ++observations_;
        // §10.12, §6.1: a COMMIT names a pending proposal — the head of the pending queue, or
        // a later one when it covers a run committed together — never one already committed.
        expect(oldest_pending && z >= *oldest_pending && z_pending, property::commit_order, [&] {
            return oldest_pending
                       ? fmt::format(
                             "server {} received COMMIT({}) while its oldest pending "
                             "proposal is {}{}",
                             follower, z, *oldest_pending, z_pending ? "" : " (and it is not pending)")
                       : fmt::format("server {} received COMMIT({}) with no proposal pending",
                                     follower, z);
        });
    }

    // --- results ----------------------------------------------------------------------------

    const std::vector<violation>& violations() const noexcept { return violations_; }
    bool ok() const noexcept { return violations_.empty() && dropped_ == 0; }
    /// How many individual checks ran: a checker that checked nothing proves nothing.
    std::uint64_t checks() const noexcept { return checks_; }
    std::uint64_t observations() const noexcept { return observations_; }

    /// Whether some violation of `p` was found.
    bool fired(property p) const {
        return std::any_of(violations_.begin(), violations_.end(),
                           [p](const violation& v) { return v.what == p; });
    }

    /// The properties violated, each once, in the order of the enum.
    std::vector<property> properties_fired() const {
        std::set<property> fired_set;
        for (const auto& v : violations_) fired_set.insert(v.what);
        return {fired_set.begin(), fired_set.end()};
    }

    /// One violation per line: `#observation property (§N): detail`.
    std::string report() const {
        std::string out;
        for (const auto& v : violations_) {
            out += fmt::format("#{} {} ({}): {}\n", v.observation, to_string(v.what),
                               citation(v.what), v.detail);
        }
        if (dropped_ > 0) out += fmt::format("... and {} more violation(s)\n", dropped_);
        return out;
    }

private:
    /// A log as reported: the snapshot it starts from (zxid{} if none) and its records.
    struct log_ref {
        zxid snapshot_base;
        const std::vector<txn_id>& records;
    };
    struct log_copy {
        zxid snapshot_base;
        std::vector<txn_id> records;  // in zxid order
        log_ref view() const { return {snapshot_base, records}; }
    };

    struct leader_record {
        peer_id leader = 0;
        log_copy history;
        bool broadcast_started = false;
    };

    /// A durable log that vouches for a history not yet known (its leader not established).
    struct history_claim {
        peer_id server;
        log_copy log;
        std::string what;
    };

    struct verified_history {
        epoch_t epoch = 0;
        zxid snapshot_base;
        std::size_t size = 0;
        txn_id last;
        bool operator==(const verified_history&) const = default;
    };

    struct server_record {
        // D_s of the current life of the state machine, as zxid -> digest, and its length.
        std::map<zxid, std::uint64_t> delivered;
        std::size_t delivered_count = 0;
        bool follows_reference = true;  // D_s is a prefix of the reference so far
        epoch_t highest_epoch_delivered = 0;

        std::optional<epochs> durable_epochs;
        std::optional<zxid> highest_logged;   // highest zxid ever in its log (or snapshot)
        std::optional<txn_id> highest_acked;  // highest txn it vouched for with an ACK
        epoch_t highest_newleader_acked = 0;

        // Contiguity is checked incrementally: the first `log_checked` records, ending with
        // `log_checked_last`, are known good.
        std::size_t log_checked = 0;
        txn_id log_checked_last{};

        // The last durable log found to hold a leader's history (see check_history_durable).
        std::optional<verified_history> history_verified;
    };

    // --- helpers ------------------------------------------------------------------------------

    template <typename Detail>
    void expect(bool holds, property p, Detail&& detail) {
        ++checks_;
        if (!holds) fail(p, detail());
    }

    /// A check that ran and failed.
    void fail_check(property p, std::string detail) {
        ++checks_;
        fail(p, std::move(detail));
    }

    void fail(property p, std::string detail) {
        if (!reported_.emplace(p, detail).second) return;  // the same fact, seen again
        if (violations_.size() >= options_.max_violations) {
            ++dropped_;
            return;
        }
        violations_.push_back({p, std::move(detail), observations_});
    }

    static std::string show(const txn_id& t) { return fmt::format("{}#{:x}", t.id, t.digest); }

    static std::string show_some(const std::vector<txn_id>& txns) {
        std::string out;
        const std::size_t shown = std::min<std::size_t>(txns.size(), 4);
        for (std::size_t i = 0; i < shown; ++i) out += (i == 0 ? "" : ", ") + show(txns[i]);
        if (txns.size() > shown) out += fmt::format(", ... ({} more)", txns.size() - shown);
        return out;
    }

    static std::vector<txn_id> sorted(std::vector<txn_id> txns) {
        std::sort(txns.begin(), txns.end());
        return txns;
    }

    static zxid last_of(zxid snapshot_base, const std::vector<txn_id>& records) {
        return records.empty() ? snapshot_base : std::max(snapshot_base, records.back().id);
    }

    /// The record with zxid `z` in a log in zxid order, or nullptr.
    static const txn_id* find(const std::vector<txn_id>& records, zxid z) {
        const auto it = std::lower_bound(records.begin(), records.end(), z,
                                         [](const txn_id& t, zxid id) { return t.id < id; });
        return it != records.end() && it->id == z ? &*it : nullptr;
    }

    /// Whether the log holds `t`: as a record, or inside its snapshot (applied by someone).
    bool contains(log_ref log, const txn_id& t) const {
        if (const txn_id* record = find(log.records, t.id)) return *record == t;
        return t.id <= log.snapshot_base && ever_delivered_.contains(t);
    }
    bool contains(const log_copy& log, const txn_id& t) const { return contains(log.view(), t); }

    bool is_committed(const txn_id& t) const {
        const auto it = committed_.find(t.id);
        return it != committed_.end() && it->second == t.digest;
    }

    void commit(const txn_id& t) {
        const auto known = committed_.emplace(t.id, t.digest).first;
        // §10.3 agreement: one zxid, one decision.
        expect(known->second == t.digest, property::agreement, [&] {
            return fmt::format("two different txns committed with zxid {}: {} and {}", t.id,
                               show(txn_id{t.id, known->second}), show(t));
        });
    }

    static void reset_delivered(server_record& s) {
        s.delivered.clear();
        s.delivered_count = 0;
        s.follows_reference = true;
        s.highest_epoch_delivered = 0;
    }

    /// §10.2 total order, §10.3 agreement, §10.8 prefix consistency. Every delivered sequence
    /// must be a prefix of one reference sequence (the longest delivered so far), so the
    /// delivery at position p must equal reference[p]. A mismatch is a prefix violation; it
    /// is a total-order violation when the txn is known at another position (reordered,
    /// skipped or repeated), an agreement violation when the sequences diverge (a txn nobody
    /// else delivered there). After its first mismatch a server is no longer compared, until
    /// its state machine restarts.
    void check_against_reference(peer_id server, server_record& s, const txn_id& t) {
        if (!s.follows_reference) return;
        const std::size_t p = s.delivered_count;
        const bool mismatch = p < reference_.size() && reference_[p] != t;
        expect(!mismatch, property::prefix_consistency, [&] {
            return fmt::format(
                "server {} applied {} as its txn #{}, where another server "
                "applied {}",
                server, show(t), p + 1, show(reference_[p]));
        });
        bool reordered = s.delivered.contains(t.id);  // applied twice in one life
        bool diverged = false;
        std::optional<std::size_t> known;  // t's zxid in the reference
        if (const auto it = reference_position_.find(t.id); it != reference_position_.end())
            known = it->second;
        if (known && reference_[*known] == t) {
            reordered = reordered || *known != p;
        } else {
            // Another server applied another txn with this zxid, or this one where t is.
            diverged = known.has_value() || mismatch;
        }
        expect(!reordered, property::total_order, [&] {
            if (known && *known > p) {
                return fmt::format(
                    "server {} applied {} as its txn #{} without {}, which "
                    "precedes it on another server",
                    server, show(t), p + 1, show(reference_[p]));
            }
            return fmt::format("server {} applied {} again, as its txn #{}", server, show(t),
                               p + 1);
        });
        expect(!diverged, property::agreement, [&] {
            if (known && reference_[*known] != t) {
                return fmt::format(
                    "server {} applied {}, another server applied {} with the "
                    "same zxid",
                    server, show(t), show(reference_[*known]));
            }
            return fmt::format(
                "server {} applied {} as its txn #{}, another server applied {} "
                "there: each lacks the other's",
                server, show(t), p + 1, show(reference_[p]));
        });
        if (mismatch || reordered || diverged) {
            s.follows_reference = false;
        } else if (p == reference_.size()) {
            reference_position_.emplace(t.id, reference_.size());
            reference_.push_back(t);
        }
    }

    /// §10.4 local primary order: t's predecessor in B_e (the txn its leader broadcast just
    /// before it) was delivered before t, in this life of the state machine.
    void check_local_primary_order(peer_id server, const server_record& s, const txn_id& t) {
        const auto it = broadcast_.find(t.id);
        if (it == broadcast_.end() || it->second != t.digest || it == broadcast_.begin()) return;
        const auto before = std::prev(it);
        if (before->first.epoch() != t.id.epoch()) return;  // t is the first of B_e
        const auto d = s.delivered.find(before->first);
        expect(d != s.delivered.end() && d->second == before->second, property::local_primary_order,
               [&] {
                   return fmt::format(
                       "server {} applied {} without {}, which the leader of "
                       "epoch {} broadcast before it",
                       server, show(t), show(txn_id{before->first, before->second}), t.id.epoch());
               });
    }

    /// §10.10 epoch monotonicity: every durable epochs seen for a server, in order.
    void observe_epochs(peer_id server, server_record& s, epochs e, std::string_view when) {
        expect(e.accepted >= e.current, property::epoch_monotonicity, [&] {
            return fmt::format("server {} has accepted epoch {} below current epoch {} ({})",
                               server, e.accepted, e.current, when);
        });
        if (s.durable_epochs) {
            const epochs before = *s.durable_epochs;
            expect(e.accepted >= before.accepted && e.current >= before.current,
                   property::epoch_monotonicity, [&] {
                       return fmt::format(
                           "server {}'s durable epochs went from (accepted {}, "
                           "current {}) down to (accepted {}, current {}) ({})",
                           server, before.accepted, before.current, e.accepted, e.current, when);
                   });
        }
        s.durable_epochs = e;
    }

    /// §10.11: a server whose durable state stands for epoch e (current epoch e, or its ACK
    /// of NEWLEADER(e)) durably holds leader e's initial history. Deferred when that leader
    /// is not established yet.
    void check_or_defer_history(peer_id server, epoch_t e, log_ref log, std::string_view what) {
        if (e == 0) return;
        const auto leader = leaders_.find(e);
        if (leader != leaders_.end()) {
            check_history_durable(server, e, leader->second.history, log, what);
        } else {
            pending_claims_[e].push_back(
                {server, log_copy{log.snapshot_base, log.records}, std::string{what}});
        }
    }

    void check_history_durable(peer_id server, epoch_t e, const log_copy& history, log_ref log,
                               std::string_view what) {
        server_record& s = servers_[server];
        const verified_history key{e, log.snapshot_base, log.records.size(),
                                   log.records.empty() ? txn_id{} : log.records.back()};
        if (s.history_verified == key) return;  // the same durable state, already checked
        std::vector<txn_id> missing;
        for (const auto& t : history.records) {
            ++checks_;
            if (!contains(log, t)) missing.push_back(t);
        }
        if (missing.empty()) {
            s.history_verified = key;
            return;
        }
        fail(property::advertise_durable,
             fmt::format("server {} stands for epoch {} ({}) but its durable log lacks {} txn(s) "
                         "of leader {}'s history: {}",
                         server, e, what, missing.size(), leaders_.at(e).leader,
                         show_some(missing)));
    }

    /// §10.13 contiguity: ascending zxids; within an epoch, counters +1; a new epoch starts at
    /// `first_counter`. The first record (the log's start, or the first after its snapshot)
    /// may be anything. Only the part after what was already checked is looked at.
    void check_contiguity(peer_id server, server_record& s, const std::vector<txn_id>& log) {
        std::size_t from = 1;
        if (s.log_checked > 0 && log.size() >= s.log_checked &&
            log[s.log_checked - 1] == s.log_checked_last) {
            from = s.log_checked;
        }
        for (std::size_t i = from; i < log.size(); ++i) {
            const zxid a = log[i - 1].id;
            const zxid b = log[i].id;
            const bool good = a.epoch() == b.epoch()
                                  ? a.counter() + 1 == b.counter()
                                  : a.epoch() < b.epoch() && b.counter() == options_.first_counter;
            expect(good, property::contiguity, [&] {
                return fmt::format("server {}'s log has {} right after {}", server, b, a);
            });
        }
        s.log_checked = log.size();
        if (!log.empty()) s.log_checked_last = log.back();
    }

    invariant_checker_options options_;

    std::map<zxid, std::uint64_t> broadcast_;  // every B_e, by zxid (one leader per epoch)
    std::map<epoch_t, zxid> last_broadcast_;   // per epoch, the highest zxid broadcast
    std::map<epoch_t, leader_record> leaders_;
    std::map<zxid, std::uint64_t> committed_;
    std::set<txn_id> ever_delivered_;

    // The reference delivered sequence: every D_s must be a prefix of it (§10.8).
    std::vector<txn_id> reference_;
    std::map<zxid, std::size_t> reference_position_;

    std::map<peer_id, server_record> servers_;
    std::map<std::pair<peer_id, peer_id>, zxid> last_commit_sent_;  // (leader, to) -> zxid
    std::map<epoch_t, std::vector<history_claim>> pending_claims_;

    std::vector<violation> violations_;
    std::set<std::pair<property, std::string>> reported_;
    std::uint64_t dropped_ = 0;
    std::uint64_t checks_ = 0;
    std::uint64_t observations_ = 0;
};

}  // namespace zab::testing

/// Formats a property by name.
template <>
struct fmt::formatter<zab::testing::property> : fmt::formatter<std::string_view> {
    template <typename Context>
    auto format(zab::testing::property p, Context& ctx) const {
        return fmt::formatter<std::string_view>::format(zab::testing::to_string(p), ctx);
    }
};
