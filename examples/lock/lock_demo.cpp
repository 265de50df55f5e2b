// lock_demo — the lock service (lock_machine.hpp) on three zab replicas in this process, over
// loopback TCP, each with a file log in a fresh temporary directory.
//
// The story of a fencing token: alice ACQUIREs "printer" and is granted; her answer is lost
// with the leader, which is killed (node and log objects destroyed, files kept). She
// retries the same tagged ACQUIRE through another replica, under the new leader: it commits
// as a transaction of its own and is answered `duplicate` by the session table — and her
// token is the first grant's zxid (session_reply::applied_at, docs/protocol.md §6.7), not
// the retry's. bob is told the lock is busy with that token; a RELEASE with the retry's zxid
// is refused; the right token releases; bob's grant has a larger token. Exit status: 0 when
// every step answered as it must and the live replicas hold equal lock tables; 1 when one
// did not; 2 when a step did not finish within its deadline.
//
// Usage: lock_demo [--keep]   (--keep leaves the data directory for inspection)
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
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>

#include "lock/lock_machine.hpp"
#include "zab/runtime/node.hpp"
#include "zab/storage/file_log.hpp"

namespace {

using namespace std::chrono_literals;
using zab::peer_id;
using zab::zxid;
using zab::lock::lock_answer;
using zab::lock::lock_status;
using node_type = zab::asio::node<zab::file_log, zab::lock::lock_service>;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t cluster_id = 0x6c6f636b;  // "lock"
constexpr peer_id replicas = 3;

struct replica {
    std::unique_ptr<zab::file_log> log;
    std::unique_ptr<zab::lock::lock_service> machine;
    std::unique_ptr<node_type> node;
};

/// A client: its session id and next sequence (one request outstanding at a time, §6.7).
struct client {
    std::string name;
    std::uint64_t id = 0;
    std::uint64_t sequence = 0;
};

/// A completed write: the zxid it committed as, and the lock service's answer.
struct written {
    zxid id;
    lock_answer answer;
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
        for (peer_id id = 1; id <= replicas; ++id)
            if (!start(id)) return 2;
        if (!wait("an election", [&] { return leader() != 0; })) return 2;
        say("replica {} leads", leader());
        client alice{"alice", 1}, bob{"bob", 2};

        // alice's ACQUIRE, tagged (1, 1); she will retry it with the same tag.
        const auto request = tagged(alice, acquire("printer", alice.name));
        const auto granted = propose(follower(), request);
        if (!granted) return 2;
        const std::uint64_t token = granted->answer.token.value_or(0);
        say("alice ACQUIRE printer: {}, token {} (the write's zxid {})", text(granted->answer),
            token, granted->id);
        if (!expect(granted->answer.status == lock_status::granted && token == granted->id.value(),
                    "a grant whose token is its zxid"))
            return 1;

        const peer_id killed = leader();
        say("killing leader {}; say alice's answer was lost with it", killed);
        kill(killed);
        if (!wait("a new election", [&] { return leader() != 0 && leader() != killed; })) return 2;
        say("replica {} leads", leader());

        const auto retry = propose(follower(), request);
        if (!retry) return 2;
        say("alice retries ACQUIRE printer (same tag): {}, committed as {}, token {}",
            text(retry->answer), retry->id, retry->answer.token.value_or(0));
        if (!expect(
                retry->answer.duplicate && retry->answer.token == token && retry->id != granted->id,
                "a duplicate with the first grant's token, not the retry's zxid"))
            return 1;

        const auto busy = propose(leader(), tagged(bob, acquire("printer", bob.name)));
        if (!busy) return 2;
        say("bob ACQUIRE printer: {}", text(busy->answer));
        if (!expect(busy->answer.status == lock_status::busy && busy->answer.holder == "alice" &&
                        busy->answer.token == token,
                    "busy, held by alice with her token"))
            return 1;

        const auto wrong =
            propose(follower(), tagged(alice, release("printer", alice.name, retry->id.value())));
        if (!wrong) return 2;
        say("alice RELEASE printer with the retry's zxid {}: {}", retry->id.value(),
            text(wrong->answer));
        if (!expect(wrong->answer.status == lock_status::not_holder, "refused")) return 1;

        const auto released =
            propose(follower(), tagged(alice, release("printer", alice.name, token)));
        if (!released) return 2;
        say("alice RELEASE printer with token {}: {}", token, text(released->answer));
        if (!expect(released->answer.status == lock_status::released, "released")) return 1;

        const auto next = propose(leader(), tagged(bob, acquire("printer", bob.name)));
        if (!next) return 2;
        say("bob ACQUIRE printer: {}, token {}", text(next->answer),
            next->answer.token.value_or(0));
        if (!expect(next->answer.status == lock_status::granted && next->answer.token > token,
                    "granted with a larger token"))
            return 1;

        const zxid last = next->id;
        if (!wait("every live replica to apply the last write", [&] {
                for (const auto& [id, r] : replicas_)
                    if (r.node && r.machine->last_applied() < last) return false;
                return true;
            }))
            return 2;
        return compare();
    }

private:
    template <typename... Args>
    void say(fmt::format_string<Args...> format, Args&&... args) {
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started_);
        fmt::print("[{:6.3f} s] {}\n", static_cast<double>(ms.count()) / 1000.0,
                   fmt::format(format, std::forward<Args>(args)...));
        std::fflush(stdout);
    }
    bool expect(bool ok, std::string_view what) {
        if (!ok) say("FAILED: expected {}", what);
        return ok;
    }

    std::uint64_t now_ms() const {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started_)
                .count());
    }
    std::vector<std::byte> acquire(std::string name, std::string owner) const {
        return zab::lock::encode(
                   {zab::lock::lock_op::acquire, now_ms(), std::move(name), std::move(owner), 0})
            .value();
    }
    std::vector<std::byte> release(std::string name, std::string owner, std::uint64_t token) const {
        return zab::lock::encode({zab::lock::lock_op::release, now_ms(), std::move(name),
                                  std::move(owner), token})
            .value();
    }
    static std::vector<std::byte> tagged(client& c, const std::vector<std::byte>& txn) {
        return zab::session_envelope::wrap(txn, zab::session_tag{c.id, ++c.sequence});
    }
    static std::string text(const lock_answer& a) {
        if (!a.status) return "applied earlier (answer not kept)";
        std::string s;
        switch (*a.status) {
            case lock_status::granted: s = "granted"; break;
            case lock_status::busy:
                s = fmt::format("busy (held by {}, token {})", a.holder, a.token.value_or(0));
                break;
            case lock_status::released: s = "released"; break;
            case lock_status::not_holder: s = "refused: not the holder's token"; break;
            case lock_status::malformed: s = "malformed"; break;
        }
        return a.duplicate ? s + " [duplicate]" : s;
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

    /// Opens replica `id`'s files and starts its node (the higher id of a pair dials the
    /// lower, so the starts go in increasing order).
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
        r.machine = std::make_unique<zab::lock::lock_service>();
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

    /// The established leader, 0 if none; once one is, its live followers are serving too.
    peer_id leader() const {
        peer_id found = 0;
        for (const auto& [id, r] : replicas_) {
            if (!r.node) continue;
            if (!r.node->status().established) return 0;
            if (r.node->status().role == zab::peer_state::leading) found = id;
        }
        return found;
    }
    peer_id follower() const {
        for (const auto& [id, r] : replicas_)
            if (r.node && id != leader()) return id;
        return leader();
    }

    /// Proposes `txn` at replica `via` and waits for its completion: nullopt (after saying
    /// why) when it failed or did not complete in time.
    std::optional<written> propose(peer_id via, const std::vector<std::byte>& txn) {
        std::optional<std::pair<boost::system::error_code, zab::asio::reply>> done;
        replicas_.at(via).node->async_propose(zab::byte_view{txn.data(), txn.size()},
                                              [&](boost::system::error_code e, zab::asio::reply r) {
                                                  done.emplace(e, std::move(r));
                                              });
        if (!wait("write completion", [&] { return done.has_value(); })) return std::nullopt;
        if (done->first) {
            say("FAILED: a write through replica {}: {}", via, done->first.message());
            return std::nullopt;
        }
        auto answer = zab::lock::answer_of(done->second.response.view());
        if (!answer) {
            say("FAILED: the reply through replica {} does not decode", via);
            return std::nullopt;
        }
        return written{done->second.id, std::move(answer).value()};
    }

    int compare() {
        std::optional<zab::shared_bytes> reference;
        bool ok = true;
        for (const auto& [id, r] : replicas_) {
            if (!r.node) continue;
            const auto& locks = r.machine->inner();
            const auto* holder = locks.holder("printer");
            say("replica {}: {} lock(s); printer held by {} with token {}", id,
                locks.locks().size(), holder ? holder->owner : "nobody",
                holder ? holder->token : 0);
            const zab::shared_bytes image = locks.snapshot();
            if (reference && !(image == *reference)) {
                say("FAILED: replica {}'s lock table differs", id);
                ok = false;
            }
            reference = image;
        }
        if (ok) say("the live replicas hold equal lock tables");
        return ok ? 0 : 1;
    }

    clock_type::time_point started_ = clock_type::now();
    std::filesystem::path directory_;
    boost::asio::io_context io_;
    boost::asio::thread_pool disk_{1};
    std::map<peer_id, std::uint16_t> ports_;
    std::map<peer_id, replica> replicas_;
};

}  // namespace

int main(int argc, char** argv) {
    const bool keep = argc > 1 && std::string_view{argv[1]} == "--keep";
    std::string pattern = (std::filesystem::temp_directory_path() / "zab-lock-XXXXXX").string();
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
    fmt::print("{}\n", status == 0 ? "lock_demo: OK" : "lock_demo: FAILED");
    return status;
}
