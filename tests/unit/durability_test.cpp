// Unit tests of zab::durability_tracker (zab/core/durability.hpp): operation numbers, what a
// completion makes durable (docs/protocol.md §2), and the disk-stall clock (§6.5).
#include <cstdint>

#include <catch2/catch.hpp>

#include "zab/core/durability.hpp"

using zab::durability_tracker;
using zab::epochs;
using zab::storage_op;
using zab::zxid;

namespace {
/// Issues a log operation leaving the log at `last`, at tick `now`.
storage_op issue_log(durability_tracker& d, zxid last, std::uint64_t now) {
    const storage_op op = d.next_op();
    d.log_issued(op, last, now);
    return op;
}
}  // namespace

TEST_CASE("durability: operation numbers only increase, log and epoch writes share them") {
    durability_tracker d;
    CHECK(d.last_issued_op() == 0);
    const storage_op log_op = d.next_log_op();
    CHECK(d.last_log_op() == log_op);
    const storage_op epoch_op = d.next_op();
    CHECK(epoch_op > log_op);
    d.epochs_issued(epoch_op, epochs{1, 0}, 0);
    CHECK(d.last_epoch_op() == epoch_op);
    CHECK(d.last_log_op() == log_op);  // an epoch write is no log operation
    CHECK(d.last_issued_op() == epoch_op);
    d.check();
}

TEST_CASE("durability: a completion makes durable exactly the operations up to it") {
    durability_tracker d;
    const storage_op first = issue_log(d, zxid{1, 1}, 0);
    const storage_op second = issue_log(d, zxid{1, 2}, 0);
    CHECK_FALSE(d.log_durable(first));
    CHECK(d.log_durable(0));  // no condition
    CHECK(d.newest_pending_log_op() == second);

    const auto last = d.log_completed(first, 1);
    REQUIRE(last.has_value());
    CHECK(*last == zxid{1, 1});  // what the log holds durably now
    CHECK(d.log_durable(first));
    CHECK_FALSE(d.log_durable(second));
    CHECK(d.log_pending());

    CHECK(d.log_completed(second, 2) == std::optional<zxid>{zxid{1, 2}});
    CHECK_FALSE(d.log_pending());
    // A repeated completion makes nothing more durable.
    CHECK_FALSE(d.log_completed(second, 3).has_value());
    d.check();
}

TEST_CASE("durability: log and epoch completions are independent") {
    durability_tracker d;
    const storage_op log_op = issue_log(d, zxid{2, 1}, 0);
    const storage_op epoch_op = d.next_op();
    d.epochs_issued(epoch_op, epochs{2, 2}, 0);
    CHECK(d.epochs_completed(epoch_op, 1) == std::optional<epochs>{epochs{2, 2}});
    CHECK(d.epochs_durable(epoch_op));
    CHECK_FALSE(d.log_durable(log_op));  // an epoch completion says nothing of the log
    CHECK(d.writes_pending());
    d.check();
}

TEST_CASE("durability: the stall clock runs only while a write is pending") {
    durability_tracker d;
    CHECK(d.stalled_for(100) == 0);  // nothing pending: never stalled

    const storage_op op = issue_log(d, zxid{1, 1}, 10);  // the clock starts at the issue
    CHECK(d.stalled_for(10) == 0);
    CHECK(d.stalled_for(15) == 5);

    // A second write while one is pending does not restart the clock.
    const storage_op later = issue_log(d, zxid{1, 2}, 14);
    CHECK(d.stalled_for(15) == 5);

    // Progress restarts it; with writes still pending it keeps running from there.
    d.log_completed(op, 20);
    CHECK(d.stalled_for(26) == 6);

    // Everything durable: no stall, however long.
    d.log_completed(later, 30);
    CHECK(d.stalled_for(1000) == 0);

    // A new write after a quiet time starts the clock afresh, not from the last progress.
    const storage_op epoch_op = d.next_op();
    d.epochs_issued(epoch_op, epochs{1, 1}, 500);
    CHECK(d.stalled_for(503) == 3);
}
