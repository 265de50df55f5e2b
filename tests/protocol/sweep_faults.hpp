// tests/protocol/sweep_faults.hpp — the random fault mix the seeded sweeps inject.
//
// Each seed draws its own weights, so some seeds mostly crash replicas, others mostly
// partition the network. Only faults the protocol claims to survive: connection breaks,
// symmetric and one-way partitions, heals, crashes with the disk's crash model, restarts,
// pauses (SIGSTOP) and resumes (fault_set::classic); with fault_set::network also slow links
// (one direction or a pair), one-way stalls (a direction so slow that frames arrive late but
// the connection holds), links broken at the next frame of a chosen message kind, and frames
// of a chosen kind delayed; with fault_set::all also storage faults: an operation kind that
// fails transiently (retried by the log layer: late), fails terminally (the replica enters
// its failed state, and a restart brings it back once the disk is healed), or is slow. With
// lease reads on (docs/protocol.md §7.1), `clock_faults`: replicas' clocks run at different
// rates, change rate, and jump ahead, within the drift bound the lease assumes. With
// `kill_faults`: kill -9 of a replica (page cache kept), its restart, then a power loss.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "zab/core/messages.hpp"
#include "zab/core/types.hpp"
#include "zab/testing/random.hpp"
#include "zab/testing/sim_log.hpp"
#include "zab/testing/simulator.hpp"

namespace zab::test {

struct fault_counts {
    std::uint64_t breaks = 0, partitions = 0, one_way = 0, heals = 0, crashes = 0, restarts = 0,
                  pauses = 0;
    // fault_set::network
    std::uint64_t link_delays = 0, stalls = 0, frame_breaks = 0, frame_delays = 0;
    // fault_set::all
    std::uint64_t storage_transient = 0, storage_terminal = 0, storage_slow = 0,
                  storage_hangs = 0, failed_restarts = 0;
    // clock_faults
    std::uint64_t clock_rates = 0, clock_jumps = 0;
    // kill_faults: kills (of which with un-synced data on the disk), the restarts after
    // them, and the power losses that followed a restart (timed, or at the NEWLEADER ACK;
    // of which after a kill with un-synced data)
    std::uint64_t kills = 0, kills_unsynced = 0, kill_restarts = 0, kill_power_losses = 0,
                  kill_power_losses_unsynced = 0;
};

/// A hung disk's extra latency (sweep_faults: inject_storage), in virtual microseconds.
inline constexpr testing::sim_time disk_hang_min = 2'000'000, disk_hang_max = 5'000'000;

/// Which faults a mix draws from. `classic` draws exactly what it drew before the others
/// existed, so its users' seeds replay unchanged.
enum class fault_set { classic, network, all };

/// The message kinds a targeted frame fault picks from: election and broadcast alike.
inline constexpr std::array targeted_kinds{
    wire::message_type::notification, wire::message_type::follower_info, wire::message_type::leader_info,
    wire::message_type::ack_epoch,    wire::message_type::diff,          wire::message_type::trunc,
    wire::message_type::snap,         wire::message_type::new_leader,    wire::message_type::ack,
    wire::message_type::up_to_date,   wire::message_type::proposal,      wire::message_type::commit,
};

class fault_mix {
public:
    explicit fault_mix(testing::prng& draw, fault_set set = fault_set::classic)
        : w_break_{draw.between(1, 10)},
          w_partition_{draw.between(0, 5)},
          w_one_way_{draw.between(0, 3)},
          w_heal_{draw.between(1, 6)},
          w_crash_{draw.between(0, 5)},
          w_restart_{draw.between(1, 6)},
          w_pause_{draw.between(0, 3)} {
        if (set == fault_set::classic) return;
        w_link_delay_ = draw.between(0, 3);
        w_stall_ = draw.between(0, 2);
        w_frame_break_ = draw.between(1, 4);
        w_frame_delay_ = draw.between(0, 3);
        if (set != fault_set::all) return;
        w_storage_ = draw.between(0, 3);
    }

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
            for (peer_id id = 1; id <= members; ++id) {
                if (sim.peer_of(id) && sim.peer_of(id)->failed()) {
                    // Its disk failed: the operator restarts it (the disk may still be bad).
                    sim.crash(id);
                    ++counts.failed_restarts;
                }
                if (!sim.peer_of(id)) {
                    sim.restart(id);
                    ++counts.restarts;
                    break;
                }
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

    /// Injects one of the faults beyond the classic ones (nothing, drawing nothing, for a
    /// fault_set::classic mix), chosen by this seed's weights. Called on its own schedule,
    /// next to `inject`, so that the classic faults keep their rate.
    template <typename Simulator>
    void inject_extended(Simulator& sim, testing::prng& draw, fault_counts& counts) {
        const std::uint64_t total =
            w_link_delay_ + w_stall_ + w_frame_break_ + w_frame_delay_ + w_storage_;
        if (total == 0) return;
        const std::size_t members = sim.nodes().size();
        auto random_id = [&] { return 1 + sim.random().below(members); };
        std::uint64_t pick = draw.below(total);
        auto take = [&](std::uint64_t w) {
            if (pick < w) return true;
            pick -= w;
            return false;
        };
        if (take(w_link_delay_)) {
            // A slow link: a few times the network's own latency, one direction or both.
            const peer_id a = random_id(), b = random_id();
            if (a != b) {
                const auto& o = sim.network().options();
                const testing::sim_time min = o.delay_max * draw.between(1, 4);
                const testing::sim_time max = min + o.delay_max * draw.between(0, 6);
                if (draw.chance(0.5)) sim.network().set_link_delay(a, b, min, max);
                else sim.network().set_pair_delay(a, b, min, max);
                ++counts.link_delays;
            }
        } else if (take(w_stall_)) {
            // A one-way stall: frames a → b arrive 0.1–1.5 s late, the connection holds.
            const peer_id a = random_id(), b = random_id();
            if (a != b) {
                const testing::sim_time d = draw.between(100'000, 1'500'000);
                sim.network().set_link_delay(a, b, d, d + d / 4);
                ++counts.stalls;
            }
        } else if (take(w_frame_break_)) {
            // Break a link (or any link toward a replica) at the next frame of some kind.
            const peer_id a = draw.chance(0.3) ? 0 : random_id(), b = random_id();
            if (a != b) {
                const auto kind = targeted_kinds[draw.below(targeted_kinds.size())];
                sim.break_link_at(a, b, kind, draw.between(1, 2));
                ++counts.frame_breaks;
            }
        } else if (take(w_frame_delay_)) {
            const peer_id a = draw.chance(0.5) ? 0 : random_id(), b = random_id();
            if (a != b) {
                const auto kind = targeted_kinds[draw.below(targeted_kinds.size())];
                sim.delay_frames(a, b, kind, draw.between(1, 6), draw.between(5'000, 400'000));
                ++counts.frame_delays;
            }
        } else {
            inject_storage(sim, draw, counts, random_id());
        }
    }

    /// The network whole again (partitions, blocks, slow links and frame faults gone), every
    /// paused replica resumed, every disk healed.
    template <typename Simulator>
    void heal(Simulator& sim) {
        sim.network().heal();
        sim.network().clear_link_delays();
        sim.network().clear_frame_faults();
        if (w_storage_ != 0)
            for (auto& n : sim.nodes()) n.log->heal_storage_faults();
        for (peer_id id : paused_) sim.resume(id);
        paused_.clear();
    }

private:
    template <typename Simulator>
    void inject_storage(Simulator& sim, testing::prng& draw, fault_counts& counts, peer_id id) {
        using testing::storage_fault_mode;
        auto& log = *sim.at(id).log;
        const auto kind =
            static_cast<testing::storage_op_kind>(draw.below(testing::storage_op_kind_count));
        const std::uint64_t what = draw.below(6);
        if (what < 3) {
            // Transient: the log layer retries; the completion is late (ZOOKEEPER-4882).
            log.inject({kind, storage_fault_mode::transient, draw.between(1, 4), {},
                        draw.between(1'000, 100'000)});
            ++counts.storage_transient;
        } else if (what < 5) {
            // Slow, or now and then hung for seconds (past the sweep's disk_stall_ticks, so
            // disk-stall fencing, §6.5, acts): what is issued meanwhile completes that late
            // even after the disk is healed.
            if (draw.chance(0.15)) {
                log.set_slow(kind, draw.between(disk_hang_min, disk_hang_max));
                ++counts.storage_hangs;
            } else {
                log.set_slow(kind, draw.between(5'000, 200'000));
            }
            ++counts.storage_slow;
        } else {
            // Terminal: once, or until the disk is healed (a replica that keeps failing).
            log.inject({kind, storage_fault_mode::terminal, draw.chance(0.7) ? 1u : 0u});
            ++counts.storage_terminal;
        }
    }

    std::uint64_t w_break_, w_partition_, w_one_way_, w_heal_, w_crash_, w_restart_, w_pause_;
    std::uint64_t w_link_delay_ = 0, w_stall_ = 0, w_frame_break_ = 0, w_frame_delay_ = 0,
                  w_storage_ = 0;
    std::vector<peer_id> paused_;
};

/// Kill, then power loss (issue 34, defect 3's class): a replica is killed (kill -9: the
/// process and its state gone, the page cache kept, simulator::kill), restarted — at once or
/// a little later — and, some time after that restart, loses power. Its recovery vouched for
/// what it found (its vote, ACKEPOCH, a NEWLEADER ACK after a DIFF with nothing new: §10.11),
/// some of it perhaps only in the page cache: the power loss takes whatever that recovery
/// did not make durable. Half the power losses are timed (0–400 ms after the restart), half
/// armed at the replica's next NEWLEADER ACK counted by a leader (crash_point
/// newleader_ack_counted): the moment a promise from the recovered state counts. One replica
/// at a time; a seed draws its own rate (a third of the seeds none). Draws from a stream of
/// its own, so a seed's other faults stay as they were.
class kill_faults {
public:
    explicit kill_faults(testing::prng& draw)
        : rate_{draw.below(3) == 0 ? 0.0 : 0.004 * static_cast<double>(draw.between(1, 5))} {}

    /// One step of the schedule, called once per step of the fault phase.
    template <typename Simulator>
    void step(Simulator& sim, testing::prng& draw, fault_counts& counts) {
        if (victim_ != 0) return follow_up(sim, draw, counts);
        if (rate_ == 0.0 || !draw.chance(rate_)) return;
        const auto id = static_cast<peer_id>(1 + draw.below(sim.nodes().size()));
        if (!sim.peer_of(id)) return;
        unsynced_ = sim.kill(id) > 0;
        if (unsynced_) ++counts.kills_unsynced;
        ++counts.kills;
        victim_ = id;
        restarted_ = false;
        arm_ = 0;
        restart_at_ = sim.now() + (draw.chance(0.5) ? 0 : draw.between(1'000, 200'000));
        follow_up(sim, draw, counts);
    }

private:
    template <typename Simulator>
    void follow_up(Simulator& sim, testing::prng& draw, fault_counts& counts) {
        if (!restarted_) {
            // Restarted here, or already by the fault mix's restarts.
            if (!sim.peer_of(victim_)) {
                if (sim.now() < restart_at_) return;
                sim.restart(victim_);
                ++counts.restarts;
            }
            ++counts.kill_restarts;
            restarted_ = true;
            if (draw.chance(0.5)) {
                arm_ = sim.crash_at(victim_, testing::crash_point::newleader_ack_counted);
            } else {
                power_at_ = sim.now() + (draw.chance(0.5) ? draw.between(0, 20'000)
                                                          : draw.between(20'000, 400'000));
            }
            return;
        }
        if (arm_ != 0) {
            // Armed: done once it fired, or once the replica went down another way (the arm
            // then stays until it fires or the fault phase ends).
            if (sim.crash_reached(arm_)) count_power_loss(counts);
            if (sim.crash_reached(arm_) || !sim.peer_of(victim_)) victim_ = 0;
            return;
        }
        if (sim.now() < power_at_) return;
        if (sim.peer_of(victim_)) {
            sim.crash(victim_);
            ++counts.crashes;
            count_power_loss(counts);
        }
        victim_ = 0;
    }

    void count_power_loss(fault_counts& counts) const {
        ++counts.kill_power_losses;
        if (unsynced_) ++counts.kill_power_losses_unsynced;
    }

    double rate_;
    peer_id victim_ = 0;
    bool restarted_ = false;
    bool unsynced_ = false;  ///< the victim's disk held un-synced data when it was killed
    std::uint64_t arm_ = 0;
    testing::sim_time restart_at_ = 0, power_at_ = 0;
};

/// Clock faults for lease reads (§7.1), within the drift bound `drift_bound_ppm` that the
/// sweep's peers assume: every replica's clock runs at its own rate, between 10 % slow and
/// 15 % fast (any two within a factor 1.28 of each other, under the 1.5 the bound allows),
/// changes rate now and then, and now and then jumps a tick ahead — at most once per two
/// promises (2 × read_lease_ticks of its own clock), which the bound's slack absorbs: with
/// the promise of 10 ticks the lease is ⌊8 / 1.5⌋ = 5 ticks, and a follower's promise then
/// lasts at least 6.4 ticks of the leader's time, jump and tick granularity included.
class clock_faults {
public:
    static constexpr std::uint32_t drift_bound_ppm = 500'000;
    static constexpr std::int64_t slowest_ppm = -100'000, fastest_ppm = 150'000;

    explicit clock_faults(std::uint64_t promise_ticks) : promise_ticks_{promise_ticks} {}

    /// Every replica's clock at a rate of its own.
    template <typename Simulator>
    void start(Simulator& sim, testing::prng& draw, fault_counts& counts) {
        for (const auto& n : sim.nodes()) set_rate(sim, draw, n.id, counts);
    }

    /// One clock fault: a replica's clock changes rate, or jumps a tick ahead.
    template <typename Simulator>
    void inject(Simulator& sim, testing::prng& draw, fault_counts& counts) {
        const auto id = static_cast<peer_id>(1 + draw.below(sim.nodes().size()));
        if (draw.chance(0.5)) return set_rate(sim, draw, id, counts);
        last_jump_.resize(sim.nodes().size() + 1);
        const std::uint64_t now = sim.clock_of(id);
        if (last_jump_[id] != 0 && now >= last_jump_[id] && now < last_jump_[id] + 2 * promise_ticks_)
            return;  // too soon after its last jump: that would leave the bound
        sim.jump_clock(id, 1);
        last_jump_[id] = sim.clock_of(id);
        ++counts.clock_jumps;
    }

private:
    template <typename Simulator>
    void set_rate(Simulator& sim, testing::prng& draw, peer_id id, fault_counts& counts) {
        const auto span = static_cast<std::uint64_t>(fastest_ppm - slowest_ppm);
        sim.set_clock_rate(id, slowest_ppm + static_cast<std::int64_t>(draw.below(span + 1)));
        ++counts.clock_rates;
    }

    std::uint64_t promise_ticks_;
    std::vector<std::uint64_t> last_jump_;  ///< per replica: its clock after its last jump
};

}  // namespace zab::test
