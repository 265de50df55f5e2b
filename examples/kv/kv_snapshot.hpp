// examples/kv/kv_snapshot.hpp — the replicated state of the key-value map, and its snapshot
// image: what kv_store::snapshot() writes and restore() reads.
//
// kv_state_machine's image is zab::session_machine's (include/zab/session/session_machine.hpp):
// the session table of TAGGED, then this image with no clients. An image with clients is
// what kv_state_machine wrote before the sessions moved into zab: it still restores, the
// clients converted into sessions (kv_state_machine.hpp, "Compatibility").
//
// Image, version 3, little-endian, strings as a u32 length then the bytes:
//
//   u32 magic          0x3153564B: the bytes 'K' 'V' 'S' '1'
//   u8  version        3 (version 2: the same without the value's type, every value a
//                      string; it still restores. Version 1 had no clock, expiry,
//                      versions or replies: refused with errc::unsupported_version, see
//                      `snapshot_version_problem`)
//   u64 last_applied   zxid::value()
//   u64 now_ms         the map's clock (the latest TICK stamp applied, kv_store.hpp)
//   u64 key count,     then per key, in strictly increasing byte order: key, u8 type
//                      (kv_collection.hpp value_type), the value, u64 expires_ms (0:
//                      never), u64 version (zxid of its last write). The value: a string
//                      for a string; for the others a u64 element count (1 to
//                      max_collection_elements), then the elements: a hash's field, value
//                      pairs in increasing field order; a list's items in list order; a
//                      set's members in increasing order; a sorted set's member, u64 score
//                      (IEEE 754 bits, never NaN) pairs in increasing member order
//   u64 client count,  then per client, in strictly increasing id order:
//                      u64 client_id, u64 sequence, u64 last_active (zxid),
//                      u8 outcome kind, u64 outcome integer (two's complement), error text,
//                      reply bytes
//   u32 CRC32C         of every byte before it
//
// Maps are written in their (deterministic) order, so equal states have byte-identical
// images. Decoding checks everything — magic, version, checksum, order, bounds, that outcomes
// are well formed, that no client was active and no key written after `last_applied`, that
// no key is expired by `now_ms` (applying removes those) — and rejects the image
// otherwise: a restore either installs a state `snapshot()` could have written, or nothing.
//
// The layout did not change when the clock stopped following every write's stamp (command
// format version 3, kv_command.hpp): an image from before holds a clock that some write
// moved, which is still a clock (no key in it is expired by it), and the version-2 records
// after it in the log replay as they did. So such an image is still version 2 and restores.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "binary_io.hpp"
#include "kv_collection.hpp"
#include "kv_command.hpp"
#include "kv_outcome.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"
#include "zab/core/sealed_image.hpp"
#include "zab/core/zxid.hpp"

namespace zab::kv {

/// What the map remembers of one client for exactly-once retries.
struct client_record {
    std::uint64_t sequence = 0;  ///< the client's last applied request
    zxid last_active;            ///< the last command that carried this client's id
    outcome last_outcome;        ///< the outcome of `sequence` (never marked duplicate)
    bool operator==(const client_record&) const = default;
};

/// What the map holds under one key: a string (`value`), or a collection (`items`, never
/// empty: a collection's last element removed removes its key, as in Redis).
struct kv_entry {
    std::string value;
    std::uint64_t expires_ms = 0;  ///< when it expires, by the map's clock; 0: never
    std::uint64_t version = 0;     ///< the zxid (value) of the last transaction that wrote it
    boxed_collection items;        ///< empty for a string
    bool operator==(const kv_entry&) const = default;

    value_type type() const noexcept { return items ? type_of(*items) : value_type::string; }
};

/// Keys to entries. `std::less<>` for lookups by string_view; std::string orders its bytes
/// as unsigned, like memcmp, on every platform.
using kv_map = std::map<std::string, kv_entry, std::less<>>;
using client_map = std::map<std::uint64_t, client_record>;

/// The replicated state: equal on every replica that applied the same transactions.
struct kv_state {
    zxid last_applied;
    /// The clock: the largest stamp of the TICKs applied (and of version-2 records), ms since
    /// the Unix epoch. Presence and expiry follow it alone (kv_store.hpp).
    std::uint64_t now_ms = 0;
    kv_map data;
    client_map clients;
    bool operator==(const kv_state&) const = default;
};

/// "KVS1" as a little-endian u32.
inline constexpr std::uint32_t snapshot_magic = 0x3153564Bu;
inline constexpr std::uint8_t snapshot_version = 3;
/// The previous version, every value a string: still restored.
inline constexpr std::uint8_t snapshot_version_strings = 2;

/// The text for an image of another format version, e.g. a data directory written by an
/// older kv_server (its checkpoint is version 1): what to tell the operator.
inline std::string snapshot_version_problem(unsigned found) {
    return "the kv snapshot is format version " + std::to_string(found) +
           "; this kv_server reads only versions " + std::to_string(snapshot_version_strings) +
           " and " + std::to_string(snapshot_version) +
           " (a data directory from an older kv_server: dump its keys with the old binary and "
           "load them into a new cluster)";
}

/// The format version a map image claims (its byte after the magic), if it is one (a
/// kv_state_machine image, zab::session_machine's, is not: it holds a map image).
inline std::optional<unsigned> snapshot_image_version(byte_view image) {
    if (image.size() < 5) return std::nullopt;
    std::uint32_t magic = 0;
    for (int i = 3; i >= 0; --i) magic = (magic << 8) | std::to_integer<unsigned>(image[i]);
    if (magic != snapshot_magic) return std::nullopt;
    return std::to_integer<unsigned>(image[4]);
}

namespace detail {

inline constexpr std::size_t snapshot_header_bytes = 4 + 1 + 8;
inline constexpr std::size_t snapshot_crc_bytes = 4;

inline std::size_t image_size(const kv_state& s) noexcept {
    std::size_t size = snapshot_header_bytes + 8 + 8 + 8 + snapshot_crc_bytes;
    for (const auto& [key, entry] : s.data) {
        size += 8 + 1 + 16 + key.size() + entry.value.size();
        if (entry.items) size += 8 + 16 * size_of(*entry.items);
    }
    for (const auto& entry : s.clients) size += 8 * 3 + outcome_size(entry.second.last_outcome);
    return size;
}

}  // namespace detail

namespace detail {

// The image's parts in the order it holds them: kv_deferred_snapshot.hpp writes the keys
// piece by piece from another thread, with these same functions.

inline void write_snapshot_header(byte_writer& w, zxid last_applied, std::uint64_t now_ms,
                                  std::uint64_t key_count) {
    w.u32(snapshot_magic);
    w.u8(snapshot_version);
    w.u64(last_applied.value());
    w.u64(now_ms);
    w.u64(key_count);
}

inline void write_snapshot_entry(byte_writer& w, std::string_view key, const kv_entry& entry) {
    w.string(key);
    w.u8(static_cast<std::uint8_t>(entry.type()));
    if (!entry.items) {
        w.string(entry.value);
    } else {
        const collection& c = *entry.items;
        w.u64(size_of(c));
        if (const auto* h = std::get_if<hash_value>(&c)) {
            for (const auto& [field, value] : *h) {
                w.string(field);
                w.string(value);
            }
        } else if (const auto* l = std::get_if<list_value>(&c)) {
            for (const auto& item : *l) w.string(item);
        } else if (const auto* set = std::get_if<set_value>(&c)) {
            for (const auto& member : *set) w.string(member);
        } else {
            for (const auto& [member, score] : std::get<zset_value>(c).scores) {
                w.string(member);
                w.u64(std::bit_cast<std::uint64_t>(score));
            }
        }
    }
    w.u64(entry.expires_ms);
    w.u64(entry.version);
}

/// The clients, then the CRC32C of everything in `out` before it.
inline shared_bytes finish_snapshot(std::vector<std::byte>&& out, const client_map& clients) {
    byte_writer w{out};
    w.u64(clients.size());
    for (const auto& [id, client] : clients) {
        w.u64(id);
        w.u64(client.sequence);
        w.u64(client.last_active.value());
        write_outcome(w, client.last_outcome);
    }
    w.u32(crc32c(byte_view{out.data(), out.size()}));
    return shared_bytes{std::move(out)};
}

}  // namespace detail

namespace detail {

/// A collection of type `type` (1 to 4) into `items`: false on a bad type, count, order,
/// size or score (and on truncation: `in` failed).
inline bool read_collection(byte_reader& in, std::uint8_t type, boxed_collection& items) {
    if (type < 1 || type > 4) return false;
    std::uint64_t count = 0;
    if (!in.u64(count)) return false;
    // Every element takes at least 4 bytes: a count the image cannot hold is refused before
    // anything is built.
    if (count == 0 || count > max_collection_elements || count > in.remaining() / 4) return false;
    collection c = empty_collection(static_cast<value_type>(type));
    std::string first, second;
    const auto element = [&](std::string& s) { return in.string(s, max_element_bytes); };
    for (std::uint64_t i = 0; i < count; ++i) {
        if (!element(first)) return false;
        if (auto* h = std::get_if<hash_value>(&c)) {
            if (!element(second)) return false;
            if (!h->empty() && !(h->rbegin()->first < first)) return false;
            h->emplace_hint(h->end(), std::move(first), std::move(second));
        } else if (auto* l = std::get_if<list_value>(&c)) {
            l->push_back(std::move(first));
        } else if (auto* set = std::get_if<set_value>(&c)) {
            if (!set->empty() && !(*set->rbegin() < first)) return false;
            set->emplace_hint(set->end(), std::move(first));
        } else {
            auto& z = std::get<zset_value>(c);
            std::uint64_t bits = 0;
            if (!in.u64(bits)) return false;
            const double score = std::bit_cast<double>(bits);
            if (std::isnan(score)) return false;
            if (!z.scores.empty() && !(z.scores.rbegin()->first < first)) return false;
            z.put(first, score);
        }
        first.clear();
        second.clear();
    }
    items = boxed_collection{std::move(c)};
    return true;
}

}  // namespace detail

/// The image of `s`. Its strings fit (they were decoded from commands), so this cannot fail.
inline shared_bytes encode_snapshot(const kv_state& s) {
    std::vector<std::byte> out;
    out.reserve(detail::image_size(s));
    detail::byte_writer w{out};
    detail::write_snapshot_header(w, s.last_applied, s.now_ms, s.data.size());
    for (const auto& [key, entry] : s.data) detail::write_snapshot_entry(w, key, entry);
    return detail::finish_snapshot(std::move(out), s.clients);
}

/// The state `image` holds. Errors: `errc::unsupported_version`, `errc::bad_checksum`, and
/// `errc::corrupt` for anything else (bad magic, truncation, disorder, more clients than
/// `max_clients`, bytes after the last field).
inline result<kv_state> decode_snapshot(byte_view image, std::size_t max_clients) {
    auto body = unseal_image(image, snapshot_magic, snapshot_version, 8);
    const bool typed = body.has_value();
    if (!typed && body.error() == make_error_code(errc::unsupported_version))
        body = unseal_image(image, snapshot_magic, snapshot_version_strings, 8);
    if (!body) return body.error();
    detail::byte_reader in{body.value()};
    kv_state s;
    std::uint64_t last_applied = 0, key_count = 0, client_count = 0;
    in.u64(last_applied);
    s.last_applied = zxid::from_value(last_applied);
    in.u64(s.now_ms);
    in.u64(key_count);
    for (std::uint64_t i = 0; i < key_count && !in.failed(); ++i) {
        std::string key;
        kv_entry entry;
        std::uint8_t type = 0;
        if (!in.string(key, max_string_bytes) || (typed && !in.u8(type))) break;
        if (type == static_cast<std::uint8_t>(value_type::string)) {
            if (!in.string(entry.value, max_string_bytes)) break;
        } else if (!detail::read_collection(in, type, entry.items)) {
            if (in.failed()) break;
            return make_error_code(errc::corrupt);
        }
        if (!in.u64(entry.expires_ms) || !in.u64(entry.version)) break;
        if (!s.data.empty() && !(s.data.rbegin()->first < key))
            return make_error_code(errc::corrupt);
        if (entry.version == 0 || entry.version > last_applied ||
            (entry.expires_ms != 0 && entry.expires_ms <= s.now_ms))
            return make_error_code(errc::corrupt);
        s.data.emplace_hint(s.data.end(), std::move(key), std::move(entry));
    }
    in.u64(client_count);
    if (!in.failed() && client_count > max_clients) return make_error_code(errc::corrupt);
    std::set<std::uint64_t> activity;  // one command touches one client: each zxid once
    for (std::uint64_t i = 0; i < client_count && !in.failed(); ++i) {
        std::uint64_t id = 0, active = 0;
        client_record client;
        if (!in.u64(id) || !in.u64(client.sequence) || !in.u64(active) ||
            !detail::read_outcome(in, client.last_outcome))
            break;
        client.last_active = zxid::from_value(active);
        if (!s.clients.empty() && !(s.clients.rbegin()->first < id))
            return make_error_code(errc::corrupt);
        if (client.last_active > s.last_applied || !activity.insert(active).second)
            return make_error_code(errc::corrupt);
        s.clients.emplace_hint(s.clients.end(), id, std::move(client));
    }
    if (in.failed() || in.remaining() != 0) return make_error_code(errc::corrupt);
    return s;
}

}  // namespace zab::kv
