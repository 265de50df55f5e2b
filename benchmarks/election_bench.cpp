// election_bench — Fast Leader Election on the simulator: how fast the simulator runs, and how
// many ticks and messages an election takes for 3, 5 and 7 voters, without faults and with
// 10% connection loss (each delivered frame breaks its connection with probability 0.1).
//
//   election_bench [--runs N]
//
// Medians over N seeded runs (default 300). Not a test: nothing here is asserted.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "zab/testing/election_checker.hpp"
#include "zab/testing/simulator.hpp"

using namespace zab;
using namespace zab::testing;

namespace {

using sim_type = simulator<>;

template <typename T>
T median(std::vector<T> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
template <typename T>
T percentile(std::vector<T> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

struct sample {
    double ticks = 0;
    std::uint64_t frames = 0;
    std::uint64_t events = 0;
};

sample run(std::size_t voters, double loss, std::uint64_t seed) {
    cluster_options o;
    o.seed = seed;
    o.voters = voters;
    sim_type sim{o};
    election_checker<sim_type> checker{sim};
    std::uint64_t seen = 0;
    if (loss > 0) {
        sim.add_checker([&](sim_type& s) {
            if (s.frames_delivered() == seen) return;
            seen = s.frames_delivered();
            if (!s.random().chance(loss)) return;
            const peer_id a = 1 + s.random().below(voters), b = 1 + s.random().below(voters);
            if (a != b && s.network().current_connection(a, b)) s.network().break_connection(a, b);
        });
    }
    sim.start();
    const bool decided =
        sim.run_until([&] { return checker.all_decided_same_leader(); }, sim.now() + 600'000'000);
    if (!decided || !checker.failures().empty()) {
        fmt::print(stderr, "seed {}: election did not converge\n", seed);
        std::exit(1);
    }
    return {static_cast<double>(sim.now()) / static_cast<double>(o.tick_us), sim.frames_delivered(),
            sim.steps()};
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t runs = 300;
    if (argc == 3 && std::string{argv[1]} == "--runs") runs = std::strtoull(argv[2], nullptr, 10);
    set_log_level(log_level::off);
    fmt::print("{:>6} {:>6} {:>14} {:>14} {:>14} {:>14} {:>16}\n", "voters", "loss", "ticks p50",
               "ticks p99", "frames p50", "frames p99", "sim events/s");
    for (double loss : {0.0, 0.1}) {
        for (std::size_t voters : {3, 5, 7}) {
            std::vector<double> ticks;
            std::vector<std::uint64_t> frames;
            std::uint64_t events = 0;
            const auto start = std::chrono::steady_clock::now();
            for (std::uint64_t seed = 1; seed <= runs; ++seed) {
                const auto s = run(voters, loss, seed);
                ticks.push_back(s.ticks);
                frames.push_back(s.frames);
                events += s.events;
            }
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            fmt::print("{:>6} {:>5.0f}% {:>14.1f} {:>14.1f} {:>14} {:>14} {:>16.0f}\n", voters,
                       loss * 100, median(ticks), percentile(ticks, 0.99), median(frames),
                       percentile(frames, 0.99), static_cast<double>(events) / seconds);
        }
    }
}
