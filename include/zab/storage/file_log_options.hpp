// zab/storage/file_log_options.hpp — where a file_log lives and how it cuts its files.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/storage/format.hpp"

namespace zab {

/// What `file_log::open` does with a data directory that fails its checks beyond a torn
/// tail (issue #15): a replica must never silently vote with a shorter history.
enum class corruption_policy : std::uint8_t {
    /// `open` fails with `errc::corrupt`; the error (logged, and in the diagnostic) names the
    /// file and the byte offset. An operator inspects the directory and decides.
    refuse,
    /// `open` moves the directory's zab files aside into a subdirectory `damaged-<n>/` (the
    /// first n from 1 not taken; kept for forensics, never read again), and comes up with an
    /// empty log whose acceptedEpoch is kept when the epoch file was intact (a promise made
    /// is kept) and whose currentEpoch is 0. `file_log::resynced_after_corruption()` then
    /// reports it: the driver must set `options::non_voter_until_synced` on the peer, so
    /// that the replica votes for nobody and rejoins as an observer until a leader has
    /// synced it — as `--join` does for a wiped directory (docs/protocol.md §2, ZOOKEEPER-261).
    resync,
};

/// Options of `zab::file_log`, checked by `problem()` / `validate()` (and by `open`).
struct file_log_options {
    /// The data directory. Its parent must exist.
    std::string directory;

    /// Who may use the directory: `open` refuses a directory initialized for another cluster
    /// or another replica (a misconfigured path must not hand one replica another's history).
    /// Use the peer's `options::group_id` and its own `peer_id`.
    std::uint64_t cluster_id = 0;
    std::uint64_t replica_id = 0;

    /// A missing or empty directory is created and initialized (and `fresh()` reports it).
    /// When false, `open` fails on such a directory instead: an operator must initialize it,
    /// the safe choice where a wiped disk must not rejoin on its own (docs/protocol.md §2,
    /// ZOOKEEPER-261).
    bool create_if_missing = true;

    /// A segment is closed and a new one started before it would exceed this size.
    std::uint64_t segment_bytes = 64u << 20;

    /// At most this many bytes of a segment are ever written without an fdatasync: a flush
    /// that has more syncs in steps of at most this size, on record boundaries. Recovery relies
    /// on it to tell a torn tail (damage in the last window) from corruption (a valid record
    /// further than this past the first damaged byte). Must hold a segment header and the
    /// largest record.
    std::uint32_t group_commit_window_bytes = 8u << 20;

    /// The largest transaction payload `append` accepts (≤ storage_format::record_bytes_limit).
    std::uint32_t max_record_bytes = 4u << 20;

    /// The largest snapshot state, in bytes. `open` refuses to load a larger one (it would
    /// not know it from a damaged length), so no larger one is ever written: `compact`
    /// refuses a larger state (returns false, logs why), and `install_snapshot` of one puts
    /// the log in its failed state with the reason (the next flush reports it). Raise it
    /// when the state machine's snapshots legitimately grow past it (at most 1 TiB).
    std::uint64_t max_snapshot_bytes = std::uint64_t{1} << 30;

    /// What `open` does with a directory that fails its checks beyond a torn tail.
    corruption_policy on_corruption = corruption_policy::refuse;

    /// How many snapshot files are kept: the one in effect and the newest older ones.
    std::uint32_t snapshots_kept = 2;

    /// Where every system call of the log goes: POSIX by default. Tests substitute a file
    /// system that can lose power (zab/testing/durable_image_fs.hpp). Not owned; it must
    /// outlive the log and its flush jobs.
    file_system* filesystem = &posix_file_system_instance();

    /// What is wrong with these options, or an empty string when they are consistent.
    std::string problem() const {
        using namespace storage_format;
        if (directory.empty()) return "directory must not be empty";
        if (segment_bytes == 0) return "segment_bytes must not be zero";
        if (max_record_bytes == 0) return "max_record_bytes must be at least 1";
        if (max_record_bytes > record_bytes_limit)
            return fmt::format("max_record_bytes must be at most {}", record_bytes_limit);
        const std::uint64_t smallest_window =
            segment_header_size + record_header_size + std::uint64_t{max_record_bytes};
        if (group_commit_window_bytes < smallest_window)
            return fmt::format(
                "group_commit_window_bytes ({}) must hold a segment header and the largest "
                "record: at least {}",
                group_commit_window_bytes, smallest_window);
        if (group_commit_window_bytes > segment_bytes)
            return fmt::format("group_commit_window_bytes ({}) must not exceed segment_bytes ({})",
                               group_commit_window_bytes, segment_bytes);
        if (segment_bytes > (std::uint64_t{1} << 40))
            return "segment_bytes must be at most 1 TiB";
        if (max_snapshot_bytes == 0) return "max_snapshot_bytes must not be zero";
        if (max_snapshot_bytes > (std::uint64_t{1} << 40))
            return "max_snapshot_bytes must be at most 1 TiB";
        if (snapshots_kept == 0) return "snapshots_kept must be at least 1";
        if (filesystem == nullptr) return "filesystem must not be null";
        return {};
    }

    /// `errc::invalid_options` (and the reason, logged at error level) when inconsistent.
    result<void> validate() const {
        if (auto reason = problem(); !reason.empty()) {
            log(log_level::error, "invalid file_log options: {}", reason);
            return make_error_code(errc::invalid_options);
        }
        return success();
    }
};

}  // namespace zab
