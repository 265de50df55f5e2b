// examples/kv/kv_state_machine.hpp — the key-value map (kv_store.hpp) behind zab's client
// sessions (zab::session_machine, docs/protocol.md §6.7): what kv_server replicates.
//
// Exactly once. A command tagged (client id, sequence) — TAGGED in kv_server — is applied
// at most once: the session table answers a retry of the client's last applied sequence
// with the recorded outcome marked `duplicate`, an older one with `error_applied_earlier`
// (also marked): applied before, under the contract of one tagged request per client at a
// time (resp_session enforces it on a connection; docs/protocol.md §6.7). The table is part
// of the replicated state and of the snapshot; it keeps at most `options.max_clients`
// clients, evicting the least recently active one, and with `options.session_expiry_ms`
// forgets a client idle that long by the map's clock (the TICKs' stamps, the leader's clock:
// kv_server proposes a TICK when a session is due too). A client evicted or expired and then
// retrying is applied again.
//
// Outcomes. `apply` returns the session's reply holding the map's encoded outcome: zab
// hands it to the replica that accepted the write with its completion (§6.6), and
// `outcome_of_response` reads it back. No outcome is kept here for later.
//
// Compatibility. The image is session_machine's; an image of the map with clients in it
// (kv_snapshot.hpp version 2 as kv_server wrote it before the sessions moved into zab)
// restores too: its clients become sessions (their outcomes encoded, the map's clock their
// last-seen time when sessions expire: that image kept no time per client), and the next
// snapshot is written in the new format. Logs replay as before: a command's tag is read
// from the command itself (kv_session_codec), so every tagged record ever written counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kv_command.hpp"
#include "kv_outcome.hpp"
#include "kv_snapshot.hpp"
#include "kv_store.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"
#include "zab/session/session_machine.hpp"

namespace zab::kv {

struct kv_options {
    /// Clients remembered for exactly-once retries. Part of the replicated behaviour: every
    /// replica must use the same value (a snapshot with more clients does not restore).
    /// 0 remembers none.
    std::size_t max_clients = 4096;
    /// A client idle this long by the map's clock (ms) is forgotten; 0: only evicted.
    /// Replicated behaviour too.
    std::uint64_t session_expiry_ms = 0;
    /// The largest outcome a client's session keeps for a retry (a larger one answers a
    /// retry "outcome unknown"). Replicated behaviour too.
    std::size_t max_outcome_bytes = std::size_t{1} << 20;

    /// The session options these make (zab::session_machine's).
    zab::session_options sessions() const {
        return zab::session_options{max_clients, session_expiry_ms, max_outcome_bytes};
    }
};

/// How zab::session_machine reads a kv command: its tag, and for a TICK (or a version-2
/// record, whose stamp moved the map's clock) the stamp as the leader's clock. The whole
/// command goes on to kv_store, which ignores the tag. Only commands that may carry either
/// are decoded here (a tag or a clock in their header); bytes that do not decode carry
/// neither, as kv_store then answers them "malformed".
struct kv_session_codec {
    static zab::session_header inspect(byte_view txn) {
        zab::session_header h{std::nullopt, std::nullopt, txn};
        if (txn.size() < 3) return h;
        const auto version = std::to_integer<std::uint8_t>(txn[0]);
        const auto op = std::to_integer<std::uint8_t>(txn[1]);
        const auto flags = std::to_integer<std::uint8_t>(txn[2]);
        const bool tick = version == command_version && op == 6;  // detail::op_code::tick
        if ((flags & detail::flag_tagged) == 0 && !tick && version != command_version_legacy_clock)
            return h;
        const auto decoded = decode(txn);
        if (!decoded) return h;
        const command& c = decoded.value();
        if (c.tag) h.tag = zab::session_tag{c.tag->client_id, c.tag->sequence};
        if (c.legacy_clock || std::holds_alternative<tick_op>(c.op)) h.clock_ms = c.stamp_ms;
        return h;
    }
};

/// The outcome a write's completion carries (`zab::asio::reply::response`), marked
/// `duplicate` when the session answered it; nullopt when it is unknown here (a retry of a
/// request whose outcome was too large to keep, or bytes that are no reply).
inline std::optional<outcome> outcome_of_response(byte_view response) {
    const auto reply = zab::session_reply::decode(response);
    if (!reply) return std::nullopt;
    if (reply.value().status == zab::session_status::applied_earlier) {
        outcome o = outcome::failure(std::string{error_applied_earlier});
        o.duplicate = true;
        return o;
    }
    if (!reply.value().result_kept) return std::nullopt;
    auto o = decode_outcome(reply.value().result);
    if (o) o->duplicate = reply.value().status == zab::session_status::duplicate;
    return o;
}

class kv_state_machine {
public:
    using machine_type = zab::session_machine<kv_store, kv_session_codec>;

    explicit kv_state_machine(kv_options options = {})
        : machine_{options.sessions()} {}

    // --- zab::state_machine, zab::result_machine --------------------------------------------

    /// Applies committed transaction `z`; returns the session reply (`outcome_of_response`).
    shared_bytes apply(zxid z, byte_view txn) { return machine_.apply(z, txn); }
    zxid last_applied() const noexcept { return machine_.last_applied(); }
    /// session_machine's image: byte-identical on replicas that applied the same transactions.
    shared_bytes snapshot() const { return machine_.snapshot(); }
    /// zab::deferred_snapshot_machine: what `snapshot()` returns now, written later on any
    /// one thread while `apply` goes on (kv_store.hpp, "Snapshots"): compaction does not stop
    /// the replica for the time the whole map takes to encode.
    deferred_snapshot snapshot_later() const { return machine_.snapshot_later(); }

    /// Replaces the state by an image taken at `z` (either format, see "Compatibility"). On
    /// any error the state is unchanged: `errc::bad_checksum`, `errc::unsupported_version`,
    /// `errc::corrupt` (including an image whose zxid is not `z`, and one with more clients
    /// than `options.max_clients`).
    result<void> restore(zxid z, byte_view image) {
        if (!snapshot_image_version(image)) return machine_.restore(z, image);
        auto legacy = decode_snapshot(image, machine_.sessions().options().max_sessions);
        if (!legacy) return legacy.error();
        kv_state state = std::move(legacy).value();
        if (state.last_applied != z) return make_error_code(errc::corrupt);
        zab::session_table sessions{machine_.sessions().options()};
        sessions.advance_clock(state.now_ms);
        std::map<zxid, std::uint64_t> by_activity;  // remembered oldest first: the same LRU
        for (const auto& [id, client] : state.clients) by_activity.emplace(client.last_active, id);
        for (const auto& [active, id] : by_activity) {
            const client_record& client = state.clients.at(id);
            // The former image kept no zxid of the application (only the last activity):
            // unknown, so a duplicate answers without applied_at (§6.7).
            sessions.remember({id, client.sequence}, active, encode_outcome(client.last_outcome),
                              zxid{});
        }
        state.clients.clear();
        return machine_.restore(
            z, machine_type::image(z, z, sessions, encode_snapshot(state).view()).view());
    }

    // --- reads (local: as of last_applied(); kv_store.hpp) ----------------------------------

    const kv_store& store() const noexcept { return machine_.inner(); }
    std::optional<std::string> get(std::string_view key) const { return store().get(key); }
    bool exists(std::string_view key) const { return store().exists(key); }
    const std::string* value_of(std::string_view key) const { return store().value_of(key); }
    std::optional<std::uint64_t> expiry_of(std::string_view key) const {
        return store().expiry_of(key);
    }
    std::uint64_t now_ms() const noexcept { return store().now_ms(); }
    std::optional<std::uint64_t> next_expiry() const { return store().next_expiry(); }
    std::uint64_t version_of(std::string_view key) const { return store().version_of(key); }
    std::string read_call(const std::vector<std::string>& args, std::uint64_t reader_now_ms,
                          std::size_t max_reply_bytes = std::size_t{64} << 20) const {
        return store().read_call(args, reader_now_ms, max_reply_bytes);
    }
    std::size_t size() const noexcept { return store().size(); }
    /// Number of keys with an expiry.
    std::size_t expiring_size() const noexcept { return store().expiring_size(); }
    const kv_map& contents() const noexcept { return store().contents(); }
    /// The map's replicated state (its last_applied is the map's: a retry never reaches it).
    const kv_state& state() const noexcept { return store().state(); }

    // --- sessions ---------------------------------------------------------------------------

    const zab::session_table& sessions() const noexcept { return machine_.sessions(); }
    std::size_t client_count() const noexcept { return sessions().size(); }
    /// The last sequence applied for `client_id`, if the table remembers the client.
    std::optional<std::uint64_t> last_sequence(std::uint64_t client_id) const {
        return machine_.last_sequence(client_id);
    }
    /// When the next session expires by the map's clock, if one can: the leader proposes a
    /// TICK once its clock passes it (or `next_expiry()`).
    std::optional<std::uint64_t> next_session_expiry() const { return machine_.next_expiry_ms(); }

    /// The CRC32C the snapshot image carries: equal states (map and sessions) have equal
    /// digests, e.g. to compare replicas.
    std::uint32_t digest() const {
        const shared_bytes image = snapshot();
        return crc32c(image.view().first(image.size() - 4));
    }

private:
    machine_type machine_;
};

static_assert(result_machine<kv_state_machine>);
static_assert(deferred_snapshot_machine<kv_state_machine>);

}  // namespace zab::kv
