// zab/core/quorum.hpp — quorum verifiers, and a tracker that checks every active one.
//
// Every quorum decision (FLE vote set, epoch quorum, NEWLEADER quorum, commit, leader
// liveness) is checked against *all* active verifiers (docs/protocol.md §9): the committed
// configuration's, and during a reconfiguration the proposed one's too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "zab/core/config.hpp"
#include "zab/core/types.hpp"

namespace zab {

/// A small ordered set of peer ids (sorted vector: deterministic iteration, cheap for the
/// handful of members a group has).
class peer_set {
public:
    /// Adds `id`; returns false if it was already there.
    bool insert(peer_id id) {
        auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
        if (it != ids_.end() && *it == id) return false;
        ids_.insert(it, id);
        return true;
    }
    bool erase(peer_id id) {
        auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
        if (it == ids_.end() || *it != id) return false;
        ids_.erase(it);
        return true;
    }
    bool contains(peer_id id) const { return std::binary_search(ids_.begin(), ids_.end(), id); }
    std::size_t size() const noexcept { return ids_.size(); }
    bool empty() const noexcept { return ids_.empty(); }
    void clear() noexcept { ids_.clear(); }
    auto begin() const noexcept { return ids_.begin(); }
    auto end() const noexcept { return ids_.end(); }
    friend bool operator==(const peer_set&, const peer_set&) = default;

private:
    std::vector<peer_id> ids_;
};

/// Decides whether a set of peers is a quorum. Implementations must be pure functions of the
/// configuration they were built from. Non-voters (observers, weight 0) never contribute.
class quorum_verifier {
public:
    virtual ~quorum_verifier() = default;
    /// True if `id` counts toward quorums.
    virtual bool is_voter(peer_id id) const = 0;
    /// True if `acks` (which may contain non-voters and strangers) holds a quorum.
    virtual bool contains_quorum(const peer_set& acks) const = 0;
    /// The configuration version this verifier belongs to.
    virtual std::uint64_t version() const = 0;
};

/// Majority of the voting members: `|acks ∩ voters| > |voters| / 2` (ZooKeeper's QuorumMaj).
class majority_verifier final : public quorum_verifier {
public:
    explicit majority_verifier(const configuration& config)
        : voters_{config.voters()}, version_{config.version()} {}

    /// The size of the smallest quorum: any `quorum_size()` voters are one.
    std::size_t quorum_size() const noexcept { return voters_.size() / 2 + 1; }

    bool is_voter(peer_id id) const override {
        return std::binary_search(voters_.begin(), voters_.end(), id);
    }
    bool contains_quorum(const peer_set& acks) const override {
        std::size_t counted = 0;
        for (peer_id id : acks)
            if (is_voter(id)) ++counted;
        return counted * 2 > voters_.size();
    }
    std::uint64_t version() const override { return version_; }

private:
    std::vector<peer_id> voters_;
    std::uint64_t version_;
};

/// More than half the voters' total weight (a voter of weight 0 never counts).
class weighted_verifier final : public quorum_verifier {
public:
    explicit weighted_verifier(const configuration& config) : version_{config.version()} {
        for (const member& m : config.members())
            if (m.type == learner_type::participant && m.weight > 0) {
                weights_.emplace_back(m.id, m.weight);
                total_ += m.weight;
            }
    }
    bool is_voter(peer_id id) const override { return weight_of(id) > 0; }
    bool contains_quorum(const peer_set& acks) const override {
        std::uint64_t sum = 0;
        for (peer_id id : acks) sum += weight_of(id);
        return sum * 2 > total_;
    }
    std::uint64_t version() const override { return version_; }

private:
    std::uint64_t weight_of(peer_id id) const {
        auto it = std::lower_bound(weights_.begin(), weights_.end(), id,
                                   [](const auto& w, peer_id i) { return w.first < i; });
        return it != weights_.end() && it->first == id ? it->second : 0;
    }
    std::vector<std::pair<peer_id, std::uint64_t>> weights_;  // by id
    std::uint64_t total_ = 0;
    std::uint64_t version_;
};

/// ZooKeeper's QuorumHierarchical: voters in groups, each with a weight; a quorum is more
/// than half of the groups (those of positive total weight), each by more than half of its
/// weight. A majority of groups survives the loss of a minority of whole groups (sites).
class hierarchical_verifier final : public quorum_verifier {
public:
    explicit hierarchical_verifier(const configuration& config) : version_{config.version()} {
        for (const member& m : config.members())
            if (m.type == learner_type::participant && m.weight > 0) {
                members_.push_back({m.id, m.group, m.weight});
                auto& total = group_totals_[m.group];
                total += m.weight;
            }
        std::sort(members_.begin(), members_.end(),
                  [](const entry& a, const entry& b) { return a.id < b.id; });
    }
    bool is_voter(peer_id id) const override { return find(id) != nullptr; }
    bool contains_quorum(const peer_set& acks) const override {
        std::map<std::uint32_t, std::uint64_t> acked;
        for (peer_id id : acks)
            if (const entry* e = find(id)) acked[e->group] += e->weight;
        std::size_t groups = 0;
        for (const auto& [group, sum] : acked)
            if (sum * 2 > group_totals_.at(group)) ++groups;
        return groups * 2 > group_totals_.size();
    }
    std::uint64_t version() const override { return version_; }

private:
    struct entry {
        peer_id id;
        std::uint32_t group;
        std::uint64_t weight;
    };
    const entry* find(peer_id id) const {
        auto it = std::lower_bound(members_.begin(), members_.end(), id,
                                   [](const entry& e, peer_id i) { return e.id < i; });
        return it != members_.end() && it->id == id ? &*it : nullptr;
    }
    std::vector<entry> members_;
    std::map<std::uint32_t, std::uint64_t> group_totals_;
    std::uint64_t version_;
};

/// The verifier a configuration calls for: hierarchical when its voters name groups,
/// weighted when their weights differ, else a plain majority.
inline std::shared_ptr<const quorum_verifier> make_verifier(const configuration& config) {
    if (config.hierarchical()) return std::make_shared<hierarchical_verifier>(config);
    if (config.weighted()) return std::make_shared<weighted_verifier>(config);
    return std::make_shared<majority_verifier>(config);
}

/// The verifiers every quorum decision must satisfy (one; two or more during a reconfiguration).
class quorum_system {
public:
    quorum_system() = default;
    explicit quorum_system(std::shared_ptr<const quorum_verifier> verifier) {
        if (const auto* majority = dynamic_cast<const majority_verifier*>(verifier.get()))
            majority_size_ = majority->quorum_size();
        verifiers_.push_back(std::move(verifier));
    }
    /// Every verifier of `verifiers` must find a quorum (a reconfiguration in progress: the
    /// committed configuration's and the proposed one's, §9).
    explicit quorum_system(std::vector<std::shared_ptr<const quorum_verifier>> verifiers)
        : verifiers_{std::move(verifiers)} {
        if (verifiers_.size() == 1)
            if (const auto* majority = dynamic_cast<const majority_verifier*>(verifiers_[0].get()))
                majority_size_ = majority->quorum_size();
    }
    /// A majority system over `config`'s voters.
    static quorum_system majority(const configuration& config) {
        return quorum_system{std::make_shared<majority_verifier>(config)};
    }
    /// The system `config` calls for (make_verifier).
    static quorum_system of(const configuration& config) { return quorum_system{make_verifier(config)}; }

    /// True if every active verifier finds a quorum in `acks`.
    bool contains_quorum(const peer_set& acks) const {
        if (verifiers_.empty()) return false;
        return std::all_of(verifiers_.begin(), verifiers_.end(),
                           [&](const auto& v) { return v->contains_quorum(acks); });
    }
    /// True if `id` votes in any active configuration (§3.4 step 3: current or next).
    bool is_voter(peer_id id) const {
        return std::any_of(verifiers_.begin(), verifiers_.end(),
                           [&](const auto& v) { return v->is_voter(id); });
    }
    const std::vector<std::shared_ptr<const quorum_verifier>>& verifiers() const noexcept {
        return verifiers_;
    }
    /// With one majority verifier only (no reconfiguration under way): the number of voters
    /// that makes any set of them a quorum, so that a commit point is the `k`-th largest of
    /// the voters' progress, with no set built. Nothing for any other system.
    std::optional<std::size_t> simple_majority() const noexcept { return majority_size_; }

private:
    std::vector<std::shared_ptr<const quorum_verifier>> verifiers_;
    std::optional<std::size_t> majority_size_;
};

}  // namespace zab
