// zab/core/types.hpp — peer ids, peer states, roles and phases.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace zab {

/// A replica's id (ZooKeeper's `sid`, the `myid` file). Unique within a group.
using peer_id = std::uint64_t;

/// Identifies one connection to one peer. The transport numbers connections; a message or
/// event that names a connection other than the current one is stale and is dropped
/// (Zab relies on FIFO per connection, docs/protocol.md §0).
using connection_id = std::uint64_t;

/// The state a peer announces in election notifications (docs/protocol.md §0, wire values).
enum class peer_state : std::uint8_t { looking = 0, following = 1, leading = 2, observing = 3 };

/// What a peer is after an election decided: the leader, a voting follower, or an observer.
enum class role : std::uint8_t { leader, follower, observer };

/// Zab phases (docs/protocol.md §0). The leader has none of its own while learners join (§6.3):
/// each learner handler has its own phase.
enum class phase : std::uint8_t { election, discovery, synchronization, broadcast };

/// Whether a member votes (counts toward quorums) or only observes (§8).
enum class learner_type : std::uint8_t { participant = 0, observer = 1 };

constexpr std::string_view to_string(peer_state s) noexcept {
    switch (s) {
        case peer_state::looking: return "LOOKING";
        case peer_state::following: return "FOLLOWING";
        case peer_state::leading: return "LEADING";
        case peer_state::observing: return "OBSERVING";
    }
    return "?";
}

constexpr std::string_view to_string(role r) noexcept {
    switch (r) {
        case role::leader: return "leader";
        case role::follower: return "follower";
        case role::observer: return "observer";
    }
    return "?";
}

constexpr std::string_view to_string(phase p) noexcept {
    switch (p) {
        case phase::election: return "election";
        case phase::discovery: return "discovery";
        case phase::synchronization: return "synchronization";
        case phase::broadcast: return "broadcast";
    }
    return "?";
}

constexpr std::string_view to_string(learner_type t) noexcept {
    switch (t) {
        case learner_type::participant: return "participant";
        case learner_type::observer: return "observer";
    }
    return "?";
}

}  // namespace zab

template <typename E>
    requires(std::is_same_v<E, zab::peer_state> || std::is_same_v<E, zab::role> ||
             std::is_same_v<E, zab::phase> || std::is_same_v<E, zab::learner_type>)
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
    template <typename Context>
    auto format(E e, Context& ctx) const {
        return fmt::formatter<std::string_view>::format(zab::to_string(e), ctx);
    }
};
