// zab/session/session_table.hpp — the replicated table of client sessions behind
// zab::session_machine (session_machine.hpp): for each client, its last applied request and
// that request's result, so that a retry is answered instead of applied again.
//
// Everything here is a function of the transactions applied, never of a replica's clock
// (docs/protocol.md §6.7): the table's clock is the largest leader clock stamped into a
// transaction, the least recently used session is the one whose last request has the
// smallest zxid. So every replica that applied the same transactions holds the same table,
// byte for byte in its image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/error.hpp"
#include "zab/core/options.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

/// Names one client request for exactly-once application: a client numbers its writes with
/// increasing `sequence` (gaps allowed) and retries a write with the same tag.
struct session_tag {
    std::uint64_t client_id = 0;
    std::uint64_t sequence = 0;
    friend bool operator==(const session_tag&, const session_tag&) = default;
};

/// The replicated behaviour of a session table: every replica must use the same values (an
/// image that breaks them does not restore).
struct session_options {
    /// Sessions kept; one more evicts the least recently used. 0 keeps none (nothing is
    /// deduplicated).
    std::size_t max_sessions = 4096;
    /// A session idle this long by the table's clock (the leader clocks stamped into
    /// transactions) expires. 0: sessions expire only by eviction.
    std::uint64_t expiry_ms = 0;
    /// A result larger than this is not kept: a duplicate of that request then answers
    /// `session_status::duplicate` with the result unknown (session_reply::result_kept).
    std::size_t max_result_bytes = std::size_t{1} << 20;
};

/// `options` as one number, for options::agreed_fingerprint: replicas whose session options
/// differ then refuse to follow each other (docs/protocol.md §4.2) instead of answering a
/// retry differently.
inline std::uint64_t session_fingerprint(const session_options& options) noexcept {
    return fingerprint_of({options.max_sessions, options.expiry_ms, options.max_result_bytes});
}

/// What the table remembers of one client: the last applied request, where, and its result.
struct session_record {
    std::uint64_t sequence = 0;  ///< the client's last applied request
    zxid last_active;            ///< the last transaction that carried this client's id
    /// The transaction that applied `sequence` (a duplicate's reply names it, §6.7); zero:
    /// unknown (a session restored from an image of version 1, which did not keep it).
    zxid applied_at;
    std::uint64_t last_seen_ms = 0;  ///< the table's clock then (0 while expiry_ms is 0)
    bool result_kept = true;     ///< false: the result was above max_result_bytes
    shared_bytes result;         ///< what applying `sequence` returned
    friend bool operator==(const session_record&, const session_record&) = default;
};

/// The sessions, with their least-recently-used and expiry orders. Not thread-safe; used
/// from the peer's thread, like the state machine that holds it.
class session_table {
public:
    explicit session_table(session_options options = {}) : options_{options} {}

    const session_options& options() const noexcept { return options_; }
    /// The clock: the largest leader clock stamped into a transaction applied (ms).
    std::uint64_t clock_ms() const noexcept { return clock_ms_; }
    std::size_t size() const noexcept { return sessions_.size(); }
    const std::map<std::uint64_t, session_record>& sessions() const noexcept { return sessions_; }
    const session_record* find(std::uint64_t client_id) const {
        const auto it = sessions_.find(client_id);
        return it == sessions_.end() ? nullptr : &it->second;
    }
    /// When the next session expires by the clock (ms), if one can: a leader proposes a
    /// clock-carrying transaction once its own clock passes it.
    std::optional<std::uint64_t> next_expiry_ms() const {
        if (options_.expiry_ms == 0 || by_seen_.empty()) return std::nullopt;
        return by_seen_.begin()->first + options_.expiry_ms;
    }

    /// Advances the clock to `stamp_ms` (never back) and removes every session idle for
    /// `expiry_ms` by then.
    void advance_clock(std::uint64_t stamp_ms) {
        clock_ms_ = std::max(clock_ms_, stamp_ms);
        if (options_.expiry_ms == 0) return;
        while (!by_seen_.empty() && expired(by_seen_.begin()->first))
            erase(sessions_.find(by_seen_.begin()->second));
    }

    /// The session of `client_id` if it has applied `sequence` or later: touched at `z` (it
    /// is active), else nullptr.
    const session_record* seen(const session_tag& tag, zxid z) {
        const auto it = sessions_.find(tag.client_id);
        if (it == sessions_.end() || tag.sequence > it->second.sequence) return nullptr;
        touch(tag.client_id, it->second, z);
        return &it->second;
    }

    /// Records that `tag` was applied at `z` with `result`, evicting the least recently used
    /// sessions beyond `max_sessions`.
    void remember(const session_tag& tag, zxid z, const shared_bytes& result) {
        remember(tag, z, result, z);
    }
    /// The same, for a record converted from a format that did not keep where the request
    /// was applied: active at `z`, applied at `applied_at` (zero: unknown; else at most `z`).
    void remember(const session_tag& tag, zxid z, const shared_bytes& result, zxid applied_at) {
        const auto [it, inserted] = sessions_.try_emplace(tag.client_id);
        session_record& record = it->second;
        if (!inserted) unindex(tag.client_id, record);
        record.sequence = tag.sequence;
        record.result_kept = result.size() <= options_.max_result_bytes;
        // A copy: a slice would keep its whole buffer alive, past the bound.
        record.result = record.result_kept ? shared_bytes::copy_of(result.view()) : shared_bytes{};
        record.last_active = z;
        record.applied_at = applied_at;
        record.last_seen_ms = seen_stamp();
        index(tag.client_id, record);
        while (sessions_.size() > options_.max_sessions)
            erase(sessions_.find(by_activity_.begin()->second));
    }

    // --- image ------------------------------------------------------------------------------
    //
    // Little-endian, version 2 (`image_version`): u64 clock_ms, u64 count, then per session
    // in increasing client id: u64 client_id, u64 sequence, u64 last_active (zxid),
    // u64 applied_at (zxid; 0: unknown), u64 last_seen_ms, u8 result_kept (0 or 1),
    // u32 result length, the result bytes. Version 1 is the same without applied_at (read
    // as unknown); `encode` writes version 2.

    static constexpr std::uint8_t image_version = 2;

    std::size_t encoded_size() const noexcept {
        std::size_t size = 16;
        for (const auto& [id, r] : sessions_) size += 8 * 5 + 1 + 4 + r.result.size();
        return size;
    }
    void encode(detail::wire_writer& out) const {
        out.put(clock_ms_);
        out.put(std::uint64_t{sessions_.size()});
        for (const auto& [id, r] : sessions_) {
            out.put(id);
            out.put(r.sequence);
            out.put(r.last_active.value());
            out.put(r.applied_at.value());
            out.put(r.last_seen_ms);
            out.put(std::uint8_t{r.result_kept});
            out.put(static_cast<std::uint32_t>(r.result.size()));
            out.put_raw(r.result.view());
        }
    }

    /// A table read from `in` (an image of `encode` at `last_applied`, or of the encoding
    /// of `version` 1), or `errc::corrupt` for anything `encode` would not have written
    /// under `options`: more sessions than `max_sessions`, ids out of order, a session
    /// active after `last_applied` or two active at one zxid, one applied after it was last
    /// active or two applied at one zxid, one seen after the clock or already expired by it
    /// (or seen at all, with `expiry_ms` 0: `seen_stamp`), a result above `max_result_bytes`
    /// or beside result_kept 0. `version` is 1 or 2 (the caller checked it).
    static result<session_table> decode(detail::wire_reader& in, session_options options,
                                        zxid last_applied, std::uint8_t version = image_version) {
        session_table t{options};
        std::uint64_t count = 0;
        if (!in.get(t.clock_ms_) || !in.get(count)) return make_error_code(errc::corrupt);
        if (count > options.max_sessions) return make_error_code(errc::corrupt);
        std::set<zxid> applied;  // the known applied_at of the sessions read so far
        for (std::uint64_t i = 0; i < count; ++i) {
            std::uint64_t id = 0, active = 0, applied_at = 0;
            std::uint8_t kept = 0;
            std::uint32_t length = 0;
            byte_view bytes;
            session_record r;
            if (!in.get(id) || !in.get(r.sequence) || !in.get(active) ||
                (version >= 2 && !in.get(applied_at)) || !in.get(r.last_seen_ms) ||
                !in.get(kept) || !in.get(length) || !in.get_raw(length, bytes))
                return make_error_code(errc::corrupt);
            r.last_active = zxid::from_value(active);
            r.applied_at = zxid::from_value(applied_at);
            if (applied_at != 0 &&
                (r.applied_at > r.last_active || !applied.insert(r.applied_at).second))
                return make_error_code(errc::corrupt);
            r.result_kept = kept == 1;
            r.result = shared_bytes::copy_of(bytes);
            const bool ordered = t.sessions_.empty() || t.sessions_.rbegin()->first < id;
            const bool result_ok = kept <= 1 && length <= options.max_result_bytes &&
                                   (r.result_kept || length == 0);
            if (!ordered || !result_ok || r.last_active > last_applied ||
                t.by_activity_.contains(r.last_active) || r.last_seen_ms > t.clock_ms_ ||
                t.expired(r.last_seen_ms) || (options.expiry_ms == 0 && r.last_seen_ms != 0))
                return make_error_code(errc::corrupt);
            const auto placed = t.sessions_.emplace_hint(t.sessions_.end(), id, std::move(r));
            t.index(id, placed->second);
        }
        return t;
    }

    friend bool operator==(const session_table& a, const session_table& b) {
        return a.clock_ms_ == b.clock_ms_ && a.sessions_ == b.sessions_;
    }

private:
    /// What a session's last_seen_ms becomes when it is active: the clock, or 0 while
    /// sessions do not expire (so the image does not depend on when it was last active: an
    /// application converting an older image without these times writes 0 and agrees).
    std::uint64_t seen_stamp() const noexcept { return options_.expiry_ms == 0 ? 0 : clock_ms_; }
    bool expired(std::uint64_t last_seen_ms) const noexcept {
        return options_.expiry_ms != 0 && clock_ms_ - last_seen_ms >= options_.expiry_ms;
    }
    void touch(std::uint64_t id, session_record& record, zxid z) {
        unindex(id, record);
        record.last_active = z;
        record.last_seen_ms = seen_stamp();
        index(id, record);
    }
    void index(std::uint64_t id, const session_record& record) {
        by_activity_.emplace(record.last_active, id);
        by_seen_.emplace(record.last_seen_ms, id);
    }
    void unindex(std::uint64_t id, const session_record& record) {
        by_activity_.erase(record.last_active);
        by_seen_.erase({record.last_seen_ms, id});
    }
    void erase(std::map<std::uint64_t, session_record>::iterator it) {
        unindex(it->first, it->second);
        sessions_.erase(it);
    }

    session_options options_;
    std::uint64_t clock_ms_ = 0;
    std::map<std::uint64_t, session_record> sessions_;
    /// Derived orders (not in the image): by last activity (one transaction, one client:
    /// zxids are unique), the first is evicted; by last seen time, the first expires.
    std::map<zxid, std::uint64_t> by_activity_;
    std::set<std::pair<std::uint64_t, std::uint64_t>> by_seen_;
};

}  // namespace zab
