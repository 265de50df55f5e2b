// benchmarks/scratch_directory.hpp — a fresh directory for a benchmark's files, removed with
// everything in it when it goes out of scope (the file-log benchmarks).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>

namespace zab::bench {

/// `parent/<name>_XXXXXX` made by mkdtemp; a failure ends the program (exit 1), naming it.
struct scratch_directory {
    std::string path;
    scratch_directory(const std::string& parent, std::string_view name)
        : path{parent + "/" + std::string{name} + "_XXXXXX"} {
        if (::mkdtemp(path.data()) == nullptr) {
            std::fprintf(stderr, "%.*s: mkdtemp under %s failed\n", static_cast<int>(name.size()),
                         name.data(), parent.c_str());
            std::exit(1);
        }
    }
    ~scratch_directory() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    scratch_directory(const scratch_directory&) = delete;
    scratch_directory& operator=(const scratch_directory&) = delete;
};

}  // namespace zab::bench
