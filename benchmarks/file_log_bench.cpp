// zab::file_log benchmark: appends of 100-byte and 4 KiB records in batches of 1, 16 and
// 256 records per flush (append + sync + flush on one thread: the group commit a driver
// gets when it flushes once per peer step), on a real directory with real fdatasyncs.
//
// Each line is the median of 5 runs; a run appends batches for about 300 ms (wall time:
// the cost is the disk, not the CPU) in a fresh directory under /tmp (or `--dir <parent>`),
// removed afterwards. Reported: records/s, MB/s of payload, and fdatasyncs/s (one per
// flush while a batch fits in one segment and one group-commit window).
// `--smoke` runs each case for a few flushes only: the numbers mean nothing, it proves the
// benchmark still builds and runs.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "zab/storage/file_log.hpp"

namespace {

bool smoke = false;
std::string parent_directory = "/tmp";

struct run_result {
    double records_per_second = 0;
    double megabytes_per_second = 0;
    double fsyncs_per_second = 0;
};

std::vector<zab::log_record> make_batch(std::uint32_t& counter, std::size_t count,
                                        const zab::shared_bytes& payload) {
    std::vector<zab::log_record> batch;
    batch.reserve(count);
    for (std::size_t i = 0; i < count; ++i) batch.push_back({zab::zxid{1, ++counter}, payload});
    return batch;
}

/// One run in a fresh directory; exits the program on any storage error.
run_result run_once(std::size_t record_bytes, std::size_t batch_records) {
    std::string pattern = parent_directory + "/zab_file_log_bench_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
        std::perror("mkdtemp");
        std::exit(1);
    }
    zab::file_log_options options;
    options.directory = pattern + "/data";
    std::string why;
    auto opened = zab::file_log::open(options, &why);
    if (!opened) {
        std::fprintf(stderr, "open failed: %s\n", why.c_str());
        std::exit(1);
    }
    zab::file_log log = std::move(opened).value();
    log.write_epochs(0, {1, 1});
    if (log.flush().failed()) std::exit(1);

    const zab::shared_bytes payload{std::vector<std::byte>(record_bytes, std::byte{0x5a})};
    const auto stats_before = log.stats();
    std::uint32_t counter = 0;
    zab::storage_op op = 0;
    std::size_t flushes = 0;
    const auto minimum = std::chrono::milliseconds{smoke ? 0 : 300};
    const std::size_t minimum_flushes = smoke ? 3 : 10;
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = std::chrono::steady_clock::duration{};
    while (elapsed < minimum || flushes < minimum_flushes) {
        const auto batch = make_batch(counter, batch_records, payload);
        log.append(++op, batch);
        log.sync(op);
        const auto result = log.flush();
        if (result.failed() || result.log_durable != op) {
            std::fprintf(stderr, "flush failed: %s\n", result.reason.c_str());
            std::exit(1);
        }
        ++flushes;
        elapsed = std::chrono::steady_clock::now() - start;
    }
    const double seconds = std::chrono::duration<double>(elapsed).count();
    const double records = static_cast<double>(counter);
    const double syncs = static_cast<double>(log.stats().data_syncs - stats_before.data_syncs);

    // Check what was written reads back, then clean up.
    auto back = log.read(zab::zxid{}, 4);
    if (!back || back.value().size() != std::min<std::size_t>(4, counter)) {
        std::fprintf(stderr, "read back failed\n");
        std::exit(1);
    }
    { zab::file_log closed = std::move(log); }
    std::error_code ignored;
    std::filesystem::remove_all(pattern, ignored);
    return {records / seconds, records * static_cast<double>(record_bytes) / seconds / 1e6,
            syncs / seconds};
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--smoke") {
            smoke = true;
        } else if (arg == "--dir" && i + 1 < argc) {
            parent_directory = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--smoke] [--dir <parent directory>]\n", argv[0]);
            return 2;
        }
    }
    const int runs = smoke ? 1 : 5;
    std::printf("file_log appends on %s (median of %d runs; append + sync + flush per batch)\n",
                parent_directory.c_str(), runs);
    std::printf("%-8s %-7s %14s %10s %12s\n", "record", "batch", "records/s", "MB/s", "fsyncs/s");
    for (const std::size_t record_bytes : {std::size_t{100}, std::size_t{4096}}) {
        for (const std::size_t batch : {std::size_t{1}, std::size_t{16}, std::size_t{256}}) {
            std::vector<double> records, megabytes, fsyncs;
            for (int run = 0; run < runs; ++run) {
                const run_result r = run_once(record_bytes, batch);
                records.push_back(r.records_per_second);
                megabytes.push_back(r.megabytes_per_second);
                fsyncs.push_back(r.fsyncs_per_second);
            }
            std::printf("%-8s %-7zu %14.0f %10.2f %12.0f\n",
                        record_bytes == 100 ? "100 B" : "4 KiB", batch, median(records),
                        median(megabytes), median(fsyncs));
        }
    }
    return 0;
}
