// zab/core/reconfig.hpp — reconfiguration as a transaction, and the configuration a snapshot
// stands for (docs/protocol.md §9).
//
// A reconfiguration is a transaction the core itself proposes, logs, commits and applies like
// any other; it carries the whole new configuration, and its zxid is the new configuration's
// version. The core recognizes it by a reserved prefix (`system_txn_magic`): the state machine
// never sees it, and a client transaction that begins with the prefix is refused
// (`errc::invalid_argument`) before it is proposed.
//
//   offset size field
//        0    8 magic             "\0zab-sys" — system_txn_magic
//        8    1 kind              1: reconfiguration
//        9    1 has_expected      0 or 1
//       10    8 expected_version  the configuration version the change applies to (CAS), if set
//       18    4 member count      1 … max_members
//       22    … members           each: id u64, type u8 (0 participant, 1 observer),
//                                 group u32, weight u32, flags u8 (bit 0: promote, bit 1:
//                                 an address follows, bit 2: a client address follows),
//                                 then with bit 1 the address's length u8 (1 … 255) and its
//                                 bytes, then with bit 2 the client address the same way;
//                                 ascending ids
//
// A snapshot taken after a reconfiguration carries the configuration in force at its zxid,
// in front of the state machine's bytes, so that a log compacted past the reconfiguration (or
// a SNAP sync) still knows its members:
//
//        0    8 magic             "\0zab-cfg"
//        8    8 version
//       16    4 member count, then the members as above
//        …    4 CRC32C of everything before it
//        …      the state machine's snapshot
//
// A snapshot without the prefix is the state machine's alone (no reconfiguration was ever
// applied): the configuration is the one the replica was started with.
//
// A snapshot is labelled with the core's last applied zxid, which counts zab's own
// transactions; a state machine that is no zab::system_txn_machine never sees those, so its
// own `last_applied()` can be behind the label (a reconfiguration was the last transaction
// applied). Such a snapshot carries the machine's own label in front of everything else, and
// the machine is restored with that label — the zxid its `last_applied()` returned when the
// snapshot was taken, so a machine that checks a snapshot against its own zxid always finds
// its own (issue 34 defect 1):
//
//        0    8 magic             "\0zab-lbl"
//        8    8 machine label     the state machine's last_applied() at the snapshot
//       16    4 CRC32C of everything before it
//       20      the rest: a configuration prefix and the state machine's snapshot, as above
//
// Without it the machine's label is the snapshot's own zxid.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/config.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"

namespace zab {

/// The prefix of a system transaction (a reconfiguration). Client transactions must not
/// begin with it: `peer::submit` refuses them with `invalid_argument`.
inline constexpr std::array<std::byte, 8> system_txn_magic{
    std::byte{0}, std::byte{'z'}, std::byte{'a'}, std::byte{'b'},
    std::byte{'-'}, std::byte{'s'}, std::byte{'y'}, std::byte{'s'}};

/// The prefix of a snapshot that carries its configuration.
inline constexpr std::array<std::byte, 8> config_snapshot_magic{
    std::byte{0}, std::byte{'z'}, std::byte{'a'}, std::byte{'b'},
    std::byte{'-'}, std::byte{'c'}, std::byte{'f'}, std::byte{'g'}};

/// The prefix of a snapshot whose state machine's own label differs from the snapshot's zxid.
inline constexpr std::array<std::byte, 8> label_snapshot_magic{
    std::byte{0}, std::byte{'z'}, std::byte{'a'}, std::byte{'b'},
    std::byte{'-'}, std::byte{'l'}, std::byte{'b'}, std::byte{'l'}};

/// Members a configuration may have (bounds what a decoder allocates).
inline constexpr std::size_t max_members = 1024;

/// True if `txn` is one of zab's own transactions rather than the application's.
inline bool is_system_txn(byte_view txn) noexcept {
    return txn.size() >= system_txn_magic.size() &&
           std::memcmp(txn.data(), system_txn_magic.data(), system_txn_magic.size()) == 0;
}

/// A requested change of membership: the whole new member list, and optionally the version
/// it must replace (compare-and-set, ZooKeeper's `reconfig -v`).
struct reconfig_request {
    std::vector<member> members;
    std::optional<std::uint64_t> expected_version;
    friend bool operator==(const reconfig_request&, const reconfig_request&) = default;
};

namespace detail {

inline constexpr std::uint8_t system_txn_reconfig = 1;
/// A member's fixed part (the smallest encoding of one).
inline constexpr std::size_t member_bytes = 18;
inline constexpr std::uint8_t member_promote = 1;
inline constexpr std::uint8_t member_has_address = 2;
inline constexpr std::uint8_t member_has_client_address = 4;

inline std::size_t members_size(const std::vector<member>& members) noexcept {
    std::size_t size = 4 + member_bytes * members.size();
    for (const member& m : members) {
        if (!m.address.empty()) size += 1 + m.address.size();
        if (!m.client_address.empty()) size += 1 + m.client_address.size();
    }
    return size;
}

/// A length-prefixed address (1 … 255 bytes), as a member's flags announce it.
inline void put_address(wire_writer& w, const std::string& text) noexcept {
    w.put(static_cast<std::uint8_t>(text.size()));
    w.put_raw(std::as_bytes(std::span{text}));
}

/// Reads what put_address wrote; false (with `r` failed) for an empty or short one.
inline bool get_address(wire_reader& r, std::string& text) {
    std::uint8_t length = 0;
    if (!r.get(length) || length == 0 || r.remaining() < length) {
        r.fail();
        return false;
    }
    byte_view bytes;
    r.get_raw(length, bytes);
    text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return true;
}

/// `members` must be a valid configuration's (addresses within max_address_size).
inline void put_members(wire_writer& w, const std::vector<member>& members) noexcept {
    w.put(static_cast<std::uint32_t>(members.size()));
    for (const member& m : members) {
        w.put(std::uint64_t{m.id});
        w.put(static_cast<std::uint8_t>(m.type));
        w.put(std::uint32_t{m.group});
        w.put(std::uint32_t{m.weight});
        w.put(static_cast<std::uint8_t>(
            (m.promote ? member_promote : 0) | (m.address.empty() ? 0 : member_has_address) |
            (m.client_address.empty() ? 0 : member_has_client_address)));
        if (!m.address.empty()) put_address(w, m.address);
        if (!m.client_address.empty()) put_address(w, m.client_address);
    }
}

/// Reads a member list; nullopt (with `r` failed) for a short, oversized or invalid one.
inline std::optional<std::vector<member>> get_members(wire_reader& r) {
    std::uint32_t count = 0;
    if (!r.get(count) || count == 0 || count > max_members ||
        r.remaining() < member_bytes * count) {
        r.fail();
        return std::nullopt;
    }
    std::vector<member> members;
    members.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        std::uint64_t id = 0;
        std::uint8_t type = 0, flags = 0;
        std::uint32_t group = 0, weight = 0;
        r.get(id);
        r.get(type);
        r.get(group);
        r.get(weight);
        r.get(flags);
        constexpr std::uint8_t known_flags =
            member_promote | member_has_address | member_has_client_address;
        if (r.failed() || type > 1 || (flags & ~known_flags) != 0 || id == 0 ||
            (!members.empty() && id <= members.back().id)) {
            r.fail();
            return std::nullopt;
        }
        member m{id, static_cast<learner_type>(type), group, weight,
                 (flags & member_promote) != 0, {}, {}};
        if ((flags & member_has_address) != 0 && !get_address(r, m.address)) return std::nullopt;
        if ((flags & member_has_client_address) != 0 && !get_address(r, m.client_address))
            return std::nullopt;
        members.push_back(std::move(m));
    }
    return members;
}

}  // namespace detail

/// The transaction that proposes `request` (members sorted by id first).
inline shared_bytes encode_reconfig(reconfig_request request) {
    std::sort(request.members.begin(), request.members.end(),
              [](const member& a, const member& b) { return a.id < b.id; });
    const std::size_t size = system_txn_magic.size() + 1 + 1 + 8 + detail::members_size(request.members);
    return shared_bytes::make(size, [&](std::span<std::byte> out) {
        detail::wire_writer w{out};
        w.put_raw(system_txn_magic);
        w.put(detail::system_txn_reconfig);
        w.put(static_cast<std::uint8_t>(request.expected_version ? 1 : 0));
        w.put(std::uint64_t{request.expected_version.value_or(0)});
        detail::put_members(w, request.members);
    });
}

/// Decodes a system transaction as a reconfiguration. `errc::malformed` for anything else
/// (another kind, a bad member list, trailing bytes): the input may come from a client.
inline result<reconfig_request> decode_reconfig(byte_view txn) {
    if (!is_system_txn(txn)) return make_error_code(errc::malformed);
    detail::wire_reader r{txn.subspan(system_txn_magic.size())};
    std::uint8_t kind = 0, has_expected = 0;
    std::uint64_t expected = 0;
    r.get(kind);
    r.get(has_expected);
    r.get(expected);
    if (r.failed() || kind != detail::system_txn_reconfig || has_expected > 1)
        return make_error_code(errc::malformed);
    auto members = detail::get_members(r);
    if (!members || r.remaining() != 0) return make_error_code(errc::malformed);
    reconfig_request request;
    request.members = std::move(*members);
    if (has_expected == 1) request.expected_version = expected;
    return request;
}

namespace detail {
inline bool has_prefix(byte_view bytes, const std::array<std::byte, 8>& magic) noexcept {
    return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
}
}  // namespace detail

/// A snapshot as the core keeps and sends it: the state machine's bytes with what the core
/// must know beside them — the configuration in force once a reconfiguration was applied, and
/// the machine's own label when it differs from the snapshot's zxid (see the header comment).
/// Absent parts are absent bytes: a snapshot of a replica that never reconfigured, of a
/// machine at the snapshot's zxid, is the machine's bytes alone.
inline shared_bytes wrap_snapshot(const std::optional<configuration>& config,
                                  std::optional<zxid> machine_label, byte_view state) {
    const std::size_t label_head = machine_label ? label_snapshot_magic.size() + 8 : 0;
    const std::size_t config_head =
        config ? config_snapshot_magic.size() + 8 + detail::members_size(config->members()) : 0;
    const std::size_t size =
        (label_head ? label_head + 4 : 0) + (config_head ? config_head + 4 : 0) + state.size();
    return shared_bytes::make(size, [&](std::span<std::byte> out) {
        detail::wire_writer w{out};
        if (machine_label) {
            w.put_raw(label_snapshot_magic);
            w.put(machine_label->value());
            w.put(crc32c(byte_view{out.data(), label_head}));
        }
        if (config) {
            const std::size_t start = label_head ? label_head + 4 : 0;
            w.put_raw(config_snapshot_magic);
            w.put(std::uint64_t{config->version()});
            detail::put_members(w, config->members());
            w.put(crc32c(byte_view{out.data() + start, config_head}));
        }
        w.put_raw(state);
    });
}

/// `state` (the state machine's snapshot) with `config` in front of it.
inline shared_bytes wrap_snapshot(const configuration& config, byte_view state) {
    return wrap_snapshot(std::optional<configuration>{config}, std::nullopt, state);
}

/// A snapshot split into the configuration it carries (if any), the state machine's own
/// label (if it differs from the snapshot's zxid) and the state machine's part.
struct unwrapped_snapshot {
    std::optional<configuration> config;
    byte_view state;
    std::optional<zxid> machine_label;

    /// The zxid to restore the state machine with, for a snapshot at `at`.
    zxid machine_at(zxid at) const noexcept { return machine_label.value_or(at); }
};

/// Splits a snapshot written by `wrap_snapshot`; one without a prefix is the state machine's
/// alone. `errc::corrupt` when a prefix is there but what follows does not check out.
inline result<unwrapped_snapshot> unwrap_snapshot(byte_view bytes) {
    unwrapped_snapshot out{std::nullopt, bytes, std::nullopt};
    if (detail::has_prefix(bytes, label_snapshot_magic)) {
        detail::wire_reader r{bytes.subspan(label_snapshot_magic.size())};
        std::uint64_t label = 0;
        std::uint32_t stored_crc = 0;
        const std::size_t head = label_snapshot_magic.size() + 8;
        if (!r.get(label) || !r.get(stored_crc) || stored_crc != crc32c(bytes.first(head)))
            return make_error_code(errc::corrupt);
        out.machine_label = zxid::from_value(label);
        bytes = bytes.subspan(head + 4);
        out.state = bytes;
    }
    if (!detail::has_prefix(bytes, config_snapshot_magic)) return out;
    detail::wire_reader r{bytes.subspan(config_snapshot_magic.size())};
    std::uint64_t version = 0;
    r.get(version);
    auto members = detail::get_members(r);
    if (!members) return make_error_code(errc::corrupt);
    const std::size_t head = bytes.size() - r.remaining();
    std::uint32_t stored_crc = 0;
    if (!r.get(stored_crc) || stored_crc != crc32c(bytes.first(head)))
        return make_error_code(errc::corrupt);
    auto config = configuration::make(std::move(*members), version);
    if (!config) return make_error_code(errc::corrupt);
    out.config = std::move(config.value());
    out.state = bytes.subspan(head + 4);
    return out;
}

}  // namespace zab
