// zab/session/session_reply.hpp — what zab::session_machine's `apply` returns for a
// transaction: whether it was applied or answered from the session table, the zxid at which
// the request was applied, and the result.
//
// These bytes are the write's result (zab::result_machine): they reach the writer with the
// write's completion (client_completion::response, zab::asio::reply::response; §6.6, §6.7).
//
// Encoding, little-endian:
//
//   u8  status    session_status: 1 applied, 2 duplicate, 3 applied_earlier
//   u8  flags     bit 0: result_kept; bit 1: applied_at follows; every other bit 0
//   [u64 applied_at]   if bit 1: the zxid (as its 64-bit value, never 0) at which the
//                      request was applied — this transaction's for `applied`, the first
//                      application's for `duplicate`; never for applied_earlier
//   the result bytes
//
// The former encoding is this one without bit 1 (flags 0 or 1: the old result_kept byte),
// and reads as a reply without applied_at. applied_earlier carries no result and result_kept
// 0 (1 is read alike: the encoding before it had its name). `decode` refuses everything
// else with errc::malformed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

enum class session_status : std::uint8_t {
    /// Applied now (a new request of its client, or an untagged transaction): `result` is
    /// what the inner machine's `apply` returned.
    applied = 1,
    /// A retry of the client's last applied request: not applied again; `result` is the
    /// recorded result of the first application (unless `result_kept` is false).
    duplicate = 2,
    /// A request older than the client's last applied one: not applied now. Under the
    /// sessions' contract — a client has one tagged request outstanding at a time: it sends
    /// sequence s+1 only once s was answered `applied` or `duplicate`, retrying s (with
    /// its tag) until then — an older request is a late copy of one applied earlier, whose
    /// result is no longer kept (`result_kept` false). A client that pipelines tagged
    /// requests breaks that contract, and then this answer says only that this copy was
    /// not applied: an older request lost on the way and never applied gets it too
    /// (docs/protocol.md §6.7).
    applied_earlier = 3,
    /// The former name of applied_earlier (the encoding is the same).
    stale = applied_earlier,
};

/// One decoded reply. `result` points into the bytes it was decoded from.
struct session_reply {
    static constexpr std::uint8_t flag_result_kept = 1;
    static constexpr std::uint8_t flag_applied_at = 2;

    session_status status = session_status::applied;
    /// False for a duplicate whose first result was above session_options::max_result_bytes
    /// (applied once, result not kept), and always for applied_earlier.
    bool result_kept = true;
    byte_view result;
    /// The zxid at which the request was applied: for `applied` this transaction's, for
    /// `duplicate` the first application's — not the retry's, which the completion names —
    /// so that a reply derived from the write's zxid (a version, a fencing token) is the
    /// same for every copy. None for applied_earlier, for a duplicate whose session was
    /// restored from an image that did not keep it (session_machine's version 1), and in
    /// replies of the former encoding.
    std::optional<zxid> applied_at = std::nullopt;

    shared_bytes encode() const {
        const bool at = applied_at.has_value() && status != session_status::applied_earlier;
        const std::size_t header = 2 + (at ? 8 : 0);
        return shared_bytes::make(header + result.size(), [&](std::span<std::byte> out) {
            detail::wire_writer w{out};
            w.put(static_cast<std::uint8_t>(status));
            w.put(static_cast<std::uint8_t>((result_kept ? flag_result_kept : 0) |
                                            (at ? flag_applied_at : 0)));
            if (at) w.put(applied_at->value());
            w.put_raw(result);
        });
    }

    /// The reply `bytes` hold; `errc::malformed` for bytes `encode` would not write (in
    /// either encoding).
    static zab::result<session_reply> decode(byte_view bytes) {
        detail::wire_reader in{bytes};
        std::uint8_t status = 0, flags = 0;
        if (!in.get(status) || !in.get(flags)) return make_error_code(errc::malformed);
        if (status < 1 || status > 3 || (flags & ~(flag_result_kept | flag_applied_at)) != 0)
            return make_error_code(errc::malformed);
        session_reply r{
            static_cast<session_status>(status), (flags & flag_result_kept) != 0, {}, std::nullopt};
        if ((flags & flag_applied_at) != 0) {
            std::uint64_t at = 0;
            if (!in.get(at) || at == 0 || r.status == session_status::applied_earlier)
                return make_error_code(errc::malformed);
            r.applied_at = zxid::from_value(at);
        }
        r.result = bytes.subspan(bytes.size() - in.remaining());
        // applied_earlier was written with result_kept 1 before it had its name: read alike.
        if (r.status == session_status::applied_earlier) {
            if (!r.result.empty()) return make_error_code(errc::malformed);
            r.result_kept = false;
        }
        if ((!r.result_kept && r.status == session_status::applied) ||
            (!r.result_kept && !r.result.empty()))
            return make_error_code(errc::malformed);
        return r;
    }
};

}  // namespace zab
