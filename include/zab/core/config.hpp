// zab/core/config.hpp — the members of a group: who votes, who observes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/types.hpp"

namespace zab {

/// One member of the group.
struct member {
    peer_id id = 0;
    learner_type type = learner_type::participant;
    /// Hierarchical quorums (ZooKeeper's QuorumHierarchical, docs/protocol.md §9): the group
    /// this voter belongs to, 0 for none. When any voter names a group, every voter must,
    /// and a quorum is a majority of the groups, each by a majority of its weight.
    std::uint32_t group = 0;
    /// The voter's weight (1 by default; 0 makes a voter that never counts). When weights
    /// differ and there are no groups, a quorum is more than half the total weight.
    std::uint32_t weight = 1;
    /// An observer that joins as a follower without a vote — it is synced and acknowledges
    /// proposals — and that the leader makes a voter by a reconfiguration of its own once it
    /// is caught up (options::promotion_max_lag): etcd's learner promotion (§9).
    bool promote = false;
    /// Where the other replicas reach this one ("host:port" of its peer port), carried by
    /// reconfigurations so that replicas learn the addresses of members added later (§9).
    /// Opaque to the core, which only bounds it (max_address_size, printable ASCII); empty:
    /// the driver's own table (zab::asio::tcp_transport_options::peers) says.
    std::string address = {};
    /// Where clients reach this replica ("host:port" of the application's client port),
    /// carried like `address` so that a replica refusing a write (`not_leader`) can name the
    /// leader's client address, also for members added later. Opaque to the core, bounded
    /// the same way; empty: not known (zab::asio::reply::leader_client_address stays empty).
    std::string client_address = {};
    friend bool operator==(const member&, const member&) = default;
};

/// The longest `member::address` or `member::client_address`.
inline constexpr std::size_t max_address_size = 255;

/// Why `text`, given as member `id`'s `what` ("address", "client address"), is no valid
/// member address; empty when it is one (at most max_address_size printable ASCII bytes,
/// no space).
inline std::string member_address_problem(peer_id id, std::string_view what,
                                          std::string_view text) {
    if (text.size() > max_address_size)
        return fmt::format("peer {}'s {} has {} bytes (at most {})", id, what, text.size(),
                           max_address_size);
    if (std::any_of(text.begin(), text.end(), [](char c) { return c <= ' ' || c > '~'; }))
        return fmt::format("peer {}'s {} has a space or a character that is not printable ASCII",
                           id, what);
    return {};
}

/// The group's membership. `version` is 0 for a static configuration; reconfiguration
/// (docs/protocol.md §9) will number later ones. Members are kept sorted by id.
class configuration {
public:
    configuration() = default;

    /// Builds a configuration; `errc::invalid_options` (reason logged) for duplicate ids,
    /// id 0 (reserved: it stands for "no candidate" in votes), or no voter at all.
    static result<configuration> make(std::vector<member> members, std::uint64_t version = 0) {
        std::sort(members.begin(), members.end(),
                  [](const member& a, const member& b) { return a.id < b.id; });
        std::string problem;
        if (members.empty() || std::none_of(members.begin(), members.end(), [](const member& m) {
                return m.type == learner_type::participant;
            }))
            problem = "a configuration needs at least one voting member";
        bool grouped = false, ungrouped = false;
        for (std::size_t i = 0; i < members.size() && problem.empty(); ++i) {
            const member& m = members[i];
            if (m.id == 0) problem = "peer id 0 is reserved";
            if (i > 0 && m.id == members[i - 1].id)
                problem = fmt::format("peer id {} appears twice", m.id);
            if (m.type == learner_type::participant) (m.group != 0 ? grouped : ungrouped) = true;
            if (m.promote && m.type != learner_type::observer)
                problem = fmt::format("peer {} is to be promoted but is a voter already", m.id);
            if (m.weight > max_weight)
                problem = fmt::format("peer {} has weight {} (at most {})", m.id, m.weight, max_weight);
            if (auto bad = member_address_problem(m.id, "address", m.address); !bad.empty())
                problem = std::move(bad);
            if (auto bad = member_address_problem(m.id, "client address", m.client_address);
                !bad.empty())
                problem = std::move(bad);
        }
        if (problem.empty() && grouped && ungrouped)
            problem = "some voters name a group and some do not: name one for every voter";
        if (problem.empty()) {
            std::uint64_t total = 0;
            for (const member& m : members)
                if (m.type == learner_type::participant) total += m.weight;
            if (total == 0) problem = "the voters' weights add up to 0: nothing could be a quorum";
        }
        if (!problem.empty()) {
            log(log_level::error, "invalid configuration: {}", problem);
            return make_error_code(errc::invalid_options);
        }
        configuration c;
        c.members_ = std::move(members);
        c.version_ = version;
        return c;
    }

    /// The largest weight a voter may have (keeps sums far from overflow).
    static constexpr std::uint32_t max_weight = 1u << 16;

    /// Voters `1..voters`, then observers `voters+1..voters+observers`.
    static result<configuration> numbered(std::size_t voters, std::size_t observers = 0) {
        std::vector<member> members;
        for (std::size_t i = 1; i <= voters + observers; ++i)
            members.push_back({i, i <= voters ? learner_type::participant : learner_type::observer});
        return make(std::move(members));
    }

    const std::vector<member>& members() const noexcept { return members_; }
    std::uint64_t version() const noexcept { return version_; }

    std::optional<learner_type> type_of(peer_id id) const noexcept {
        const member* m = find(id);
        if (m == nullptr) return std::nullopt;
        return m->type;
    }
    /// Member `id`, or nullptr.
    const member* find(peer_id id) const noexcept {
        auto it = std::lower_bound(members_.begin(), members_.end(), id,
                                   [](const member& m, peer_id i) { return m.id < i; });
        if (it == members_.end() || it->id != id) return nullptr;
        return &*it;
    }
    /// Whether quorums are counted by groups (hierarchical) or weights rather than heads.
    bool hierarchical() const noexcept {
        return std::any_of(members_.begin(), members_.end(), [](const member& m) {
            return m.type == learner_type::participant && m.group != 0;
        });
    }
    bool weighted() const noexcept {
        return std::any_of(members_.begin(), members_.end(), [](const member& m) {
            return m.type == learner_type::participant && m.weight != 1;
        });
    }
    bool contains(peer_id id) const noexcept { return type_of(id).has_value(); }
    bool is_voter(peer_id id) const noexcept {
        return type_of(id) == learner_type::participant;
    }

    /// A fingerprint of the member list (ids and types, not the version): replicas started
    /// with the same members agree on it, replicas started with different ones almost surely
    /// do not. The TCP handshake compares it (net/handshake.hpp). FNV-1a, 64 bits.
    std::uint64_t digest() const noexcept { return membership_digest(members_); }

    /// `digest()` of a member list sorted by id (what `make` keeps).
    static std::uint64_t membership_digest(const std::vector<member>& sorted) noexcept {
        std::uint64_t hash = 0xcbf29ce484222325u;
        const auto mix = [&hash](std::uint64_t value, int bytes) {
            for (int i = 0; i < bytes; ++i) {
                hash ^= (value >> (8 * i)) & 0xffu;
                hash *= 0x100000001b3u;
            }
        };
        for (const member& m : sorted) {
            mix(m.id, 8);
            mix(static_cast<std::uint64_t>(m.type), 1);
            // Groups, weights and promotion only when not the defaults: the digest of a plain
            // member list is what it always was.
            if (m.group != 0 || m.weight != 1 || m.promote) {
                mix(m.group, 4);
                mix(m.weight, 4);
                mix(m.promote ? 1 : 0, 1);
            }
        }
        return hash;
    }

    /// Ids of the voting members, ascending.
    std::vector<peer_id> voters() const {
        std::vector<peer_id> ids;
        for (const auto& m : members_)
            if (m.type == learner_type::participant) ids.push_back(m.id);
        return ids;
    }

private:
    std::vector<member> members_;
    std::uint64_t version_ = 0;
};

}  // namespace zab
