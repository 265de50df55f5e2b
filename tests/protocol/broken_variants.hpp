// tests/protocol/broken_variants.hpp — deliberately broken variants of zab's phase policies.
//
// Each derives from one of zab's policies and hides one member (the peer calls policies by
// their static type), reintroducing one bug: a §10 property's violation, or a historic defect
// whose fix it reverts. Shared by broken_variants_test.cpp (the seeded sweep must catch each)
// and the exhaustive explorer (tests/explorer/explorer_main.cpp: it must find each within a
// small bound).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "zab/core/peer.hpp"

namespace zab::test::broken {

using namespace zab;

/// Integrity: a follower that logs (and so applies) other bytes than the leader proposed.
struct mangling_broadcast : zab_broadcast {
    using zab_broadcast::zab_broadcast;
    void learner_on_proposal(const log_record& record) {
        std::vector<std::byte> mangled(record.txn.view().begin(), record.txn.view().end());
        mangled.push_back(std::byte{'!'});
        zab_broadcast::learner_on_proposal(
            log_record{record.id, shared_bytes::copy_of(byte_view{mangled.data(), mangled.size()})});
    }
};

/// Total order / local primary order / prefix consistency: a follower that now and then
/// marks a committed txn applied without applying it.
struct skipping_broadcast : zab_broadcast {
    using zab_broadcast::zab_broadcast;
    std::uint64_t seen = 0;
    void learner_on_commit(const wire::commit& m) {
        auto& s = *ctx_.learning;
        if (s.at == learner_state::stage::broadcasting && ++seen % 7 == 3 &&
            !s.unapplied.empty() && s.unapplied.front().id == m.id && ctx_.last_applied < m.id) {
            ctx_.last_applied = m.id;
            s.unapplied.pop_front();
            s.known_committed = std::max(s.known_committed, m.id);
            return;
        }
        zab_broadcast::learner_on_commit(m);
    }
};

/// Agreement: a learner that ignores TRUNC and keeps its uncommitted suffix.
struct truncless_synchronization : zab_synchronization {
    using zab_synchronization::zab_synchronization;
    void learner_on_trunc(const zab::wire::trunc& m) {
        if (!begin_sync(sync_summary::method::trunc)) return;
        auto& s = *ctx_.learning;
        s.known_committed = std::max(s.known_committed, m.truncate_to);
    }
};

/// Advertise ≤ durable (ZOOKEEPER-4643): currentEpoch written before the history is durable.
struct epoch_first_synchronization : zab_synchronization {
    using zab_synchronization::zab_synchronization;
    void learner_on_new_leader(const wire::new_leader& m) {
        zab_synchronization::learner_on_new_leader(m);
        if (ctx_.learning && ctx_.learning->at == learner_state::stage::awaiting_uptodate)
            ctx_.write_epochs({ctx_.learning->epoch, ctx_.learning->epoch});
    }
};

/// Advertise ≤ durable (ZOOKEEPER-3911): NEWLEADER acknowledged before the history and
/// currentEpoch are durable.
struct early_ack_synchronization : zab_synchronization {
    using zab_synchronization::zab_synchronization;
    void learner_on_new_leader(const wire::new_leader& m) {
        zab_synchronization::learner_on_new_leader(m);
        if (ctx_.learning && ctx_.learning->at == learner_state::stage::awaiting_uptodate)
            ctx_.send(ctx_.learning->leader, wire::ack{zxid{ctx_.learning->epoch, 0}});
    }
};

/// Epoch monotonicity: a learner that writes currentEpoch with a stale acceptedEpoch.
struct stale_accepted_synchronization : zab_synchronization {
    using zab_synchronization::zab_synchronization;
    void learner_on_new_leader(const wire::new_leader& m) {
        zab_synchronization::learner_on_new_leader(m);
        if (ctx_.learning && ctx_.learning->at == learner_state::stage::awaiting_uptodate)
            ctx_.write_epochs({ctx_.learning->epoch - 1, ctx_.learning->epoch});
    }
};

/// Commit order: the leader also commits a later proposal as soon as it has its quorum,
/// before the earlier ones.
struct eager_commit_broadcast : zab_broadcast {
    using zab_broadcast::zab_broadcast;
    std::set<zxid> sent_early;
    void leader_advance() {
        auto& l = *ctx_.leading;
        for (std::size_t i = 1; i < l.outstanding.size(); ++i) {
            const auto& p = l.outstanding[i];
            if (p.record.id > quorum_acked(l) || !sent_early.insert(p.record.id).second)
                continue;
            for (const auto& link : l.links)
                if (link.forwarding && link.type == learner_type::participant)
                    ctx_.send(link.id, wire::commit{p.record.id});
        }
        zab_broadcast::leader_advance();
    }
};

/// Applied ⇒ committed: a follower that applies a proposal as soon as it arrives.
struct eager_apply_broadcast : zab_broadcast {
    using zab_broadcast::zab_broadcast;
    void learner_on_proposal(const log_record& record) {
        zab_broadcast::learner_on_proposal(record);
        auto& s = *ctx_.learning;
        if (s.at != learner_state::stage::broadcasting || s.unapplied.empty()) return;
        s.known_committed = std::max(s.known_committed, s.unapplied.back().id);
        ctx_.apply_known_committed();
    }
};

/// Contiguity: the leader skips a counter now and then.
struct gapped_broadcast : zab_broadcast {
    using zab_broadcast::zab_broadcast;
    std::uint64_t proposed = 0;
    result<zxid> propose(byte_view txn) {
        if (ctx_.leading && ctx_.leading->established() && ++proposed % 5 == 0)
            ctx_.leading->last_proposed = ctx_.leading->last_proposed.next();
        return zab_broadcast::propose(txn);
    }
};

/// ZOOKEEPER-4646: currentEpoch and the NEWLEADER ACK once the epoch is durable, without
/// waiting for the synced history to be durable.
struct ack_before_history_synchronization : zab_synchronization {
    using zab_synchronization::zab_synchronization;
    void learner_on_new_leader(const wire::new_leader& m) {
        zab_synchronization::learner_on_new_leader(m);
        auto& s = *ctx_.learning;
        if (s.at != learner_state::stage::awaiting_uptodate || !s.newleader_pending) return;
        s.newleader_pending = false;
        s.newleader_epoch_op = ctx_.write_epochs({s.epoch, s.epoch});
        ctx_.send_after(s.leader, wire::ack{zxid{s.epoch, 0}}, 0, s.newleader_epoch_op);
    }
};

/// ZOOKEEPER-1277: a leader that goes on past the last counter. The 64-bit increment carries
/// the counter into the epoch: epoch e's leader proposes zxids of epoch e+1 — the very zxids
/// the next epoch's leader will assign (from `initial_counter` on, under the test hook).
struct rollover_broadcast : zab_broadcast {
    using zab_broadcast::zab_broadcast;
    result<zxid> propose(byte_view txn, peer_id origin = 0) {
        if (ctx_.leading && ctx_.leading->established() &&
            ctx_.leading->last_proposed.counter_exhausted())
            ctx_.leading->last_proposed =
                zxid{ctx_.leading->last_proposed.epoch() + 1, ctx_.opts().test_only.initial_counter};
        return zab_broadcast::propose(txn, origin);
    }
};

template <typename Broadcast = zab_broadcast, typename Synchronization = zab_synchronization,
          typename Discovery = zab_discovery>
using variant_policies = policies<fast_leader_election, Discovery, Synchronization, Broadcast>;

/// The stale acknowledgement (issue 15 defect 1, the `forget_learner` fix reverted): the
/// leader remembers what each follower acknowledged in this epoch across the end of its link,
/// and counts it again on the follower's next link — even when that link's sync TRUNCated
/// the proposal away. With the leader's own copy it commits a write only it holds durably.
struct stale_ack_broadcast : zab_broadcast {
    using zab_broadcast::zab_broadcast;
    std::map<peer_id, zxid> remembered;  // per follower, the highest ACK of this epoch
    epoch_t remembered_epoch = 0;
    void leader_on_ack(learner_link& link, const wire::ack& m) {
        zab_broadcast::leader_on_ack(link, m);
        if (!ctx_.leading || ctx_.leading->find_link(link.id) == nullptr) return;
        if (remembered_epoch != ctx_.leading->epoch) remembered.clear();
        remembered_epoch = ctx_.leading->epoch;
        zxid& r = remembered[link.id];
        r = std::max(r, link.last_acked);
    }
    void leader_advance() {
        auto& l = *ctx_.leading;
        if (remembered_epoch == l.epoch)
            for (auto& link : l.links)
                if (const auto it = remembered.find(link.id);
                    it != remembered.end() && it->second > link.last_acked) {
                    link.last_acked = it->second;
                    l.progress_moved = true;
                }
        zab_broadcast::leader_advance();
    }
};

/// A transfer's target synced after the last write never counts as caught up (issue 34
/// defect 8, its fix reverted): the leader forgets what the learner's sync covered once its
/// ACK of NEWLEADER is in, so only an ACK of the last proposal on the new link — which never
/// comes when nothing was proposed since — lets the hand-over go. Since 19ece75 a learner
/// also ACKs its synced history's last proposal with its ACK of NEWLEADER, even one its log
/// held before the sync (for the leader's view of its lag), which covers the defect too: with
/// that ACK the variant behaved exactly as the core (the explorer reached the same states).
/// So the learner here is as before 19ece75: it ACKs at NEWLEADER only proposals the sync
/// brought it (`unapplied`), not a history it already held (a restarted target's, by DIFF).
struct unsynced_transfer_synchronization : zab_synchronization {
    using zab_synchronization::zab_synchronization;
    void leader_on_newleader_ack(learner_link& link, const wire::ack& m) {
        zab_synchronization::leader_on_newleader_ack(link, m);
        link.synced_through = zxid{};
    }
    /// zab_synchronization::learner_advance as it was before 19ece75.
    void learner_advance() {
        auto& learner = *ctx_.learning;
        if (!learner.newleader_pending || !ctx_.log_durable(learner.newleader_log_op)) return;
        learner.newleader_pending = false;
        learner.newleader_epoch_op = ctx_.write_epochs({learner.epoch, learner.epoch});
        ctx_.send_after(learner.leader, wire::ack{zxid{learner.epoch, 0}}, 0, learner.newleader_epoch_op);
        if (ctx_.self_type() == learner_type::participant && !learner.unapplied.empty() &&
            learner.unapplied.back().id.epoch() == learner.epoch)
            ctx_.send_after(learner.leader, wire::ack{learner.unapplied.back().id}, ctx_.last_log_op(),
                            learner.newleader_epoch_op);
    }
};

/// ZOOKEEPER-3109 (its fix reverted): an unestablished leader that a quorum no longer votes
/// for keeps waiting for the whole init_limit instead of giving up at once.
struct patient_discovery : zab_discovery {
    using zab_discovery::zab_discovery;
    void leader_on_vote(peer_id, const wire::notification&) {}
};

}  // namespace zab::test::broken
