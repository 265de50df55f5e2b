// zab::file_log in normal operation: options, round trips across segment rolls, reads from
// memory and disk, compacted reads, truncation (in memory, on disk, across segments, while a
// flush runs), snapshot installs, epochs, group commit counted in fdatasyncs, a flush on
// another thread, the terminal failed state, and the index of system transactions and the
// tail reads (system_txns, read_last).
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "storage_test_support.hpp"

using namespace storage_test;
using zab::errc;
using zab::file_log_stats;

TEST_CASE("file_log options: nonsense is refused with the field named") {
    temporary_directory dir;
    const file_log_options good = small_options(dir.data());
    REQUIRE(good.problem().empty());
    file_log_options defaults;
    defaults.directory = "x";
    REQUIRE(defaults.problem().empty());

    struct bad_case {
        const char* field;
        file_log_options options;
    };
    std::vector<bad_case> cases;
    auto with = [&](const char* field, auto change) {
        file_log_options o = good;
        change(o);
        cases.push_back({field, o});
    };
    with("directory", [](file_log_options& o) { o.directory.clear(); });
    with("segment_bytes", [](file_log_options& o) { o.segment_bytes = 0; });
    with("max_record_bytes", [](file_log_options& o) { o.max_record_bytes = 0; });
    with("max_record_bytes", [](file_log_options& o) { o.max_record_bytes = 1u << 30; });
    with("group_commit_window_bytes", [](file_log_options& o) { o.group_commit_window_bytes = 100; });
    with("must not exceed segment_bytes", [](file_log_options& o) { o.segment_bytes = 1000; });
    with("snapshots_kept", [](file_log_options& o) { o.snapshots_kept = 0; });
    with("max_snapshot_bytes", [](file_log_options& o) { o.max_snapshot_bytes = 0; });
    for (const auto& c : cases) {
        INFO(c.field);
        REQUIRE_THAT(c.options.problem(), Catch::Contains(c.field));
        REQUIRE(c.options.validate().error() == errc::invalid_options);
        const auto failure = open_must_fail(c.options);
        REQUIRE(failure.error == errc::invalid_options);
        REQUIRE_THAT(failure.why, Catch::Contains(c.field));
    }
    REQUIRE_FALSE(std::filesystem::exists(dir.data()));  // nothing was created
}

TEST_CASE("file_log round trip: append, flush, reopen across segment rolls") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    {
        file_log log = open_new(options);
        REQUIRE(log.fresh());
        REQUIRE(log.last_zxid() == zxid{});
        zab::storage_op op = 0;
        for (std::uint32_t first = 1; first <= 100; first += 10) {
            const auto batch = records(1, first, first + 9);
            log.append(++op, batch);
            log.make_durable(op);
            const auto done = flush_ok(log);
            REQUIRE(done.log_durable == op);
            REQUIRE_FALSE(done.epochs_durable);
        }
        REQUIRE(log.last_zxid() == zxid{1, 100});
        require_records(read_all(log, 7), ids(1, 1, 100));
    }
    // 100 records of 76 bytes in segments of 2048: four segments, each rolled in time.
    REQUIRE(segment_files(dir.data()).size() == 4);
    for (const auto& name : segment_files(dir.data()))
        REQUIRE(std::filesystem::file_size(dir.data() + "/" + name) <= 2048);

    file_log log = open_log(options);
    REQUIRE_FALSE(log.fresh());
    REQUIRE(log.last_zxid() == zxid{1, 100});
    require_records(read_all(log), ids(1, 1, 100));
    require_records(read_all(log, 3), ids(1, 1, 100));

    // Appending after a reopen continues the last segment, then rolls.
    log.append(1, records(2, 1, 40));
    flush_ok(log);
    {
        file_log moved = std::move(log);
        require_records(read_all(moved), [] {
            auto want = ids(1, 1, 100);
            const auto more = ids(2, 1, 40);
            want.insert(want.end(), more.begin(), more.end());
            return want;
        }());
    }
    file_log reopened = open_log(options);
    REQUIRE(reopened.last_zxid() == zxid{2, 40});
    REQUIRE(read_all(reopened).size() == 140);
}

TEST_CASE("file_log read: ranges from memory, from disk, and across both") {
    temporary_directory dir;
    file_log log = open_new(small_options(dir.data()));
    log.append(1, records(1, 1, 30));
    log.make_durable(1);
    flush_ok(log);
    log.append(2, records(1, 31, 40));  // not flushed: served from memory

    auto range = [&](zxid after, std::size_t max) {
        auto got = log.read(after, max);
        REQUIRE(got.has_value());
        return ids(got.value());
    };
    REQUIRE(range(zxid{}, 5) == ids(1, 1, 5));
    REQUIRE(range(zxid{1, 10}, 3) == ids(1, 11, 13));
    REQUIRE(range(zxid{1, 25}, 10) == ids(1, 26, 35));  // disk, then memory
    REQUIRE(range(zxid{1, 35}, 100) == ids(1, 36, 40));
    REQUIRE(range(zxid{1, 40}, 100).empty());
    REQUIRE(range(zxid{2, 0}, 100).empty());
    REQUIRE(range(zxid{1, 5}, 0).empty());
    // A zxid between records (here: before the first of epoch 1) starts at the next one.
    REQUIRE(range(zxid{0, 99}, 2) == ids(1, 1, 2));
    require_records(read_all(log), ids(1, 1, 40));
}

TEST_CASE("file_log install_snapshot: compacted below, records after, and reopen") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    const auto state = shared_bytes::copy_of(zab::as_bytes("the state at <1, 50>"));
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 80));
        flush_ok(log);
        log.install_snapshot(2, zxid{1, 50}, state, records(1, 51, 55));
        REQUIRE(log.last_zxid() == zxid{1, 55});
        REQUIRE(log.snapshot()->last_included == zxid{1, 50});
        REQUIRE(log.snapshot()->state == state);
        REQUIRE(log.read(zxid{1, 49}, 10).error() == errc::compacted);
        REQUIRE(log.read(zxid{}, 10).error() == errc::compacted);
        REQUIRE(ids(log.read(zxid{1, 50}, 10).value()) == ids(1, 51, 55));
        log.make_durable(2);
        REQUIRE(flush_ok(log).log_durable == 2);
        log.append(3, records(1, 56, 60));
        flush_ok(log);
    }
    file_log log = open_log(options);
    REQUIRE(log.snapshot()->last_included == zxid{1, 50});
    REQUIRE(log.snapshot()->state == state);
    REQUIRE(log.last_zxid() == zxid{1, 60});
    REQUIRE(log.read(zxid{1, 10}, 10).error() == errc::compacted);
    require_records(read_all(log), ids(1, 51, 60));
    // The old generation's segments are gone from the disk.
    for (const auto& name : segment_files(dir.data())) {
        const auto bytes = read_file(dir.data() + "/" + name);
        REQUIRE(zab::storage_format::get_u64(&bytes[48]) != 0);  // every segment names a generation
    }
}

TEST_CASE("file_log snapshots: a snapshot alone, and only the newest N files kept") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    options.snapshots_kept = 2;
    {
        file_log log = open_new(options);
        for (std::uint32_t i = 1; i <= 4; ++i) {
            log.append(2 * i - 1, records(i, 1, 30));
            const std::string text = "state " + std::to_string(i);
            log.install_snapshot(2 * i, zxid{i, 20}, shared_bytes::copy_of(zab::as_bytes(text)));
            flush_ok(log);
        }
        REQUIRE(log.last_zxid() == zxid{4, 20});
        REQUIRE(read_all(log).empty());
    }
    REQUIRE(files_with_prefix(dir.data(), "snapshot.").size() == 2);
    REQUIRE(segment_files(dir.data()).empty());
    file_log log = open_log(options);
    REQUIRE(log.last_zxid() == zxid{4, 20});
    REQUIRE(log.snapshot()->state == shared_bytes::copy_of(zab::as_bytes("state 4")));
    // Appends continue after the snapshot, in a segment of its generation.
    log.append(9, records(4, 21, 22));
    flush_ok(log);
    require_records(read_all(log), ids(4, 21, 22));
}

TEST_CASE("file_log truncate_after, then reopen and append") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    auto setup = [&] {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 100));  // four segments: 26 records per segment
        flush_ok(log);
        REQUIRE(segment_files(dir.data()).size() == 4);
        return log;
    };
    auto check_after_reopen = [&](zxid last, const std::vector<zxid>& want) {
        {
            file_log log = open_log(options);
            REQUIRE(log.last_zxid() == last);
            require_records(read_all(log), want);
            // Appending after the cut works and survives another reopen.
            log.append(1, records(5, 1, 30));
            flush_ok(log);
        }
        file_log log = open_log(options);
        auto all = want;
        const auto more = ids(5, 1, 30);
        all.insert(all.end(), more.begin(), more.end());
        require_records(read_all(log), all);
    };

    SECTION("within the last segment") {
        {
            file_log log = setup();
            log.truncate_after(2, zxid{1, 90});
            REQUIRE(log.last_zxid() == zxid{1, 90});
            const auto truncations = log.stats().truncations;
            flush_ok(log);
            REQUIRE(log.stats().truncations == truncations + 1);
            REQUIRE(segment_files(dir.data()).size() == 4);
        }
        check_after_reopen(zxid{1, 90}, ids(1, 1, 90));
    }
    SECTION("across segments") {
        {
            file_log log = setup();
            log.truncate_after(2, zxid{1, 30});
            REQUIRE(ids(log.read(zxid{1, 28}, 10).value()) == ids(1, 29, 30));
            flush_ok(log);
            REQUIRE(segment_files(dir.data()).size() == 2);
        }
        check_after_reopen(zxid{1, 30}, ids(1, 1, 30));
    }
    SECTION("to a segment boundary") {
        {
            file_log log = setup();
            log.truncate_after(2, zxid{1, 26});
            flush_ok(log);
            REQUIRE(segment_files(dir.data()).size() == 1);
        }
        check_after_reopen(zxid{1, 26}, ids(1, 1, 26));
    }
    SECTION("to empty") {
        {
            file_log log = setup();
            log.truncate_after(2, zxid{});
            REQUIRE(log.last_zxid() == zxid{});
            REQUIRE(read_all(log).empty());
            flush_ok(log);
            REQUIRE(segment_files(dir.data()).size() == 1);  // the first, reduced to its header
        }
        check_after_reopen(zxid{}, {});
    }
    SECTION("of records never flushed: no disk truncation at all") {
        {
            file_log log = setup();
            log.append(2, records(1, 101, 120));
            log.truncate_after(3, zxid{1, 110});
            log.append(4, records(3, 1, 5));
            flush_ok(log);
            REQUIRE(log.stats().truncations == 0);
        }
        auto want = ids(1, 1, 110);
        const auto more = ids(3, 1, 5);
        want.insert(want.end(), more.begin(), more.end());
        check_after_reopen(zxid{3, 5}, want);
    }
    SECTION("below a snapshot: every record after the snapshot goes, the snapshot stays") {
        {
            file_log log = setup();
            log.install_snapshot(2, zxid{1, 100}, shared_bytes{}, records(2, 1, 10));
            flush_ok(log);
            log.truncate_after(3, zxid{1, 50});
            REQUIRE(log.last_zxid() == zxid{1, 100});
            flush_ok(log);
        }
        file_log log = open_new(options);
        REQUIRE(log.last_zxid() == zxid{1, 100});
        REQUIRE(read_all(log).empty());
    }
}

TEST_CASE("file_log truncation while a flush job is outstanding") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 10));
        flush_ok(log);
        log.append(2, records(1, 11, 40));
        auto job = log.begin_flush();  // holds 11..40
        REQUIRE(log.flush_in_progress());
        log.truncate_after(3, zxid{1, 20});  // cuts into what the job is writing
        log.append(4, records(2, 1, 3));
        log.make_durable(4);
        require_records(read_all(log), [] {
            auto want = ids(1, 1, 20);
            const auto more = ids(2, 1, 3);
            want.insert(want.end(), more.begin(), more.end());
            return want;
        }());
        job.run();
        const auto first = log.finish_flush(std::move(job));
        REQUIRE_FALSE(first.failed());
        REQUIRE_FALSE(first.log_durable);  // the sync came after begin_flush
        REQUIRE(log.has_pending_work());
        const auto second = flush_ok(log);
        REQUIRE(second.log_durable == 4);
        REQUIRE_FALSE(log.has_pending_work());
    }
    file_log log = open_log(options);
    auto want = ids(1, 1, 20);
    const auto more = ids(2, 1, 3);
    want.insert(want.end(), more.begin(), more.end());
    require_records(read_all(log), want);
}

TEST_CASE("file_log epochs: visible at once, durable after a flush, last write wins") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    {
        file_log log = open_log(options);
        REQUIRE(log.stored_epochs() == epochs{});
        log.write_epochs(1, {1, 0});
        log.write_epochs(2, {2, 1});
        REQUIRE(log.stored_epochs() == epochs{2, 1});
        const auto done = flush_ok(log);
        REQUIRE(done.epochs_durable == 2);
        REQUIRE_FALSE(done.log_durable);
        REQUIRE(log.stats().epoch_writes == 1);
    }
    REQUIRE(files_with_prefix(dir.data(), "epochs").size() == 1);  // no temporary left
    file_log log = open_log(options);
    REQUIRE(log.stored_epochs() == epochs{2, 1});
}

TEST_CASE("file_log group commit: one fdatasync per touched segment") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    options.segment_bytes = 4096;
    options.group_commit_window_bytes = 4096;
    file_log log = open_new(options);
    const file_log_stats before = log.stats();

    // 40 appends of one record each, one flush: one segment, one fdatasync.
    zab::storage_op op = 0;
    for (std::uint32_t c = 1; c <= 40; ++c) log.append(++op, records(1, c, c));
    log.make_durable(op);
    REQUIRE(flush_ok(log).log_durable == op);
    REQUIRE(log.stats().data_syncs - before.data_syncs == 1);
    REQUIRE(log.stats().watermark_syncs - before.watermark_syncs == 1);  // then the watermark
    REQUIRE(log.stats().records_written - before.records_written == 40);

    // 60 more: the rest of this segment and a new one, two fdatasyncs (and one directory
    // fsync for the new file).
    const file_log_stats middle = log.stats();
    for (std::uint32_t c = 41; c <= 100; ++c) log.append(++op, records(1, c, c));
    flush_ok(log);
    REQUIRE(segment_files(dir.data()).size() == 2);
    REQUIRE(log.stats().data_syncs - middle.data_syncs == 2);
    REQUIRE(log.stats().directory_syncs - middle.directory_syncs == 1);

    // A flush with nothing to write syncs nothing.
    const file_log_stats idle = log.stats();
    log.make_durable(++op);
    REQUIRE(flush_ok(log).log_durable == op);
    REQUIRE(log.stats().data_syncs == idle.data_syncs);
    REQUIRE(log.stats().watermark_syncs == idle.watermark_syncs);
    REQUIRE(log.stats().bytes_written == idle.bytes_written);
}

TEST_CASE("file_log group commit window: a batch larger than the window syncs in steps") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    options.segment_bytes = 4096;
    options.group_commit_window_bytes = 1024;
    file_log log = open_new(options);
    const auto before = log.stats().data_syncs;
    // 64-byte header + 30 records of 76 bytes = 2344 bytes; steps of at most 1024 bytes on
    // record boundaries: 64 + 12×76 = 976, 13×76 = 988, 5×76 = 380.
    log.append(1, records(1, 1, 30));
    flush_ok(log);
    REQUIRE(log.stats().data_syncs - before == 3);
}

TEST_CASE("file_log flush job runs on another thread while the peer thread keeps going") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 50));
        flush_ok(log);
        log.append(2, records(1, 51, 100));
        log.make_durable(2);
        log.write_epochs(3, {1, 1});
        auto job = log.begin_flush();
        std::thread worker([&job] { job.run(); });
        // Meanwhile: reads from disk and memory, and more appends for the next flush.
        for (int i = 0; i < 20; ++i) require_records(read_all(log, 9), ids(1, 1, 100));
        log.append(4, records(1, 101, 110));
        worker.join();
        const auto done = log.finish_flush(std::move(job));
        REQUIRE_FALSE(done.failed());
        REQUIRE(done.log_durable == 2);
        REQUIRE(done.epochs_durable == 3);
        log.make_durable(4);
        REQUIRE(flush_ok(log).log_durable == 4);
    }
    file_log log = open_log(options);
    require_records(read_all(log), ids(1, 1, 110));
    REQUIRE(log.stored_epochs() == epochs{1, 1});
}

namespace {

/// POSIX, except that the fsync of a snapshot file blocks until `release()` when it runs on
/// another thread than the one that made the file system (the test's, the peer thread), and
/// is refused (EIO, counted) on that thread: a checkpoint written inside the peer's flush
/// would stall its appends, the defect this file system catches.
class blocking_snapshot_fs final : public zab::file_system {
public:
    int open_directory(const std::string& path, int& fd) override { return real_.open_directory(path, fd); }
    int make_directory(const std::string& path) override { return real_.make_directory(path); }
    int lock_directory(int fd) override { return real_.lock_directory(fd); }
    int list_directory(const std::string& path, std::vector<std::string>& names) override {
        return real_.list_directory(path, names);
    }
    int sync_directory(int fd, zab::sync_site site) override { return real_.sync_directory(fd, site); }
    int open_file(int dir, const std::string& name, zab::open_mode mode, int& fd) override {
        return real_.open_file(dir, name, mode, fd);
    }
    int rename_file(int dir, const std::string& from, const std::string& to) override {
        return real_.rename_file(dir, from, to);
    }
    int remove_file(int dir, const std::string& name) override { return real_.remove_file(dir, name); }
    int write_at(int fd, zab::byte_view data, std::uint64_t offset) override {
        return real_.write_at(fd, data, offset);
    }
    int read_at(int fd, std::span<std::byte> out, std::uint64_t offset, std::size_t& got) override {
        return real_.read_at(fd, out, offset, got);
    }
    int size_of(int fd, std::uint64_t& size) override { return real_.size_of(fd, size); }
    int truncate_file(int fd, std::uint64_t size) override { return real_.truncate_file(fd, size); }
    int sync_data(int fd, zab::sync_site site) override { return real_.sync_data(fd, site); }
    int sync_file(int fd, zab::sync_site site) override {
        if (site == zab::sync_site::snapshot_file) {
            std::unique_lock lock{mutex_};
            if (std::this_thread::get_id() == peer_thread_) {
                ++refused_on_peer_thread_;
                return EIO;
            }
            blocked_ = true;
            changed_.notify_all();
            changed_.wait(lock, [this] { return released_; });
            blocked_ = false;
        }
        return real_.sync_file(fd, site);
    }
    void close(int fd) noexcept override { real_.close(fd); }

    /// Waits until a snapshot fsync is blocked on another thread.
    void wait_until_blocked() {
        std::unique_lock lock{mutex_};
        changed_.wait(lock, [this] { return blocked_; });
    }
    void release() {
        std::lock_guard lock{mutex_};
        released_ = true;
        changed_.notify_all();
    }
    bool blocked() {
        std::lock_guard lock{mutex_};
        return blocked_;
    }
    int refused_on_peer_thread() {
        std::lock_guard lock{mutex_};
        return refused_on_peer_thread_;
    }

private:
    zab::posix_file_system real_;
    const std::thread::id peer_thread_ = std::this_thread::get_id();
    std::mutex mutex_;
    std::condition_variable changed_;
    bool blocked_ = false;
    bool released_ = false;
    int refused_on_peer_thread_ = 0;
};

}  // namespace

TEST_CASE("file_log a checkpoint being written never delays the appends' and the epoch "
          "writes' durability (issue 34, defect 4)") {
    temporary_directory dir;
    blocking_snapshot_fs disk;
    auto options = small_options(dir.data());
    options.filesystem = &disk;
    const shared_bytes state = shared_bytes::copy_of(zab::as_bytes("state as of <1, 45>"));
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 40));
        log.make_durable(1);
        REQUIRE(flush_ok(log).log_durable == 1);
        // A compaction of a record that is not durable yet waits for it: no job is due.
        log.append(2, records(1, 41, 50));
        REQUIRE(log.compact(zxid{1, 45}, state));
        REQUIRE_FALSE(log.has_checkpoint_work());
        log.make_durable(2);
        zab::flush_job second = log.begin_flush();  // not flush(): it writes a due checkpoint
        second.run();
        REQUIRE(log.finish_flush(std::move(second)).log_durable == 2);
        REQUIRE(log.has_checkpoint_work());

        zab::checkpoint_job checkpoint = log.begin_checkpoint();
        REQUIRE_FALSE(log.has_checkpoint_work());
        std::thread writer([&checkpoint] { checkpoint.run(); });
        disk.wait_until_blocked();
        // The checkpoint's fsync is stuck: appends, a sync and an epoch write complete.
        for (int round = 0; round < 3; ++round) {
            const auto first = static_cast<std::uint32_t>(51 + 10 * round);
            log.append(static_cast<zab::storage_op>(3 + 2 * round), records(1, first, first + 9));
            log.make_durable(static_cast<zab::storage_op>(3 + 2 * round));
            log.write_epochs(static_cast<zab::storage_op>(4 + 2 * round), {2, 1});
            zab::flush_job job = log.begin_flush();
            job.run();
            const auto done = log.finish_flush(std::move(job));
            REQUIRE_FALSE(done.failed());
            REQUIRE(done.log_durable == static_cast<zab::storage_op>(3 + 2 * round));
            REQUIRE(done.epochs_durable == static_cast<zab::storage_op>(4 + 2 * round));
        }
        REQUIRE(disk.blocked());
        REQUIRE(log.checkpoint_in_progress());
        REQUIRE(log.read(zxid{1, 44}, 1).error() == errc::compacted);
        disk.release();
        writer.join();
        log.finish_checkpoint(std::move(checkpoint));
        REQUIRE_FALSE(log.failed());
        REQUIRE(log.stats().snapshots_written == 1);
    }
    REQUIRE(disk.refused_on_peer_thread() == 0);
    options.filesystem = &zab::posix_file_system_instance();
    file_log log = open_log(options);
    REQUIRE(log.snapshot()->last_included == zxid{1, 45});
    REQUIRE(log.snapshot()->state == state);
    require_records(read_all(log), ids(1, 46, 80));
    REQUIRE(log.stored_epochs() == epochs{2, 1});
}

TEST_CASE("file_log failure is terminal: every later flush fails, nothing is retried") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    file_log log = open_new(options);
    log.append(1, records(1, 1, 10));
    flush_ok(log);

    SECTION("a failed write of the batch") {
        log.append(2, records(1, 11, 20));
        log.make_durable(2);
        log.inject_failure_for_testing(EIO);
        const auto before = log.stats();
        const auto failed = log.flush();
        REQUIRE(failed.failed());
        REQUIRE(failed.error == errc::storage_failed);
        REQUIRE_FALSE(failed.log_durable);
        // The first step of this job is the write of the batch.
        REQUIRE_THAT(failed.reason, Catch::Contains("log.0000000000000001") &&
                                        Catch::Contains("Input/output error"));
        REQUIRE(log.failed());
        REQUIRE(log.stats().data_syncs == before.data_syncs);

        const auto after_failure = log.stats();
        log.append(3, records(1, 21, 22));
        log.make_durable(3);
        log.write_epochs(4, {1, 1});
        for (int i = 0; i < 3; ++i) {
            const auto again = log.flush();
            REQUIRE(again.failed());
            REQUIRE(again.reason == failed.reason);
            REQUIRE_FALSE(again.log_durable);
            REQUIRE_FALSE(again.epochs_durable);
        }
        REQUIRE(log.stats().bytes_written == after_failure.bytes_written);
        REQUIRE(log.stats().data_syncs == after_failure.data_syncs);
        REQUIRE(log.stats().epoch_writes == after_failure.epoch_writes);
        REQUIRE(log.stats().files_created == after_failure.files_created);
    }
    SECTION("a failed truncation") {
        log.truncate_after(2, zxid{1, 5});
        log.inject_failure_for_testing(EIO);
        const auto failed = log.flush();
        REQUIRE(failed.failed());
        // Its first step lowers the synced watermark to the cut (issue 34, defect 10).
        REQUIRE_THAT(failed.reason, Catch::Contains("synced"));
        REQUIRE(log.stats().truncations == 0);
        REQUIRE(log.flush().failed());
        REQUIRE(log.stats().truncations == 0);
    }
    SECTION("a record too large to store") {
        log.append(2, std::vector<log_record>{record(1, 11, options.max_record_bytes + 1)});
        REQUIRE(log.has_pending_work());
        const auto failed = log.flush();
        REQUIRE(failed.failed());
        REQUIRE_THAT(failed.reason, Catch::Contains("max_record_bytes"));
        REQUIRE(log.flush().failed());
    }
}

TEST_CASE("file_log a directory is used by one file_log at a time") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    {
        file_log first = open_log(options);
        const auto second = open_must_fail(options);
        REQUIRE(second.error == errc::invalid_argument);
        REQUIRE_THAT(second.why, Catch::Contains("in use"));
        // open_or_throw: the code, and the whole diagnostic in what().
        try {
            (void)file_log::open_or_throw(options);
            FAIL("open_or_throw opened a directory in use");
        } catch (const std::system_error& e) {
            REQUIRE(e.code() == make_error_code(errc::invalid_argument));
            REQUIRE_THAT(e.what(), Catch::Contains("in use"));
            REQUIRE_THAT(e.what(), Catch::Contains(options.directory));
        }
    }
    open_log(options);  // released with the first
}

TEST_CASE("file_log options changed between runs: old segments read, new ones written") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 10));
        flush_ok(log);
    }
    options.group_commit_window_bytes = 2048;  // the last segment keeps its own (1024)
    {
        file_log log = open_log(options);
        log.append(1, records(1, 11, 20));  // goes to a new segment, written with 2048
        flush_ok(log);
        REQUIRE(segment_files(dir.data()).size() == 2);
    }
    file_log log = open_log(options);
    require_records(read_all(log), ids(1, 1, 20));
}

TEST_CASE("file_log snapshot install while a flush job is outstanding") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    const auto state = shared_bytes::copy_of(zab::as_bytes("snap"));
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 30));
        flush_ok(log);
        log.append(2, records(1, 31, 60));
        auto job = log.begin_flush();  // writes 31..60 into the old generation
        log.install_snapshot(3, zxid{1, 45}, state, records(1, 46, 47));
        log.append(4, records(2, 1, 2));
        log.make_durable(4);
        job.run();
        REQUIRE_FALSE(log.finish_flush(std::move(job)).failed());
        auto want = ids(1, 46, 47);
        want.push_back(zxid{2, 1});
        want.push_back(zxid{2, 2});
        require_records(read_all(log), want);
        REQUIRE(flush_ok(log).log_durable == 4);
        require_records(read_all(log), want);
    }
    file_log log = open_log(options);
    REQUIRE(log.snapshot()->last_included == zxid{1, 45});
    auto want = ids(1, 46, 47);
    want.push_back(zxid{2, 1});
    want.push_back(zxid{2, 2});
    require_records(read_all(log), want);
    REQUIRE(log.read(zxid{1, 40}, 1).error() == errc::compacted);
}

TEST_CASE("file_log compact: a checkpoint stands in for the records up to it; the segments it "
          "covers go; records after it stay; reopen") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    const auto state = shared_bytes::copy_of(zab::as_bytes("the state at <1, 50>"));
    std::size_t segments_before = 0;
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 80));
        log.make_durable(1);
        flush_ok(log);
        segments_before = segment_files(dir.data()).size();
        REQUIRE(segments_before >= 3);

        REQUIRE_FALSE(log.compact(zxid{1, 81}, state));  // not in the log
        REQUIRE(log.compact(zxid{1, 50}, state));
        REQUIRE_FALSE(log.compact(zxid{1, 50}, state));  // not above the snapshot in effect
        REQUIRE_FALSE(log.compact(zxid{1, 20}, state));
        REQUIRE(log.snapshot()->last_included == zxid{1, 50});
        REQUIRE(log.snapshot()->state == state);
        REQUIRE(log.last_zxid() == zxid{1, 80});
        REQUIRE(log.read(zxid{1, 49}, 10).error() == errc::compacted);
        require_records(log.read(zxid{1, 50}, 100).value(), ids(1, 51, 80));
        // Not a log operation: the flush reports nothing for it, and appends go on.
        log.append(2, records(1, 81, 85));
        log.make_durable(2);
        REQUIRE(flush_ok(log).log_durable == 2);
        REQUIRE(files_with_prefix(dir.data(), "snapshot.").size() == 1);
        REQUIRE(segment_files(dir.data()).size() < segments_before);
        REQUIRE(log.stats().snapshots_written == 1);
        require_records(read_all(log), ids(1, 51, 85));
    }
    {
        file_log log = open_log(options);
        REQUIRE(log.snapshot()->last_included == zxid{1, 50});
        REQUIRE(log.snapshot()->state == state);
        REQUIRE(log.last_zxid() == zxid{1, 85});
        REQUIRE(log.read(zxid{1, 10}, 10).error() == errc::compacted);
        require_records(read_all(log), ids(1, 51, 85));
        // A TRUNC below the checkpoint keeps it and every record it covers.
        log.truncate_after(3, zxid{1, 40});
        REQUIRE(log.last_zxid() == zxid{1, 50});
        log.make_durable(3);
        flush_ok(log);
        log.append(4, records(2, 1, 30));
        log.make_durable(4);
        flush_ok(log);
        // A second checkpoint, in a segment made after the first one.
        REQUIRE(log.compact(zxid{2, 25}, shared_bytes::copy_of(zab::as_bytes("at <2, 25>"))));
        flush_ok(log);
    }
    file_log log = open_log(options);
    REQUIRE(log.snapshot()->last_included == zxid{2, 25});
    REQUIRE(log.last_zxid() == zxid{2, 30});
    require_records(read_all(log), ids(2, 26, 30));
    REQUIRE(files_with_prefix(dir.data(), "snapshot.").size() == options.snapshots_kept);
}

TEST_CASE("file_log compact at a crash: before the checkpoint lands the whole log is found; "
          "segments it covers but a crash left are removed at open; a gap below it is "
          "corruption") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    const auto state = shared_bytes::copy_of(zab::as_bytes("state"));
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 80));
        log.make_durable(1);
        flush_ok(log);
        REQUIRE(log.compact(zxid{1, 60}, state));
    }  // a crash: the checkpoint never reached the disk
    {
        file_log log = open_log(options);
        REQUIRE_FALSE(log.snapshot().has_value());
        require_records(read_all(log), ids(1, 1, 80));
    }
    // Keep copies of the segments, checkpoint, then put the unlinked ones back: what a crash
    // between the checkpoint's rename and its unlinks leaves.
    const std::string saved = dir.path() + "/saved";
    fs::create_directory(saved);
    for (const auto& name : segment_files(dir.data()))
        fs::copy_file(dir.data() + "/" + name, saved + "/" + name);
    {
        file_log log = open_log(options);
        REQUIRE(log.compact(zxid{1, 60}, state));
        flush_ok(log);
    }
    std::vector<std::string> unlinked;
    for (const auto& name : segment_files(saved))
        if (!fs::exists(dir.data() + "/" + name)) unlinked.push_back(name);
    REQUIRE_FALSE(unlinked.empty());
    for (const auto& name : unlinked) fs::copy_file(saved + "/" + name, dir.data() + "/" + name);
    {
        file_log log = open_log(options);
        REQUIRE(log.snapshot()->last_included == zxid{1, 60});
        require_records(read_all(log), ids(1, 61, 80));
    }
    for (const auto& name : unlinked) REQUIRE_FALSE(fs::exists(dir.data() + "/" + name));

    // The segment holding the checkpoint's zxid lost: the records it covers are missing.
    const auto live = segment_files(dir.data());
    REQUIRE(live.size() >= 2);
    fs::remove(dir.data() + "/" + live.front());
    const auto failure = open_must_fail(options);
    CHECK(failure.error == errc::corrupt);
    CHECK_THAT(failure.why, Catch::Contains("a segment is missing") ||
                                Catch::Contains("does not hold <1, 60>"));
}

TEST_CASE("file_log compact and install_snapshot: an install replaces a pending checkpoint; a "
          "checkpoint waits while an install is pending") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    const auto after_install = shared_bytes::copy_of(zab::as_bytes("after install"));
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 40));
        flush_ok(log);
        REQUIRE(log.compact(zxid{1, 30}, shared_bytes::copy_of(zab::as_bytes("checkpoint"))));
        const auto installed = shared_bytes::copy_of(zab::as_bytes("installed"));
        log.install_snapshot(2, zxid{1, 35}, installed, records(1, 36, 38));
        REQUIRE(log.snapshot()->state == installed);
        REQUIRE_FALSE(log.compact(zxid{1, 37}, after_install));  // the install is not flushed
        log.make_durable(2);
        flush_ok(log);
        REQUIRE(log.compact(zxid{1, 37}, after_install));
        flush_ok(log);
    }
    file_log log = open_log(options);
    REQUIRE(log.snapshot()->last_included == zxid{1, 37});
    REQUIRE(log.snapshot()->state == after_install);
    require_records(read_all(log), ids(1, 38, 38));
}

namespace {

/// A record like `record()` whose payload begins like one of zab's own transactions.
log_record system_record(std::uint32_t epoch, std::uint32_t counter) {
    log_record r = record(epoch, counter);
    std::vector<std::byte> bytes(r.txn.view().begin(), r.txn.view().end());
    std::copy(zab::system_txn_magic.begin(), zab::system_txn_magic.end(), bytes.begin());
    return {r.id, shared_bytes{std::move(bytes)}};
}

/// Records (1, first) … (1, last), those whose counter is a multiple of 10 system ones.
std::vector<log_record> mixed_records(std::uint32_t first, std::uint32_t last) {
    std::vector<log_record> out;
    for (std::uint32_t c = first; c <= last; ++c)
        out.push_back(c % 10 == 0 ? system_record(1, c) : record(1, c));
    return out;
}

std::vector<zxid> tens(std::uint32_t first, std::uint32_t last) {
    std::vector<zxid> out;
    for (std::uint32_t c = first; c <= last; ++c)
        if (c % 10 == 0) out.push_back(zxid{1, c});
    return out;
}

std::vector<zxid> last_ids(const file_log& log, std::size_t max) {
    auto last = log.read_last(max);
    REQUIRE(last.has_value());
    return ids(last.value());
}

}  // namespace

TEST_CASE("file_log system_txns and read_last: kept through append, truncate, compact, install "
          "and reopen") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    {
        file_log log = open_new(options);
        REQUIRE(log.system_txns().empty());
        REQUIRE(last_ids(log, 5).empty());
        log.append(1, mixed_records(1, 80));  // several segments, some not yet written
        REQUIRE(log.system_txns() == tens(1, 80));
        REQUIRE(last_ids(log, 3) == ids(1, 78, 80));
        log.make_durable(1);
        flush_ok(log);
        log.append(2, mixed_records(81, 95));  // the tail half on disk, half in memory
        REQUIRE(last_ids(log, 20) == ids(1, 76, 95));
        REQUIRE(log.system_txns() == tens(1, 95));
        // A TRUNC takes the system transactions after its point with it.
        log.truncate_after(3, zxid{1, 64});
        REQUIRE(log.system_txns() == tens(1, 64));
        REQUIRE(last_ids(log, 2) == ids(1, 63, 64));
        log.make_durable(3);
        flush_ok(log);
        // A compaction: those up to it are no longer the log's, the tail stops at it.
        REQUIRE(log.compact(zxid{1, 35}, shared_bytes::copy_of(zab::as_bytes("at <1, 35>"))));
        REQUIRE(log.system_txns() == tens(36, 64));
        REQUIRE(last_ids(log, 100) == ids(1, 36, 64));
        flush_ok(log);
    }
    {
        // Reopened: the scan at open finds them again, the checkpoint's covered ones not.
        file_log log = open_log(options);
        REQUIRE(log.system_txns() == tens(36, 64));
        REQUIRE(last_ids(log, 100) == ids(1, 36, 64));
        REQUIRE(last_ids(log, 1) == ids(1, 64, 64));
        log.append(4, mixed_records(65, 72));
        REQUIRE(log.system_txns() == tens(36, 72));
        // A snapshot install replaces everything: only `following`'s count.
        log.install_snapshot(5, zxid{1, 100}, shared_bytes::copy_of(zab::as_bytes("snap")),
                             mixed_records(101, 125));
        REQUIRE(log.system_txns() == tens(101, 125));
        REQUIRE(last_ids(log, 4) == ids(1, 122, 125));
        log.make_durable(5);
        flush_ok(log);
    }
    file_log log = open_log(options);
    REQUIRE(log.system_txns() == tens(101, 125));
    REQUIRE(last_ids(log, 100) == ids(1, 101, 125));
    auto last = log.read_last(1);
    REQUIRE(last.has_value());
    REQUIRE(last.value().front().txn == record(1, 125).txn);
    REQUIRE(log.read(zxid{1, 119}, 1).value().front().txn == system_record(1, 120).txn);
}
