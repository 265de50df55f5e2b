// Unit tests of zab::outbox (zab/core/outbox.hpp): frames leave in order per destination,
// each once the storage operations it waits for are durable (docs/design.md rule 2,
// docs/protocol.md §6.1), and a cumulative frame covered by a later one is left out.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/outbox.hpp"

using zab::connection_id;
using zab::durability_tracker;
using zab::outbox;
using zab::peer_id;
using zab::storage_op;
using zab::zxid;

namespace {

/// A one-byte frame `tag`, to tell frames apart.
zab::shared_bytes frame_of(std::uint8_t tag) {
    return zab::shared_bytes{std::vector<std::byte>{std::byte{tag}}};
}

struct sent {
    peer_id to;
    connection_id connection;
    std::uint8_t tag;
    friend bool operator==(const sent&, const sent&) = default;
};

std::vector<sent> release(outbox& box, const durability_tracker& storage,
                          std::uint64_t* coalesced = nullptr) {
    std::vector<sent> out;
    const std::uint64_t left_out = box.release(storage, [&](const outbox::queued_frame& f) {
        out.push_back({f.to, f.connection, static_cast<std::uint8_t>(f.frame.view()[0])});
    });
    if (coalesced != nullptr) *coalesced = left_out;
    return out;
}

/// A log operation issued and not durable yet: what a frame can wait for.
storage_op pending_log_op(durability_tracker& storage) {
    const storage_op op = storage.next_op();
    storage.log_issued(op, zxid{1, 1}, 0);
    return op;
}

/// An outbox with connections 20 to peer 2 and 30 to peer 3, and two frames queued: 1 for
/// peer 2, then 2 for peer 3.
outbox two_peers_one_frame_each() {
    outbox box;
    box.set_connection(2, 20);
    box.set_connection(3, 30);
    box.queue(2, frame_of(1), 0, 0);
    box.queue(3, frame_of(2), 0, 0);
    return box;
}

}  // namespace

TEST_CASE("outbox: frames leave in the order queued, per destination") {
    outbox box = two_peers_one_frame_each();
    durability_tracker storage;
    box.queue(2, frame_of(3), 0, 0);
    CHECK(box.size() == 3);
    CHECK(box.queued_for(2) == 2);
    CHECK(release(box, storage) == std::vector<sent>{{2, 20, 1}, {3, 30, 2}, {2, 20, 3}});
    CHECK(box.size() == 0);
    CHECK(release(box, storage).empty());  // once
}

TEST_CASE("outbox: a frame gated on a log operation waits until it is durable, and holds "
          "back later frames to its destination only") {
    outbox box;
    durability_tracker storage;
    box.set_connection(2, 20);
    box.set_connection(3, 30);
    const storage_op op = pending_log_op(storage);
    box.queue(2, frame_of(1), op, 0);  // an ACK: durable first
    box.queue(2, frame_of(2), 0, 0);   // behind it
    box.queue(3, frame_of(3), 0, 0);   // another destination: not held
    CHECK(release(box, storage) == std::vector<sent>{{3, 30, 3}});
    CHECK(box.queued_for(2) == 2);

    box.queue(2, frame_of(4), 0, 0);  // queued while held: still behind
    CHECK(release(box, storage).empty());

    storage.log_completed(op, 1);
    CHECK(release(box, storage) == std::vector<sent>{{2, 20, 1}, {2, 20, 2}, {2, 20, 4}});
    CHECK(box.size() == 0);
}

TEST_CASE("outbox: a frame gated on an epoch write waits for that write, not the log") {
    outbox box;
    durability_tracker storage;
    box.set_connection(2, 20);
    const storage_op log_op = storage.next_op();
    storage.log_issued(log_op, zxid{1, 1}, 0);
    const storage_op epoch_op = storage.next_op();
    storage.epochs_issued(epoch_op, zab::epochs{1, 0}, 0);
    box.queue(2, frame_of(1), 0, epoch_op);  // an ACKEPOCH
    storage.log_completed(log_op, 1);
    CHECK(release(box, storage).empty());
    storage.epochs_completed(epoch_op, 2);
    CHECK(release(box, storage) == std::vector<sent>{{2, 20, 1}});
}

TEST_CASE("outbox: without a connection a frame is lost; a replaced connection's frames go") {
    outbox box;
    durability_tracker storage;
    box.queue(2, frame_of(1), 0, 0);  // no link: lost
    CHECK(box.size() == 0);

    box.set_connection(2, 20);
    const storage_op op = pending_log_op(storage);
    box.queue(2, frame_of(2), op, 0);
    CHECK(release(box, storage).empty());
    box.set_connection(2, 21);  // reconnected: the held frame of the old link can never go
    CHECK(box.size() == 0);
    box.queue(2, frame_of(3), 0, 0);
    CHECK(release(box, storage) == std::vector<sent>{{2, 21, 3}});  // not held behind it
}

TEST_CASE("outbox: close forgets the connection and its frames; the close is handed over once") {
    outbox box = two_peers_one_frame_each();
    durability_tracker storage;
    box.close(2);
    CHECK_FALSE(box.connection_to(2).has_value());
    CHECK(box.connected_peers() == std::vector<peer_id>{3});
    CHECK(box.take_closes() == std::vector<std::pair<peer_id, connection_id>>{{2, 20}});
    CHECK(box.take_closes().empty());
    CHECK(release(box, storage) == std::vector<sent>{{3, 30, 2}});
}

TEST_CASE("outbox: a cumulative frame followed at once by a later one of its kind is left out") {
    outbox box;
    durability_tracker storage;
    box.set_connection(2, 20);
    constexpr std::uint8_t ack = 24;
    constexpr std::uint8_t commit = 31;
    box.queue(2, frame_of(1), 0, 0, ack);
    box.queue(2, frame_of(2), 0, 0, ack);  // covers the first
    box.queue(2, frame_of(3), 0, 0);       // another frame: the waiting ACK goes before it
    box.queue(2, frame_of(4), 0, 0, ack);
    box.queue(2, frame_of(5), 0, 0, commit);  // another kind covers nothing of the ACK
    std::uint64_t coalesced = 0;
    CHECK(release(box, storage, &coalesced) ==
          std::vector<sent>{{2, 20, 2}, {2, 20, 3}, {2, 20, 4}, {2, 20, 5}});
    CHECK(coalesced == 1);
}

TEST_CASE("outbox: destinations over a backlog, ascending") {
    outbox box;
    durability_tracker storage;
    for (peer_id id : {4, 2, 3}) box.set_connection(id, id * 10);
    const storage_op op = pending_log_op(storage);
    for (int i = 0; i < 3; ++i) box.queue(4, frame_of(1), op, 0);
    for (int i = 0; i < 3; ++i) box.queue(2, frame_of(2), op, 0);
    box.queue(3, frame_of(3), op, 0);
    CHECK(release(box, storage).empty());
    CHECK(box.destinations_over(2) == std::vector<std::pair<peer_id, std::size_t>>{{2, 3}, {4, 3}});
    CHECK(box.destinations_over(7).empty());
}
