// zab/storage/data_directory.hpp — the data directory as a whole: opening and locking it,
// telling its files apart, and reading the small files (identity, epochs, snapshot).
//
// Identity (issue #6): a directory belongs to one replica of one cluster. `identity` is
// written last when a directory is initialized, so its presence is the "initialized" marker
// (docs/protocol.md §2, ZOOKEEPER-261): a directory without it holds no history, whatever else
// lies there, and `file_log::fresh()` reports it so the core can join as a non-voter.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/storage/file_log_options.hpp"
#include "zab/storage/file_system.hpp"
#include "zab/storage/format.hpp"
#include "zab/storage/posix_file.hpp"

namespace zab::detail {

/// The open, locked data directory, shared by a file_log and its flush jobs (the lock and
/// the descriptor live as long as the last of them), and the file system it lives in.
struct directory_handle {
    file_system* fs = nullptr;
    std::string path;
    unique_fd fd;
};

/// The directory that contains `path` ("." for a bare name).
inline std::string parent_directory(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

/// Opens the data directory, creating it (and making the creation durable in its parent)
/// when it is missing and `create_if_missing` allows; then takes an exclusive flock so
/// that a second file_log on the same directory, in this process or another, is refused.
inline result<std::shared_ptr<directory_handle>> open_directory(const file_log_options& options,
                                                                std::string& why) {
    const std::string& path = options.directory;
    file_system& fs = *options.filesystem;
    int fd = -1;
    int open_error = fs.open_directory(path, fd);
    if (open_error == ENOENT) {
        if (!options.create_if_missing) {
            why = fmt::format("data directory {} does not exist and create_if_missing is false",
                              path);
            return make_error_code(errc::invalid_argument);
        }
        if (const int error = fs.make_directory(path); error != 0 && error != EEXIST) {
            why = fmt::format("mkdir {} failed: {}", path, errno_text(error));
            return make_error_code(errc::storage_failed);
        }
        const std::string parent = parent_directory(path);
        int parent_descriptor = -1;
        int error = fs.open_directory(parent, parent_descriptor);
        const unique_fd parent_fd =
            error == 0 ? unique_fd{fs, parent_descriptor} : unique_fd{};
        if (error == 0)
            error = fs.sync_directory(parent_fd.get(), sync_site::data_directory_parent);
        if (error != 0) {
            why = fmt::format("fsync of {} (parent of the new data directory) failed: {}",
                              parent, errno_text(error));
            return make_error_code(errc::storage_failed);
        }
        open_error = fs.open_directory(path, fd);
    }
    if (open_error != 0) {
        why = fmt::format("cannot open data directory {}: {}", path, errno_text(open_error));
        return make_error_code(errc::storage_failed);
    }
    auto handle =
        std::make_shared<directory_handle>(directory_handle{&fs, path, unique_fd{fs, fd}});
    if (const int error = fs.lock_directory(fd); error != 0) {
        why = error == EWOULDBLOCK
                  ? fmt::format("data directory {} is in use by another file_log", path)
                  : fmt::format("flock of data directory {} failed: {}", path, errno_text(error));
        return make_error_code(error == EWOULDBLOCK ? errc::invalid_argument
                                                    : errc::storage_failed);
    }
    return handle;
}

/// The zab files of a directory, by kind. Other names are left alone.
struct directory_contents {
    std::vector<std::uint64_t> segments;    ///< ascending
    std::vector<std::uint64_t> snapshots;   ///< ascending
    std::vector<std::string> temporaries;   ///< `<zab file name>.tmp`
    bool has_identity = false;
    bool has_epochs = false;
    bool has_synced = false;
};

inline bool is_zab_file_name(std::string_view name) {
    using namespace storage_format;
    return name == epochs_file_name || name == identity_file_name || name == synced_file_name ||
           parse_numbered_name(name, segment_prefix) ||
           parse_numbered_name(name, snapshot_prefix);
}

inline directory_contents classify(const std::vector<std::string>& names) {
    using namespace storage_format;
    directory_contents contents;
    for (const std::string& name : names) {
        const std::string_view n = name;
        if (n == identity_file_name) {
            contents.has_identity = true;
        } else if (n == epochs_file_name) {
            contents.has_epochs = true;
        } else if (n == synced_file_name) {
            contents.has_synced = true;
        } else if (auto segment = parse_numbered_name(n, segment_prefix)) {
            contents.segments.push_back(*segment);
        } else if (auto snapshot = parse_numbered_name(n, snapshot_prefix)) {
            contents.snapshots.push_back(*snapshot);
        } else if (n.size() > temporary_suffix.size() &&
                   n.substr(n.size() - temporary_suffix.size()) == temporary_suffix &&
                   is_zab_file_name(n.substr(0, n.size() - temporary_suffix.size()))) {
            contents.temporaries.push_back(name);
        }
    }
    std::sort(contents.segments.begin(), contents.segments.end());
    std::sort(contents.snapshots.begin(), contents.snapshots.end());
    return contents;
}

/// Reads file `name` of the directory whole, refusing one larger than `max_bytes` before
/// allocating for it.
inline result<std::vector<std::byte>> read_small_file(const directory_handle& dir,
                                                      const std::string& name,
                                                      std::uint64_t max_bytes, std::string& why) {
    const std::string path = fmt::format("{}/{}", dir.path, name);
    int descriptor = -1;
    int error = dir.fs->open_file(dir.fd.get(), name, open_mode::read_only, descriptor);
    const unique_fd fd = error == 0 ? unique_fd{*dir.fs, descriptor} : unique_fd{};
    std::uint64_t size = 0;
    if (error == 0) error = dir.fs->size_of(fd.get(), size);
    if (error != 0) {
        why = fmt::format("cannot read {}: {}", path, errno_text(error));
        return make_error_code(errc::storage_failed);
    }
    if (size > max_bytes) {
        why = fmt::format("{}: file is {} bytes, more than the {} allowed", path, size, max_bytes);
        return make_error_code(errc::corrupt);
    }
    std::vector<std::byte> bytes(static_cast<std::size_t>(size));
    std::size_t got = 0;
    error = dir.fs->read_at(fd.get(), bytes, 0, got);
    if (error != 0 || got != bytes.size()) {
        why = fmt::format("cannot read {}: {}", path,
                          error != 0 ? errno_text(error) : std::string{"short read"});
        return make_error_code(errc::storage_failed);
    }
    return bytes;
}

inline result<storage_format::identity> read_identity(const directory_handle& dir,
                                                      std::string& why) {
    const std::string name{storage_format::identity_file_name};
    auto bytes = read_small_file(dir, name, 4096, why);
    if (!bytes) return bytes.error();
    std::string problem;
    auto id = storage_format::decode_identity(bytes.value(), problem);
    if (!id) {
        why = fmt::format("{}/{}: {}", dir.path, name, problem);
        return id.error() == errc::unsupported_version ? id.error()
                                                        : make_error_code(errc::corrupt);
    }
    return id;
}

inline result<epochs> read_epochs(const directory_handle& dir, std::string& why) {
    const std::string name{storage_format::epochs_file_name};
    auto bytes = read_small_file(dir, name, 4096, why);
    if (!bytes) return bytes.error();
    std::string problem;
    auto value = storage_format::decode_epochs(bytes.value(), problem);
    if (!value) {
        why = fmt::format("{}/{}: {}", dir.path, name, problem);
        return value.error() == errc::unsupported_version ? value.error()
                                                        : make_error_code(errc::corrupt);
    }
    return value;
}

/// The synced watermark (format.hpp); `corrupt` when neither slot is valid.
inline result<storage_format::synced_mark> read_synced(const directory_handle& dir,
                                                       std::string& why) {
    const std::string name{storage_format::synced_file_name};
    auto bytes = read_small_file(dir, name, 4096, why);
    if (!bytes) return bytes.error();
    std::string problem;
    auto mark = storage_format::decode_synced(bytes.value(), problem);
    if (!mark) {
        why = fmt::format("{}/{}: {}", dir.path, name, problem);
        return mark.error() == errc::unsupported_version ? mark.error()
                                                         : make_error_code(errc::corrupt);
    }
    return mark;
}

/// A snapshot file as read: the snapshot, and the log generation that follows it.
struct snapshot_file {
    log_snapshot snapshot;
    std::uint64_t live_generation = 0;
};

/// Loads and checks snapshot file `generation` (its size bounded by `max_state_bytes`).
inline result<snapshot_file> read_snapshot(const directory_handle& dir, std::uint64_t generation,
                                           const storage_format::identity& owner,
                                           std::uint64_t max_state_bytes, std::string& why) {
    using namespace storage_format;
    const std::string name = snapshot_file_name(generation);
    const std::string path = fmt::format("{}/{}", dir.path, name);
    auto bytes = read_small_file(dir, name, snapshot_header_size + max_state_bytes, why);
    if (!bytes) {
        if (bytes.error() == errc::corrupt)
            why += " (raise max_snapshot_bytes if the snapshot is legitimately this large)";
        return bytes.error();
    }
    // One buffer: the state handed out is a slice of it, not a copy.
    const shared_bytes whole{std::move(bytes).value()};
    const byte_view file = whole.view();
    std::string problem;
    auto header = decode_snapshot_header(file, problem);
    if (!header) {
        why = fmt::format("{}: {}", path, problem);
        return header.error() == errc::unsupported_version ? header.error()
                                                           : make_error_code(errc::corrupt);
    }
    const snapshot_header& h = header.value();
    if (h.state_length != file.size() - snapshot_header_size) {
        why = fmt::format("{}: header says {} bytes of state, the file holds {}", path,
                          h.state_length, file.size() - snapshot_header_size);
        return make_error_code(errc::corrupt);
    }
    const byte_view state = file.subspan(snapshot_header_size);
    if (!snapshot_checksum_matches(file.first(snapshot_header_size), state)) {
        why = fmt::format("{}: checksum mismatch", path);
        return make_error_code(errc::corrupt);
    }
    if (h.cluster_id != owner.cluster_id || h.replica_id != owner.replica_id ||
        h.generation != generation) {
        why = fmt::format("{}: snapshot of cluster {} replica {} generation {:016x}, expected "
                          "cluster {} replica {} generation {:016x}",
                          path, h.cluster_id, h.replica_id, h.generation, owner.cluster_id,
                          owner.replica_id, generation);
        return make_error_code(errc::corrupt);
    }
    if (h.checkpoint && h.continued_generation >= generation) {
        why = fmt::format("{}: checkpoint {:016x} continues generation {:016x}, which is not "
                          "older than itself",
                          path, generation, h.continued_generation);
        return make_error_code(errc::corrupt);
    }
    return snapshot_file{log_snapshot{h.last_included, whole.slice(state)}, h.live_generation()};
}

}  // namespace zab::detail
