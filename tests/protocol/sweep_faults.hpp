// tests/protocol/sweep_faults.hpp — the random fault mix the seeded sweeps inject.
//
// Each seed draws its own weights, so some seeds mostly crash replicas, others mostly
// partition the network. Only faults the protocol claims to survive: connection breaks,
// symmetric and one-way partitions, heals, crashes with the disk's crash model, restarts,
// pauses (SIGSTOP) and resumes.
#pragma once

#include <cstdint>
#include <vector>

#include "zab/core/types.hpp"
#include "zab/testing/random.hpp"

namespace zab::test {

struct fault_counts {
    std::uint64_t breaks = 0, partitions = 0, one_way = 0, heals = 0, crashes = 0, restarts = 0,
                  pauses = 0;
};

class fault_mix {
public:
    explicit fault_mix(testing::prng& draw)
        : w_break_{draw.between(1, 10)},
          w_partition_{draw.between(0, 5)},
          w_one_way_{draw.between(0, 3)},
          w_heal_{draw.between(1, 6)},
          w_crash_{draw.between(0, 5)},
          w_restart_{draw.between(1, 6)},
          w_pause_{draw.between(0, 3)} {}

    /// Injects one fault, chosen by this seed's weights, into `sim`.
    template <typename Simulator>
    void inject(Simulator& sim, testing::prng& draw, fault_counts& counts) {
        const std::size_t members = sim.nodes().size();
        auto random_id = [&] { return 1 + sim.random().below(members); };
        std::uint64_t pick = draw.below(w_break_ + w_partition_ + w_one_way_ + w_heal_ +
                                        w_crash_ + w_restart_ + w_pause_);
        auto take = [&](std::uint64_t w) {
            if (pick < w) return true;
            pick -= w;
            return false;
        };
        if (take(w_break_)) {
            const peer_id a = random_id(), b = random_id();
            if (a != b && sim.network().current_connection(a, b)) {
                sim.network().break_connection(a, b);
                ++counts.breaks;
            }
        } else if (take(w_partition_)) {
            std::vector<peer_id> left, right;
            for (peer_id id = 1; id <= members; ++id)
                (draw.chance(0.5) ? left : right).push_back(id);
            if (!left.empty() && !right.empty()) {
                sim.network().partition({left, right});
                ++counts.partitions;
            }
        } else if (take(w_one_way_)) {
            const peer_id a = random_id(), b = random_id();
            if (a != b) {
                sim.network().block_one_way(a, b);
                ++counts.one_way;
            }
        } else if (take(w_heal_)) {
            heal(sim);
            ++counts.heals;
        } else if (take(w_crash_)) {
            const peer_id id = random_id();
            if (sim.peer_of(id)) {
                sim.crash(id);
                ++counts.crashes;
            }
        } else if (take(w_restart_)) {
            for (peer_id id = 1; id <= members; ++id)
                if (!sim.peer_of(id)) {
                    sim.restart(id);
                    ++counts.restarts;
                    break;
                }
        } else {
            const peer_id id = random_id();
            if (sim.peer_of(id) && !sim.at(id).paused) {
                sim.pause(id);
                paused_.push_back(id);
                ++counts.pauses;
            }
        }
    }

    /// The network whole again, every paused replica resumed.
    template <typename Simulator>
    void heal(Simulator& sim) {
        sim.network().heal();
        for (peer_id id : paused_) sim.resume(id);
        paused_.clear();
    }

private:
    std::uint64_t w_break_, w_partition_, w_one_way_, w_heal_, w_crash_, w_restart_, w_pause_;
    std::vector<peer_id> paused_;
};

}  // namespace zab::test
