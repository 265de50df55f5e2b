// examples/kv/kv_collection.hpp — the values a key can hold besides a string: a hash, a
// list, a set or a sorted set, as Redis has them, and the bounds on their sizes.
//
// Every container here iterates in an order fixed by its contents (ordered maps and sets, a
// deque in list order), never by addresses or hashing: replies and snapshot images built by
// walking them are the same on every replica.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>

namespace zab::kv {

/// The most elements (fields, items, members) one collection may hold. A constant, not an
/// option: the bound is checked where the command is applied, on every replica alike, so a
/// replica configured otherwise would diverge.
inline constexpr std::size_t max_collection_elements = std::size_t{1} << 22;
/// The largest field, value, item or member of a collection (bytes).
inline constexpr std::size_t max_element_bytes = std::size_t{1} << 20;

/// What kind of value a key holds: TYPE's answer.
enum class value_type : std::uint8_t { string = 0, hash = 1, list = 2, set = 3, zset = 4 };

inline const char* type_name(value_type t) noexcept {
    switch (t) {
        case value_type::string: return "string";
        case value_type::hash: return "hash";
        case value_type::list: return "list";
        case value_type::set: return "set";
        case value_type::zset: return "zset";
    }
    return "none";
}

using hash_value = std::map<std::string, std::string, std::less<>>;
using list_value = std::deque<std::string>;
using set_value = std::set<std::string, std::less<>>;

/// A sorted set: each member's score, and (score, member) in Redis's order (by score, then
/// by member bytes). Scores are never NaN.
struct zset_value {
    std::map<std::string, double, std::less<>> scores;
    std::set<std::pair<double, std::string>> order;

    std::size_t size() const noexcept { return scores.size(); }
    bool empty() const noexcept { return scores.empty(); }
    /// Sets `member`'s score (adding it if absent).
    void put(const std::string& member, double score) {
        if (const auto it = scores.find(member); it != scores.end()) {
            order.erase({it->second, member});
            it->second = score;
        } else {
            scores.emplace(member, score);
        }
        order.emplace(score, member);
    }
    /// Removes `member`; true if it was there.
    bool remove(std::string_view member) {
        const auto it = scores.find(member);
        if (it == scores.end()) return false;
        order.erase({it->second, it->first});
        scores.erase(it);
        return true;
    }
    bool operator==(const zset_value& other) const { return scores == other.scores; }
};

using collection = std::variant<hash_value, list_value, set_value, zset_value>;

inline value_type type_of(const collection& c) noexcept {
    return static_cast<value_type>(c.index() + 1);  // the variant lists them in type order
}
inline std::size_t size_of(const collection& c) noexcept {
    return std::visit([](const auto& v) { return v.size(); }, c);
}
/// An empty collection of type `t` (not string).
inline collection empty_collection(value_type t) {
    switch (t) {
        case value_type::hash: return hash_value{};
        case value_type::list: return list_value{};
        case value_type::set: return set_value{};
        default: return zset_value{};
    }
}

/// A collection held by pointer, copied deeply: an entry holding a string pays one pointer
/// for the other types.
class boxed_collection {
public:
    boxed_collection() = default;
    explicit boxed_collection(collection c) : p_{std::make_unique<collection>(std::move(c))} {}
    boxed_collection(const boxed_collection& o)
        : p_{o.p_ ? std::make_unique<collection>(*o.p_) : nullptr} {}
    boxed_collection(boxed_collection&&) noexcept = default;
    boxed_collection& operator=(const boxed_collection& o) {
        if (this != &o) p_ = o.p_ ? std::make_unique<collection>(*o.p_) : nullptr;
        return *this;
    }
    boxed_collection& operator=(boxed_collection&&) noexcept = default;
    bool operator==(const boxed_collection& o) const {
        return p_ == nullptr ? o.p_ == nullptr : o.p_ != nullptr && *p_ == *o.p_;
    }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    collection& operator*() const noexcept { return *p_; }
    collection* get() const noexcept { return p_.get(); }
    void reset() noexcept { p_.reset(); }

private:
    std::unique_ptr<collection> p_;
};

}  // namespace zab::kv
