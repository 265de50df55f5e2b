// kv_demo — what `scripts/demo` runs: a replicated key-value map on three zab replicas in
// this process, over loopback TCP, each with a file log in a fresh temporary directory.
//
// It prints a timeline: the election and its epoch; writes through every replica with the
// zxids they committed as; the leader killed (its node and log objects destroyed, its files
// kept, as a process death leaves them); the next election and epoch; writes going on; the
// old leader restarted from its files and caught up (by DIFF, TRUNC or SNAP); finally the
// three replicas compared. Exit status: 0 when every replica holds every acknowledged write
// and all three are equal; 1 when anything committed was lost or the replicas differ; 2 when
// a step did not finish within its deadline.
//
// Usage: kv_demo [--keep]   (--keep leaves the data directory for inspection)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "demo_cluster.hpp"
#include "kv/kv_command.hpp"
#include "kv/kv_state_machine.hpp"

namespace {

using namespace std::chrono_literals;
using zab::peer_id;
using zab::zxid;

constexpr std::uint64_t cluster_id = 0x6b76;  // "kv"
constexpr peer_id replicas = 3;

class demo : zab::demo::cluster<zab::kv::kv_state_machine> {
public:
    explicit demo(const std::filesystem::path& directory)
        : cluster{directory, replicas, cluster_id} {
        say("data directory {}", directory.string());
    }

    int run() {
        for (peer_id id = 1; id <= replicas; ++id)
            if (!start(id)) return 2;
        if (!wait("an election", [&] { return all_serving(); })) return 2;
        const peer_id first = leader();
        say("replica {} elected leader, epoch {}", first, epoch_of(first));

        if (!write_keys("a", 6)) return 2;

        say("killing leader {} (node and log objects destroyed; its files stay)", first);
        const zab::zxid before_kill = replicas_.at(first).node->status().last_applied;
        kill(first);
        if (!wait("a new election", [&] { return all_serving(); })) return 2;
        const peer_id second = leader();
        say("replica {} elected leader, epoch {}", second, epoch_of(second));
        const auto counters_before = replicas_.at(second).node->protocol_peer()->counters();

        if (!write_keys("b", 6)) return 2;

        if (!start(first)) return 2;
        say("replica {} restarted from its files: log ends at {} (applied {} before the kill)",
            first, replicas_.at(first).log->last_zxid(), before_kill);
        if (!wait("the old leader to catch up", [&] { return converged(); })) return 2;
        const auto counters_after = replicas_.at(leader()).node->protocol_peer()->counters();
        say("replica {} caught up by {}; it now follows leader {}", first,
            sync_kind(counters_before, counters_after), leader());

        if (!write_keys("c", 3)) return 2;
        if (!wait("every replica to apply the last write", [&] { return converged(); })) return 2;
        return compare();
    }

private:
    bool converged() const {
        if (!all_serving()) return false;
        const zxid last = replicas_.at(leader()).node->status().last_applied;
        for (const auto& [id, r] : replicas_)
            if (!r.node || r.node->status().last_applied != last) return false;
        return true;
    }
    zab::epoch_t epoch_of(peer_id id) const { return replicas_.at(id).node->status().epoch; }

    /// Writes `count` keys `<prefix>1..`, each through the next live replica in turn, one at a
    /// time, and prints where each committed.
    bool write_keys(std::string_view prefix, int count) {
        std::vector<peer_id> live;
        for (const auto& [id, r] : replicas_)
            if (r.node) live.push_back(id);
        for (int i = 1; i <= count; ++i) {
            const std::string key = fmt::format("{}{}", prefix, i);
            const std::string value = fmt::format("value-{}-{}", prefix, i);
            const peer_id via = live[static_cast<std::size_t>(i) % live.size()];
            auto bytes = zab::kv::encode(zab::kv::command{zab::kv::set_op{key, value}, {}});
            if (!bytes) return false;
            std::optional<std::pair<boost::system::error_code, zxid>> done;
            replicas_.at(via).node->async_propose(
                zab::byte_view{bytes.value().data(), bytes.value().size()},
                [&](boost::system::error_code e, zab::asio::reply r) { done.emplace(e, r.id); });
            if (!wait("write completion", [&] { return done.has_value(); })) return false;
            if (done->first) {
                say("SET {} via replica {}: {}", key, via, done->first.message());
                return false;
            }
            acknowledged_[key] = value;
            say("SET {} = {} via replica {} (leader {}): committed {}", key, value, via, leader(),
                done->second);
        }
        return true;
    }

    static std::string sync_kind(const zab::peer_counters& before, const zab::peer_counters& after) {
        std::vector<std::string> kinds;
        if (after.syncs_diff > before.syncs_diff) kinds.push_back("DIFF");
        if (after.syncs_trunc > before.syncs_trunc) kinds.push_back("TRUNC");
        if (after.syncs_snap > before.syncs_snap) kinds.push_back("SNAP");
        if (kinds.empty()) return "no sync recorded";
        return fmt::format("{}", fmt::join(kinds, " + "));
    }

    int compare() {
        const auto& reference = *replicas_.at(1).machine;
        bool ok = true;
        for (const auto& [id, r] : replicas_) {
            const auto& m = *r.machine;
            say("replica {}: {} keys, last applied {}, digest {:08x}", id, m.size(),
                m.last_applied(), m.digest());
            if (!(m.state() == reference.state())) {
                say("FAILED: replica {} differs from replica 1", id);
                ok = false;
            }
            for (const auto& [key, value] : acknowledged_) {
                if (m.get(key) != value) {
                    say("FAILED: replica {} lost the acknowledged write {} = {}", id, key, value);
                    ok = false;
                }
            }
        }
        if (ok)
            say("all {} replicas are equal and hold all {} acknowledged writes", replicas,
                acknowledged_.size());
        return ok ? 0 : 1;
    }

    std::map<std::string, std::string> acknowledged_;
};

}  // namespace

int main(int argc, char** argv) {
    return zab::demo::run_demo("demo", argc, argv,
                               [](const std::filesystem::path& directory) {
                                   demo d{directory};
                                   return d.run();
                               });
}
