// zab/storage/posix_file.hpp — thin POSIX helpers behind zab::posix_file_system
// (file_system.hpp): whole-buffer pread/pwrite loops, file size, directory listing. Linux; no
// policy, no error wording beyond errno: callers say which file and which step failed.
// file_log itself calls none of these: it goes through its `file_system`.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zab/core/bytes.hpp"

namespace zab::detail {

/// strerror-like text for an errno value (thread-safe).
inline std::string errno_text(int error) { return std::system_category().message(error); }

/// Writes all of `data` at `offset`, retrying short writes and EINTR. 0 or an errno.
inline int write_all_at(int fd, byte_view data, std::uint64_t offset) noexcept {
    while (!data.empty()) {
        const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;  // no progress on a regular file: report, never spin
        data = data.subspan(static_cast<std::size_t>(n));
        offset += static_cast<std::uint64_t>(n);
    }
    return 0;
}

/// Reads into `out` from `offset` until it is full or the file ends; `got` says how much.
/// 0 or an errno.
inline int read_at_most(int fd, std::span<std::byte> out, std::uint64_t offset,
                        std::size_t& got) noexcept {
    got = 0;
    while (got < out.size()) {
        const ssize_t n =
            ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    return 0;
}

/// The size of an open file. 0 or an errno.
inline int file_size(int fd, std::uint64_t& size) noexcept {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return errno;
    size = static_cast<std::uint64_t>(st.st_size);
    return 0;
}

/// The names in directory `path` (without "." and ".."). 0 or an errno.
inline int list_directory(const std::string& path, std::vector<std::string>& names) {
    names.clear();
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return errno;
    int error = 0;
    for (;;) {
        errno = 0;
        const dirent* entry = ::readdir(dir);
        if (entry == nullptr) {
            error = errno;
            break;
        }
        const std::string name = entry->d_name;
        if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
    return error;
}

}  // namespace zab::detail
