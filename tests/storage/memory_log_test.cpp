// zab::memory_log: the log_store members, and the flush interface the runtime drives
// (completions only for what was asked, once each).
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/storage/memory_log.hpp"

using zab::zxid;

namespace {

zab::log_record record(zxid z, const std::string& bytes) {
    return {z, zab::shared_bytes::copy_of(zab::as_bytes(bytes))};
}

std::vector<zxid> ids(const zab::result<std::vector<zab::log_record>>& read) {
    REQUIRE(read.has_value());
    std::vector<zxid> out;
    for (const auto& r : read.value()) out.push_back(r.id);
    return out;
}

zab::flush_result flush(zab::memory_log& log) {
    auto job = log.begin_flush();
    job.run();
    return log.finish_flush(std::move(job));
}

}  // namespace

TEST_CASE("memory_log: append, read, truncate, snapshot install") {
    zab::memory_log log;
    CHECK(log.last_zxid() == zxid{});
    const std::vector<zab::log_record> batch{record({1, 1}, "a"), record({1, 2}, "b"),
                                             record({1, 3}, "c")};
    log.append(1, batch);
    CHECK(log.last_zxid() == zxid(1, 3));
    CHECK(ids(log.read(zxid{1, 1}, 10)) == std::vector<zxid>{{1, 2}, {1, 3}});
    CHECK(ids(log.read(zxid{}, 2)) == std::vector<zxid>{{1, 1}, {1, 2}});
    log.truncate_after(2, zxid{1, 1});
    CHECK(log.last_zxid() == zxid(1, 1));

    const std::vector<zab::log_record> after{record({2, 1}, "d")};
    log.install_snapshot(3, zxid{1, 9}, zab::shared_bytes::copy_of(zab::as_bytes("state")), after);
    REQUIRE(log.snapshot().has_value());
    CHECK(log.snapshot()->last_included == zxid(1, 9));
    CHECK(log.last_zxid() == zxid(2, 1));
    CHECK(ids(log.read(zxid{1, 9}, 10)) == std::vector<zxid>{{2, 1}});
    // Below the snapshot the history is gone.
    CHECK(log.read(zxid{1, 1}, 10).error() == zab::make_error_code(zab::errc::compacted));
}

TEST_CASE("memory_log: a flush reports what was asked, once") {
    zab::memory_log log;
    CHECK(!log.has_pending_work());
    log.append(1, std::vector<zab::log_record>{record({1, 1}, "a")});
    CHECK(!log.has_pending_work());  // an append alone asks for nothing
    log.make_durable(1);
    log.write_epochs(2, zab::epochs{1, 1});
    CHECK(log.stored_epochs() == zab::epochs{1, 1});  // visible at once
    REQUIRE(log.has_pending_work());
    const auto first = flush(log);
    CHECK(!first.failed());
    CHECK(first.log_durable == zab::storage_op{1});
    CHECK(first.epochs_durable == zab::storage_op{2});
    CHECK(!log.has_pending_work());
    const auto second = flush(log);
    CHECK(!second.log_durable.has_value());
    CHECK(!second.epochs_durable.has_value());
}

TEST_CASE("memory_log: starts from a given image and epochs") {
    zab::log_image image;
    image.append(std::vector<zab::log_record>{record({3, 1}, "x")});
    zab::memory_log log{image, zab::epochs{3, 3}};
    CHECK(log.last_zxid() == zxid(3, 1));
    CHECK(log.stored_epochs() == zab::epochs{3, 3});
    CHECK(log.contents().records.size() == 1);
}

TEST_CASE("memory_log: compact replaces the records up to a record above the snapshot") {
    zab::memory_log log;
    log.append(1, {{record({1, 1}, "a"), record({1, 2}, "b"), record({1, 3}, "c")}});
    const auto state = zab::shared_bytes::copy_of(zab::as_bytes("a,b"));
    CHECK_FALSE(log.compact(zxid{1, 4}, state));  // not a record
    REQUIRE(log.compact(zxid{1, 2}, state));
    CHECK_FALSE(log.compact(zxid{1, 2}, state));  // not above the snapshot
    REQUIRE(log.snapshot());
    CHECK(log.snapshot()->last_included == zxid{1, 2});
    CHECK(log.snapshot()->state == state);
    CHECK(log.last_zxid() == zxid{1, 3});
    CHECK(log.read(zxid{1, 1}, 10).error() == zab::errc::compacted);
    CHECK(ids(log.read(zxid{1, 2}, 10)) == std::vector<zxid>{{1, 3}});
    REQUIRE(log.compact(zxid{1, 3}, state));  // the last record: none left after it
    CHECK(log.last_zxid() == zxid{1, 3});
    CHECK(ids(log.read(zxid{1, 3}, 10)).empty());
}

TEST_CASE("memory_log: system_txns and read_last through append, truncate, compact, install") {
    const std::string system{reinterpret_cast<const char*>(zab::system_txn_magic.data()),
                             zab::system_txn_magic.size()};
    zab::log_image start;
    start.records = {record({1, 1}, system + "first"), record({1, 2}, "b")};
    zab::memory_log log{start, zab::epochs{1, 1}};
    CHECK(log.system_txns() == std::vector<zxid>{{1, 1}});  // found in the image it starts with
    const std::vector<zab::log_record> batch{record({1, 3}, "c"), record({1, 4}, system + "d"),
                                             record({1, 5}, "e"), record({1, 6}, system + "f")};
    log.append(1, batch);
    CHECK(log.system_txns() == std::vector<zxid>{{1, 1}, {1, 4}, {1, 6}});
    CHECK(log.system_txns() == log.contents().system_txns());
    CHECK(ids(log.read_last(2)) == std::vector<zxid>{{1, 5}, {1, 6}});
    CHECK(ids(log.read_last(100)).size() == 6);
    log.truncate_after(2, zxid{1, 5});
    CHECK(log.system_txns() == std::vector<zxid>{{1, 1}, {1, 4}});
    REQUIRE(log.compact(zxid{1, 2}, zab::shared_bytes::copy_of(zab::as_bytes("at 1.2"))));
    CHECK(log.system_txns() == std::vector<zxid>{{1, 4}});
    CHECK(ids(log.read_last(10)) == std::vector<zxid>{{1, 3}, {1, 4}, {1, 5}});
    const std::vector<zab::log_record> following{record({2, 1}, system + "g"), record({2, 2}, "h")};
    log.install_snapshot(3, zxid{1, 9}, zab::shared_bytes::copy_of(zab::as_bytes("s")), following);
    CHECK(log.system_txns() == std::vector<zxid>{{2, 1}});
    CHECK(ids(log.read_last(1)) == std::vector<zxid>{{2, 2}});
}
