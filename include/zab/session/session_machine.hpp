// zab/session/session_machine.hpp — client sessions for any state machine: each request
// tagged (client id, sequence) is applied at most once (docs/protocol.md §6.7; ZooKeeper's
// sessions, the Raft thesis, section 6.3).
//
// A client that got `outcome_unknown` (its replica lost the leader, §6.1) retries the write
// with the same tag, through any replica, as often as it likes: the first copy to commit is
// applied, every later one is answered from the replicated session table with the result
// of the first and the zxid it was applied at (`session_status::duplicate`, `applied_at`). The contract: one tagged request per client
// outstanding at a time (the Raft thesis's model) — the client sends its next sequence only
// once the last was answered applied or duplicate. Under it a request older than the
// client's last applied one is a late copy of a request applied earlier, answered
// `applied_earlier` with its result no longer kept; a client that pipelines tagged requests
// cannot tell from that answer whether an older one was applied (kv_server refuses a second
// TAGGED of a client outstanding on a connection). The table is part of the replicated
// state and of the snapshot, and everything about it follows from the transactions applied,
// never from a replica's clock: sessions expire by the leader clock stamped into
// transactions (the codec's `clock_ms`), the least recently used session (by zxid) is
// evicted beyond `max_sessions`.
// So the promise holds for a client active within the last `max_sessions` clients and
// `expiry_ms` of leader time; an evicted or expired client that retries is applied again.
//
// `apply` returns a session_reply (session_reply.hpp) holding the inner machine's result:
// session_machine is a zab::result_machine, so the writer gets it with its completion (§6.6).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"
#include "zab/core/sealed_image.hpp"
#include "zab/core/zxid.hpp"
#include "zab/session/session_envelope.hpp"
#include "zab/session/session_reply.hpp"
#include "zab/session/session_table.hpp"

namespace zab {

/// Optional for session_machine's inner machine: told of each transaction the session table
/// answered (a duplicate or an older request), which it does not apply. For a machine whose
/// state follows every transaction in some way even so (the kv example: its version-2
/// records move its clock whatever they carry).
template <typename S>
concept retry_aware_machine = requires(S& sm, zxid z, byte_view txn) {
    { sm.on_retry(z, txn) } -> std::same_as<void>;
};

/// `Inner` (any zab::state_machine; its `apply` may return a result or nothing) behind a
/// session table. Transactions are read by `Codec` (session_envelope: wrap them with
/// `session_envelope::wrap`; or the application's own format, see session_codec).
///
/// Snapshot image, little-endian: u32 magic "ZSM1", u8 version 2, u64 last_applied,
/// u64 inner_last_applied (the inner machine's: a duplicate never reaches it), the session
/// table (session_table.hpp, its version 2: with each session's applied_at), u64 inner
/// image length, the inner image, u32 CRC32C of every byte before it. An image of version 1
/// (the table without applied_at) still restores, its sessions' applied_at unknown: their
/// duplicates then answer without one. `restore` checks all of it and the table against the
/// options, and changes nothing on any error (`errc::corrupt`, `bad_checksum`,
/// `unsupported_version` for a version other than 1 and 2, or the inner machine's own).
template <state_machine Inner, session_codec Codec = session_envelope>
class session_machine {
public:
    static constexpr std::uint32_t image_magic = 0x314D535Au;  // "ZSM1"
    static constexpr std::uint8_t image_version = session_table::image_version;  // 2
    static constexpr std::uint8_t oldest_image_version = 1;  ///< still restored

    explicit session_machine(session_options options = {}, Inner inner = Inner{})
        : inner_{std::move(inner)}, table_{options} {}

    // --- zab::state_machine, zab::result_machine -------------------------------------------

    /// Applies `z`: a new request (or an untagged transaction) through the inner machine, a
    /// retry from the table. Returns the encoded session_reply.
    shared_bytes apply(zxid z, byte_view txn) {
        ZAB_ASSERT(last_applied_ < z, "session_machine: transactions applied out of zxid order");
        last_applied_ = z;
        const session_header h = Codec::inspect(txn);
        if (h.clock_ms) table_.advance_clock(*h.clock_ms);
        if (h.tag) {
            if (const session_record* r = table_.seen(*h.tag, z)) {
                if constexpr (retry_aware_machine<Inner>) inner_.on_retry(z, h.payload);
                if (r->sequence != h.tag->sequence)
                    return session_reply{session_status::applied_earlier, false, {}}.encode();
                return session_reply{session_status::duplicate, r->result_kept, r->result.view(),
                                     known(r->applied_at)}
                    .encode();
            }
        }
        shared_bytes result;
        if constexpr (result_machine<Inner>) {
            result = inner_.apply(z, h.payload);
        } else {
            inner_.apply(z, h.payload);
        }
        if (h.tag) table_.remember(*h.tag, z, result);
        return session_reply{session_status::applied, true, result.view(), z}.encode();
    }

    /// zab::system_txn_machine, when the inner machine is one.
    void apply_system(zxid z, byte_view txn)
        requires system_txn_machine<Inner>
    {
        ZAB_ASSERT(last_applied_ < z, "session_machine: transactions applied out of zxid order");
        last_applied_ = z;
        inner_.apply_system(z, txn);
    }

    zxid last_applied() const noexcept { return last_applied_; }

    shared_bytes snapshot() const { return image(last_applied_, inner_.last_applied(), table_,
                                                 inner_.snapshot().view()); }

    /// zab::deferred_snapshot_machine, when the inner machine is one: the table is copied
    /// now (bounded by max_sessions; the results' bytes are shared), and encoded with the
    /// inner machine's view later.
    deferred_snapshot snapshot_later() const
        requires deferred_snapshot_machine<Inner>
    {
        return [at = last_applied_, inner_at = inner_.last_applied(), table = table_,
                inner = inner_.snapshot_later()] {
            return image(at, inner_at, table, inner().view());
        };
    }

    result<void> restore(zxid z, byte_view bytes) {
        std::uint8_t version = image_version;
        auto body = unseal_image(bytes, image_magic, version, 8 + 8);
        if (!body && body.error() == make_error_code(errc::unsupported_version)) {
            version = oldest_image_version;
            body = unseal_image(bytes, image_magic, version, 8 + 8);
        }
        if (!body) return body.error();
        detail::wire_reader in{body.value()};
        std::uint64_t at = 0, inner_at = 0, inner_size = 0;
        in.get(at);
        in.get(inner_at);
        if (at != z.value() || inner_at > at) return make_error_code(errc::corrupt);
        auto table = session_table::decode(in, table_.options(), z, version);
        if (!table) return table.error();
        byte_view inner_image;
        if (!in.get(inner_size) || inner_size != in.remaining() ||
            !in.get_raw(inner_size, inner_image))
            return make_error_code(errc::corrupt);
        if (auto restored = inner_.restore(zxid::from_value(inner_at), inner_image); !restored)
            return restored;
        table_ = std::move(table).value();
        last_applied_ = z;
        return success();
    }

    // --- the sessions ------------------------------------------------------------------------

    const Inner& inner() const noexcept { return inner_; }
    const session_table& sessions() const noexcept { return table_; }
    /// The last sequence applied for `client_id`, if its session is kept.
    std::optional<std::uint64_t> last_sequence(std::uint64_t client_id) const {
        const session_record* r = table_.find(client_id);
        return r ? std::optional{r->sequence} : std::nullopt;
    }
    /// When the next session expires (ms, by the leader clocks stamped into transactions):
    /// a leader proposes a clock-carrying transaction once its clock passes it.
    std::optional<std::uint64_t> next_expiry_ms() const { return table_.next_expiry_ms(); }

    /// The image `snapshot()` writes for these parts (also how an application converts an
    /// older format of its own into this one).
    static shared_bytes image(zxid at, zxid inner_at, const session_table& table,
                              byte_view inner_image) {
        const std::size_t size = 4 + 1 + 8 + 8 + table.encoded_size() + 8 + inner_image.size() + 4;
        return shared_bytes::make(size, [&](std::span<std::byte> out) {
            detail::wire_writer w{out};
            w.put(image_magic);
            w.put(image_version);
            w.put(at.value());
            w.put(inner_at.value());
            table.encode(w);
            w.put(std::uint64_t{inner_image.size()});
            w.put_raw(inner_image);
            w.put(crc32c(byte_view{out.data(), size - 4}));
        });
    }

private:
    static std::optional<zxid> known(zxid applied_at) {
        return applied_at == zxid{} ? std::nullopt : std::optional{applied_at};
    }

    Inner inner_;
    session_table table_;
    zxid last_applied_;
};

}  // namespace zab
