// zab/session/session_reply.hpp — what zab::session_machine's `apply` returns for a
// transaction: whether it was applied or answered from the session table, and the result.
//
// These bytes are the write's result (zab::result_machine): they reach the writer with the
// write's completion (client_completion::response, zab::asio::reply::response; §6.6, §6.7).
//
// Encoding: u8 status (session_status), u8 result_kept (0 or 1), then the result bytes.
// applied_earlier carries no result, and result_kept 0 (1 is read alike: the former
// encoding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"

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
    session_status status = session_status::applied;
    /// False for a duplicate whose first result was above session_options::max_result_bytes
    /// (applied once, result not kept), and always for applied_earlier.
    bool result_kept = true;
    byte_view result;

    shared_bytes encode() const {
        return shared_bytes::make(2 + result.size(), [&](std::span<std::byte> out) {
            out[0] = static_cast<std::byte>(status);
            out[1] = static_cast<std::byte>(result_kept ? 1 : 0);
            if (!result.empty()) std::memcpy(out.data() + 2, result.data(), result.size());
        });
    }

    /// The reply `bytes` hold; `errc::malformed` for bytes `encode` would not write.
    static zab::result<session_reply> decode(byte_view bytes) {
        if (bytes.size() < 2) return make_error_code(errc::malformed);
        const auto status = std::to_integer<std::uint8_t>(bytes[0]);
        const auto kept = std::to_integer<std::uint8_t>(bytes[1]);
        if (status < 1 || status > 3 || kept > 1) return make_error_code(errc::malformed);
        session_reply r{static_cast<session_status>(status), kept == 1, bytes.subspan(2)};
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
