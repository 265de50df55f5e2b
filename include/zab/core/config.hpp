// zab/core/config.hpp — the members of a group: who votes, who observes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
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
    friend bool operator==(const member&, const member&) = default;
};

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
        for (std::size_t i = 0; i < members.size() && problem.empty(); ++i) {
            if (members[i].id == 0) problem = "peer id 0 is reserved";
            if (i > 0 && members[i].id == members[i - 1].id)
                problem = fmt::format("peer id {} appears twice", members[i].id);
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
        auto it = std::lower_bound(members_.begin(), members_.end(), id,
                                   [](const member& m, peer_id i) { return m.id < i; });
        if (it == members_.end() || it->id != id) return std::nullopt;
        return it->type;
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
