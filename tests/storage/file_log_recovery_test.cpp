// zab::file_log recovery: torn tails cut at every byte, garbage after the tail, corruption
// refused with the file named (earlier segment, beyond the window, missing or foreign
// segment), idempotent recovery, the epoch file and the start-up checks of docs/protocol.md §2,
// the directory's identity and fresh flag, and snapshot installs interrupted by a crash
// (ZOOKEEPER-2832/2872: never a stale record after the snapshot).
#include <cstdint>
#include <filesystem>
#include <optional>
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

/// Writes records 1..n of epoch 1 in one flush, then `tail` more in a second flush; the
/// last flush's watermark update is then undone, as by a crash right before it, so that
/// damage in its last write step reads as a torn tail (saved_watermark).
void write_log(const file_log_options& options, std::uint32_t n, std::uint32_t tail = 0) {
    std::vector<std::byte> before_last;
    {
        file_log log = open_new(options);
        if (tail == 0) before_last = saved_watermark(options.directory);
        log.append(1, records(1, 1, n));
        flush_ok(log);
        if (tail > 0) {
            before_last = saved_watermark(options.directory);
            log.append(2, records(1, n + 1, n + tail));
            flush_ok(log);
        }
    }
    restore_watermark(options.directory, before_last);
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
    // The last batch's job extended the file: room reserved ahead of the records.
    REQUIRE(std::filesystem::file_size(pristine + "/" + name) ==
            small_options(pristine).segment_bytes);
    REQUIRE(zero_from(pristine + "/" + name, end));

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
    // Cut by zeroing what was damaged: the file keeps its length (the watermark vouches for
    // at most the length before the garbage), the records theirs.
    REQUIRE(std::filesystem::file_size(segment) == clean_size + garbage.size());
    REQUIRE(zero_from(segment, clean_size));
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
    SECTION("a flipped byte in an earlier write step of the last segment") {
        // The last segment holds 18 records (1368 bytes), written in two steps of one flush:
        // the records of the second name the first as synced.
        write_log(options, 70);
        flip_byte(dir.data() + "/log.0000000000000003", header_size + 20);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000003") &&
                                      Catch::Contains("not a torn tail"));
    }
    SECTION("a flipped byte in the last write step is a torn tail") {
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
    // Segment 2 holds records 27..43; cut into the last one (its last step was not synced).
    std::filesystem::resize_file(segment, header_size + 17 * record_size - 30);
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

TEST_CASE("file_log start-up checks of docs/protocol.md §2") {
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

// --- issue #15: corruption is never taken for a torn tail --------------------------------

namespace {

/// 60 records of epoch 1 in flushes of 3 (one write step each): segment 1 holds 1..26,
/// segment 2 27..52, segment 3 53..60. The last write step — the only bytes a power loss may
/// have torn — holds records 58..60.
constexpr std::uint32_t flushed_records = 60;
constexpr std::uint32_t last_step_first = 58;

void write_in_steps(const file_log_options& options) {
    std::vector<std::byte> before_last;
    {
        file_log log = open_new(options);
        for (std::uint32_t first = 1; first <= flushed_records; first += 3) {
            before_last = saved_watermark(options.directory);
            log.append(first, records(1, first, first + 2));
            log.make_durable(first);
            flush_ok(log);
        }
    }
    restore_watermark(options.directory, before_last);  // as write_log does
}

/// Where each record of a segment file starts, walking the lengths (the file is intact).
std::vector<std::size_t> record_starts(const std::vector<std::byte>& file) {
    std::vector<std::size_t> out;
    for (std::size_t at = header_size;
         at + zab::storage_format::record_header_size <= file.size() &&
         !std::all_of(file.begin() + static_cast<std::ptrdiff_t>(at),
                      file.begin() +
                          static_cast<std::ptrdiff_t>(at + zab::storage_format::record_header_size),
                      [](std::byte b) { return b == std::byte{0}; });
         at += zab::storage_format::record_header_size +
               zab::storage_format::get_u32(&file[at + 4]))
        out.push_back(at);  // up to the zeros of the room reserved after the records
    return out;
}

}  // namespace

TEST_CASE("file_log a flipped byte in any header or record of a synced log is refused as "
          "corruption, with the file and offset named, unless it lies in the newest segment's "
          "last write step") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    write_in_steps(options);
    const auto names = segment_files(dir.data());
    REQUIRE(names.size() == 3);
    std::uint32_t first_in_file = 1;
    std::size_t refused = 0, cut = 0, total = 0;
    for (std::size_t f = 0; f < names.size(); ++f) {
        const std::string path = dir.data() + "/" + names[f];
        const auto pristine = read_file(path);
        const auto starts = record_starts(pristine);
        const bool newest = f + 1 == names.size();
        // Every byte of the header, and in every record a byte of each field (CRC, length,
        // zxid, sync distance) and the first and last byte of its payload.
        std::vector<std::size_t> positions;
        for (std::size_t at = 0; at < header_size; ++at) positions.push_back(at);
        for (std::size_t start : starts)
            for (std::size_t field : {std::size_t{0}, std::size_t{5}, std::size_t{11},
                                      std::size_t{17}, std::size_t{20}, record_size - 1})
                positions.push_back(start + field);
        total += positions.size();
        for (std::size_t at : positions) {
            // The record the byte belongs to (or the header) and its zxid counter.
            std::size_t r = 0;
            while (r + 1 < starts.size() && starts[r + 1] <= at) ++r;
            const bool in_header = at < header_size;
            const auto counter = static_cast<std::uint32_t>(first_in_file + r);
            INFO(names[f] << " byte " << at);
            flip_byte(path, at);
            std::string why;
            auto opened = file_log::open(options, &why);
            if (newest && !in_header && counter >= last_step_first) {
                // Indistinguishable from a torn write of the last step: cut at the damaged
                // record; every record before it is kept.
                INFO("open failed: " << why);
                REQUIRE(opened.has_value());
                REQUIRE(opened.value().last_zxid() == zxid{1, counter - 1});
                require_records(read_all(opened.value()), ids(1, 1, counter - 1));
                ++cut;
            } else {
                REQUIRE_FALSE(opened.has_value());
                REQUIRE(opened.error() == errc::corrupt);
                const std::size_t offset = in_header ? 0 : starts[r];
                REQUIRE_THAT(why, Catch::Contains(names[f]) &&
                                      Catch::Contains(fmt::format("offset {}:", offset)));
                ++refused;
            }
            write_file(path, pristine);
        }
        first_in_file += static_cast<std::uint32_t>(starts.size());
    }
    REQUIRE(first_in_file == flushed_records + 1);
    CHECK(cut == 3 * 6);  // the last step: records 58..60
    CHECK(refused + cut == total);
}

TEST_CASE("file_log a damaged header of the newest segment is corruption once a record in it "
          "proves the header synced, a torn header only while it does not") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    const std::string newest = dir.data() + "/log.0000000000000003";
    SECTION("several write steps in the segment: corruption") {
        write_in_steps(options);  // segment 3: records 53..60 in three steps
        for (std::size_t at = 0; at < header_size; ++at) {
            INFO("byte " << at);
            flip_byte(newest, at);
            const auto failure = open_must_fail(options);
            REQUIRE(failure.error == errc::corrupt);
            // Either proof: a record naming a synced offset past 0, or the room reserved after
            // the first step (a file longer than one window).
            REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000003: offset 0") &&
                                          Catch::Contains("segment header") &&
                                          (Catch::Contains("had been synced") ||
                                           Catch::Contains("more than the first write step")));
            flip_byte(newest, at);
        }
    }
    SECTION("one write step in the segment: a torn header, the segment goes") {
        std::vector<std::byte> before_last;
        {
            file_log log = open_new(options);
            log.append(1, records(1, 1, 52));  // segments 1 and 2, full
            flush_ok(log);
            before_last = saved_watermark(options.directory);
            log.append(2, records(1, 53, 55));  // segment 3: one step, header included
            flush_ok(log);
        }
        restore_watermark(options.directory, before_last);
        const auto pristine = read_file(newest);
        for (std::size_t at = 0; at < header_size; ++at) {
            INFO("byte " << at);
            flip_byte(newest, at);
            {
                file_log log = open_log(options);
                REQUIRE(log.last_zxid() == zxid{1, 52});
            }
            REQUIRE_FALSE(std::filesystem::exists(newest));
            write_file(newest, pristine);
        }
    }
}

TEST_CASE("file_log only the newest segment file may be torn: a torn header after a segment "
          "proves that segment synced") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    write_log(options, 40, 3);  // segment 2 ends in the last step: records 41..43
    const std::string segment = last_segment(dir.data());
    // A new segment whose header never made it: segment 2 had been synced whole before it
    // was created, so damage in segment 2's last records is corruption.
    write_file(dir.data() + "/log.0000000000000003", std::vector<std::byte>(30, std::byte{0}));
    flip_byte(segment, header_size + 16 * record_size + 30);
    const auto failure = open_must_fail(options);
    REQUIRE(failure.error == errc::corrupt);
    REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000002") &&
                                  Catch::Contains("only the newest segment"));
}

TEST_CASE("file_log a synced tail lost is told from a torn tail: the newest segment cut to "
          "half after its flush completed is refused, or resynced, never cut (issue 34, "
          "defect 10)") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 40));  // segment 2 holds records 27..40, reported durable
        log.make_durable(1);
        REQUIRE(flush_ok(log).log_durable == 1);
    }
    const std::string segment = last_segment(dir.data());
    const auto length = std::filesystem::file_size(segment);
    SECTION("cut to half: refused, the directory left as it was") {
        std::filesystem::resize_file(segment, length / 2);
        const auto before = directory_state(dir.data());
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("log.0000000000000002") &&
                                      Catch::Contains("synced tail was lost") &&
                                      Catch::Contains(fmt::format("a length of {} bytes", length)));
        REQUIRE(directory_state(dir.data()) == before);
    }
    SECTION("after a later flush extended the file: cut to half of its length, refused") {
        {
            file_log log = open_log(options);
            log.append(2, records(1, 41, 43));
            flush_ok(log);
        }
        const auto extended = std::filesystem::file_size(segment);
        REQUIRE(extended == options.segment_bytes);  // room reserved after the records
        std::filesystem::resize_file(segment, extended / 2);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("synced tail was lost") &&
                                      Catch::Contains(fmt::format("a length of {} bytes",
                                                                  extended)));
    }
    SECTION("the watermark costs an fdatasync per segment created or extended, not per flush") {
        file_log log = open_log(options);
        const auto before = log.stats();
        for (std::uint32_t i = 41; i <= 140; ++i) {
            log.append(i, records(1, i, i));
            flush_ok(log);
        }
        const auto after = log.stats();
        const auto flushes = after.flushes - before.flushes;
        const auto marks = after.watermark_syncs - before.watermark_syncs;
        const auto grown = (after.files_created - before.files_created) +
                           (after.extensions - before.extensions);
        INFO(flushes << " flushes, " << marks << " watermark syncs, " << grown
                     << " segments created or extended");
        REQUIRE(flushes == 100);
        REQUIRE(grown > 0);
        REQUIRE(marks == grown);
        REQUIRE(marks * 4 < flushes);
    }
    SECTION("cut by one record, at a record boundary (no damaged byte to see)") {
        std::filesystem::resize_file(segment, length - record_size);
        REQUIRE(open_must_fail(options).error == errc::corrupt);
    }
    SECTION("the newest segment gone") {
        std::filesystem::remove(segment);
        const auto failure = open_must_fail(options);
        REQUIRE_THAT(failure.why, Catch::Contains("the file is missing"));
    }
    SECTION("with corruption_policy::resync: moved aside, and the replica must resync as a "
            "non-voter") {
        std::filesystem::resize_file(segment, length / 2);
        options.on_corruption = zab::corruption_policy::resync;
        std::string why;
        auto opened = file_log::open(options, &why);
        REQUIRE(opened.has_value());
        REQUIRE(opened.value().resynced_after_corruption());
        REQUIRE(opened.value().last_zxid() == zxid{});
        REQUIRE_THAT(why, Catch::Contains("synced tail was lost") && Catch::Contains("damaged-1"));
    }
    SECTION("a directory of an earlier release (no synced file) opens as before, trusting "
            "what it finds, and gets a watermark; from then on a lost tail is refused") {
        const std::string synced = dir.data() + "/synced";
        std::filesystem::remove(synced);
        // Without a watermark a short log is judged as before the watermark existed: the cut
        // is a torn tail (nothing on the disk says it was synced).
        std::filesystem::resize_file(segment, length - record_size / 2);
        {
            file_log log = open_log(options);
            REQUIRE(log.last_zxid() == zxid{1, 39});
        }
        REQUIRE(std::filesystem::file_size(synced) == zab::storage_format::synced_file_size);
        std::string problem;
        const auto mark = zab::storage_format::decode_synced(read_file(synced), problem);
        REQUIRE(mark.has_value());
        REQUIRE(mark.value().segment == 2);
        // The torn record was zeroed, not cut: the file keeps its length, and the watermark
        // vouches for that length.
        REQUIRE(std::filesystem::file_size(segment) == length - record_size / 2);
        REQUIRE(mark.value().offset == length - record_size / 2);
        // The watermark written at that open now guards what it found.
        std::filesystem::resize_file(segment, (length - record_size) / 2);
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::corrupt);
        REQUIRE_THAT(failure.why, Catch::Contains("synced tail was lost"));
    }
    SECTION("an untouched log opens, and so does one whose last flush never updated the "
            "watermark (a torn tail)") {
        { REQUIRE(open_log(options).last_zxid() == zxid{1, 40}); }
        std::vector<std::byte> before_last = saved_watermark(dir.data());
        {
            file_log log = open_log(options);
            log.append(2, records(1, 41, 43));
            flush_ok(log);
        }
        restore_watermark(dir.data(), before_last);
        // The job of 41..43 extended the file and raised the watermark; with the raise lost,
        // neither the extension nor the last records need have landed.
        std::filesystem::resize_file(segment, header_size + 17 * record_size - 100);
        REQUIRE(open_log(options).last_zxid() == zxid{1, 41});
    }
}

TEST_CASE("file_log a torn header is judged by the window it was written with, not today's "
          "(issue 34, defect 7: group_commit_window_bytes lowered between runs)") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    options.segment_bytes = 4096;
    options.group_commit_window_bytes = 2048;
    const std::string newest = dir.data() + "/log.0000000000000002";
    std::vector<std::byte> before_last;
    {
        file_log log = open_new(options);
        log.append(1, records(1, 1, 53));  // segment 1, full
        flush_ok(log);
        before_last = saved_watermark(dir.data());
        log.append(2, records(1, 54, 73));  // segment 2: one step of 1584 bytes
        flush_ok(log);
    }
    REQUIRE(std::filesystem::file_size(newest) == header_size + 20 * record_size);
    // The power failed in segment 2's first step: its header torn, the watermark not updated.
    restore_watermark(dir.data(), before_last);
    flip_byte(newest, 10);
    options.group_commit_window_bytes = 1024;  // lowered: the torn step is larger than this
    {
        file_log log = open_log(options);
        REQUIRE(log.last_zxid() == zxid{1, 53});
    }
    REQUIRE_FALSE(std::filesystem::exists(newest));
}

TEST_CASE("file_log corruption_policy::resync: the damaged files are moved aside, the log "
          "comes up empty with acceptedEpoch kept and currentEpoch 0, and says so") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    options.on_corruption = zab::corruption_policy::resync;
    {
        file_log log = open_log(options);
        log.write_epochs(1, {4, 3});
        log.append(2, records(3, 1, 60));
        flush_ok(log);
    }
    const auto before = directory_state(dir.data());
    SECTION("a damaged segment; the epoch file is intact") {
        flip_byte(dir.data() + "/log.0000000000000002", header_size + 5 * record_size + 30);
        std::string why;
        auto opened = file_log::open(options, &why);
        REQUIRE(opened.has_value());
        file_log& log = opened.value();
        REQUIRE(log.resynced_after_corruption());
        REQUIRE_FALSE(log.fresh());
        REQUIRE(log.last_zxid() == zxid{});
        REQUIRE_FALSE(log.snapshot());
        REQUIRE(log.stored_epochs() == epochs{4, 0});
        REQUIRE_THAT(why, Catch::Contains("log.0000000000000002: offset 444") &&
                              Catch::Contains("damaged-1"));
        // Everything that was there is kept in damaged-1/, byte for byte the same sizes.
        REQUIRE(directory_state(dir.data() + "/damaged-1") == before);
        REQUIRE(segment_files(dir.data()).empty());
        // The replica goes on: a leader's sync lands, and it is an ordinary log again.
        log.install_snapshot(3, zxid{4, 2}, shared_bytes::copy_of(zab::as_bytes("leader")),
                             records(4, 3, 5));
        log.write_epochs(4, {4, 4});
        flush_ok(log);
    }
    SECTION("a damaged epoch file: acceptedEpoch 0") {
        flip_byte(dir.data() + "/epochs", 9);
        file_log log = open_log(options);
        REQUIRE(log.resynced_after_corruption());
        REQUIRE(log.stored_epochs() == epochs{0, 0});
    }
    SECTION("a second damage later goes to damaged-2") {
        flip_byte(dir.data() + "/log.0000000000000001", 3);
        { REQUIRE(open_log(options).resynced_after_corruption()); }
        // Until a leader syncs it, reopening still reports the resync (a crash right after
        // the move must not make it a voter).
        { REQUIRE(open_log(options).resynced_after_corruption()); }
        {
            file_log log = open_log(options);
            log.append(1, records(4, 1, 30));
            log.write_epochs(2, {4, 4});
            flush_ok(log);
        }
        REQUIRE_FALSE(open_log(options).resynced_after_corruption());
        flip_byte(dir.data() + "/log.0000000000000001", 3);
        REQUIRE(open_log(options).resynced_after_corruption());
        REQUIRE(std::filesystem::exists(dir.data() + "/damaged-2/log.0000000000000001"));
    }
    // After the sync, the log is an ordinary one.
    if (std::filesystem::exists(dir.data() + "/snapshot.0000000000000001")) {
        file_log log = open_log(options);
        REQUIRE_FALSE(log.resynced_after_corruption());
        REQUIRE(log.last_zxid() == zxid{4, 5});
    }
}

TEST_CASE("file_log an epochs or identity file of another format version is "
          "unsupported_version, named, and never moved aside, under resync too") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    {
        file_log log = open_log(options);
        log.write_epochs(1, {3, 2});
        log.append(2, records(2, 1, 10));
        flush_ok(log);
    }
    // As a later build might write it: version 2, and a longer layout (so neither the size
    // nor the checksum of version 1 fit).
    const auto newer = [](const std::string& file) {
        auto bytes = read_file(file);
        bytes[4] = std::byte{2};
        bytes.resize(bytes.size() + 8, std::byte{0x5a});
        write_file(file, bytes);
    };
    const std::string name = GENERATE(as<std::string>{}, "epochs", "identity");
    newer(dir.data() + "/" + name);
    const auto before = directory_state(dir.data());
    for (const auto policy : {zab::corruption_policy::refuse, zab::corruption_policy::resync}) {
        options.on_corruption = policy;
        const auto failure = open_must_fail(options);
        REQUIRE(failure.error == errc::unsupported_version);
        REQUIRE_THAT(failure.why, Catch::Contains(name) &&
                                      Catch::Contains("format version 2 (this build reads 1)"));
        REQUIRE(directory_state(dir.data()) == before);
    }
}

TEST_CASE("file_log corruption_policy::refuse is the default and changes nothing") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    REQUIRE(options.on_corruption == zab::corruption_policy::refuse);
    write_log(options, 60);
    flip_byte(dir.data() + "/log.0000000000000001", 3);
    const auto before = directory_state(dir.data());
    REQUIRE(open_must_fail(options).error == errc::corrupt);
    REQUIRE(directory_state(dir.data()) == before);
}

TEST_CASE("file_log max_snapshot_bytes is checked where a snapshot is written") {
    temporary_directory dir;
    auto options = small_options(dir.data());
    options.max_snapshot_bytes = 100;
    const auto small = shared_bytes::copy_of(zab::as_bytes(std::string(100, 's')));
    const auto large = shared_bytes::copy_of(zab::as_bytes(std::string(101, 'l')));
    std::optional<file_log> log{open_new(options)};
    log->append(1, records(1, 1, 10));
    flush_ok(*log);
    SECTION("compact refuses a state that open could not load, and the log goes on") {
        REQUIRE_FALSE(log->compact(zxid{1, 5}, large));
        REQUIRE_FALSE(log->snapshot());
        REQUIRE_FALSE(log->failed());
        REQUIRE(log->compact(zxid{1, 5}, small));
        flush_ok(*log);
    }
    SECTION("install_snapshot of such a state fails the log, with the reason") {
        log->install_snapshot(2, zxid{1, 20}, large);
        REQUIRE(log->failed());
        const auto result = log->flush();
        REQUIRE(result.failed());
        REQUIRE_THAT(result.reason, Catch::Contains("101 bytes") &&
                                        Catch::Contains("max_snapshot_bytes (100)"));
        REQUIRE(files_with_prefix(dir.data(), "snapshot.").empty());
    }
    SECTION("a state of the limit is written and reopens") {
        log->install_snapshot(2, zxid{1, 20}, small);
        flush_ok(*log);
    }
    const bool failed = log->failed();
    log.reset();
    file_log again = open_log(options);
    REQUIRE(again.snapshot().has_value() != failed);
    if (!failed) REQUIRE(again.snapshot()->state == small);
}

TEST_CASE("file_log read: a read that fails is an error with its cause, never fewer records") {
    temporary_directory dir;
    const auto options = small_options(dir.data());
    write_log(options, 40);
    file_log log = open_log(options);
    const std::string segment = dir.data() + "/log.0000000000000002";
    SECTION("the file was cut behind the log's back") {
        std::filesystem::resize_file(segment, header_size + 3 * record_size);
        const auto got = log.read(zxid{1, 26}, 100);
        REQUIRE_FALSE(got.has_value());
        REQUIRE(got.error() == errc::storage_failed);
        REQUIRE_THAT(log.last_read_failure(),
                     Catch::Contains("log.0000000000000002") && Catch::Contains("short read"));
    }
    SECTION("a record changed behind the log's back") {
        flip_byte(segment, header_size + 2 * record_size + 40);
        const auto got = log.read(zxid{1, 26}, 100);
        REQUIRE_FALSE(got.has_value());
        REQUIRE(got.error() == errc::corrupt);
        REQUIRE_THAT(log.last_read_failure(), Catch::Contains("log.0000000000000002") &&
                                                  Catch::Contains("<1, 29>"));
    }
    REQUIRE(log.read(zxid{1, 1}, 10).value().size() == 10);  // the rest still reads
}
