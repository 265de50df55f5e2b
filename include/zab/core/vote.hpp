// zab/core/vote.hpp — an FLE vote, the vote order, and when two votes agree (docs/protocol.md §3).
#pragma once

#include <cstdint>
#include <tuple>

#include <fmt/format.h>

#include "zab/core/messages.hpp"
#include "zab/core/types.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// A vote: the proposed leader and the history it claims, the election round it was cast in,
/// and the state of the peer that holds it. `leader == 0` is "no candidate" (an observer's
/// own vote, ZooKeeper's Long.MIN_VALUE): it never wins.
struct vote {
    peer_id leader = 0;
    zxid leader_zxid;
    epoch_t leader_epoch = 0;
    std::uint64_t round = 0;
    peer_state state = peer_state::looking;

    friend bool operator==(const vote&, const vote&) = default;

    static vote from(const wire::notification& n) {
        return {n.leader, n.leader_zxid, n.leader_epoch, n.round, n.state};
    }
    wire::notification to_notification(peer_state sender_state) const {
        return {sender_state, leader, leader_zxid, round, leader_epoch};
    }
};

/// FLE's totalOrderPredicate (§3.3): does `candidate` beat `current`? Compares
/// (epoch, zxid, sid) lexicographically — epoch first, so an inflated current epoch beats a
/// longer log (which is why current_epoch is written only after the history it stands for,
/// ZOOKEEPER-4643). A candidate that cannot vote (`can_win == false`: an observer, weight 0,
/// or "no candidate") never wins. Strict total order on voters (ZOOKEEPER-1419).
inline bool vote_beats(const vote& candidate, bool can_win, const vote& current) noexcept {
    if (!can_win || candidate.leader == 0) return false;
    return std::tie(candidate.leader_epoch, candidate.leader_zxid, candidate.leader) >
           std::tie(current.leader_epoch, current.leader_zxid, current.leader);
}

/// ZooKeeper's Vote.equals, used to count agreeing votes (§3.4 steps 4 and 6): while either
/// side is LOOKING, votes agree on (leader, zxid, round, epoch); between settled votes
/// (FOLLOWING/LEADING) only (leader, epoch) matter, because followers of one leader report
/// different zxids and rounds (ZOOKEEPER-1805/1818).
inline bool votes_agree(const vote& a, const vote& b) noexcept {
    if (a.state == peer_state::looking || b.state == peer_state::looking)
        return a.leader == b.leader && a.leader_zxid == b.leader_zxid && a.round == b.round &&
               a.leader_epoch == b.leader_epoch;
    return a.leader == b.leader && a.leader_epoch == b.leader_epoch;
}

}  // namespace zab

/// Formats as the seeds do: `<leader, epoch, zxid>` plus round and state.
template <>
struct fmt::formatter<zab::vote> {
    constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
    template <typename Context>
    auto format(const zab::vote& v, Context& ctx) const {
        return fmt::format_to(ctx.out(), "<{}, {}, {}> round {} {}", v.leader, v.leader_epoch,
                              v.leader_zxid, v.round, v.state);
    }
};
