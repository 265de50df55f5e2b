// zab/storage/file_system.hpp — the seam between zab::file_log and the disk: every system
// call file_log makes on its data directory goes through a `zab::file_system`.
//
// Why a seam: the page cache survives kill -9, so a test that kills a process cannot tell
// whether data was synced. A test file system that keeps a durable image apart from what the
// page cache would hold (zab/testing/durable_image_fs.hpp) can lose power for real, and can
// skip the syncs of one call site to show that the site is needed (issue #6). Every sync
// therefore names its `sync_site`.
//
// The contract is POSIX's, one system call per member (virtual calls cost nothing next to a
// system call): results are 0 or an errno value, so callers word their failures exactly as
// before. Descriptors are plain ints owned by the file_system that issued them; `unique_fd`
// closes through it.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zab/core/bytes.hpp"
#include "zab/storage/posix_file.hpp"

namespace zab {

/// Every place where file_log makes something durable. A test file system tells them apart,
/// e.g. to skip the syncs of one site and show that the crash tests then lose data.
enum class sync_site : std::uint8_t {
    data_directory_parent,         ///< fsync of the parent after creating the data directory
    initial_epoch_file,            ///< fsync of epochs.tmp when a directory is initialized
    initial_epoch_directory,       ///< fsync of the directory after renaming it into place
    identity_file,                 ///< fsync of identity.tmp (initialization)
    identity_directory,            ///< fsync of the directory after renaming it into place
    torn_tail_data,                ///< recovery: fdatasync of the newest segment, always
                                   ///< (after cutting a torn tail, or of what it found
                                   ///< whole: a killed process's page cache)
    recovery_removal_directory,    ///< recovery: fsync of the directory after its unlinks
    truncation_removal_directory,  ///< TRUNC: fsync of the directory after each unlink
    truncation_data,               ///< TRUNC: fdatasync after the ftruncate
    segment_created_directory,     ///< fsync of the directory after creating a segment
    segment_data,                  ///< fdatasync after each window of appended records
    snapshot_file,                 ///< fsync of snapshot.N.tmp (install or checkpoint)
    snapshot_rename_directory,     ///< fsync of the directory after renaming it into place
    snapshot_retire_directory,     ///< fsync of the directory after unlinking what it replaced
    epoch_file,                    ///< fsync of epochs.tmp (write_epochs)
    epoch_rename_directory,        ///< fsync of the directory after renaming it into place
    recovery_directory,            ///< recovery: fsync of the directory, always: the entries
                                   ///< a killed process left unsynced (renamed epoch and
                                   ///< snapshot files, a new segment) are vouched for
    synced_watermark,              ///< fdatasync of the synced file after each update
    synced_watermark_file,         ///< fsync of synced.tmp (its first write, at open)
    synced_watermark_directory,    ///< fsync of the directory after renaming it into place
};

/// One past the last `sync_site`, for loops over every site.
inline constexpr std::size_t sync_site_count =
    static_cast<std::size_t>(sync_site::synced_watermark_directory) + 1;

inline constexpr std::string_view sync_site_name(sync_site site) noexcept {
    switch (site) {
        case sync_site::data_directory_parent: return "data_directory_parent";
        case sync_site::initial_epoch_file: return "initial_epoch_file";
        case sync_site::initial_epoch_directory: return "initial_epoch_directory";
        case sync_site::identity_file: return "identity_file";
        case sync_site::identity_directory: return "identity_directory";
        case sync_site::torn_tail_data: return "torn_tail_data";
        case sync_site::recovery_removal_directory: return "recovery_removal_directory";
        case sync_site::truncation_removal_directory: return "truncation_removal_directory";
        case sync_site::truncation_data: return "truncation_data";
        case sync_site::segment_created_directory: return "segment_created_directory";
        case sync_site::segment_data: return "segment_data";
        case sync_site::snapshot_file: return "snapshot_file";
        case sync_site::snapshot_rename_directory: return "snapshot_rename_directory";
        case sync_site::snapshot_retire_directory: return "snapshot_retire_directory";
        case sync_site::epoch_file: return "epoch_file";
        case sync_site::epoch_rename_directory: return "epoch_rename_directory";
        case sync_site::recovery_directory: return "recovery_directory";
        case sync_site::synced_watermark: return "synced_watermark";
        case sync_site::synced_watermark_file: return "synced_watermark_file";
        case sync_site::synced_watermark_directory: return "synced_watermark_directory";
    }
    return "unknown";
}

/// How `file_system::open_file` opens a file of a directory.
enum class open_mode : std::uint8_t {
    read_only,           ///< O_RDONLY: an existing file
    read_write,          ///< O_RDWR: an existing file
    create_exclusive,    ///< O_RDWR | O_CREAT | O_EXCL: the file must not exist
    create_or_truncate,  ///< O_WRONLY | O_CREAT | O_TRUNC
};

/// The system calls of a file_log. Every member returns 0 or an errno value (never throws,
/// never sets errno for the caller); out-parameters are set only on success.
class file_system {
public:
    virtual ~file_system() = default;

    /// open(path, O_RDONLY | O_DIRECTORY).
    virtual int open_directory(const std::string& path, int& fd) = 0;
    /// mkdir(path, 0755); EEXIST when it exists.
    virtual int make_directory(const std::string& path) = 0;
    /// flock(directory_fd, LOCK_EX | LOCK_NB): EWOULDBLOCK when someone else holds it.
    virtual int lock_directory(int directory_fd) = 0;
    /// The names in directory `path`, without "." and "..".
    virtual int list_directory(const std::string& path, std::vector<std::string>& names) = 0;
    /// fsync of a directory: its entries (creations, renames, unlinks) become durable.
    virtual int sync_directory(int directory_fd, sync_site site) = 0;

    /// openat(directory_fd, name, mode, 0644).
    virtual int open_file(int directory_fd, const std::string& name, open_mode mode, int& fd) = 0;
    /// renameat within one directory, replacing `to` atomically. `to` may also name an entry
    /// of a subdirectory ("damaged-1/log.…"): corruption_policy::resync moves files aside so
    /// (POSIX renameat does it; testing::durable_image_fs does not model subdirectories).
    virtual int rename_file(int directory_fd, const std::string& from, const std::string& to) = 0;
    /// unlinkat; ENOENT when it does not exist.
    virtual int remove_file(int directory_fd, const std::string& name) = 0;

    /// Writes all of `data` at `offset` (pwrite until done).
    virtual int write_at(int fd, byte_view data, std::uint64_t offset) = 0;
    /// Reads into `out` from `offset` until it is full or the file ends; `got` says how much.
    virtual int read_at(int fd, std::span<std::byte> out, std::uint64_t offset,
                        std::size_t& got) = 0;
    /// fstat's st_size.
    virtual int size_of(int fd, std::uint64_t& size) = 0;
    /// ftruncate.
    virtual int truncate_file(int fd, std::uint64_t size) = 0;
    /// fdatasync: the file's bytes and size become durable.
    virtual int sync_data(int fd, sync_site site) = 0;
    /// fsync: the same, and the rest of the file's metadata.
    virtual int sync_file(int fd, sync_site site) = 0;
    /// close; errors are not reported (what must be durable was synced before).
    virtual void close(int fd) noexcept = 0;
};

/// The real thing: each member is the POSIX call it names.
class posix_file_system final : public file_system {
public:
    int open_directory(const std::string& path, int& fd) override {
        return opened(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd);
    }
    int make_directory(const std::string& path) override {
        return ::mkdir(path.c_str(), 0755) == 0 ? 0 : errno;
    }
    int lock_directory(int directory_fd) override {
        return ::flock(directory_fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
    }
    int list_directory(const std::string& path, std::vector<std::string>& names) override {
        return detail::list_directory(path, names);
    }
    int sync_directory(int directory_fd, sync_site) override {
        return ::fsync(directory_fd) == 0 ? 0 : errno;
    }
    int open_file(int directory_fd, const std::string& name, open_mode mode, int& fd) override {
        int flags = O_CLOEXEC;
        switch (mode) {
            case open_mode::read_only: flags |= O_RDONLY; break;
            case open_mode::read_write: flags |= O_RDWR; break;
            case open_mode::create_exclusive: flags |= O_RDWR | O_CREAT | O_EXCL; break;
            case open_mode::create_or_truncate: flags |= O_WRONLY | O_CREAT | O_TRUNC; break;
        }
        return opened(::openat(directory_fd, name.c_str(), flags, 0644), fd);
    }
    int rename_file(int directory_fd, const std::string& from, const std::string& to) override {
        return ::renameat(directory_fd, from.c_str(), directory_fd, to.c_str()) == 0 ? 0 : errno;
    }
    int remove_file(int directory_fd, const std::string& name) override {
        return ::unlinkat(directory_fd, name.c_str(), 0) == 0 ? 0 : errno;
    }
    int write_at(int fd, byte_view data, std::uint64_t offset) override {
        return detail::write_all_at(fd, data, offset);
    }
    int read_at(int fd, std::span<std::byte> out, std::uint64_t offset, std::size_t& got) override {
        return detail::read_at_most(fd, out, offset, got);
    }
    int size_of(int fd, std::uint64_t& size) override { return detail::file_size(fd, size); }
    int truncate_file(int fd, std::uint64_t size) override {
        return ::ftruncate(fd, static_cast<off_t>(size)) == 0 ? 0 : errno;
    }
    int sync_data(int fd, sync_site) override { return ::fdatasync(fd) == 0 ? 0 : errno; }
    int sync_file(int fd, sync_site) override { return ::fsync(fd) == 0 ? 0 : errno; }
    void close(int fd) noexcept override { ::close(fd); }

private:
    static int opened(int fd, int& out) {
        if (fd < 0) return errno;
        out = fd;
        return 0;
    }
};

/// The process-wide POSIX file system: the default of `file_log_options::filesystem`. Never
/// destroyed: a log held by an object with static storage (destroyed after this function's
/// statics, since it was made before the first call) still closes its files through it.
inline file_system& posix_file_system_instance() noexcept {
    static file_system* const instance = new posix_file_system;
    return *instance;
}

namespace detail {

/// Owns a descriptor of a file_system; closes it through that file_system. Move-only.
class unique_fd {
public:
    unique_fd() noexcept = default;
    unique_fd(file_system& fs, int fd) noexcept : fs_{&fs}, fd_{fd} {}
    unique_fd(unique_fd&& other) noexcept : fs_{other.fs_}, fd_{std::exchange(other.fd_, -1)} {}
    unique_fd& operator=(unique_fd&& other) noexcept {
        if (this != &other) {
            reset();
            fs_ = other.fs_;
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    ~unique_fd() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    /// Closes now. A close error is not reported: what must be durable was synced before.
    void reset() noexcept {
        if (fd_ >= 0) fs_->close(fd_);
        fd_ = -1;
    }

private:
    file_system* fs_ = nullptr;
    int fd_ = -1;
};

}  // namespace detail
}  // namespace zab
