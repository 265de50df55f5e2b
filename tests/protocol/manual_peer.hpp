// tests/protocol/manual_peer.hpp — a peer driven by hand, message by message.
//
// The seeds' walkthroughs are scripts: "B receives C's vote, B sends <3, 1, 102, B>". This
// fixture runs one real zab::peer over a transport that records every frame it sends and a
// log whose recovered state the test chooses, so a test can feed notifications and assert
// exactly what comes out.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/codec.hpp"
#include "zab/core/peer.hpp"
#include "zab/testing/recording_state_machine.hpp"

namespace zab::test {

/// Records frames instead of sending them.
struct recording_transport {
    struct sent_frame {
        peer_id to;
        connection_id connection;
        shared_bytes frame;
    };
    std::vector<sent_frame> sent;
    std::vector<std::pair<peer_id, connection_id>> closed;

    void send(peer_id to, connection_id c, const shared_bytes& frame) {
        sent.push_back({to, c, frame});
    }
    void close(peer_id to, connection_id c) { closed.emplace_back(to, c); }

    /// The notifications sent so far, in order, and forgets them.
    std::vector<std::pair<peer_id, wire::notification>> take_notifications() {
        std::vector<std::pair<peer_id, wire::notification>> out;
        for (const auto& s : sent) {
            auto decoded = decode(s.frame.view());
            REQUIRE(decoded.has_value());
            if (const auto* n = std::get_if<wire::notification>(&decoded.value().msg))
                out.emplace_back(s.to, *n);
        }
        sent.clear();
        return out;
    }
};

/// A log whose recovered state is set by the test; the election phase only reads it.
struct fixed_log {
    zxid last;
    epochs stored;
    void append(storage_op, std::span<const log_record>) {}
    void truncate_after(storage_op, zxid) {}
    void install_snapshot(storage_op, zxid, const shared_bytes&, std::span<const log_record>) {}
    void make_durable(storage_op) {}
    void write_epochs(storage_op, epochs) {}
    zxid last_zxid() const { return last; }
    epochs stored_epochs() const { return stored; }
    std::optional<log_snapshot> snapshot() const { return std::nullopt; }
    result<std::vector<log_record>> read(zxid, std::size_t) const {
        return std::vector<log_record>{};
    }
};

/// A log the test makes durable by hand: it remembers the operations it was asked to sync
/// and the epoch writes, and holds its records so that the leader can read its history.
struct hand_log {
    std::vector<log_record> records;
    epochs stored;
    std::vector<storage_op> syncs;        // every sync(op) asked for, in order
    std::vector<storage_op> epoch_writes;  // every write_epochs(op, …), in order
    std::optional<std::error_code> read_error;  // set: every read fails with it

    void append(storage_op, std::span<const log_record> rs) {
        records.insert(records.end(), rs.begin(), rs.end());
    }
    void truncate_after(storage_op, zxid z) {
        std::erase_if(records, [&](const log_record& r) { return r.id > z; });
    }
    void install_snapshot(storage_op, zxid, const shared_bytes&, std::span<const log_record> rs) {
        records.assign(rs.begin(), rs.end());
    }
    void make_durable(storage_op op) { syncs.push_back(op); }
    void write_epochs(storage_op op, epochs e) {
        epoch_writes.push_back(op);
        stored = e;
    }
    zxid last_zxid() const { return records.empty() ? zxid{} : records.back().id; }
    epochs stored_epochs() const { return stored; }
    std::optional<log_snapshot> snapshot() const { return std::nullopt; }
    result<std::vector<log_record>> read(zxid after, std::size_t max) const {
        if (read_error) return *read_error;
        std::vector<log_record> out;
        for (const auto& r : records)
            if (r.id > after && out.size() < max) out.push_back(r);
        return out;
    }
};

template <typename Policies = default_policies>
struct manual_peer {
    using peer_type = peer<recording_transport, fixed_log, testing::recording_state_machine,
                           Policies>;

    recording_transport transport;
    fixed_log log;
    testing::recording_state_machine machine;
    std::unique_ptr<peer_type> p;

    /// Replica `self` of `config`, which recovered `last` and current epoch `epoch`; every
    /// other member is connected on connection id = its peer id.
    manual_peer(peer_id self, const configuration& config, zxid last, epoch_t epoch,
                options opts = {}) {
        log.last = last;
        log.stored = epochs{epoch, epoch};
        auto created = peer_type::create(self, config, opts, transport, log, machine);
        REQUIRE(created.has_value());
        p = std::move(created).value();
        for (const auto& m : config.members())
            if (m.id != self) p->on_connected(m.id, m.id);
        transport.sent.clear();
    }

    /// Delivers `n` as sent by `from`.
    void receive(peer_id from, const wire::notification& n) {
        p->on_receive(from, from, encode(frame_context{}, n));
    }
};

inline configuration voters(std::size_t n, std::size_t observers = 0) {
    auto c = configuration::numbered(n, observers);
    REQUIRE(c.has_value());
    return c.value();
}

/// A LOOKING notification for `leader` with `(epoch, zxid)`, in `round`.
inline wire::notification looking(peer_id leader, epoch_t epoch, zxid z, std::uint64_t round) {
    return wire::notification{peer_state::looking, leader, z, round, epoch};
}

}  // namespace zab::test
