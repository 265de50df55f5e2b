// Codec micro-benchmark: encode and decode of a PROPOSAL (128 B and 4 KiB of txn bytes),
// next to a plain memcpy of the same frame, and CRC32C alone (hardware vs portable).
//
// Each line is the median of 15 runs; a run repeats the operation enough times to last
// about 5 ms. Results pass through `keep`/`clobber_memory` so the compiler cannot drop work
// whose result is never used. Target (issue #2): decoding a 4 KiB PROPOSAL, CRC included,
// at 2 GB/s or more.
//
// Time is the thread's CPU time by default: on a shared machine, wall time mostly measures
// how long the scheduler kept us off the CPU. `--wall` measures wall time (steady_clock).
// `--smoke` runs every operation a few times only (the ctest smoke run): its numbers mean
// nothing, it only proves the benchmark still builds, runs and decodes what it encodes.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <time.h>

#include "zab/core/codec.hpp"
#include "zab/core/crc32c.hpp"

namespace {

/// A std::chrono clock over the calling thread's CPU time (POSIX CLOCK_THREAD_CPUTIME_ID).
struct thread_cpu_clock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<thread_cpu_clock>;
    [[maybe_unused]] static constexpr bool is_steady = true;  // unused here; clocks have it
    static time_point now() noexcept {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return time_point{std::chrono::seconds{ts.tv_sec} + std::chrono::nanoseconds{ts.tv_nsec}};
    }
};

bool use_wall_clock = false;
bool smoke = false;

/// Makes `value` observable: the compiler must compute it and may not keep it in a register
/// across the barrier.
template <typename T>
void keep(const T& value) {
    asm volatile("" : : "r,m"(value) : "memory");
}

/// Makes every pending store observable (the memcpy destination, the encoded frame).
void clobber_memory() { asm volatile("" : : : "memory"); }

/// Median ns per call of `operation` over 15 runs, timed with `Clock`.
template <typename Clock, typename Operation>
double median_ns_with(Operation& operation) {
    // Calibrate: double the repetitions until one run lasts at least 5 ms.
    std::size_t repetitions = smoke ? 2 : 64;
    while (!smoke) {
        const auto start = Clock::now();
        for (std::size_t i = 0; i < repetitions; ++i) operation();
        if (Clock::now() - start >= std::chrono::milliseconds{5}) break;
        repetitions *= 2;
    }
    const int runs = smoke ? 1 : 15;
    std::vector<double> per_call;
    for (int run = 0; run < runs; ++run) {
        const auto start = Clock::now();
        for (std::size_t i = 0; i < repetitions; ++i) operation();
        const std::chrono::duration<double, std::nano> elapsed = Clock::now() - start;
        per_call.push_back(elapsed.count() / static_cast<double>(repetitions));
    }
    std::sort(per_call.begin(), per_call.end());
    return per_call[runs / 2];
}

template <typename Operation>
double median_ns(Operation&& operation) {
    return use_wall_clock ? median_ns_with<std::chrono::steady_clock>(operation)
                          : median_ns_with<thread_cpu_clock>(operation);
}

/// One result line: "`operation` `label`" (the label may be empty), bytes, ns, GB/s. The two
/// parts are joined by snprintf, not std::string's operator+: g++ 12 at -O3 reports a false
/// -Wrestrict inside the inlined operator+ (the release preset builds with -Werror).
void report(const char* operation, const char* label, std::size_t bytes, double ns) {
    char name[128];
    std::snprintf(name, sizeof name, "%s%s", operation, label);
    // bytes per ns is GB/s (10^9 bytes per second).
    std::printf("%-40s %8zu %10.1f %8.2f\n", name, bytes, ns, static_cast<double>(bytes) / ns);
}

/// False if the frame does not decode back to `msg` (the benchmark would measure nothing).
bool bench_proposal(std::size_t txn_size) {
    std::vector<std::byte> txn(txn_size);
    for (std::size_t i = 0; i < txn.size(); ++i) txn[i] = static_cast<std::byte>(i * 131 + 7);
    const zab::frame_context context{1, 1};
    const zab::wire::message msg = zab::wire::proposal{zab::zxid{3, 42}, txn};
    const std::size_t frame_size = zab::encoded_size(msg);
    char label[64];
    std::snprintf(label, sizeof label, " PROPOSAL %zu B txn", txn_size);

    std::vector<std::byte> frame(frame_size);
    report("encode_into", label, frame_size, median_ns([&] {
               zab::encode_into(frame, context, msg);
               clobber_memory();
           }));
    report("encode (allocating)", label, frame_size, median_ns([&] {
               const zab::shared_bytes encoded = zab::encode(context, msg);
               keep(encoded.data());
           }));
    report("decode (with CRC)", label, frame_size, median_ns([&] {
               const auto decoded = zab::decode(frame);
               keep(decoded.has_value());
               keep(std::get<zab::wire::proposal>(decoded.value().msg).txn.data());
           }));

    std::vector<std::byte> copy(frame_size);
    report("memcpy of the frame", "", frame_size, median_ns([&] {
               std::memcpy(copy.data(), frame.data(), frame_size);
               keep(copy.data());
               clobber_memory();
           }));

    const auto decoded = zab::decode(frame);
    return decoded.has_value() && decoded.value().msg == msg;
}

void bench_crc(std::size_t size) {
    std::vector<std::byte> data(size);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 17 + 3);
    char label[32];
    std::snprintf(label, sizeof label, " %zu B", size);
#if ZAB_CRC32C_HAVE_SSE42
    if (zab::detail::crc32c_hardware_supported()) {
        report("crc32c hardware", label, size, median_ns([&] {
                   keep(zab::detail::crc32c_hardware(data));
                   clobber_memory();
               }));
    }
#endif
    report("crc32c portable", label, size, median_ns([&] {
               keep(zab::detail::crc32c_portable(data));
               clobber_memory();
           }));
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--wall") == 0) {
            use_wall_clock = true;
        } else if (std::strcmp(argv[i], "--smoke") == 0) {
            smoke = true;
        } else {
            std::fprintf(stderr, "usage: %s [--wall] [--smoke]\n", argv[0]);
            return 2;
        }
    }
#if !defined(__OPTIMIZE__)
    std::printf("warning: built without optimisation; numbers are meaningless\n");
#endif
    std::printf("zab codec benchmark: median of 15 runs, %s time; crc32c in use: %s\n",
                use_wall_clock ? "wall" : "thread CPU",
                zab::detail::crc32c_hardware_supported() ? "hardware (SSE4.2)" : "portable");
    std::printf("%-40s %8s %10s %8s\n", "operation", "bytes", "ns/op", "GB/s");
    bool ok = bench_proposal(128);
    ok = bench_proposal(4096) && ok;
    for (std::size_t size : {128u, 4096u, 65536u}) bench_crc(size);
    if (!ok) {
        std::fprintf(stderr, "error: a benchmarked frame did not decode to its message\n");
        return 1;
    }
    return 0;
}
