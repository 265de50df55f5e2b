// Runs a libFuzzer target over files, without libFuzzer: lets any compiler (g++ included)
// replay the checked-in corpus and past crashes as a regression test.
//
// Usage: replay PATH...   where each PATH is a file or a directory (not recursive).
// A directory that does not exist is skipped (fuzz/crashes/ exists only once a crash was
// found). Fails if no input at all was run, so a moved corpus cannot pass silently.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int run_file(const std::filesystem::path& path) {
    std::ifstream in{path, std::ios::binary};
    if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
        return 1;
    }
    const std::vector<char> bytes{std::istreambuf_iterator<char>{in},
                                  std::istreambuf_iterator<char>{}};
    // Never a null pointer, even for an empty file.
    static const std::uint8_t empty = 0;
    const auto* data = bytes.empty() ? &empty : reinterpret_cast<const std::uint8_t*>(bytes.data());
    LLVMFuzzerTestOneInput(data, bytes.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t inputs = 0;
    int failures = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path path{argv[i]};
        std::error_code error;
        if (std::filesystem::is_directory(path, error)) {
            // Sorted, so a run is reproducible whatever order the file system lists in.
            std::vector<std::filesystem::path> files;
            for (const auto& entry : std::filesystem::directory_iterator{path}) {
                if (entry.is_regular_file()) files.push_back(entry.path());
            }
            std::sort(files.begin(), files.end());
            for (const auto& file : files) {
                failures += run_file(file);
                ++inputs;
            }
        } else if (std::filesystem::is_regular_file(path, error)) {
            failures += run_file(path);
            ++inputs;
        } else {
            std::printf("replay: %s does not exist, skipped\n", path.c_str());
        }
    }
    std::printf("replay: %zu inputs run\n", inputs);
    if (inputs == 0) {
        std::fprintf(stderr, "replay: no input found\n");
        return 1;
    }
    return failures == 0 ? 0 : 1;
}
