// long_log_bench — what a long log costs a replica on its own thread, on a real file_log in a
// fresh directory (`--dir <parent>`, default /tmp) holding `--records N` records of 100 bytes
// (default 1,000,000) after no snapshot, as a log whose snapshot_every is large leaves it:
//
//   - open:         file_log::open (recovery's CRC-checked scan of every record: the file
//                   log's own cost, which any start pays);
//   - create:       peer::create on the opened log (the membership it recovers, §9);
//   - leader_start: the step that makes it leader of three voters (fixed_leader_election: no
//                   messages), which loads the committed window it syncs learners from (§5.1).
//
// Each figure is the median of `--runs` (default 3) reopenings of the same directory (the
// page cache is warm: the cost measured is the peer's thread, not the disk). `--smoke` builds
// a log of 2,000 records and runs once: the numbers mean nothing, it proves the benchmark
// still builds and runs. Not a test: nothing here is asserted beyond the run completing.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zab/core/peer.hpp"
#include "zab/storage/file_log.hpp"
#include "zab/testing/recording_state_machine.hpp"

#include "scratch_directory.hpp"

namespace {

using bench_clock = std::chrono::steady_clock;
using bench_peer = zab::peer<zab::archetypes::transport, zab::file_log,
                             zab::testing::recording_state_machine,
                             zab::policies<zab::fixed_leader_election>>;

double seconds_since(bench_clock::time_point start) {
    return std::chrono::duration<double>(bench_clock::now() - start).count();
}

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "long_log_bench: %s\n", what.c_str());
    std::exit(1);
}


zab::file_log open_log(const std::string& directory) {
    zab::file_log_options options;
    options.directory = directory;
    std::string why;
    auto opened = zab::file_log::open(options, &why);
    if (!opened) fail("open failed: " + why);
    return std::move(opened).value();
}

/// `records` records of 100 bytes in epoch 1, written and synced, epochs {1, 1}.
void build_log(const std::string& directory, std::uint64_t records) {
    zab::file_log log = open_log(directory);
    log.write_epochs(1, {1, 1});
    const zab::shared_bytes payload{std::vector<std::byte>(100, std::byte{0x5a})};
    zab::storage_op op = 1;
    std::uint32_t counter = 0;
    while (counter < records) {
        std::vector<zab::log_record> batch;
        const std::uint64_t n = std::min<std::uint64_t>(10'000, records - counter);
        for (std::uint64_t i = 0; i < n; ++i) batch.push_back({zab::zxid{1, ++counter}, payload});
        log.append(++op, batch);
        if (counter % 100'000 == 0 || counter == records) {
            log.make_durable(op);
            if (log.flush().failed()) fail("flush failed");
        }
    }
}

struct sample {
    double open = 0;
    double create = 0;
    double leader_start = 0;
};

sample measure(const std::string& directory, std::uint64_t records) {
    sample s;
    auto start = bench_clock::now();
    zab::file_log log = open_log(directory);
    s.open = seconds_since(start);
    if (log.last_zxid() != zab::zxid{1, static_cast<std::uint32_t>(records)})
        fail("the log reopened at the wrong zxid");
    auto config = zab::configuration::numbered(3, 0);
    if (!config) fail("configuration");
    zab::options opts;
    opts.fixed_leader = 1;
    zab::archetypes::transport transport;
    zab::testing::recording_state_machine machine;
    start = bench_clock::now();
    auto created = bench_peer::create(1, config.value(), opts, transport, log, machine);
    s.create = seconds_since(start);
    if (!created) fail("peer::create failed: " + created.error().message());
    auto& p = *created.value();
    start = bench_clock::now();
    p.start();
    s.leader_start = seconds_since(start);
    if (p.state() != zab::peer_state::leading || p.failed()) fail("the peer did not lead");
    return s;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t records = 1'000'000;
    int runs = 3;
    std::string parent = "/tmp";
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--smoke") {
            records = 2'000;
            runs = 1;
        } else if (arg == "--records" && i + 1 < argc) {
            records = std::strtoull(argv[++i], nullptr, 10);
        } else if (arg == "--runs" && i + 1 < argc) {
            runs = std::max(1, std::atoi(argv[++i]));
        } else if (arg == "--dir" && i + 1 < argc) {
            parent = argv[++i];
        } else {
            fail("usage: long_log_bench [--records N] [--runs N] [--dir PARENT] [--smoke]");
        }
    }
    if (records == 0 || records > 0xffff'fffeu) fail("--records must be in [1, 2^32 - 2]");
    zab::set_log_level(zab::log_level::off);
    const zab::bench::scratch_directory dir{parent, "zab_long_log_bench"};
    const std::string data = dir.path + "/data";
    const auto built = bench_clock::now();
    build_log(data, records);
    std::printf("log of %llu records of 100 bytes built in %.2f s\n",
                static_cast<unsigned long long>(records), seconds_since(built));
    std::vector<double> open, create, leader_start;
    for (int run = 0; run < runs; ++run) {
        const sample s = measure(data, records);
        open.push_back(s.open);
        create.push_back(s.create);
        leader_start.push_back(s.leader_start);
        std::printf("run %d: open %.3f ms, create %.3f ms, leader_start %.3f ms\n", run + 1,
                    s.open * 1e3, s.create * 1e3, s.leader_start * 1e3);
    }
    std::printf("median of %d: open %.3f ms, create %.3f ms, leader_start %.3f ms\n", runs,
                median(open) * 1e3, median(create) * 1e3, median(leader_start) * 1e3);
}
