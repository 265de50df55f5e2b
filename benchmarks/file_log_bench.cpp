// zab::file_log benchmark, on a real directory with real fdatasyncs (`--dir <parent>`,
// default /tmp), each figure the median of 5 runs in a fresh directory removed afterwards:
//
//   - the raw device, the baselines the log is quoted against: a loop writing 4 KiB at the
//     end of a new file + fdatasync (what an append costs: the file's size changes, so the
//     journal commits), and a loop overwriting a preallocated, zero-filled file 4 KiB at a
//     time + fdatasync (data only);
//   - appends of 100-byte and 4 KiB records in batches of 1, 10, 100 and 1000 per flush
//     (append + sync + flush on one thread: the group commit a driver gets when it flushes
//     once per peer step): records/s, MB/s of payload, fdatasyncs/s, and the ratio of the
//     flushes/s to the append baseline;
//   - recovery: `open` of a log of 100-byte records (CRC-checked scan of every record), in
//     seconds per GB;
//   - snapshots: a checkpoint (`compact`) of a 64 MiB state written and made durable, and
//     loaded again by `open`, in MB/s.
//
//   - `--watermark-cost`: only the cost of the synced watermark (issue 34, defect 10): the
//     appends above with every fdatasync of the `synced` file done, and with it skipped (a
//     file system that makes that one sync a no-op; the watermark is still written), run
//     alternately in one sitting, medians of 3 each, with flushes/s and fdatasyncs per flush
//     (file_log_stats::data_syncs + watermark_syncs).
//
// A run appends for about 300 ms (wall time: the cost is the disk, not the CPU).
// `--smoke` runs each case briefly and small: the numbers mean nothing, it proves the
// benchmark still builds and runs.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "zab/storage/file_log.hpp"

#include "scratch_directory.hpp"

namespace {

bool smoke = false;
std::string parent_directory = "/tmp";

struct run_result {
    double records_per_second = 0;
    double megabytes_per_second = 0;
    double fsyncs_per_second = 0;
    double flushes_per_second = 0;
    double watermark_syncs_per_flush = 0;
};

std::vector<zab::log_record> make_batch(std::uint32_t& counter, std::size_t count,
                                        const zab::shared_bytes& payload) {
    std::vector<zab::log_record> batch;
    batch.reserve(count);
    for (std::size_t i = 0; i < count; ++i) batch.push_back({zab::zxid{1, ++counter}, payload});
    return batch;
}

using bench_clock = std::chrono::steady_clock;

double seconds_since(bench_clock::time_point start) {
    return std::chrono::duration<double>(bench_clock::now() - start).count();
}

[[noreturn]] void die(const char* what) {
    std::perror(what);
    std::exit(1);
}


/// The real file system, except that the fdatasync of the synced watermark is skipped (the
/// write itself still happens): what the appends would cost without the watermark's sync.
class no_watermark_sync_file_system final : public zab::file_system {
public:
    int open_directory(const std::string& path, int& fd) override {
        return real_.open_directory(path, fd);
    }
    int make_directory(const std::string& path) override { return real_.make_directory(path); }
    int lock_directory(int fd) override { return real_.lock_directory(fd); }
    int list_directory(const std::string& path, std::vector<std::string>& names) override {
        return real_.list_directory(path, names);
    }
    int sync_directory(int fd, zab::sync_site site) override {
        return real_.sync_directory(fd, site);
    }
    int open_file(int directory_fd, const std::string& name, zab::open_mode mode,
                  int& fd) override {
        return real_.open_file(directory_fd, name, mode, fd);
    }
    int rename_file(int fd, const std::string& from, const std::string& to) override {
        return real_.rename_file(fd, from, to);
    }
    int remove_file(int fd, const std::string& name) override { return real_.remove_file(fd, name); }
    int write_at(int fd, zab::byte_view data, std::uint64_t offset) override {
        return real_.write_at(fd, data, offset);
    }
    int read_at(int fd, std::span<std::byte> out, std::uint64_t offset,
                std::size_t& got) override {
        return real_.read_at(fd, out, offset, got);
    }
    int size_of(int fd, std::uint64_t& size) override { return real_.size_of(fd, size); }
    int truncate_file(int fd, std::uint64_t size) override { return real_.truncate_file(fd, size); }
    int sync_data(int fd, zab::sync_site site) override {
        return site == zab::sync_site::synced_watermark ? 0 : real_.sync_data(fd, site);
    }
    int sync_file(int fd, zab::sync_site site) override { return real_.sync_file(fd, site); }
    void close(int fd) noexcept override { real_.close(fd); }

private:
    zab::posix_file_system real_;
};

zab::file_system* filesystem = nullptr;  // null: the default (posix_file_system)

zab::file_log open_log(const std::string& directory) {
    zab::file_log_options options;
    options.directory = directory;
    if (filesystem != nullptr) options.filesystem = filesystem;
    std::string why;
    auto opened = zab::file_log::open(options, &why);
    if (!opened) {
        std::fprintf(stderr, "open failed: %s\n", why.c_str());
        std::exit(1);
    }
    return std::move(opened).value();
}

/// The raw device: 4 KiB writes + fdatasync per second, appending to a new file or
/// overwriting a preallocated, zero-filled one.
double raw_syncs_per_second(bool preallocated) {
    const zab::bench::scratch_directory dir{parent_directory, "zab_file_log_bench"};
    const std::string path = dir.path + "/raw";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) die("open");
    const std::size_t block = 4096;
    const std::size_t max_blocks = 16384;  // 64 MiB
    std::vector<char> bytes(block, 'z');
    if (preallocated) {
        std::vector<char> zeros(1 << 20, 0);
        for (std::size_t i = 0; i < max_blocks * block / zeros.size(); ++i)
            if (::write(fd, zeros.data(), zeros.size()) != static_cast<ssize_t>(zeros.size()))
                die("write");
        if (::fsync(fd) != 0) die("fsync");
    }
    std::size_t n = 0;
    const auto start = bench_clock::now();
    while (n < max_blocks && (n < (smoke ? 3u : 10u) || seconds_since(start) < (smoke ? 0 : 0.3))) {
        if (::pwrite(fd, bytes.data(), block, static_cast<off_t>(n * block)) !=
            static_cast<ssize_t>(block))
            die("pwrite");
        if (::fdatasync(fd) != 0) die("fdatasync");
        ++n;
    }
    const double rate = static_cast<double>(n) / seconds_since(start);
    ::close(fd);
    return rate;
}

/// One run in a fresh directory; exits the program on any storage error.
run_result run_once(std::size_t record_bytes, std::size_t batch_records) {
    const zab::bench::scratch_directory dir{parent_directory, "zab_file_log_bench"};
    zab::file_log log = open_log(dir.path + "/data");
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
        log.make_durable(op);
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
    const double watermark_syncs =
        static_cast<double>(log.stats().watermark_syncs - stats_before.watermark_syncs);

    // Check what was written reads back, then clean up.
    auto back = log.read(zab::zxid{}, 4);
    if (!back || back.value().size() != std::min<std::size_t>(4, counter)) {
        std::fprintf(stderr, "read back failed\n");
        std::exit(1);
    }
    return {records / seconds, records * static_cast<double>(record_bytes) / seconds / 1e6,
            syncs / seconds, static_cast<double>(flushes) / seconds,
            watermark_syncs / static_cast<double>(flushes)};
}

/// Seconds per GB to open (recover) a log of 100-byte records `megabytes` large.
double recovery_seconds_per_gb(std::size_t megabytes) {
    const zab::bench::scratch_directory dir{parent_directory, "zab_file_log_bench"};
    std::uint64_t bytes = 0;
    {
        zab::file_log log = open_log(dir.path + "/data");
        log.write_epochs(0, {1, 1});
        const zab::shared_bytes payload{std::vector<std::byte>(100, std::byte{0x5a})};
        std::uint32_t counter = 0;
        zab::storage_op op = 0;
        while (bytes < megabytes * 1000'000) {
            log.append(++op, make_batch(counter, 10'000, payload));
            bytes += 10'000 * (100 + zab::storage_format::record_header_size);
        }
        log.make_durable(op);
        if (log.flush().failed()) std::exit(1);
    }
    const auto start = bench_clock::now();
    zab::file_log reopened = open_log(dir.path + "/data");
    const double seconds = seconds_since(start);
    if (reopened.last_zxid() == zab::zxid{}) std::exit(1);
    return seconds / (static_cast<double>(bytes) / 1e9);
}

/// MB/s of a checkpoint of a `megabytes` state: written and made durable, then loaded.
std::pair<double, double> snapshot_megabytes_per_second(std::size_t megabytes) {
    const zab::bench::scratch_directory dir{parent_directory, "zab_file_log_bench"};
    const zab::shared_bytes state{std::vector<std::byte>(megabytes << 20, std::byte{0x33})};
    const double size = static_cast<double>(state.size()) / 1e6;
    double write_seconds = 0;
    {
        zab::file_log log = open_log(dir.path + "/data");
        log.write_epochs(0, {1, 1});
        log.append(1, std::vector<zab::log_record>{{zab::zxid{1, 1}, state.slice(state.view().first(10))}});
        log.make_durable(1);
        if (log.flush().failed()) std::exit(1);
        const auto start = bench_clock::now();
        if (!log.compact(zab::zxid{1, 1}, state) || log.flush().failed()) std::exit(1);
        write_seconds = seconds_since(start);
    }
    const auto start = bench_clock::now();
    zab::file_log reopened = open_log(dir.path + "/data");
    const double read_seconds = seconds_since(start);
    if (!reopened.snapshot() || reopened.snapshot()->state.size() != state.size()) std::exit(1);
    return {size / write_seconds, size / read_seconds};
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

/// `--watermark-cost`: appends with and without the watermark's fdatasync, alternated.
int watermark_cost() {
    const int runs = smoke ? 1 : 3;
    no_watermark_sync_file_system skipping;
    std::printf("file_log on %s: the synced watermark's fdatasync, with and without "
                "(alternated, median of %d runs each)\n\n",
                parent_directory.c_str(), runs);
    std::printf("%-8s %-7s %14s %14s %8s %16s\n", "record", "batch", "flushes/s with",
                "flushes/s w/o", "cost", "watermark/flush");
    for (const std::size_t record_bytes : {std::size_t{100}, std::size_t{4096}}) {
        for (const std::size_t batch : {std::size_t{1}, std::size_t{10}, std::size_t{100}}) {
            std::vector<double> with, without, per_flush;
            for (int run = 0; run < runs; ++run) {
                filesystem = nullptr;
                const run_result r = run_once(record_bytes, batch);
                with.push_back(r.flushes_per_second);
                per_flush.push_back(r.watermark_syncs_per_flush);
                filesystem = &skipping;
                without.push_back(run_once(record_bytes, batch).flushes_per_second);
            }
            filesystem = nullptr;
            const double a = median(with), b = median(without);
            std::printf("%-8s %-7zu %14.0f %14.0f %7.0f%% %16.2f\n",
                        record_bytes == 100 ? "100 B" : "4 KiB", batch, a, b, 100.0 * (1 - a / b),
                        median(per_flush));
        }
    }
    return 0;
}

int main(int argc, char** argv) {
    bool only_watermark = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--watermark-cost") {
            only_watermark = true;
        } else if (arg == "--smoke") {
            smoke = true;
        } else if (arg == "--dir" && i + 1 < argc) {
            parent_directory = argv[++i];
        } else {
            std::fprintf(stderr,
                         "usage: %s [--smoke] [--watermark-cost] [--dir <parent directory>]\n",
                         argv[0]);
            return 2;
        }
    }
    if (only_watermark) return watermark_cost();
    const int runs = smoke ? 1 : 5;
    const auto median_of = [runs](auto&& measure) {
        std::vector<double> values;
        for (int run = 0; run < runs; ++run) values.push_back(measure());
        return median(values);
    };
    std::printf("file_log on %s (median of %d runs)\n\n", parent_directory.c_str(), runs);
    const double append_baseline = median_of([] { return raw_syncs_per_second(false); });
    const double overwrite_baseline = median_of([] { return raw_syncs_per_second(true); });
    std::printf("raw device, 4 KiB write + fdatasync: appending %.0f/s, overwriting a "
                "preallocated file %.0f/s\n\n",
                append_baseline, overwrite_baseline);
    std::printf("%-8s %-7s %14s %10s %12s %12s\n", "record", "batch", "records/s", "MB/s",
                "fsyncs/s", "flushes/raw");
    for (const std::size_t record_bytes : {std::size_t{100}, std::size_t{4096}}) {
        for (const std::size_t batch :
             {std::size_t{1}, std::size_t{10}, std::size_t{100}, std::size_t{1000}}) {
            std::vector<double> records, megabytes, fsyncs, flushes;
            for (int run = 0; run < runs; ++run) {
                const run_result r = run_once(record_bytes, batch);
                records.push_back(r.records_per_second);
                megabytes.push_back(r.megabytes_per_second);
                fsyncs.push_back(r.fsyncs_per_second);
                flushes.push_back(r.flushes_per_second);
            }
            std::printf("%-8s %-7zu %14.0f %10.2f %12.0f %12.2f\n",
                        record_bytes == 100 ? "100 B" : "4 KiB", batch, median(records),
                        median(megabytes), median(fsyncs), median(flushes) / append_baseline);
        }
    }
    const std::size_t log_megabytes = smoke ? 4 : 256;
    std::printf("\nrecovery (open) of a %zu MB log of 100-byte records: %.2f s per GB\n",
                log_megabytes, median_of([&] { return recovery_seconds_per_gb(log_megabytes); }));
    const std::size_t state_megabytes = smoke ? 1 : 64;
    std::vector<double> writes, reads;
    for (int run = 0; run < runs; ++run) {
        const auto [w, r] = snapshot_megabytes_per_second(state_megabytes);
        writes.push_back(w);
        reads.push_back(r);
    }
    std::printf("checkpoint of a %zu MiB state: written durably at %.0f MB/s, loaded by open at "
                "%.0f MB/s\n",
                state_megabytes, median(writes), median(reads));
    return 0;
}
