// examples/kv/kv_state_machine.hpp — the replicated key-value map, as a zab::state_machine.
//
// zab hands `apply` each committed transaction — an encoded kv::command (kv_command.hpp) — in
// zxid order on every replica; applying is deterministic, so every replica holds the same
// map. Nothing here does I/O or reads a clock.
//
// Outcomes. `apply` never fails (concepts.hpp): a refusal is an `outcome` (kv_outcome.hpp).
// The server that proposed a write learns its outcome after zab reports the write applied
// (client_completion names its zxid) by asking `outcome_of(zxid)`: the machine keeps the
// outcomes of the last `options.recent_outcomes_max` applies. They are local, not replicated:
// a zxid that reached this replica inside a snapshot (restore) rather than through `apply`
// has no outcome here; answer "outcome unknown", and a tagged client's retry then gets the
// recorded outcome from the (replicated) client table. `on_applied` is the push alternative.
//
// Exactly once. A command tagged (client id, sequence) that this client already applied is
// not applied again: the same sequence answers the recorded outcome marked `duplicate`, an
// older one answers `error_stale_sequence`. The table of clients is part of the replicated
// state (and of the snapshot); it keeps at most `options.max_clients` clients, evicting the
// one whose last tagged command is oldest. A client evicted and then retrying is applied
// again: the promise holds for clients that are active within the last `max_clients`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include "decimal.hpp"
#include "kv_command.hpp"
#include "kv_outcome.hpp"
#include "kv_snapshot.hpp"
#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"

namespace zab::kv {

struct kv_options {
    /// Clients remembered for exactly-once retries. Part of the replicated behaviour: every
    /// replica must use the same value (a snapshot with more clients does not restore).
    /// 0 remembers none.
    std::size_t max_clients = 4096;
    /// Outcomes kept for `outcome_of`. Local to this replica; 0 keeps none.
    std::size_t recent_outcomes_max = 4096;
};

class kv_state_machine {
public:
    /// Called by `apply` after each command, with its outcome. It runs inside zab's step:
    /// it must not call into the peer (concepts.hpp), only record or hand off.
    using applied_callback = std::function<void(zxid, const outcome&)>;

    explicit kv_state_machine(kv_options options = {}) : options_{options} {}

    // The key index points into `state_.data`: a copy rebuilds it; a move carries it over
    // (std::map's nodes, and so the iterators, move with the map) and empties the source.
    kv_state_machine(const kv_state_machine& other)
        : options_{other.options_},
          state_{other.state_},
          by_activity_{other.by_activity_},
          recent_{other.recent_},
          on_applied_{other.on_applied_} {
        rebuild_index();
    }
    kv_state_machine(kv_state_machine&& other)
        : options_{other.options_},
          state_{std::move(other.state_)},
          index_{std::move(other.index_)},
          by_activity_{std::move(other.by_activity_)},
          recent_{std::move(other.recent_)},
          on_applied_{std::move(other.on_applied_)} {
        other.state_.data.clear();
        other.index_.clear();
    }
    kv_state_machine& operator=(const kv_state_machine& other) {
        if (this != &other) *this = kv_state_machine{other};
        return *this;
    }
    kv_state_machine& operator=(kv_state_machine&& other) noexcept {
        if (this == &other) return *this;
        options_ = other.options_;
        state_ = std::move(other.state_);
        index_ = std::move(other.index_);
        by_activity_ = std::move(other.by_activity_);
        recent_ = std::move(other.recent_);
        on_applied_ = std::move(other.on_applied_);
        other.state_.data.clear();
        other.index_.clear();
        return *this;
    }
    ~kv_state_machine() = default;

    // --- zab::state_machine ---------------------------------------------------------------

    /// Applies committed transaction `z`. zab delivers zxids in increasing order (docs/design.md
    /// rule 5); anything else is a bug in zab, hence asserted.
    void apply(zxid z, byte_view txn) {
        ZAB_ASSERT(state_.last_applied < z, "kv: transactions applied out of zxid order");
        outcome result = run(z, txn);
        state_.last_applied = z;
        if (options_.recent_outcomes_max > 0) {
            recent_.emplace_back(z, result);
            if (recent_.size() > options_.recent_outcomes_max) recent_.pop_front();
        }
        if (on_applied_) on_applied_(z, result);
    }

    zxid last_applied() const noexcept { return state_.last_applied; }

    /// The image of the replicated state (kv_snapshot.hpp): byte-identical on replicas that
    /// applied the same transactions.
    shared_bytes snapshot() const { return encode_snapshot(state_); }

    /// Replaces the state by an image taken at `z`. On any error the state is unchanged:
    /// `errc::bad_checksum`, `errc::unsupported_version`, `errc::corrupt` (including an image
    /// whose zxid is not `z`, and one with more clients than `options.max_clients`).
    result<void> restore(zxid z, byte_view image) {
        auto decoded = decode_snapshot(image, options_.max_clients);
        if (!decoded) return decoded.error();
        if (decoded.value().last_applied != z) return make_error_code(errc::corrupt);
        state_ = std::move(decoded).value();
        rebuild_index();
        by_activity_.clear();
        for (const auto& [id, client] : state_.clients)
            by_activity_.emplace(client.last_active, id);
        // Outcomes at or below z are those of the same committed transactions: still true.
        while (!recent_.empty() && recent_.back().first > z) recent_.pop_back();
        return success();
    }

    // --- reads (local: as of last_applied()) ------------------------------------------------

    std::optional<std::string> get(std::string_view key) const {
        const auto it = find(key);
        if (it == state_.data.end()) return std::nullopt;
        return it->second;
    }
    bool exists(std::string_view key) const { return find(key) != state_.data.end(); }
    /// The value of `key` in place (no copy), or nullptr; valid until the next apply.
    const std::string* value_of(std::string_view key) const {
        const auto it = find(key);
        return it == state_.data.end() ? nullptr : &it->second;
    }
    /// Number of keys.
    std::size_t size() const noexcept { return state_.data.size(); }
    /// Every key and value, in key order.
    const kv_map& contents() const noexcept { return state_.data; }

    // --- outcomes and exactly-once ----------------------------------------------------------

    /// The outcome of transaction `z` if it is among the last `recent_outcomes_max` applied
    /// here; nullopt otherwise (answer such a client "outcome unknown": it may retry with its
    /// tag and get the recorded outcome).
    std::optional<outcome> outcome_of(zxid z) const {
        const auto it = std::lower_bound(recent_.begin(), recent_.end(), z,
                                         [](const auto& entry, zxid x) { return entry.first < x; });
        if (it == recent_.end() || it->first != z) return std::nullopt;
        return it->second;
    }

    /// Sets (or with nullptr clears) the callback `apply` calls after each command.
    void on_applied(applied_callback callback) { on_applied_ = std::move(callback); }

    /// Clients in the exactly-once table.
    std::size_t client_count() const noexcept { return state_.clients.size(); }
    /// The last sequence applied for `client_id`, if the table remembers the client.
    std::optional<std::uint64_t> last_sequence(std::uint64_t client_id) const {
        const auto it = state_.clients.find(client_id);
        if (it == state_.clients.end()) return std::nullopt;
        return it->second.sequence;
    }

    // --- comparing replicas ----------------------------------------------------------------

    /// The replicated state (map, client table, last_applied), e.g. to compare replicas.
    const kv_state& state() const noexcept { return state_; }
    /// The CRC32C a snapshot image carries: equal states have equal digests. A quick check
    /// for the demo; tests compare `state()` too. (Not the CRC of the whole image: a CRC over
    /// a message followed by its own CRC is the same constant for every message.)
    std::uint32_t digest() const {
        const shared_bytes image = snapshot();
        return crc32c(image.view().first(image.size() - detail::snapshot_crc_bytes));
    }

private:
    /// Decodes, deduplicates and executes one transaction.
    outcome run(zxid z, byte_view txn) {
        auto decoded = decode(txn);
        if (!decoded) {
            return outcome::failure(std::string{error_malformed_prefix} +
                                    decoded.error().message());
        }
        command& c = decoded.value();
        if (!c.tag) return execute(std::move(c.op));

        const request_tag tag = *c.tag;
        if (const auto it = state_.clients.find(tag.client_id); it != state_.clients.end()) {
            client_record& client = it->second;
            if (tag.sequence <= client.sequence) {
                touch(tag.client_id, client, z);
                outcome answer = tag.sequence == client.sequence
                                     ? client.last_outcome
                                     : outcome::failure(std::string{error_stale_sequence});
                answer.duplicate = true;
                return answer;
            }
        }
        outcome result = execute(std::move(c.op));
        remember(tag, z, result);
        return result;
    }

    outcome execute(operation&& op) {
        return std::visit([this](auto&& o) { return execute_one(std::move(o)); }, std::move(op));
    }

    outcome execute_one(set_op&& op) {
        if (const auto it = find(op.key); it != state_.data.end()) {
            it->second = std::move(op.value);
        } else {
            insert(std::move(op.key), std::move(op.value));
        }
        return outcome::ok();
    }

    outcome execute_one(del_op&& op) {
        // Redis answers DEL with the number of keys removed.
        const auto it = find(op.key);
        if (it == state_.data.end()) return outcome::integer_value(0);
        erase(it);
        return outcome::integer_value(1);
    }

    outcome execute_one(incr_op&& op) {
        // Redis semantics: a missing key counts as 0; the value must be a strict decimal
        // int64; incrementing INT64_MAX is an error, not a wrap.
        const auto it = find(op.key);
        std::int64_t current = 0;
        if (it != state_.data.end()) {
            const auto parsed = parse_int64(it->second);
            if (!parsed) return outcome::failure(std::string{error_not_integer});
            current = *parsed;
        }
        if (current == std::numeric_limits<std::int64_t>::max())
            return outcome::failure(std::string{error_overflow});
        const std::int64_t next = current + 1;
        if (it != state_.data.end()) {
            it->second = format_int64(next);
        } else {
            insert(std::move(op.key), format_int64(next));
        }
        return outcome::integer_value(next);
    }

    outcome execute_one(cas_op&& op) {
        const auto it = find(op.key);
        const bool present = it != state_.data.end();
        const bool matched = op.expected ? present && it->second == *op.expected : !present;
        if (!matched) return outcome::cas(false);
        if (present) {
            it->second = std::move(op.desired);
        } else {
            insert(std::move(op.key), std::move(op.desired));
        }
        return outcome::cas(true);
    }

    // --- the key index ----------------------------------------------------------------------
    //
    // `state_.data` is an ordered map (snapshots and `contents()` list keys in order), but a
    // lookup in it walks ~17 levels of string compares for 100k keys, each a cache miss: that
    // was the largest cost of applying a SET. Writes and reads find keys through a hash index
    // of views of the map's keys (std::map nodes never move); only a new key walks the tree.
    // The index is never iterated, so nothing about it can reach a reply or a snapshot.

    kv_map::iterator find(std::string_view key) {
        const auto it = index_.find(key);
        return it == index_.end() ? state_.data.end() : it->second;
    }
    kv_map::const_iterator find(std::string_view key) const {
        const auto it = index_.find(key);
        return it == index_.end() ? state_.data.cend() : kv_map::const_iterator{it->second};
    }
    void insert(std::string&& key, std::string&& value) {
        const auto [it, inserted] = state_.data.emplace(std::move(key), std::move(value));
        ZAB_ASSERT(inserted, "kv: the key index missed a key of the map");
        index_.emplace(std::string_view{it->first}, it);
    }
    void erase(kv_map::iterator it) {
        index_.erase(std::string_view{it->first});
        state_.data.erase(it);
    }
    void rebuild_index() {
        index_.clear();
        index_.reserve(state_.data.size());
        for (auto it = state_.data.begin(); it != state_.data.end(); ++it)
            index_.emplace(std::string_view{it->first}, it);
    }

    /// Records that `client` was last seen at `z`.
    void touch(std::uint64_t client_id, client_record& client, zxid z) {
        by_activity_.erase(client.last_active);
        client.last_active = z;
        by_activity_.emplace(z, client_id);
    }

    /// Records `tag`'s outcome, evicting the least recently active clients beyond the bound.
    void remember(const request_tag& tag, zxid z, const outcome& result) {
        const auto [it, inserted] = state_.clients.try_emplace(tag.client_id);
        client_record& client = it->second;
        if (!inserted) by_activity_.erase(client.last_active);
        client.sequence = tag.sequence;
        client.last_outcome = result;
        client.last_outcome.duplicate = false;
        client.last_active = z;
        by_activity_.emplace(z, tag.client_id);
        while (state_.clients.size() > options_.max_clients) {
            const auto oldest = by_activity_.begin();
            state_.clients.erase(oldest->second);
            by_activity_.erase(oldest);
        }
    }

    kv_options options_;
    kv_state state_;
    /// Every key of `state_.data` (a view of the key in its node) → its node.
    std::unordered_map<std::string_view, kv_map::iterator> index_;
    /// Clients by the zxid of their last tagged command (one command, one client): the first
    /// entry is the one to evict. Derived from `state_.clients`, so not in the snapshot.
    std::map<zxid, std::uint64_t> by_activity_;
    /// Outcomes of the latest applies, in zxid order.
    std::deque<std::pair<zxid, outcome>> recent_;
    applied_callback on_applied_;
};

static_assert(state_machine<kv_state_machine>);

}  // namespace zab::kv
