// zab::file_log recovery: torn tails cut at every byte, garbage after the tail, corruption
// refused with the file named (earlier segment, beyond the window, missing or foreign
// segment), idempotent recovery, the epoch file and the start-up checks of PROTOCOL.md §2,
// the directory's identity and fresh flag, and snapshot installs interrupted by a crash
// (ZOOKEEPER-2832/2872: never a stale record after the snapshot).
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "storage_test_support.hpp"

using namespace storage_test;
using zab::errc;

namespace {

constexpr std::size_t header_size = zab::storage_format::segment_header_size;
constexpr std::size_t record_size = zab::storage_format::record_header_size + payload_size;

/// Writes records 1..n of epoch 1 in one flush, then `tail` more in a second flush.
void write_log(const file_log_options& options, std::uint32_t n, std::uint32_t tail = 0) {
    file_log log = open_new(options);
    log.append(1, records(1, 1, n));
    flush_ok(log);
    if (tail > 0) {
        log.append(2, records(1, n + 1, n + tail));
        flush_ok(log);
    }
}

std::string last_segment(const std::string& directory) {
    const auto names = segment_files(directory);
    REQUIRE_FALSE(names.empty());
    return directory + "/" + names.back();
}

}  // namespace

TEST_CASE("file_log torn tail: cut at every byte of the last batch, recovery keeps the rest") {
    temporary_directory dir;
    const std::string pristine = dir.path() + "/pristine";
    const std::string work = dir.path() + "/work";
    // 40 records, then a last batch of 3: segment 1 holds 26, segment 2 holds 14 + 3.
    write_log(small_options(pristine), 40, 3);
    REQUIRE(segment_files(pristine).size() == 2);
    const std::string name = segment_files(pristine).back();
    const std::size_t batch_start = header_size + 14 * record_size;
    const std::size_t end = header_size + 17 * record_size;
    REQUIRE(std::filesystem::file_size(pristine + "/" + name) == end);

    for (std::size_t cut = batch_start; cut < end; ++cut) {
        INFO("cut at " << cut);
        copy_directory(pristine, work);
        std::filesystem::resize_file(work + "/" + name, cut);
        const auto whole = static_cast<std::uint32_t>(26 + (cut - header_size) / record_size);
        const auto options = small_options(work);
        {
            file_log log = open_log(options);
            REQUIRE(log.last_zxid() == zxid{1, whole});
            require_records(read_all(log), ids(1, 1, whole));
            log.append(1, records(2, 1, 2));
            flush_ok(log);
        }
        file_log log = open_log(options);
        auto want = ids(1, 1, whole);
        want.push_back(zxid{2, 1});
        want.push_back(zxid{2, 2});
        require_records(read_all(log), want);
    }
}

TEST_CASE("file_log torn tail: garbage after the last record is cut") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    write_log(options, 30);
    const std::string segment = last_segment(dir.data());
    const auto clean_size = std::filesystem::file_size(segment);

    std::vector<std::byte> garbage;
    SECTION("a few zeros") { garbage.assign(100, std::byte{0}); }
    SECTION("zeros, more than a window") { garbage.assign(5000, std::byte{0}); }
    SECTION("random bytes, more than a window") {
        std::mt19937 random{12345};
        for (int i = 0; i < 5000; ++i) garbage.push_back(static_cast<std::byte>(random() & 0xff));
    }
    SECTION("half a record header") { garbage.assign(7, std::byte{0x11}); }
    append_to_file(segment, garbage);

    {
        file_log log = open_log(options);
        REQUIRE(log.last_zxid() == zxid{1, 30});
        require_records(read_all(log), ids(1, 1, 30));
    }
    REQUIRE(std::filesystem::file_size(segment) == clean_size);
}

TEST_CASE("file_log torn header: a last segment whose header never made it is removed") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    write_log(options, 30);  // segments 1 and 2
    const std::string torn = dir.data() + "/log.0000000000000003";
    SECTION("empty file") { write_file(torn, {}); }
    SECTION("part of a header") {
        auto header = read_file(last_segment(dir.data()));
        header.resize(30);
        write_file(torn, header);
    }
    SECTION("a header of zeros") { write_file(torn, std::vector<std::byte>(200, std::byte{0})); }
    {
        file_log log = open_log(options);
        REQUIRE(log.last_zxid() == zxid{1, 30});
        log.append(1, records(1, 31, 32));
        flush_ok(log);
    }
    REQUIRE_FALSE(std::filesystem::exists(torn));
    file_log log = open_log(options);
    require_records(read_all(log), ids(1, 1, 32));
}

TEST_CASE("file_log corruption is refused, with the file and offset named") {
    temporary_directory dir;
    const auto options = small_options(dir.data());

    SECTION("a flipped byte in an earlier segment") {
        write_log(options, 60);  // segments 1, 2, 3
        flip_byte(dir.data() + "/log.0000000000000002", header_size + 5 * record_size + 30);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000002") &&
                                      Catch::Contains("offset 444") &&
                                      Catch::Contains("checksum"));
    }
    SECTION("a flipped byte further than the window before the end of the last segment") {
        write_log(options, 70);  // the last segment holds 18 records: 1368 bytes of records
        flip_byte(dir.data() + "/log.0000000000000003", header_size + 20);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000003") &&
                                      Catch::Contains("not a torn tail"));
    }
    SECTION("a flipped byte within the window before the end is a torn tail") {
        write_log(options, 70);
        flip_byte(dir.data() + "/log.0000000000000003", header_size + 17 * record_size + 20);
        file_log log = open_log(options);
        REQUIRE(log.last_zxid() == zxid{1, 69});
    }
    SECTION("a damaged header of an earlier segment") {
        write_log(options, 60);
        flip_byte(dir.data() + "/log.0000000000000001", 30);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000001") &&
                                      Catch::Contains("header"));
    }
    SECTION("a missing segment in the middle") {
        write_log(options, 60);
        std::filesystem::remove(dir.data() + "/log.0000000000000002");
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000003") &&
                                      Catch::Contains("missing"));
    }
    SECTION("a segment of another replica") {
        write_log(options, 60);
        auto other = small_options(dir.path() + "/other");
        other.replica_id = 4;
        write_log(other, 60);
        std::filesystem::copy_file(other.directory + "/log.0000000000000003",
                                   dir.data() + "/log.0000000000000003",
                                   std::filesystem::copy_options::overwrite_existing);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000003") &&
                                      Catch::Contains("replica 4"));
    }
    // A refused directory is left exactly as it was, for an operator to look at.
    const auto before = directory_state(dir.data());
    if (!file_log::open(options)) REQUIRE(directory_state(dir.data()) == before);
}

TEST_CASE("file_log recovery is idempotent") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    write_log(options, 40, 3);
    const std::string segment = last_segment(dir.data());
    std::filesystem::resize_file(segment, std::filesystem::file_size(segment) - 30);
    append_to_file(segment, std::vector<std::byte>(50, std::byte{0x33}));
    write_file(dir.data() + "/epochs.tmp", std::vector<std::byte>(7, std::byte{1}));

    // A crash during recovery is a second recovery of the same directory: keep a copy of
    // the directory as the first recovery found it, and recover both.
    const std::string crashed = dir.path() + "/crashed";
    copy_directory(dir.data(), crashed);

    std::vector<zxid> first_ids;
    {
        file_log log = open_log(options);
        first_ids = ids(read_all(log));
        REQUIRE(first_ids == ids(1, 1, 42));
    }
    const auto first_state = directory_state(dir.data());
    {
        file_log log = open_log(options);
        REQUIRE(ids(read_all(log)) == first_ids);
        REQUIRE(log.last_zxid() == zxid{1, 42});
    }
    REQUIRE(directory_state(dir.data()) == first_state);
    {
        file_log log = open_log(small_options(crashed));
        REQUIRE(ids(read_all(log)) == first_ids);
    }
    REQUIRE(directory_state(crashed) == first_state);
}

TEST_CASE("file_log epoch file: atomic writes, leftovers ignored, damage refused") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    {
        file_log log = open_log(options);
        log.write_epochs(1, {3, 2});
        flush_ok(log);
    }
    const std::string file = dir.data() + "/epochs";

    SECTION("a leftover temporary (a crash mid-write) is ignored and removed") {
        write_file(file + ".tmp", std::vector<std::byte>(20, std::byte{0x7f}));
        {
            file_log log = open_log(options);
            REQUIRE(log.stored_epochs() == epochs{3, 2});
        }
        REQUIRE_FALSE(std::filesystem::exists(file + ".tmp"));
    }
    SECTION("a damaged epoch file") {
        flip_byte(file, 9);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("epochs") && Catch::Contains("checksum"));
    }
    SECTION("a short epoch file") {
        auto bytes = read_file(file);
        bytes.resize(12);
        write_file(file, bytes);
        REQUIRE(open_must_fail(options).error == errc::corrupt);
    }
    SECTION("a missing epoch file") {
        std::filesystem::remove(file);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("epochs is missing"));
    }
}

TEST_CASE("file_log start-up checks of PROTOCOL.md §2") {
    temporary_directory dir;
    const auto options = small_options(dir.data());

    SECTION("acceptedEpoch < currentEpoch: refuse") {
        {
            file_log log = open_log(options);
            log.write_epochs(1, {1, 2});
            flush_ok(log);
        }
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("acceptedEpoch 1 < currentEpoch 2"));
    }
    SECTION("epoch of the last logged zxid above acceptedEpoch: refuse") {
        {
            file_log log = open_log(options);
            log.write_epochs(1, {2, 2});
            log.append(2, records(3, 1, 5));
            flush_ok(log);
        }
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("<3, 5>") && Catch::Contains("acceptedEpoch 2"));
    }
    SECTION("a crash between the synced history and currentEpoch (§11.1) opens") {
        // Accepted 3, current still 2, records of epoch 3 logged: ZOOKEEPER-1653's state.
        {
            file_log log = open_log(options);
            log.write_epochs(1, {3, 2});
            log.append(2, records(3, 1, 5));
            flush_ok(log);
        }
        file_log log = open_log(options);
        REQUIRE(log.stored_epochs() == epochs{3, 2});
        REQUIRE(log.last_zxid() == zxid{3, 5});
    }
    SECTION("a snapshot-only log: the snapshot's zxid counts") {
        {
            file_log log = open_log(options);
            log.write_epochs(1, {2, 2});
            log.install_snapshot(2, zxid{3, 7}, shared_bytes{});
            flush_ok(log);
        }
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("<3, 7>"));
    }
    SECTION("consistent epochs open") {
        {
            file_log log = open_log(options);
            log.write_epochs(1, {3, 3});
            log.append(2, records(3, 1, 5));
            flush_ok(log);
        }
        file_log log = open_log(options);
        REQUIRE(log.stored_epochs() == epochs{3, 3});
        REQUIRE(log.last_zxid() == zxid{3, 5});
    }
}

TEST_CASE("file_log data directory identity and the fresh flag (ZOOKEEPER-261)") {
    temporary_directory dir;
    auto options = small_options(dir.data());

    SECTION("missing directory, creation not allowed") {
        options.create_if_missing = false;
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::invalid_argument);
        REQUIRE_THAT(failure.why, Catch::Contains("create_if_missing"));
        REQUIRE_FALSE(std::filesystem::exists(dir.data()));
    }
    SECTION("empty directory, creation not allowed, then allowed") {
        std::filesystem::create_directory(dir.data());
        options.create_if_missing = false;
        REQUIRE(open_must_fail(options).error == errc::invalid_argument);
        options.create_if_missing = true;
        REQUIRE(open_log(options).fresh());
        options.create_if_missing = false;  // initialized now: no creation needed
        REQUIRE_FALSE(open_log(options).fresh());
    }
    SECTION("fresh once, then not") {
        REQUIRE(open_log(options).fresh());
        REQUIRE_FALSE(open_log(options).fresh());
    }
    SECTION("a wiped directory is fresh again") {
        write_log(options, 10);
        std::filesystem::remove_all(dir.data());
        file_log log = open_log(options);
        REQUIRE(log.fresh());
        REQUIRE(log.last_zxid() == zxid{});
    }
    SECTION("another cluster") {
        open_log(options);
        options.cluster_id = 8;
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::invalid_argument);
        REQUIRE_THAT(failure.why, Catch::Contains("belongs to cluster 7 replica 3") &&
                                      Catch::Contains("cluster 8 replica 3"));
    }
    SECTION("another replica") {
        open_log(options);
        options.replica_id = 4;
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::invalid_argument);
        REQUIRE_THAT(failure.why, Catch::Contains("not to cluster 7 replica 4"));
    }
    SECTION("a damaged identity file") {
        open_log(options);
        flip_byte(dir.data() + "/identity", 10);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("identity"));
    }
    SECTION("log files without an identity are not adopted") {
        write_log(options, 10);
        std::filesystem::remove(dir.data() + "/identity");
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("no identity file"));
    }
}

TEST_CASE("file_log snapshot install interrupted by a crash (ZOOKEEPER-2832/2872)") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    const auto state = shared_bytes::copy_of(zab::as_bytes("state at <1, 50>"));
    const std::string before_install = dir.path() + "/before";
    const std::string old_segments = dir.path() + "/old_segments";
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 80));  // four segments
        flush_ok(log);
        copy_directory(dir.data(), before_install);
        copy_directory(dir.data(), old_segments);
        log.install_snapshot(2, zxid{1, 50}, state, records(1, 51, 52));
        log.append(3, records(2, 1, 3));
        flush_ok(log);
    }
    auto want_after_install = ids(1, 51, 52);
    want_after_install.push_back(zxid{2, 1});
    want_after_install.push_back(zxid{2, 2});
    want_after_install.push_back(zxid{2, 3});

    SECTION("after the snapshot landed, before the old segments were removed") {
        for (const auto& name : segment_files(old_segments))
            std::filesystem::copy_file(old_segments + "/" + name, dir.data() + "/" + name,
                                       std::filesystem::copy_options::overwrite_existing);
        {
            file_log log = open_log(options);
            REQUIRE(log.snapshot()->last_included == zxid{1, 50});
            REQUIRE(log.last_zxid() == zxid{2, 3});
            require_records(read_all(log), want_after_install);
            REQUIRE(log.read(zxid{1, 60}, 100).value().front().id == zxid{2, 1});  // no <1, 61>
        }
        for (const auto& name : segment_files(old_segments))
            REQUIRE_FALSE(std::filesystem::exists(dir.data() + "/" + name));
    }
    SECTION("after the new generation's segments, before the snapshot's rename") {
        // The directory as it was, plus what the install wrote before its rename: the new
        // generation's segments and the snapshot's temporary file.
        for (const auto& name : segment_files(dir.data()))
            std::filesystem::copy_file(dir.data() + "/" + name, before_install + "/" + name,
                                       std::filesystem::copy_options::skip_existing);
        const auto snapshots = files_with_prefix(dir.data(), "snapshot.");
        REQUIRE(snapshots.size() == 1);
        std::filesystem::copy_file(dir.data() + "/" + snapshots[0],
                                   before_install + "/" + snapshots[0] + ".tmp");
        const auto new_segments = segment_files(dir.data());
        {
            file_log log = open_log(small_options(before_install));
            REQUIRE_FALSE(log.snapshot());
            REQUIRE(log.last_zxid() == zxid{1, 80});
            require_records(read_all(log), ids(1, 1, 80));
            log.append(1, records(2, 1, 1));
            flush_ok(log);
        }
        for (const auto& name : new_segments)
            if (name > "log.0000000000000004") {
                INFO(name);
                REQUIRE_FALSE(std::filesystem::exists(before_install + "/" + name));
            }
        REQUIRE(files_with_prefix(before_install, "snapshot.").empty());
        file_log log = open_log(small_options(before_install));
        auto want = ids(1, 1, 80);
        want.push_back(zxid{2, 1});
        require_records(read_all(log), want);
    }
    SECTION("a damaged snapshot file is corruption, not an older state") {
        const auto snapshots = files_with_prefix(dir.data(), "snapshot.");
        flip_byte(dir.data() + "/" + snapshots[0], 70);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains(snapshots[0]) && Catch::Contains("checksum"));
    }
}
