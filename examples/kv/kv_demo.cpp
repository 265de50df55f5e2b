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

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>

#include "kv/kv_command.hpp"
#include "kv/kv_state_machine.hpp"
#include "zab/runtime/node.hpp"
#include "zab/storage/file_log.hpp"

namespace {

using namespace std::chrono_literals;
using zab::peer_id;
using zab::zxid;
using node_type = zab::asio::node<zab::file_log, zab::kv::kv_state_machine>;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t cluster_id = 0x6b76;  // "kv"
constexpr std::size_t replicas = 3;

struct replica {
    std::unique_ptr<zab::file_log> log;
    std::unique_ptr<zab::kv::kv_state_machine> machine;
    std::unique_ptr<node_type> node;
};

class demo {
public:
    explicit demo(std::filesystem::path directory) : directory_{std::move(directory)} {}
    ~demo() {
        for (auto& [id, r] : replicas_) r.node.reset();
        io_.poll();
        disk_.join();
    }

    int run() {
        say("data directory {}", directory_.string());
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
    template <typename... Args>
    void say(fmt::format_string<Args...> format, Args&&... args) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() -
                                                                             started_);
        fmt::print("[{:6.3f} s] {}\n", static_cast<double>(ms.count()) / 1000.0,
                   fmt::format(format, std::forward<Args>(args)...));
        std::fflush(stdout);
    }

    zab::asio::node_options options_for(peer_id id) const {
        zab::asio::node_options o;
        o.config = zab::configuration::numbered(replicas).value();
        o.tick = std::chrono::milliseconds{20};
        o.cluster_id = cluster_id;
        o.transport.self = id;
        o.transport.reconnect_min = 10ms;
        o.transport.reconnect_max = 200ms;
        for (peer_id m = 1; m <= replicas; ++m) {
            const auto port = ports_.find(m);
            o.transport.peers[m] = {"127.0.0.1",
                                    port == ports_.end() ? std::uint16_t{0} : port->second};
        }
        return o;
    }

    /// Opens replica `id`'s files (creating them the first time) and starts its node. The
    /// higher id of a pair dials the lower, so the first starts go in increasing order.
    bool start(peer_id id) {
        replica& r = replicas_[id];
        zab::file_log_options fo;
        fo.directory = (directory_ / fmt::format("replica-{}", id)).string();
        fo.cluster_id = cluster_id;
        fo.replica_id = id;
        std::string why;
        auto opened = zab::file_log::open(fo, &why);
        if (!opened) {
            say("replica {}: cannot open its log: {}", id, why);
            return false;
        }
        r.log = std::make_unique<zab::file_log>(std::move(opened).value());
        r.machine = std::make_unique<zab::kv::kv_state_machine>();
        r.node = std::make_unique<node_type>(io_.get_executor(), options_for(id), *r.log,
                                             *r.machine, disk_.get_executor());
        if (auto started = r.node->start(); !started) {
            say("replica {}: cannot start: {}", id, started.error().message());
            return false;
        }
        ports_[id] = r.node->transport().local_port();
        return true;
    }

    void kill(peer_id id) {
        replica& r = replicas_.at(id);
        r.node.reset();
        r.machine.reset();
        r.log.reset();
    }

    bool wait(std::string_view what, const std::function<bool()>& done) {
        const auto deadline = clock_type::now() + 10s;
        while (!done()) {
            if (clock_type::now() > deadline) {
                say("FAILED: no {} within 10 s", what);
                return false;
            }
            io_.run_one_for(20ms);
        }
        return true;
    }

    peer_id leader() const {
        for (const auto& [id, r] : replicas_)
            if (r.node && r.node->status().established &&
                r.node->status().role == zab::peer_state::leading)
                return id;
        return 0;
    }
    bool all_serving() const {
        for (const auto& [id, r] : replicas_)
            if (r.node && !r.node->status().established) return false;
        return leader() != 0;
    }
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

    clock_type::time_point started_ = clock_type::now();
    std::filesystem::path directory_;
    boost::asio::io_context io_;
    boost::asio::thread_pool disk_{1};
    std::map<peer_id, std::uint16_t> ports_;
    std::map<peer_id, replica> replicas_;
    std::map<std::string, std::string> acknowledged_;
};

}  // namespace

int main(int argc, char** argv) {
    const bool keep = argc > 1 && std::string_view{argv[1]} == "--keep";
    std::string pattern = (std::filesystem::temp_directory_path() / "zab-demo-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
        std::perror("mkdtemp");
        return 2;
    }
    zab::set_log_level(zab::log_level::error);
    int status = 0;
    {
        demo d{pattern};
        status = d.run();
    }
    if (!keep) {
        std::error_code ignored;
        std::filesystem::remove_all(pattern, ignored);
    }
    fmt::print("{}\n", status == 0 ? "demo: OK" : "demo: FAILED");
    return status;
}
