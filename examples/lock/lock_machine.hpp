// examples/lock/lock_machine.hpp — a replicated lock service with fencing tokens: named
// locks, each held by one owner, granted with a token that is the zxid of the write that
// granted it (ZooKeeper's recipe, where the token is the lock node's czxid). A resource the
// locks guard refuses a write carrying a token below the highest it has seen, so a holder
// whose lease ran out while it was paused cannot write after the next holder did.
//
// lock_machine is a zab::result_machine; lock_service wraps it in zab::session_machine
// (docs/protocol.md §6.7) so that a client that got `outcome_unknown` can retry an ACQUIRE
// with the same session tag. That is where the token needs care: the retry commits as a
// transaction of its own, with its own zxid, and is answered `duplicate` without reaching
// this machine. The token of the grant is the FIRST application's zxid, which the session
// reply carries as `applied_at` (§6.7); `answer_of` reads it from there, never from the
// completion's zxid. So the result of a grant does not repeat the token: the zxid is it.
//
// A command, little-endian:   u8 op (1 ACQUIRE, 2 RELEASE), u64 now_ms (the proposer's
//                             clock), u16 length + name, u16 length + owner, u64 argument
//                             (ACQUIRE: the lease in ms, 0 for none; RELEASE: the token).
// A result:                   u8 lock_status, then for busy and not_holder u64 token +
//                             u16 length + holder (the live holder; 0 and "" for none).
// Bytes that are no command are answered `malformed`, on every replica alike.
//
// Leases go by the machine's clock, the largest now_ms applied — never a replica's own
// clock, so every replica applies alike: a lock whose lease has passed is free to ACQUIRE.
// The stamps are the proposers' clocks, trusted as such: a clock far ahead ends leases
// early, which is what the fencing token is for (the resource refuses the older holder).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"
#include "zab/core/sealed_image.hpp"
#include "zab/core/zxid.hpp"
#include "zab/session/session_machine.hpp"

namespace zab::lock {

inline constexpr std::size_t max_name_bytes = 256;  ///< for a lock's name and an owner's

enum class lock_op : std::uint8_t { acquire = 1, release = 2 };

struct lock_command {
    lock_op op = lock_op::acquire;
    std::uint64_t now_ms = 0;  ///< the proposer's clock: moves the machine's (leases)
    std::string name;
    std::string owner;
    std::uint64_t argument = 0;  ///< ACQUIRE: lease in ms (0: none); RELEASE: the token
};

enum class lock_status : std::uint8_t {
    granted = 1,     ///< the lock is the owner's; the token is the write's zxid
    busy = 2,        ///< held by `holder` (perhaps the owner itself) with `token`
    released = 3,    ///< the holder's token matched: the lock is free
    not_holder = 4,  ///< a RELEASE without the holder's token: nothing changed
    malformed = 5,   ///< the transaction is no command
};

/// A lock held: by whom, its token, and until when.
struct lock_entry {
    std::string owner;
    std::uint64_t token = 0;       ///< the zxid (value) of the ACQUIRE that granted it
    std::uint64_t granted_ms = 0;  ///< the machine's clock then
    std::uint64_t lease_ms = 0;    ///< 0: held until released
    friend bool operator==(const lock_entry&, const lock_entry&) = default;
};

namespace detail {
inline std::size_t text_size(std::string_view s) { return 2 + s.size(); }
inline void put_text(zab::detail::wire_writer& w, std::string_view s) {
    w.put(static_cast<std::uint16_t>(s.size()));
    w.put_raw(as_bytes(s));
}
inline bool get_text(zab::detail::wire_reader& in, std::string& out) {
    std::uint16_t size = 0;
    byte_view bytes;
    if (!in.get(size) || size > max_name_bytes || !in.get_raw(size, bytes)) return false;
    out.assign(as_string_view(bytes));
    return true;
}
}  // namespace detail

/// `c` as a transaction; `errc::invalid_argument` for a name or owner that is empty or
/// longer than max_name_bytes.
inline result<std::vector<std::byte>> encode(const lock_command& c) {
    if (c.name.empty() || c.owner.empty() || c.name.size() > max_name_bytes ||
        c.owner.size() > max_name_bytes)
        return make_error_code(errc::invalid_argument);
    std::vector<std::byte> out(1 + 8 + detail::text_size(c.name) + detail::text_size(c.owner) + 8);
    zab::detail::wire_writer w{out};
    w.put(static_cast<std::uint8_t>(c.op));
    w.put(c.now_ms);
    detail::put_text(w, c.name);
    detail::put_text(w, c.owner);
    w.put(c.argument);
    return out;
}

/// The command `txn` holds; `errc::malformed` for bytes `encode` would not write.
inline result<lock_command> decode_command(byte_view txn) {
    zab::detail::wire_reader in{txn};
    lock_command c;
    std::uint8_t op = 0;
    if (!in.get(op) || (op != 1 && op != 2) || !in.get(c.now_ms) || !detail::get_text(in, c.name) ||
        !detail::get_text(in, c.owner) || !in.get(c.argument) || in.remaining() != 0 ||
        c.name.empty() || c.owner.empty())
        return make_error_code(errc::malformed);
    c.op = static_cast<lock_op>(op);
    return c;
}

/// The named locks. Deterministic: a function of the transactions applied alone.
class lock_machine {
public:
    static constexpr std::uint32_t image_magic = 0x314B4C5Au;  // "ZLK1"
    static constexpr std::uint8_t image_version = 1;

    // --- zab::state_machine, zab::result_machine ---------------------------------------------

    shared_bytes apply(zxid z, byte_view txn) {
        last_applied_ = z;
        const auto c = decode_command(txn);
        if (!c) return answer(lock_status::malformed);
        clock_ms_ = std::max(clock_ms_, c.value().now_ms);
        const lock_command& cmd = c.value();
        const lock_entry* held = holder(cmd.name);
        if (cmd.op == lock_op::acquire) {
            if (held) return answer(lock_status::busy, held);
            locks_[cmd.name] = lock_entry{cmd.owner, z.value(), clock_ms_, cmd.argument};
            return answer(lock_status::granted);
        }
        // A holder may release with its token even after its lease passed, if nobody took it.
        const auto it = locks_.find(cmd.name);
        if (it == locks_.end() || it->second.owner != cmd.owner || it->second.token != cmd.argument)
            return answer(lock_status::not_holder, held);
        locks_.erase(it);
        return answer(lock_status::released);
    }
    zxid last_applied() const noexcept { return last_applied_; }

    // --- reads (local: as of last_applied()) ---------------------------------------------------

    /// The live holder of `name`: nullptr when it is free or its lease has passed.
    const lock_entry* holder(const std::string& name) const {
        const auto it = locks_.find(name);
        if (it == locks_.end()) return nullptr;
        const lock_entry& e = it->second;
        if (e.lease_ms != 0 && clock_ms_ - e.granted_ms >= e.lease_ms) return nullptr;
        return &e;
    }
    std::uint64_t clock_ms() const noexcept { return clock_ms_; }
    const std::map<std::string, lock_entry, std::less<>>& locks() const noexcept { return locks_; }

    // --- snapshot ---------------------------------------------------------------------------
    //
    // Image: u32 magic "ZLK1", u8 version 1, u64 last_applied, u64 clock_ms, u64 count, per
    // lock in name order: u16 + name, u16 + owner, u64 token, u64 granted_ms, u64 lease_ms;
    // u32 CRC32C of every byte before it (zab/core/sealed_image.hpp).

    shared_bytes snapshot() const {
        std::size_t size = 4 + 1 + 8 * 3 + 4;
        for (const auto& [name, e] : locks_)
            size += detail::text_size(name) + detail::text_size(e.owner) + 8 * 3;
        return shared_bytes::make(size, [&](std::span<std::byte> out) {
            zab::detail::wire_writer w{out};
            w.put(image_magic);
            w.put(image_version);
            w.put(last_applied_.value());
            w.put(clock_ms_);
            w.put(std::uint64_t{locks_.size()});
            for (const auto& [name, e] : locks_) {
                detail::put_text(w, name);
                detail::put_text(w, e.owner);
                w.put(e.token);
                w.put(e.granted_ms);
                w.put(e.lease_ms);
            }
            w.put(crc32c(byte_view{out.data(), size - 4}));
        });
    }

    /// Replaces the state by an image taken at `z`; on any error nothing changes:
    /// `errc::corrupt` (another magic, an image not of `z`, names out of order, a token
    /// after `z`, a grant after the clock, trailing bytes), `unsupported_version`,
    /// `bad_checksum`.
    result<void> restore(zxid z, byte_view image) {
        const auto body = unseal_image(image, image_magic, image_version, 8 * 3);
        if (!body) return body.error();
        zab::detail::wire_reader in{body.value()};
        std::uint64_t at = 0, clock = 0, count = 0;
        in.get(at);
        in.get(clock);
        in.get(count);
        if (at != z.value()) return make_error_code(errc::corrupt);
        std::map<std::string, lock_entry, std::less<>> locks;
        for (std::uint64_t i = 0; i < count; ++i) {
            std::string name;
            lock_entry e;
            if (!detail::get_text(in, name) || !detail::get_text(in, e.owner) || !in.get(e.token) ||
                !in.get(e.granted_ms) || !in.get(e.lease_ms) || name.empty() || e.owner.empty() ||
                e.token == 0 || e.token > at || e.granted_ms > clock ||
                (!locks.empty() && locks.rbegin()->first >= name))
                return make_error_code(errc::corrupt);
            locks.emplace_hint(locks.end(), std::move(name), std::move(e));
        }
        if (in.remaining() != 0) return make_error_code(errc::corrupt);
        last_applied_ = z;
        clock_ms_ = clock;
        locks_ = std::move(locks);
        return success();
    }

private:
    static shared_bytes answer(lock_status s, const lock_entry* held = nullptr) {
        const bool named = s == lock_status::busy || s == lock_status::not_holder;
        const std::string_view owner = held ? std::string_view{held->owner} : std::string_view{};
        const std::size_t size = 1 + (named ? 8 + detail::text_size(owner) : 0);
        return shared_bytes::make(size, [&](std::span<std::byte> out) {
            zab::detail::wire_writer w{out};
            w.put(static_cast<std::uint8_t>(s));
            if (!named) return;
            w.put(held ? held->token : std::uint64_t{0});
            detail::put_text(w, owner);
        });
    }

    zxid last_applied_;
    std::uint64_t clock_ms_ = 0;
    std::map<std::string, lock_entry, std::less<>> locks_;
};

static_assert(result_machine<lock_machine>);

/// The lock machine behind client sessions: what the replicas run. Wrap each command with
/// `session_envelope::wrap(encode(c).value(), session_tag{client, sequence})`.
using lock_service = session_machine<lock_machine>;

/// What a client learns from its write's completion (`response`, lock_service's reply).
struct lock_answer {
    /// None: applied earlier, its answer not kept (`applied_earlier`, an older request of
    /// this client, or a result too large to keep, which a lock's never is): read `holder`
    /// on a replica.
    std::optional<lock_status> status;
    /// granted: the fencing token, the zxid (value) at which this ACQUIRE was first applied —
    /// session_reply::applied_at, the same for a retry answered `duplicate`; none when the
    /// reply does not name it (a session restored from an image of session_machine's version
    /// 1): read `holder` on a replica then. busy, not_holder: the live holder's (0: none).
    std::optional<std::uint64_t> token;
    std::string holder;      ///< busy, not_holder: the live holder ("" for none)
    bool duplicate = false;  ///< answered from the session table: a retry of an applied write
};

/// The answer a lock_machine result holds (without the token of a grant: the zxid is it);
/// `errc::malformed` for bytes `apply` would not return.
inline result<lock_answer> decode_result(byte_view bytes) {
    zab::detail::wire_reader in{bytes};
    std::uint8_t status = 0;
    if (!in.get(status) || status < 1 || status > 5) return make_error_code(errc::malformed);
    lock_answer a;
    a.status = static_cast<lock_status>(status);
    if (a.status == lock_status::busy || a.status == lock_status::not_holder) {
        std::uint64_t token = 0;
        if (!in.get(token) || !detail::get_text(in, a.holder))
            return make_error_code(errc::malformed);
        a.token = token;
    }
    if (in.remaining() != 0) return make_error_code(errc::malformed);
    return a;
}

/// The answer `response` (a lock_service reply) holds, a grant's token taken from
/// `applied_at`; `errc::malformed` for bytes that are no such reply.
inline result<lock_answer> answer_of(byte_view response) {
    const auto reply = session_reply::decode(response);
    if (!reply) return reply.error();
    const session_reply& r = reply.value();
    lock_answer a;
    if (r.result_kept) {
        auto decoded = decode_result(r.result);
        if (!decoded) return decoded.error();
        a = std::move(decoded).value();
    }
    a.duplicate = r.status != session_status::applied;
    if (a.status == lock_status::granted && r.applied_at) a.token = r.applied_at->value();
    return a;
}

}  // namespace zab::lock
