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

#include <fmt/format.h>

#include "demo_cluster.hpp"
#include "lock/lock_machine.hpp"

namespace {

using namespace std::chrono_literals;
using zab::peer_id;
using zab::zxid;
using zab::lock::lock_answer;
using zab::lock::lock_status;

constexpr std::uint64_t cluster_id = 0x6c6f636b;  // "lock"
constexpr peer_id replicas = 3;

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

class demo : zab::demo::cluster<zab::lock::lock_service> {
public:
    explicit demo(const std::filesystem::path& directory)
        : cluster{directory, replicas, cluster_id} {}

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
    bool expect(bool ok, std::string_view what) {
        if (!ok) say("FAILED: expected {}", what);
        return ok;
    }

    std::uint64_t now_ms() const { return elapsed_ms(); }
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

    /// The established leader, 0 if none; once one is, its live followers are serving too.
    peer_id leader() const { return all_serving() ? cluster::leader() : 0; }
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

};

}  // namespace

int main(int argc, char** argv) {
    return zab::demo::run_demo("lock_demo", argc, argv,
                               [](const std::filesystem::path& directory) {
                                   demo d{directory};
                                   return d.run();
                               });
}
