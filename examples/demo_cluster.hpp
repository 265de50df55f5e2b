// examples/demo_cluster.hpp — what the in-process demos (kv/kv_demo.cpp, lock/lock_demo.cpp)
// share: a group of replicas of one state machine in this process, over loopback TCP, each
// with a file log in its own directory under one data directory; started, killed (node, log
// and machine objects destroyed, files kept, as a process death leaves them) and waited for
// on one io_context; and the timeline they print. Not part of the library.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>

#include "zab/runtime/node.hpp"
#include "zab/storage/file_log.hpp"

namespace zab::demo {

using clock_type = std::chrono::steady_clock;

/// `replicas` replicas numbered 1..replicas of `Machine` (default-constructed at each start),
/// the files of replica i in `directory`/replica-i. A demo derives from it.
template <typename Machine>
class cluster {
public:
    using node_type = zab::asio::node<zab::file_log, Machine>;
    struct replica {
        std::unique_ptr<zab::file_log> log;
        std::unique_ptr<Machine> machine;
        std::unique_ptr<node_type> node;  ///< null while killed
    };

    cluster(std::filesystem::path directory, peer_id replicas, std::uint64_t cluster_id)
        : directory_{std::move(directory)}, size_{replicas}, cluster_id_{cluster_id} {}
    ~cluster() {
        for (auto& [id, r] : replicas_) r.node.reset();
        io_.poll();
        disk_.join();
    }
    cluster(const cluster&) = delete;
    cluster& operator=(const cluster&) = delete;

protected:
    /// One line of the timeline: the seconds since the start, then the text.
    template <typename... Args>
    void say(fmt::format_string<Args...> format, Args&&... args) const {
        fmt::print("[{:6.3f} s] {}\n", static_cast<double>(elapsed_ms()) / 1000.0,
                   fmt::format(format, std::forward<Args>(args)...));
        std::fflush(stdout);
    }
    std::uint64_t elapsed_ms() const {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started_)
                .count());
    }

    /// Opens replica `id`'s files (creating them the first time) and starts its node; false
    /// (after saying why) if it cannot. The higher id of a pair dials the lower, so the first
    /// starts go in increasing order.
    bool start(peer_id id) {
        replica& r = replicas_[id];
        zab::file_log_options fo;
        fo.directory = (directory_ / fmt::format("replica-{}", id)).string();
        fo.cluster_id = cluster_id_;
        fo.replica_id = id;
        std::string why;
        auto opened = zab::file_log::open(fo, &why);
        if (!opened) {
            say("replica {}: cannot open its log: {}", id, why);
            return false;
        }
        r.log = std::make_unique<zab::file_log>(std::move(opened).value());
        r.machine = std::make_unique<Machine>();
        r.node = std::make_unique<node_type>(io_.get_executor(), options_for(id), *r.log,
                                             *r.machine, disk_.get_executor());
        if (auto started = r.node->start(); !started) {
            say("replica {}: cannot start: {}", id, started.error().message());
            return false;
        }
        ports_[id] = r.node->transport().local_port();
        return true;
    }

    /// Replica `id` dies: its objects are destroyed, its files stay.
    void kill(peer_id id) {
        replica& r = replicas_.at(id);
        r.node.reset();
        r.machine.reset();
        r.log.reset();
    }

    /// Runs the group until `done()`; false (after saying so) if 10 s pass first.
    bool wait(std::string_view what, const std::function<bool()>& done) {
        const auto deadline = clock_type::now() + std::chrono::seconds{10};
        while (!done()) {
            if (clock_type::now() > deadline) {
                say("FAILED: no {} within 10 s", what);
                return false;
            }
            io_.run_one_for(std::chrono::milliseconds{20});
        }
        return true;
    }

    /// The live replica that leads an established epoch, 0 if none.
    peer_id leader() const {
        for (const auto& [id, r] : replicas_)
            if (r.node && r.node->status().established &&
                r.node->status().role == zab::peer_state::leading)
                return id;
        return 0;
    }
    /// Every live replica is established (leading or following), and one leads.
    bool all_serving() const {
        for (const auto& [id, r] : replicas_)
            if (r.node && !r.node->status().established) return false;
        return leader() != 0;
    }

    std::map<peer_id, replica> replicas_;  ///< every replica started once, live or killed

private:
    zab::asio::node_options options_for(peer_id id) const {
        zab::asio::node_options o;
        o.config = zab::configuration::numbered(size_).value();
        o.tick = std::chrono::milliseconds{20};
        o.cluster_id = cluster_id_;
        o.transport.self = id;
        o.transport.reconnect_min = std::chrono::milliseconds{10};
        o.transport.reconnect_max = std::chrono::milliseconds{200};
        for (peer_id m = 1; m <= size_; ++m) {
            const auto port = ports_.find(m);
            o.transport.peers[m] = {"127.0.0.1",
                                    port == ports_.end() ? std::uint16_t{0} : port->second};
        }
        return o;
    }

    clock_type::time_point started_ = clock_type::now();
    std::filesystem::path directory_;
    peer_id size_;
    std::uint64_t cluster_id_;
    boost::asio::io_context io_;
    boost::asio::thread_pool disk_{1};
    std::map<peer_id, std::uint16_t> ports_;
};

/// A demo's main(): `run(directory)` in a fresh temporary directory named after `name`,
/// removed afterwards unless the command line is `--keep`; prints "NAME: OK" or
/// "NAME: FAILED" and returns run's status (2 if the directory cannot be made).
inline int run_demo(std::string_view name, int argc, char** argv,
                    const std::function<int(const std::filesystem::path&)>& run) {
    const bool keep = argc > 1 && std::string_view{argv[1]} == "--keep";
    std::string pattern =
        (std::filesystem::temp_directory_path() / fmt::format("zab-{}-XXXXXX", name)).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
        std::perror("mkdtemp");
        return 2;
    }
    zab::set_log_level(zab::log_level::error);
    const int status = run(pattern);
    if (keep) {
        fmt::print("kept: {}\n", pattern);
    } else {
        std::error_code ignored;
        std::filesystem::remove_all(pattern, ignored);
    }
    fmt::print("{}: {}\n", name, status == 0 ? "OK" : "FAILED");
    return status;
}

}  // namespace zab::demo
