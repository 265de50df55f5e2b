// kv_nemesis — the key-value server under a nemesis, its history checked for linearizability.
//
// Starts N kv_server processes with file logs (fsync on) in a work directory; every peer
// connection passes through an in-process proxy (nemesis/peer_proxy.hpp) that can cut a
// replica off. Client threads issue, through every replica for --seconds, half of them on
// linearizable connections (READMODE linearizable), half on local reads:
//   - GET, SET and CAS on a few keys (--keys);
//   - MULTI/EXEC blocks on the keys t0, t1, tc (SET t0 v; SET t1 v; INCR tc), WATCHed CASes
//     (WATCH t0; GET t0; MULTI; SET t0 v; SET t1 v; EXEC) and MGET t0 t1 tc;
//   - SET PX (a TTL of 0.05-3 s, the faults' timescale), SET and GET on the keys e0-e7, and
//     the conditional writes whose answer depends on whether a key has expired: SET NX PX
//     and WATCHed CASes (WATCH e; GET e; MULTI; SET e v PX; EXEC);
//   - collections: RPUSH, LPOP, LRANGE 0 -1 and LLEN on the lists l0, l1; SADD, SREM,
//     SMEMBERS, SCARD and SISMEMBER on the sets s0, s1 (a few elements each; a WRONGTYPE
//     answer is a bug, as no string command touches them).
// Every SET, CAS and collection write is TAGGED (exactly-once), and one whose outcome is
// unknown is retried
// with its tag on another replica until it gets an answer or its time runs out; a block
// whose EXEC got no answer stays of unknown outcome.
// Meanwhile the nemesis, one fault at a time, kill -9s and restarts a random minority (the
// leader in half the cases), pauses a replica with SIGSTOP/SIGCONT, cuts one off, or asks
// the leader to hand its leadership over (ZTRANSFER ANY; writes meanwhile get -TRYAGAIN, a
// definite refusal the log checks hold it to).
//
// Then every fault is healed, a last write goes through, and the test checks:
//   1. the replicas converge: equal state digests at the same zxid (INFO DIGEST);
//   2. every replica exits 0 on SIGTERM, and their committed logs agree record by record;
//   3. the log, replayed, gives the replicas' digest; every acknowledged write is in it
//      with the outcome its client was told, no refused write is, none is applied twice;
//   4. the history of writes, CAS, blocks, expiries, collection commands and linearizable
//      reads (final reads on every replica included) is linearizable
//      (zab::testing::check_linearizability, per group of keys: nemesis/group_model.hpp
//      says what is promised for blocks, expiry and collections);
//   5. local reads keep the per-connection guarantee (nemesis/history_check.hpp).
//
// --negative-control shows the check is not blind: every client reads locally but its reads
// are checked as linearizable, and the nemesis only cuts followers off, so reads served by a
// cut-off follower are stale; the run passes only if the checker reports a violation.
//
// Usage: kv_nemesis --server PATH/kv_server [--replicas 3] [--seconds 20] [--clients 6]
//                   [--keys 3] [--seed 1] [--tick-ms 20] [--work DIR] [--keep]
//                   [--negative-control]
// Exit 0: every check passed; 1: a check failed (the report says which, with the replicas'
// log tails); 2: bad command line or the cluster could not be set up.
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nemesis/group_model.hpp"
#include "nemesis/history_check.hpp"
#include "nemesis/peer_proxy.hpp"
#include "nemesis/resp_client.hpp"
#include "nemesis/settle_unknowns.hpp"
#include "zab/core/options.hpp"
#include "zab/storage/file_log.hpp"
#include "zab/testing/linearizability.hpp"

namespace {

namespace nm = zab::kv::nemesis;
using model = nm::group_model;
using history_op = zab::testing::operation<model>;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// --- command line ----------------------------------------------------------------------------

struct options {
    std::string server;
    std::uint32_t replicas = 3;
    double seconds = 20;
    std::uint32_t clients = 6;
    std::uint32_t keys = 3;
    std::uint64_t seed = 1;
    std::uint32_t tick_ms = 20;
    std::string work;
    bool keep = false;
    /// Every client reads locally but its reads are checked as linearizable, and the nemesis
    /// only cuts followers off: stale reads must be caught (exit 0 iff the check fails).
    bool negative_control = false;
    /// kv_server --snapshot-every: logs compacted during the run. The checks that need the
    /// whole committed log (writes, sessions) then run only if some replica kept it whole.
    /// 0: never (the servers get --snapshot-every-bytes 0 too, else they compact every 64 MiB).
    std::uint64_t snapshot_every = 0;
};

constexpr std::string_view usage =
    "usage: kv_nemesis --server PATH/kv_server [--replicas 3] [--seconds 20] [--clients 6]\n"
    "                  [--keys 3] [--seed 1] [--tick-ms 20] [--work DIR] [--keep]\n"
    "                  [--negative-control] [--snapshot-every N]\n";

std::optional<options> parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--keep" || flag == "--negative-control") {
            (flag == "--keep" ? o.keep : o.negative_control) = true;
            continue;
        }
        if (i + 1 >= argc) return std::nullopt;
        const std::string value = argv[++i];
        char* end = nullptr;
        const double number = std::strtod(value.c_str(), &end);
        const bool numeric = end != value.c_str() && *end == '\0' && number >= 0;
        if (flag == "--server") o.server = value;
        else if (flag == "--work") o.work = value;
        else if (!numeric) return std::nullopt;
        else if (flag == "--replicas") o.replicas = static_cast<std::uint32_t>(number);
        else if (flag == "--seconds") o.seconds = number;
        else if (flag == "--clients") o.clients = static_cast<std::uint32_t>(number);
        else if (flag == "--keys") o.keys = static_cast<std::uint32_t>(number);
        else if (flag == "--seed") o.seed = static_cast<std::uint64_t>(number);
        else if (flag == "--tick-ms") o.tick_ms = static_cast<std::uint32_t>(number);
        else if (flag == "--snapshot-every") o.snapshot_every = static_cast<std::uint64_t>(number);
        else return std::nullopt;
    }
    if (o.server.empty() || o.replicas < 1 || o.replicas > 9 || o.clients < 1 || o.keys < 1 ||
        o.tick_ms < 1)
        return std::nullopt;
    return o;
}

// --- time and the timeline -------------------------------------------------------------------

const clock_type::time_point start_time = clock_type::now();

zab::testing::history_time now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start_time)
        .count();
}

std::mutex say_mutex;

template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
    const std::string text = fmt::format(format, std::forward<Args>(args)...);
    std::lock_guard lock{say_mutex};
    fmt::print("[{:8.3f} s] {}\n", static_cast<double>(now_us()) / 1e6, text);
    std::fflush(stdout);
}

/// Sleeps `d`, waking early when `stop` is set.
void nap(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
    const auto until = clock_type::now() + d;
    while (!stop && clock_type::now() < until) std::this_thread::sleep_for(10ms);
}

// --- the replicas ----------------------------------------------------------------------------

/// A port nobody listens on now, for a replica to bind later, each handed out once. Below the
/// kernel's ephemeral range (ip_local_port_range), as tests/kv/cluster_lib.sh picks them: the
/// kernel's choice for port 0 comes from that range, and so does the local end of every
/// outgoing connection (the proxy makes thousands), which took a replica's port before it
/// bound it once ("Address already in use": the replica never started).
std::uint16_t free_port() {
    static std::set<std::uint16_t> handed_out;
    static std::mt19937 random{std::random_device{}()};
    int high = 32767;
    if (std::ifstream range{"/proc/sys/net/ipv4/ip_local_port_range"}; range) {
        int ephemeral_low = 0;
        if (range >> ephemeral_low && ephemeral_low > 10001) high = std::min(high, ephemeral_low - 1);
    }
    std::uniform_int_distribution<int> pick{10000, high};
    for (int attempt = 0; attempt < 10000; ++attempt) {
        const auto port = static_cast<std::uint16_t>(pick(random));
        if (handed_out.contains(port)) continue;
        boost::asio::io_context io;
        boost::asio::ip::tcp::acceptor a{io};
        boost::system::error_code error;
        a.open(boost::asio::ip::tcp::v4(), error);
        if (!error)
            a.bind(boost::asio::ip::tcp::endpoint{boost::asio::ip::address_v4::loopback(), port},
                   error);
        if (error) continue;  // taken (or in TIME_WAIT): another
        handed_out.insert(port);
        return port;
    }
    throw std::runtime_error("no free loopback port below the ephemeral range");
}

struct replica {
    std::uint32_t id = 0;
    std::uint16_t peer_port = 0;
    std::uint16_t client_port = 0;
    std::string peers;  // its --peers: itself at peer_port, the others through the proxy
    std::string data;
    std::string log_path;
    pid_t pid = -1;
    bool paused = false;
    std::uint32_t starts = 0;
};

class cluster {
public:
    cluster(const options& o, nm::peer_proxy& proxy) : options_{o} {
        for (std::uint32_t id = 1; id <= o.replicas; ++id) {
            replica r;
            r.id = id;
            r.peer_port = free_port();
            r.client_port = free_port();
            r.data = fmt::format("{}/replica-{}/data", o.work, id);
            r.log_path = fmt::format("{}/replica-{}.log", o.work, id);
            replicas_.push_back(r);
        }
        for (auto& from : replicas_) {
            from.peers = fmt::format("{}=127.0.0.1:{}", from.id, from.peer_port);
            for (const auto& to : replicas_) {
                if (to.id == from.id) continue;
                from.peers += fmt::format(",{}=127.0.0.1:{}", to.id,
                                          proxy.add_route(from.id, to.id, to.peer_port));
            }
        }
    }

    std::vector<replica>& replicas() { return replicas_; }
    replica& at(std::uint32_t id) { return replicas_.at(id - 1); }

    void start(std::uint32_t id) {
        replica& r = at(id);
        std::filesystem::create_directories(std::filesystem::path{r.data}.parent_path());
        const std::vector<std::string> args = {
            options_.server,  "--id",          std::to_string(id),
            "--peers",        r.peers,         "--client-port",
            std::to_string(r.client_port),     "--data",
            r.data,           "--tick-ms",     std::to_string(options_.tick_ms),
            "--log-level",    "warn",          "--snapshot-every",
            std::to_string(options_.snapshot_every),
            "--snapshot-every-bytes",
            options_.snapshot_every == 0 ? "0" : std::to_string(zab::options{}.snapshot_every_bytes)};
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        const int log = ::open(r.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        const pid_t pid = ::fork();
        if (pid == 0) {
            // Only async-signal-safe calls here. The child must not keep the proxy's
            // sockets: a cut closes them, and a copy in a child would keep them open.
            ::dup2(log, 1);
            ::dup2(log, 2);
            ::syscall(SYS_close_range, 3U, ~0U, 0U);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(log);
        r.pid = pid;
        r.paused = false;
        ++r.starts;
    }

    void kill(std::uint32_t id) {
        replica& r = at(id);
        if (r.pid < 0) return;
        ::kill(r.pid, SIGKILL);
        ::waitpid(r.pid, nullptr, 0);
        r.pid = -1;
        r.paused = false;
    }

    void pause(std::uint32_t id) {
        ::kill(at(id).pid, SIGSTOP);
        at(id).paused = true;
    }
    void resume(std::uint32_t id) {
        ::kill(at(id).pid, SIGCONT);
        at(id).paused = false;
    }

    /// SIGTERM and wait (10 s at most, then SIGKILL): the exit status, -1 if it was killed.
    int terminate(std::uint32_t id) {
        replica& r = at(id);
        if (r.pid < 0) return -1;
        ::kill(r.pid, SIGCONT);
        ::kill(r.pid, SIGTERM);
        int status = 0;
        const auto deadline = clock_type::now() + 10s;
        while (::waitpid(r.pid, &status, WNOHANG) == 0) {
            if (clock_type::now() > deadline) {
                ::kill(r.pid, SIGKILL);
                ::waitpid(r.pid, &status, 0);
                r.pid = -1;
                return -1;
            }
            std::this_thread::sleep_for(10ms);
        }
        r.pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

    void kill_all() {
        for (auto& r : replicas_) kill(r.id);
    }

private:
    const options& options_;
    std::vector<replica> replicas_;
};

/// INFO (or INFO DIGEST) of a replica as key → value; empty when it does not answer.
std::map<std::string, std::string> info(std::uint16_t port, const char* section = nullptr) {
    std::map<std::string, std::string> out;
    nm::resp_client c;
    if (!c.connect(port, 300ms)) return out;
    std::vector<std::string> args{"INFO"};
    if (section != nullptr) args.emplace_back(section);
    const auto r = c.call(args, 500ms);
    if (!r || r->kind != nm::reply::type::bulk) return out;
    std::string_view text = r->text;
    while (!text.empty()) {
        const std::size_t eol = text.find("\r\n");
        const std::string_view line = text.substr(0, eol);
        text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 2);
        const std::size_t colon = line.find(':');
        if (colon != std::string_view::npos && line.front() != '#')
            out.emplace(line.substr(0, colon), line.substr(colon + 1));
    }
    return out;
}

/// The replica that says it leads an established epoch, or 0.
std::uint32_t find_leader(cluster& c) {
    for (auto& r : c.replicas()) {
        if (r.pid < 0 || r.paused) continue;
        auto i = info(r.client_port);
        if (i["replica_role"] == "leading" && i["established"] == "1") return r.id;
    }
    return 0;
}

// --- clients ---------------------------------------------------------------------------------

/// What the clients share with the test: the ports (fixed) and the stop flag.
struct client_context {
    std::vector<std::uint16_t> ports;
    std::atomic<bool> stop{false};
};

/// The keys of the workload. Each `plain` key is its own group (GET, SET, CAS); the `block`
/// keys are one group, "t", written only by MULTI/EXEC blocks (two SETs of one value and an
/// INCR of the counter, or a WATCHed CAS of the first key setting both) and read by MGET of
/// all three, so a torn block shows; each `expiring` key is its own group (SET PX, SET, GET,
/// SET NX PX, and WATCH e; GET e; MULTI; SET e v PX; EXEC). Each list and each set is its own
/// group too, and only collection commands of its type touch it.
struct workload_keys {
    std::vector<std::string> plain;
    std::string block_group = "t";
    std::vector<std::string> block = {"t0", "t1", "tc"};  ///< tc: the INCR counter
    /// Many, each written rarely, so that some values outlive their TTL.
    std::vector<std::string> expiring = {"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"};
    std::vector<std::string> lists = {"l0", "l1"};
    std::vector<std::string> sets = {"s0", "s1"};
};

/// A client keeps a collection at about this many elements (it pops or removes rather than
/// adds once it saw this many), so that the states the checker explores stay small.
constexpr std::size_t collection_bound = 6;

/// The earliest an expiry can take effect, before the SET's call + TTL: the deadline is the
/// later of the map's clock and the stamp (both the server's system clock, in whole
/// milliseconds, read after the call), and only the leader's TICK at or past it removes the
/// value; our clock is steady microseconds.
constexpr zab::testing::history_time expiry_margin_us = 5'000;

struct client_counters {
    std::uint64_t reads = 0, reads_failed = 0;
    std::uint64_t writes_acknowledged = 0, writes_refused = 0, writes_unknown = 0;
    std::uint64_t retries = 0, connections = 0;
    std::uint64_t expiring_writes = 0, expiring_nil_reads = 0;
    /// Conditional writes on expiring keys: SET NX answered OK / nil; WATCHed CASes whose
    /// EXEC was sent, and those that may have applied (answered the array, or no answer).
    std::uint64_t nx_set = 0, nx_not_set = 0, expiring_cas = 0, expiring_cas_applied = 0;
    std::uint64_t blocks_applied = 0, blocks_aborted = 0, blocks_refused = 0, blocks_unknown = 0;
    /// Collection commands: writes acknowledged (of them, LPOPs of an element, SADD/SREM
    /// answered 1), refused, unknown; reads answered.
    std::uint64_t collection_writes = 0, collection_changes = 0, collection_refused = 0;
    std::uint64_t collection_unknown = 0, collection_reads = 0;
};

/// One client: a thread with one connection at a time, to a random replica.
class client {
public:
    /// `linearizable`: the connection's read mode. `checked_linearizable`: whether its reads
    /// go into the linearizability history (differs only in the negative control).
    client(std::uint64_t client_id, bool linearizable, bool checked_linearizable,
           std::uint64_t seed, const workload_keys& keys, client_context& context)
        : id_{client_id}, linearizable_{linearizable}, checked_{checked_linearizable},
          rng_{seed}, keys_{keys}, context_{context} {
        for (const auto& k : keys_.plain) last_seen_[k] = "init-" + k;
    }

    void run() {
        while (!context_.stop) {
            if (!connection_.connected() && !connect()) {
                std::this_thread::sleep_for(20ms);
                continue;
            }
            const auto area = rng_() % 100;
            const auto roll = rng_() % 100;
            if (area < 44) {
                const std::string& key = keys_.plain[rng_() % keys_.plain.size()];
                if (roll < 45) read(key, key);
                else write(key, roll >= 80);
            } else if (area < 66) {
                if (roll < 35) read_block();
                else if (roll < 65) block();
                else watched_cas();
            } else if (area < 78) {
                if (rng_() % 2 == 0) list_command(keys_.lists[rng_() % keys_.lists.size()], roll);
                else set_command(keys_.sets[rng_() % keys_.sets.size()], roll);
            } else {
                const std::string& key = keys_.expiring[rng_() % keys_.expiring.size()];
                // TTLs of 50 ms to 3 s: the faults' timescale, and short enough that some
                // values expire before the next write of their key.
                const auto ttl = [&] { return 50 + (rng_() % 60) * (rng_() % 50); };
                if (roll < 65) {
                    if (const auto v = read(key, key); v && !*v) ++counters_.expiring_nil_reads;
                } else if (roll < 75) {
                    expiring_watched_cas(key, ttl());
                } else if (roll < 85) {
                    write(key, false, ttl(), true);
                } else {
                    write(key, false, roll < 97 ? ttl() : 0);
                }
            }
            std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 4000));
        }
    }

    /// One write, retried with its tag until it has an answer (10 s at most): the fate and
    /// the history operation. `ttl_ms` > 0: SET ... PX ttl_ms, and the history gets the
    /// expiry too (group_model.hpp), called at the SET's call + TTL, of unknown outcome.
    /// `if_absent`: SET ... NX, a CAS expecting the key absent (answered OK or nil).
    void write(const std::string& key, bool cas, std::uint64_t ttl_ms = 0,
               bool if_absent = false) {
        nm::write_record w;
        w.tag = {id_, ++sequence_};
        w.key = key;
        w.if_absent = if_absent;
        w.value = fmt::format("c{}-{}", id_, sequence_);
        std::vector<std::string> args{"TAGGED", std::to_string(w.tag.client_id),
                                      std::to_string(w.tag.sequence)};
        if (cas) {
            w.expected = last_seen_[key];
            args.insert(args.end(), {"CAS", key, *w.expected, w.value});
        } else {
            args.insert(args.end(), {"SET", key, w.value});
            if (if_absent) args.emplace_back("NX");
            if (ttl_ms > 0) args.insert(args.end(), {"PX", std::to_string(ttl_ms)});
        }
        history_op op;
        op.client = id_;
        op.call_time = now_us();
        op.input = cas         ? model::cas(key, key, *w.expected, w.value)
                   : if_absent ? model::set_if_absent(key, key, w.value)
                               : model::put(key, key, w.value);
        send_tagged(args, w, [&](const nm::reply* r) {
            if (r == nullptr) return;
            const bool set_ok = r->kind == nm::reply::type::simple && r->text == "OK";
            const bool ok = cas ? r->kind == nm::reply::type::integer &&
                                      (r->integer == 0 || r->integer == 1)
                            : if_absent ? set_ok || r->kind == nm::reply::type::nil
                                        : set_ok;
            if (!ok) {
                problems_.push_back(fmt::format("write {}/{}: unexpected reply '{}'", id_,
                                                w.tag.sequence, r->text));
                return;
            }
            w.result = nm::write_record::fate::acknowledged;
            w.cas_matched = (cas && r->integer == 1) || (if_absent && set_ok);
            if (if_absent) ++(set_ok ? counters_.nx_set : counters_.nx_not_set);
            op.return_time = now_us();
            op.output = cas || if_absent ? model::cas_returned(w.cas_matched)
                                         : model::write_returned();
        });
        const bool not_set = (cas || if_absent) &&
                             w.result == nm::write_record::fate::acknowledged && !w.cas_matched;
        if (ttl_ms > 0 && w.result != nm::write_record::fate::refused && !not_set) {
            ++counters_.expiring_writes;
            history_op expiry;
            expiry.client = id_;
            expiry.call_time = op.call_time +
                               static_cast<zab::testing::history_time>(ttl_ms) * 1000 -
                               expiry_margin_us;
            expiry.input = model::expire(key, key, w.value);
            history_.push_back(std::move(expiry));
        }
        switch (w.result) {
            case nm::write_record::fate::acknowledged:
                ++counters_.writes_acknowledged;
                if ((!cas && !if_absent) || w.cas_matched) last_seen_[key] = w.value;
                events_.push_back({session_, false, {}, {}, w.tag});
                history_.push_back(std::move(op));
                break;
            case nm::write_record::fate::refused: ++counters_.writes_refused; break;
            case nm::write_record::fate::unknown:
                ++counters_.writes_unknown;
                history_.push_back(std::move(op));  // open to the end of the history
                break;
        }
        writes_.push_back(std::move(w));
    }

    /// One command on the list `key`: RPUSH of a new element (an LPOP instead once the list
    /// held collection_bound), LPOP, LRANGE key 0 -1 or LLEN.
    void list_command(const std::string& key, std::uint64_t roll) {
        const bool full = seen_sizes_[key] >= collection_bound;
        if (roll < 30 && !full) {
            const std::string element = fmt::format("c{}-{}", id_, sequence_ + 1);
            collection_write(model::rpush(key, element), {"RPUSH", key, element});
        } else if (roll < 55) {
            collection_write(model::lpop(key), {"LPOP", key});
        } else if (roll < 85) {
            collection_read(model::lrange(key), {"LRANGE", key, "0", "-1"});
        } else {
            collection_read(model::llen(key), {"LLEN", key});
        }
    }

    /// One command on the set `key`: SADD of a new member (a SREM instead once the set held
    /// collection_bound), SADD again of a member seen, SREM of a member seen (or of one never
    /// added: answered 0), SMEMBERS, SCARD or SISMEMBER.
    void set_command(const std::string& key, std::uint64_t roll) {
        const auto& seen = seen_members_[key];
        const auto some_seen = [&]() -> std::string {
            if (seen.empty()) return fmt::format("c{}-none", id_);
            return seen[rng_() % seen.size()];
        };
        const bool full = seen_sizes_[key] >= collection_bound;
        if (roll < 28 && !full) {
            const std::string member = fmt::format("c{}-{}", id_, sequence_ + 1);
            collection_write(model::sadd(key, member), {"SADD", key, member});
        } else if (roll < 36 && !full) {
            const std::string member = some_seen();
            collection_write(model::sadd(key, member), {"SADD", key, member});
        } else if (roll < 56) {
            const std::string member = some_seen();
            collection_write(model::srem(key, member), {"SREM", key, member});
        } else if (roll < 80) {
            collection_read(model::smembers(key), {"SMEMBERS", key});
        } else if (roll < 90) {
            collection_read(model::scard(key), {"SCARD", key});
        } else {
            const std::string member = some_seen();
            collection_read(model::sismember(key, member), {"SISMEMBER", key, member});
        }
    }

    /// Sends the TAGGED write `args` (of `w`) until it has an answer, 10 s at most: a timeout,
    /// a broken connection or -UNKNOWN (the write may have applied) reconnects and retries
    /// with the same tag; a refusal before any attempt may have applied makes `w` refused.
    /// Any other reply (WRONGTYPE included) goes to `on_reply`, which records `w`
    /// acknowledged or reports a problem; on giving up it is called with nullptr (`w` stays
    /// unknown).
    template <typename OnReply>
    void send_tagged(const std::vector<std::string>& args, nm::write_record& w,
                     OnReply&& on_reply) {
        bool uncertain = false;  // an earlier attempt may have been applied
        const auto give_up = clock_type::now() + 10s;
        for (bool first = true;; first = false) {
            if (!first) ++counters_.retries;
            if (clock_type::now() > give_up) return on_reply(nullptr);
            if (!connection_.connected() && !connect()) {
                std::this_thread::sleep_for(50ms);
                continue;
            }
            const auto r = connection_.call(args, 2s);
            if (!r) {
                uncertain = true;  // timed out or the connection broke: reconnect, retry
                continue;
            }
            if (r->is_error() && !r->error_is("WRONGTYPE")) {
                if (r->error_is("UNKNOWN")) {
                    uncertain = true;
                    connection_.close();  // another replica, maybe
                } else if (!uncertain) {
                    w.result = nm::write_record::fate::refused;
                    w.refusal = r->text;
                    return;
                }
                std::this_thread::sleep_for(50ms);
                continue;
            }
            return on_reply(&*r);
        }
    }

    /// A RPUSH, LPOP, SADD or SREM (`in`; `args` the command), TAGGED and retried with its
    /// tag until it has an answer (10 s at most), as write() does. The history gets it if it
    /// may have applied; the log check, its reply.
    void collection_write(model::input in, const std::vector<std::string>& command) {
        nm::write_record w;
        w.tag = {id_, ++sequence_};
        w.key = in.keys.at(0);
        w.value = in.value;
        w.verb = command.at(0);
        std::vector<std::string> args{"TAGGED", std::to_string(w.tag.client_id),
                                      std::to_string(w.tag.sequence)};
        args.insert(args.end(), command.begin(), command.end());
        history_op op;
        op.client = id_;
        op.call_time = now_us();
        send_tagged(args, w, [&](const nm::reply* r) {
            if (r == nullptr) return;
            if (r->error_is("WRONGTYPE")) {
                return problem(fmt::format("{} {}: {} (only {} commands touch it)", w.verb,
                                           w.key, r->text,
                                           in.what == model::kind::rpush ||
                                                   in.what == model::kind::lpop
                                               ? "list"
                                               : "set"));
            }
            std::string reply;
            if (in.what == model::kind::lpop && r->kind == nm::reply::type::bulk) {
                reply = fmt::format("${}\r\n{}\r\n", r->text.size(), r->text);
                op.output = model::popped(r->text);
            } else if (in.what == model::kind::lpop && r->kind == nm::reply::type::nil) {
                reply = "$-1\r\n";
                op.output = model::popped(std::nullopt);
            } else if (in.what != model::kind::lpop && r->kind == nm::reply::type::integer &&
                       (in.what == model::kind::rpush || r->integer == 0 || r->integer == 1)) {
                reply = fmt::format(":{}\r\n", r->integer);
                op.output = model::integer_returned(r->integer);
            } else {
                return problem(fmt::format("{} {}: unexpected reply '{}'", w.verb, w.key, r->text));
            }
            w.result = nm::write_record::fate::acknowledged;
            w.reply = std::move(reply);
            op.return_time = now_us();
        });
        switch (w.result) {
            case nm::write_record::fate::acknowledged: {
                ++counters_.collection_writes;
                const auto& o = *op.output;
                const bool changed = in.what == model::kind::rpush ||
                                     (in.what == model::kind::lpop ? o.values.at(0).has_value()
                                                                   : o.number == 1);
                if (changed) ++counters_.collection_changes;
                if (in.what == model::kind::rpush)
                    seen_sizes_[w.key] = static_cast<std::size_t>(o.number);
                events_.push_back({session_, false, {}, {}, w.tag});
                break;
            }
            case nm::write_record::fate::refused: ++counters_.collection_refused; break;
            case nm::write_record::fate::unknown: ++counters_.collection_unknown; break;
        }
        if (w.result != nm::write_record::fate::refused) {
            op.input = std::move(in);
            history_.push_back(std::move(op));  // unknown: open to the end of the history
        }
        writes_.push_back(std::move(w));
    }

    /// LRANGE, LLEN, SMEMBERS, SCARD or SISMEMBER (`in`; `args` the command); a failed one is
    /// dropped. It updates what this client saw of the collection (the workload's bounds),
    /// and joins the history on a linearizable connection.
    void collection_read(model::input in, const std::vector<std::string>& args) {
        history_op op;
        op.client = id_;
        op.call_time = now_us();
        const auto r = connection_.call(args, 1500ms);
        if (!r) {
            ++counters_.reads_failed;
            return;
        }
        if (r->error_is("WRONGTYPE")) {
            return problem(fmt::format("{} {}: {}", args[0], args[1], r->text));
        }
        if (r->is_error()) {  // e.g. -NOQUORUM on a linearizable read
            ++counters_.reads_failed;
            return;
        }
        const std::string& key = in.keys.at(0);
        const bool listing = in.what == model::kind::lrange || in.what == model::kind::smembers;
        if (listing != (r->kind == nm::reply::type::array) ||
            (!listing && r->kind != nm::reply::type::integer)) {
            return problem(fmt::format("{} {}: unexpected reply '{}'", args[0], key, r->text));
        }
        if (listing) {
            std::vector<std::string> elements;
            for (const auto& e : r->elements) {
                if (e.kind != nm::reply::type::bulk)
                    return problem(fmt::format("{} {}: unexpected element '{}'", args[0], key,
                                               e.text));
                elements.push_back(e.text);
            }
            seen_sizes_[key] = elements.size();
            if (in.what == model::kind::smembers) seen_members_[key] = elements;
            op.output = in.what == model::kind::lrange ? model::elements_returned(elements)
                                                       : model::members_returned(elements);
        } else {
            if (in.what != model::kind::sismember)
                seen_sizes_[key] = static_cast<std::size_t>(std::max<std::int64_t>(r->integer, 0));
            op.output = model::integer_returned(r->integer);
        }
        ++counters_.reads;
        ++counters_.collection_reads;
        if (!checked_) return;
        op.return_time = now_us();
        op.input = std::move(in);
        history_.push_back(std::move(op));
    }

    /// One GET of `key` (in `group`); a failed one is dropped (a read has no effect). On a
    /// linearizable connection it goes into the linearizability history; every read goes
    /// into the session check. The value read, if the read got an answer.
    std::optional<std::optional<std::string>> read(const std::string& group,
                                                   const std::string& key) {
        history_op op;
        op.client = id_;
        op.call_time = now_us();
        const auto r = connection_.call({"GET", key}, 1500ms);
        if (!r || (r->kind != nm::reply::type::bulk && r->kind != nm::reply::type::nil)) {
            ++counters_.reads_failed;
            return std::nullopt;
        }
        std::optional<std::string> value;
        if (r->kind == nm::reply::type::bulk) value = r->text;
        if (value && last_seen_.contains(key)) last_seen_[key] = *value;
        record_read(std::move(op), model::get(group, key), {value});
        return value;
    }

    /// MGET of every block key: one read at one state of the whole group.
    void read_block() {
        history_op op;
        op.client = id_;
        op.call_time = now_us();
        std::vector<std::string> args{"MGET"};
        args.insert(args.end(), keys_.block.begin(), keys_.block.end());
        const auto r = connection_.call(args, 1500ms);
        if (!r || r->kind != nm::reply::type::array || r->elements.size() != keys_.block.size()) {
            ++counters_.reads_failed;
            return;
        }
        std::vector<std::optional<std::string>> values;
        for (const auto& e : r->elements) {
            if (e.kind == nm::reply::type::bulk) values.emplace_back(e.text);
            else if (e.kind == nm::reply::type::nil) values.emplace_back();
            else return problem(fmt::format("MGET: unexpected element '{}'", e.text));
        }
        record_read(std::move(op), model::mget(keys_.block_group, keys_.block), std::move(values));
    }

    /// MULTI; SET t0 v; SET t1 v; INCR tc; EXEC.
    void block() {
        const std::string value = fmt::format("c{}-{}", id_, ++sequence_);
        run_block(model::multi(keys_.block_group,
                               {{keys_.block[0], value}, {keys_.block[1], value},
                                {keys_.block[2], std::nullopt}}));
    }

    /// WATCH t0; GET t0 -> seen; MULTI; SET t0 v; SET t1 v; EXEC: a CAS of t0 by
    /// optimistic locking, writing t1 alongside.
    void watched_cas() {
        const std::string& key = keys_.block[0];
        const auto watched = connection_.call({"WATCH", key}, 1500ms);
        if (!watched || watched->kind != nm::reply::type::simple) {
            connection_.close();  // nothing was proposed
            return;
        }
        const auto seen = read(keys_.block_group, key);
        if (!seen) {
            connection_.close();  // drops the WATCH
            return;
        }
        const std::string value = fmt::format("c{}-{}", id_, ++sequence_);
        run_block(model::watch_cas(keys_.block_group, key, *seen,
                                   {{keys_.block[0], value}, {keys_.block[1], value}}));
    }

    /// WATCH e; GET e -> seen; MULTI; SET e v PX ttl; EXEC, on an expiring key: the
    /// conditional write whose answer depends on whether `seen` expired meanwhile (it must
    /// abort if a read already saw the key gone). The new value's expiry joins the history
    /// if the block may have applied.
    void expiring_watched_cas(const std::string& key, std::uint64_t ttl_ms) {
        const auto watched = connection_.call({"WATCH", key}, 1500ms);
        if (!watched || watched->kind != nm::reply::type::simple) {
            connection_.close();
            return;
        }
        const auto seen = read(key, key);
        if (!seen) {
            connection_.close();
            return;
        }
        const std::string value = fmt::format("c{}-{}", id_, ++sequence_);
        const auto blocks_before = counters_.blocks_applied + counters_.blocks_aborted +
                                   counters_.blocks_refused + counters_.blocks_unknown;
        const auto exec_call =
            run_block(model::watch_cas(key, key, *seen, {{key, value}}), ttl_ms);
        if (counters_.blocks_applied + counters_.blocks_aborted + counters_.blocks_refused +
                counters_.blocks_unknown != blocks_before)
            ++counters_.expiring_cas;
        if (!exec_call) return;
        ++counters_.expiring_cas_applied;
        ++counters_.expiring_writes;
        history_op expiry;
        expiry.client = id_;
        expiry.call_time =
            *exec_call + static_cast<zab::testing::history_time>(ttl_ms) * 1000 - expiry_margin_us;
        expiry.input = model::expire(key, key, value);
        history_.push_back(std::move(expiry));
    }

    /// MULTI, the queued writes of `in` (SETs with PX `ttl_ms` if > 0), EXEC; the EXEC as
    /// one history operation. A failure before EXEC closes the connection (the server
    /// forgets the block: nothing applied); EXEC without an answer is of unknown outcome; an
    /// error is a refusal. The EXEC's call time if the block may have applied (answered the
    /// array, or no answer).
    std::optional<zab::testing::history_time> run_block(model::input in,
                                                        std::uint64_t ttl_ms = 0) {
        const auto queue = [&](const std::vector<std::string>& args, std::string_view want) {
            const auto r = connection_.call(args, 1500ms);
            if (r && r->kind == nm::reply::type::simple && r->text == want) return true;
            connection_.close();
            return false;
        };
        if (!queue({"MULTI"}, "OK")) return std::nullopt;
        for (const auto& q : in.writes) {
            std::vector<std::string> args{"INCR", q.key};
            if (q.value) {
                args = {"SET", q.key, *q.value};
                if (ttl_ms > 0) args.insert(args.end(), {"PX", std::to_string(ttl_ms)});
            }
            if (!queue(args, "QUEUED")) return std::nullopt;
        }
        history_op op;
        op.client = id_;
        op.call_time = now_us();
        op.input = std::move(in);
        const auto r = connection_.call({"EXEC"}, 2s);
        if (!r || r->error_is("UNKNOWN")) {
            ++counters_.blocks_unknown;
            if (r) connection_.close();
            const auto called = op.call_time;
            history_.push_back(std::move(op));  // open to the end of the history
            return called;
        }
        if (r->is_error()) {
            ++counters_.blocks_refused;  // e.g. -NOQUORUM: not applied
            return std::nullopt;
        }
        op.return_time = now_us();
        if (r->kind == nm::reply::type::nil) {
            if (op.input.what != model::kind::watch_cas) {
                problem("EXEC without WATCH answered nil");
                return std::nullopt;
            }
            ++counters_.blocks_aborted;
            op.output = model::exec_aborted();
            history_.push_back(std::move(op));
            return std::nullopt;
        } else if (r->kind == nm::reply::type::array &&
                   r->elements.size() == op.input.writes.size()) {
            std::vector<std::string> replies;
            for (const auto& e : r->elements) {
                if (e.kind == nm::reply::type::simple) replies.push_back(e.text);
                else if (e.kind == nm::reply::type::integer) replies.push_back(std::to_string(e.integer));
                else replies.emplace_back("ERR");
            }
            ++counters_.blocks_applied;
            op.output = model::exec_returned(std::move(replies));
        } else {
            problem(fmt::format("EXEC: unexpected reply '{}'", r->text));
            return std::nullopt;
        }
        const auto called = op.call_time;
        history_.push_back(std::move(op));
        return called;
    }

    /// A read answered: the session events, and the history if this connection is checked.
    void record_read(history_op op, model::input in, std::vector<std::optional<std::string>> values) {
        ++counters_.reads;
        for (std::size_t i = 0; i < in.keys.size(); ++i)
            events_.push_back({session_, true, in.keys[i], values[i], {}});
        if (!checked_) return;
        op.return_time = now_us();
        op.input = std::move(in);
        op.output = model::read_returned(std::move(values));
        history_.push_back(std::move(op));
    }

    void problem(std::string text) {
        problems_.push_back(fmt::format("client {}: {}", id_, text));
        connection_.close();
    }

    /// Connects to a random replica in this client's read mode (a few tries).
    bool connect() {
        const auto& ports = context_.ports;
        for (std::size_t attempt = 0; attempt < ports.size(); ++attempt) {
            const std::uint16_t p = ports[rng_() % ports.size()];
            if (!connection_.connect(p, 500ms)) continue;
            const auto r = connection_.call(
                {"READMODE", linearizable_ ? "linearizable" : "local"}, 1s);
            if (!r || r->kind != nm::reply::type::simple) {
                connection_.close();
                continue;
            }
            ++session_;
            ++counters_.connections;
            return true;
        }
        return false;
    }

    std::vector<history_op>& history() { return history_; }
    std::vector<nm::write_record>& writes() { return writes_; }
    std::vector<nm::session_event>& events() { return events_; }
    std::vector<std::string>& problems() { return problems_; }
    const client_counters& counters() const { return counters_; }

private:
    std::uint64_t id_;
    bool linearizable_;
    bool checked_;
    std::mt19937_64 rng_;
    const workload_keys& keys_;
    client_context& context_;
    nm::resp_client connection_;
    std::uint64_t session_ = 0;
    std::uint64_t sequence_ = 0;
    std::map<std::string, std::string> last_seen_;
    /// Per collection: its size as this client last learned it, and a set's members.
    std::map<std::string, std::size_t> seen_sizes_;
    std::map<std::string, std::vector<std::string>> seen_members_;
    std::vector<history_op> history_;
    std::vector<nm::write_record> writes_;
    std::vector<nm::session_event> events_;
    std::vector<std::string> problems_;
    client_counters counters_;
};

// --- the nemesis -----------------------------------------------------------------------------

struct nemesis_counters {
    std::uint64_t kills = 0, leader_kills = 0, pauses = 0, cuts = 0;
    std::uint64_t transfers = 0, transfers_done = 0;  ///< ZTRANSFER asked, answered +OK
};

/// One fault at a time until `until`: kill -9 and restart a minority, pause one, cut one,
/// or move the leadership.
/// With `followers_cut_only` (the negative control) every fault is a cut of a follower.
nemesis_counters run_nemesis(cluster& c, nm::peer_proxy& proxy, std::uint64_t seed,
                             clock_type::time_point until, bool followers_cut_only,
                             const std::atomic<bool>& stop) {
    nemesis_counters n;
    std::mt19937_64 rng{seed};
    const auto ms = [&rng](int lo, int hi) {
        return std::chrono::milliseconds(lo + static_cast<int>(rng() % (hi - lo + 1)));
    };
    const std::uint32_t size = static_cast<std::uint32_t>(c.replicas().size());
    const std::uint32_t minority = (size - 1) / 2;
    if (minority == 0) return n;
    /// A victim: the leader half of the time (when there is one), else any replica.
    const auto pick = [&](const std::vector<std::uint32_t>& taken) {
        std::uint32_t v = 0;
        if (rng() % 2 == 0) v = find_leader(c);
        while (v == 0 || std::find(taken.begin(), taken.end(), v) != taken.end())
            v = 1 + static_cast<std::uint32_t>(rng() % size);
        return v;
    };
    while (!stop && clock_type::now() < until) {
        nap(ms(300, 1200), stop);
        const std::uint32_t leader = find_leader(c);
        /// A fault on `v` that lasts a while and is then undone.
        const auto transient = [&](std::uint32_t v, std::string_view fault, std::string_view undo,
                                   auto&& inflict, auto&& repair) {
            inflict(v);
            say("nemesis: {} replica {}{}", fault, v, v == leader ? " (the leader)" : "");
            nap(ms(500, 3000), stop);
            repair(v);
            say("nemesis: {} replica {}", undo, v);
        };
        const auto cut = [&](std::uint32_t v) {
            ++n.cuts;
            transient(v, "cut off", "heal", [&](std::uint32_t x) { proxy.cut(x); },
                      [&](std::uint32_t x) { proxy.heal(x); });
        };
        if (followers_cut_only) {
            std::uint32_t v = 1 + static_cast<std::uint32_t>(rng() % size);
            if (v == leader) v = 1 + v % size;
            cut(v);
            continue;
        }
        switch (rng() % 4) {
            case 0: {
                std::vector<std::uint32_t> victims;
                const std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % minority);
                while (victims.size() < count) victims.push_back(pick(victims));
                for (const std::uint32_t v : victims) {
                    c.kill(v);
                    ++n.kills;
                    if (v == leader) ++n.leader_kills;
                    say("nemesis: kill -9 replica {}{}", v, v == leader ? " (the leader)" : "");
                }
                nap(ms(300, 2500), stop);
                for (const std::uint32_t v : victims) {
                    c.start(v);
                    say("nemesis: restart replica {} from its data directory", v);
                }
                break;
            }
            case 1:
                ++n.pauses;
                transient(pick({}), "SIGSTOP", "SIGCONT", [&](std::uint32_t x) { c.pause(x); },
                          [&](std::uint32_t x) { c.resume(x); });
                break;
            case 2: cut(pick({})); break;
            default: {
                if (leader == 0) break;
                ++n.transfers;
                std::string outcome = "no answer";
                nm::resp_client admin;
                const auto& r = c.replicas()[leader - 1];
                if (admin.connect(r.client_port, 300ms)) {
                    if (const auto answer = admin.call({"ZTRANSFER", "ANY"}, 5s))
                        outcome = answer->is_error() ? "-" + answer->text : answer->text;
                }
                if (outcome == "OK") ++n.transfers_done;
                say("nemesis: ZTRANSFER ANY at replica {} (the leader): {}", leader, outcome);
                break;
            }
        }
    }
    return n;
}

// --- after the run ---------------------------------------------------------------------------

/// Waits until every replica reports the same digest at the same zxid; that zxid, or
/// nullopt after `limit`.
std::optional<std::map<std::string, std::string>> converge(cluster& c,
                                                           std::chrono::seconds limit) {
    const auto deadline = clock_type::now() + limit;
    while (clock_type::now() < deadline) {
        std::optional<std::map<std::string, std::string>> first;
        bool equal = true;
        for (auto& r : c.replicas()) {
            auto d = info(r.client_port, "DIGEST");
            if (d.empty()) {
                equal = false;
                break;
            }
            if (!first) first = d;
            else if (d["digest"] != (*first)["digest"] ||
                     d["digest_applied_raw"] != (*first)["digest_applied_raw"])
                equal = false;
        }
        if (equal && first) return first;
        std::this_thread::sleep_for(100ms);
    }
    return std::nullopt;
}

/// Every record of replica `r`'s log; nullopt (with `why`) if it does not open or read.
struct log_contents {
    std::vector<zab::log_record> records;
    std::optional<zab::log_snapshot> snapshot;
};

std::optional<log_contents> read_log(const replica& r, std::uint64_t cluster_id,
                                     std::string& why) {
    zab::file_log_options fo;
    fo.directory = r.data;
    fo.cluster_id = cluster_id;
    fo.replica_id = r.id;
    fo.create_if_missing = false;
    // As kv_server opens it: one record holds its largest write.
    fo.max_record_bytes = static_cast<std::uint32_t>((std::size_t{16} << 20) + 4096);
    fo.group_commit_window_bytes = 2 * fo.max_record_bytes;
    auto opened = zab::file_log::open(fo, &why);
    if (!opened) return std::nullopt;
    log_contents out;
    zab::zxid after{};
    if (auto s = opened.value().snapshot()) {
        after = s->last_included;
        out.snapshot = std::move(s);
    }
    for (;;) {
        auto batch = opened.value().read(after, 4096);
        if (!batch) {
            why = batch.error().message();
            return std::nullopt;
        }
        if (batch.value().empty()) break;
        after = batch.value().back().id;
        for (auto& record : batch.value()) out.records.push_back(std::move(record));
    }
    return out;
}

/// Sends the tagged SET `args` to the replicas in turn until one answers +OK (a retry of a
/// tagged write is applied once); false after 30 s.
bool write_until_ok(const std::vector<std::uint16_t>& ports, const std::vector<std::string>& args) {
    nm::resp_client conn;
    const auto deadline = clock_type::now() + 30s;
    for (std::size_t attempt = 0; clock_type::now() < deadline; ++attempt) {
        if (!conn.connected() && !conn.connect(ports[attempt % ports.size()], 500ms)) continue;
        const auto r = conn.call(args, 2s);
        if (r && r->kind == nm::reply::type::simple) return true;
        conn.close();  // the next replica
        std::this_thread::sleep_for(50ms);
    }
    return false;
}

std::string last_lines(const std::string& text, std::size_t n) {
    std::size_t at = text.size();
    if (at > 0 && text.back() == '\n') --at;
    for (std::size_t found = 0; at > 0 && found < n; --at)
        if (text[at - 1] == '\n' && ++found == n) break;
    return text.substr(at);
}

void print_log_tails(cluster& c) {
    for (const auto& r : c.replicas()) {
        std::ifstream in{r.log_path};
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        fmt::print("--- replica {} log (last 15 of {} lines) ---\n", r.id, lines.size());
        for (std::size_t i = lines.size() > 15 ? lines.size() - 15 : 0; i < lines.size(); ++i)
            fmt::print("{}\n", lines[i]);
    }
}

int run(options o) {
    constexpr std::uint64_t cluster_id = 27510;  // kv_server's default
    bool made_work = false;
    if (o.work.empty()) {
        std::string pattern = (std::filesystem::temp_directory_path() / "zab-nemesis.XXXXXX");
        if (::mkdtemp(pattern.data()) == nullptr) {
            fmt::print(stderr, "kv_nemesis: cannot create a temporary directory\n");
            return 2;
        }
        o.work = pattern;
        made_work = true;
    }
    say("work directory {}; {} replicas, {} clients, {} keys, {} s, seed {}", o.work, o.replicas,
        o.clients, o.keys, o.seconds, o.seed);

    boost::asio::io_context io;
    nm::peer_proxy proxy{io};
    cluster c{o, proxy};
    std::thread proxy_thread{[&io] { io.run(); }};
    auto work_guard = boost::asio::make_work_guard(io);
    for (auto& r : c.replicas()) c.start(r.id);

    std::vector<std::string> problems;
    const auto finish = [&](int status) {
        c.kill_all();
        work_guard.reset();
        io.stop();
        proxy_thread.join();
        if (status != 0) print_log_tails(c);
        if (made_work && !o.keep && status == 0) std::filesystem::remove_all(o.work);
        else say("kept {}", o.work);
        return status;
    };

    client_context context;
    for (const auto& r : c.replicas()) context.ports.push_back(r.client_port);
    workload_keys keys;
    for (std::uint32_t k = 0; k < o.keys; ++k) keys.plain.push_back(fmt::format("k{}", k));

    // Operations outside the clients: the initial values and the final reads.
    std::vector<history_op> history;

    // Initial values, so that every CAS has an expected value to name.
    const auto setup_deadline = clock_type::now() + 30s;
    while (find_leader(c) == 0) {
        if (clock_type::now() > setup_deadline) {
            fmt::print("FAILED: no leader within 30 s of the start\n");
            return finish(1);
        }
        std::this_thread::sleep_for(50ms);
    }
    say("replica {} leads", find_leader(c));
    for (std::size_t i = 0; i < keys.plain.size() + 2; ++i) {
        // "init-<key>" by a dedicated client: CAS expects it before anything else was seen.
        // The block keys t0 and t1 start equal, as every block leaves them.
        const bool plain = i < keys.plain.size();
        const std::string& k = plain ? keys.plain[i] : keys.block[i - keys.plain.size()];
        const std::string value = plain ? "init-" + k : std::string{"init-t"};
        history_op op;
        op.client = 900;
        op.call_time = now_us();
        op.input = model::put(plain ? k : keys.block_group, k, value);
        if (!write_until_ok(context.ports,
                            {"TAGGED", "900", std::to_string(i + 1), "SET", k, value})) {
            fmt::print("FAILED: could not write the initial value of {}\n", k);
            return finish(1);
        }
        op.return_time = now_us();
        op.output = model::write_returned();
        history.push_back(std::move(op));
    }

    // The run.
    std::vector<std::unique_ptr<client>> clients;
    for (std::uint32_t i = 0; i < o.clients; ++i)
        clients.push_back(std::make_unique<client>(1000 + i, !o.negative_control && i % 2 == 0,
                                                   o.negative_control || i % 2 == 0,
                                                   o.seed * 7919 + i, keys, context));
    std::vector<std::thread> threads;
    for (auto& cl : clients) threads.emplace_back([&cl] { cl->run(); });
    const auto until = clock_type::now() +
                       std::chrono::milliseconds(static_cast<std::int64_t>(o.seconds * 1000));
    std::atomic<bool> nemesis_stop{false};
    const nemesis_counters faults =
        run_nemesis(c, proxy, o.seed, until, o.negative_control, nemesis_stop);
    context.stop = true;
    for (auto& t : threads) t.join();
    say("clients stopped; every fault healed");

    // Convergence: one more write, then equal digests everywhere.
    if (!write_until_ok(context.ports, {"TAGGED", "901", "1", "SET", "fence", "done"}))
        problems.push_back("the final write never succeeded after healing");
    const auto digest = converge(c, 60s);
    if (!digest) {
        problems.push_back("the replicas did not converge to one digest within 60 s of healing");
    } else {
        say("replicas converged: digest {} at {}, {} keys", digest->at("digest"),
            digest->at("digest_applied"), digest->at("keys"));
    }

    // Final linearizable reads of every key on every replica.
    for (auto& r : c.replicas()) {
        nm::resp_client conn;
        if (!conn.connect(r.client_port, 1s) ||
            !conn.call({"READMODE", "linearizable"}, 2s)) {
            problems.push_back(fmt::format("replica {} does not answer after healing", r.id));
            continue;
        }
        std::vector<model::input> reads;
        for (const auto& k : keys.plain) reads.push_back(model::get(k, k));
        reads.push_back(model::mget(keys.block_group, keys.block));
        for (const auto& k : keys.expiring) reads.push_back(model::get(k, k));
        for (auto& in : reads) {
            history_op op;
            op.client = 950 + r.id;
            op.call_time = now_us();
            std::vector<std::string> args{in.what == model::kind::get ? "GET" : "MGET"};
            args.insert(args.end(), in.keys.begin(), in.keys.end());
            const auto reply = conn.call(args, 5s);
            std::vector<nm::reply> elements;
            if (reply && reply->kind == nm::reply::type::array) elements = reply->elements;
            else if (reply) elements.push_back(*reply);
            std::vector<std::optional<std::string>> values;
            for (const auto& e : elements) {
                if (e.kind == nm::reply::type::bulk) values.emplace_back(e.text);
                else if (e.kind == nm::reply::type::nil) values.emplace_back();
            }
            if (values.size() != in.keys.size() || values.size() != elements.size()) {
                problems.push_back(fmt::format("replica {}: the final read of {} failed{}", r.id,
                                               fmt::join(in.keys, " "),
                                               reply ? ": " + reply->text : ""));
                continue;
            }
            op.return_time = now_us();
            op.input = std::move(in);
            op.output = model::read_returned(std::move(values));
            history.push_back(std::move(op));
        }
        // And every collection, whole.
        std::vector<std::pair<model::input, std::vector<std::string>>> listings;
        for (const auto& k : keys.lists)
            listings.emplace_back(model::lrange(k),
                                  std::vector<std::string>{"LRANGE", k, "0", "-1"});
        for (const auto& k : keys.sets)
            listings.emplace_back(model::smembers(k), std::vector<std::string>{"SMEMBERS", k});
        for (auto& [in, args] : listings) {
            history_op op;
            op.client = 950 + r.id;
            op.call_time = now_us();
            const auto reply = conn.call(args, 5s);
            std::vector<std::string> elements;
            bool ok = reply && reply->kind == nm::reply::type::array;
            for (const auto& e : ok ? reply->elements : std::vector<nm::reply>{}) {
                ok = ok && e.kind == nm::reply::type::bulk;
                elements.push_back(e.text);
            }
            if (!ok) {
                problems.push_back(fmt::format("replica {}: the final {} {} failed{}", r.id,
                                               args[0], args[1], reply ? ": " + reply->text : ""));
                continue;
            }
            op.return_time = now_us();
            op.output = in.what == model::kind::lrange ? model::elements_returned(elements)
                                                       : model::members_returned(elements);
            op.input = std::move(in);
            history.push_back(std::move(op));
        }
    }

    // Graceful stop, then the logs.
    for (auto& r : c.replicas()) {
        const int status = c.terminate(r.id);
        if (status != 0)
            problems.push_back(fmt::format("replica {} exited with {} on SIGTERM", r.id, status));
    }
    std::map<std::uint32_t, log_contents> logs;
    for (auto& r : c.replicas()) {
        std::string why;
        auto l = read_log(r, cluster_id, why);
        if (!l) problems.push_back(fmt::format("replica {}: cannot read its log: {}", r.id, why));
        else logs.emplace(r.id, std::move(*l));
    }
    // The reference: a whole log if some replica kept one (the longest), else (compaction)
    // the log reaching back furthest, replayed from its snapshot.
    const log_contents* reference = nullptr;
    std::uint32_t reference_id = 0;
    const auto start_of = [](const log_contents& l) {
        return l.snapshot ? l.snapshot->last_included : zab::zxid{};
    };
    for (const auto& [id, l] : logs) {
        if (!reference || start_of(l) < start_of(*reference) ||
            (start_of(l) == start_of(*reference) &&
             l.records.size() > reference->records.size())) {
            reference = &l;
            reference_id = id;
        }
    }
    const bool whole_log = reference != nullptr && !reference->snapshot;
    nm::replay replayed;
    if (reference) {
        // Every log agrees with the reference where both hold a record. Past the zxid the
        // replicas converged at, a log may run on beyond the reference's end: the replicas
        // stop one at a time, and the leader may propose a TICK after the reference's
        // replica stopped.
        std::map<zab::zxid, const zab::log_record*> by_zxid;
        for (const auto& rec : reference->records) by_zxid.emplace(rec.id, &rec);
        const zab::zxid reference_end =
            reference->records.empty() ? start_of(*reference) : reference->records.back().id;
        const zab::zxid converged_at =
            digest ? zab::zxid::from_value(std::stoull(digest->at("digest_applied_raw"))) : zab::zxid{};
        for (const auto& [id, l] : logs) {
            for (const auto& rec : l.records) {
                const auto it = by_zxid.find(rec.id);
                if (it == by_zxid.end() && digest && rec.id > reference_end && rec.id > converged_at)
                    break;  // a tail the reference never received (checked no further)
                if (it == by_zxid.end() ||
                    zab::as_string_view(it->second->txn.view()) !=
                        zab::as_string_view(rec.txn.view())) {
                    problems.push_back(fmt::format(
                        "replica {}'s log holds {} {} replica {}'s", id, rec.id,
                        it == by_zxid.end() ? "which is not in" : "with other bytes than in",
                        reference_id));
                    break;
                }
            }
        }
        replayed = nm::replay_log(reference->records, reference->snapshot);
        for (auto& p : replayed.problems) problems.push_back(p);
        say("replica {}'s log: {}{} transactions up to {}, {} duplicate retries absorbed",
            reference_id,
            reference->snapshot ? fmt::format("a snapshot at {} and ", start_of(*reference))
                                : std::string{},
            replayed.transactions, replayed.last, replayed.duplicates);
        // Compared at the zxid the replicas converged at: a TICK for a key still due may
        // have committed since.
        if (digest) {
            std::vector<zab::log_record> prefix;
            for (const auto& rec : reference->records)
                if (rec.id.value() <= std::stoull(digest->at("digest_applied_raw")))
                    prefix.push_back(rec);
            const auto at = prefix.size() == reference->records.size()
                                ? replayed
                                : nm::replay_log(prefix, reference->snapshot);
            if (fmt::format("{:08x}", at.digest) != digest->at("digest") ||
                std::to_string(at.last.value()) != digest->at("digest_applied_raw"))
                problems.push_back(fmt::format(
                    "the log replayed gives digest {:08x} at {}, the replicas {} at {}",
                    at.digest, at.last, digest->at("digest"), digest->at("digest_applied")));
        }
    }

    // The histories.
    std::vector<nm::write_record> writes;
    std::vector<std::vector<nm::session_event>> sessions;
    client_counters total;
    for (auto& cl : clients) {
        for (auto& op : cl->history()) history.push_back(std::move(op));
        for (auto& w : cl->writes()) writes.push_back(std::move(w));
        sessions.push_back(std::move(cl->events()));
        for (auto& p : cl->problems()) problems.push_back(p);
        const auto& k = cl->counters();
        total.reads += k.reads;
        total.reads_failed += k.reads_failed;
        total.writes_acknowledged += k.writes_acknowledged;
        total.writes_refused += k.writes_refused;
        total.writes_unknown += k.writes_unknown;
        total.retries += k.retries;
        total.connections += k.connections;
        total.expiring_writes += k.expiring_writes;
        total.expiring_nil_reads += k.expiring_nil_reads;
        total.nx_set += k.nx_set;
        total.nx_not_set += k.nx_not_set;
        total.expiring_cas += k.expiring_cas;
        total.expiring_cas_applied += k.expiring_cas_applied;
        total.blocks_applied += k.blocks_applied;
        total.blocks_aborted += k.blocks_aborted;
        total.blocks_refused += k.blocks_refused;
        total.blocks_unknown += k.blocks_unknown;
        total.collection_writes += k.collection_writes;
        total.collection_changes += k.collection_changes;
        total.collection_refused += k.collection_refused;
        total.collection_unknown += k.collection_unknown;
        total.collection_reads += k.collection_reads;
    }
    say("faults: {} kills ({} of the leader), {} pauses, {} cuts, {} leadership transfers ({} "
        "handed over); proxy: {} peer connections forwarded, {} refused while cut",
        faults.kills, faults.leader_kills, faults.pauses, faults.cuts, faults.transfers,
        faults.transfers_done, proxy.forwarded(), proxy.refused());
    say("clients: {} reads ({} failed), writes: {} acknowledged, {} refused, {} unknown ({} "
        "with an expiry); {} retries, {} connections",
        total.reads, total.reads_failed, total.writes_acknowledged, total.writes_refused,
        total.writes_unknown, total.expiring_writes, total.retries, total.connections);
    say("MULTI/EXEC blocks: {} applied, {} aborted by WATCH, {} refused, {} unknown",
        total.blocks_applied, total.blocks_aborted, total.blocks_refused, total.blocks_unknown);
    say("collections (lists {}, sets {}): {} writes acknowledged ({} changed one: an element "
        "pushed or popped, a member added or removed), {} refused, {} unknown; {} reads",
        fmt::join(keys.lists, " "), fmt::join(keys.sets, " "), total.collection_writes,
        total.collection_changes, total.collection_refused, total.collection_unknown,
        total.collection_reads);
    say("conditional writes on expiring keys: SET NX PX {} set, {} not set; WATCHed CAS with "
        "PX {} executed, {} applied or unknown",
        total.nx_set, total.nx_not_set, total.expiring_cas, total.expiring_cas_applied);
    if (whole_log) {
        nm::check_writes(writes, replayed, problems);
        nm::check_sessions(sessions, replayed, problems);
    } else if (reference) {
        say("every replica's log starts at a snapshot (a compaction, or a sync by SNAP: a "
            "leader sends one to a learner behind the history it holds in memory, or diverged "
            "in another epoch, §11.7), the first at {}: the "
            "writes' and the sessions' checks against the committed log are skipped "
            "(linearizability and the digests still run)",
            reference->snapshot->last_included);
    }
    if (reference) {
        const auto settled =
            nm::settle_unknown_blocks(history, replayed, reference->snapshot.has_value());
        say("MULTI/EXEC blocks of unknown outcome, settled from the log: {} applied, {} never "
            "applied, {} left unknown (called before the log can tell)",
            settled.applied, settled.not_applied, settled.left);
    }
    const std::size_t moot = nm::drop_moot_expiries(history);
    say("expiries: {} reads of an expiring key answered nil; {} values overwritten before "
        "their TTL ran out (no effect possible), {} expiries checked",
        total.expiring_nil_reads, moot, std::count_if(history.begin(), history.end(), [](const history_op& op) {
            return op.input.what == model::kind::expire;
        }));
    zab::testing::linearizability_options lo;
    lo.max_steps = 500'000'000;
    const auto started = clock_type::now();
    auto report = zab::testing::check_linearizability(history, lo);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() -
                                                                            started);
    if (!report) {
        problems.push_back("the history is malformed: " + report.error().message());
    } else {
        say("linearizability: {} ({} ms)", report.value().summary(), took.count());
        if (o.negative_control) {
            if (report.value().verdict != zab::testing::linearizability_verdict::not_linearizable)
                problems.push_back("negative control: local reads from cut-off followers were "
                                   "checked as linearizable and no violation was found");
            else  // the explanation's last lines name the stale read
                say("negative control: the stale local reads were caught:\n{}",
                    last_lines(report.value().explanation, 3));
        } else if (!report.value().ok()) {
            problems.push_back(report.value().explanation);
        }
    }

    if (!problems.empty()) {
        fmt::print("FAILED: {} problems\n", problems.size());
        for (std::size_t i = 0; i < problems.size() && i < 20; ++i)
            fmt::print("  {}\n", problems[i]);
        return finish(1);
    }
    say("PASSED: converged, logs agree with each other and with the digest, {}{}",
        whole_log ? "acknowledged writes present with their outcomes, no refused write "
                    "applied, local reads per-connection consistent, "
                  : "",
        o.negative_control ? "stale reads caught" : "linearizable");
    return finish(0);
}

}  // namespace

int main(int argc, char** argv) {
    const auto parsed = parse_args(argc, argv);
    if (!parsed) {
        fmt::print(stderr, "{}", usage);
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return run(*parsed);
    } catch (const std::exception& e) {
        fmt::print(stderr, "kv_nemesis: fatal: {}\n", e.what());
        return 2;
    }
}
