// protocol_ceiling_bench — how fast the protocol core alone can go.
//
// N real `zab::peer` objects (3 and 5 voters, Fast Leader Election, default policies) in one
// process on one thread, with nothing else in the way:
//   - an in-memory, no-delay transport: a frame sent is queued on one FIFO and the driver
//     loop hands it to the receiver's `on_receive` later, never from inside `send`
//     (docs/design.md rule 2);
//   - zab::memory_log, whose durability is instant: the driver flushes it right after each
//     step and delivers what became durable (`on_log_durable` / `on_epochs_durable`) as
//     steps of their own;
//   - a state machine that counts the transactions and bytes it applies.
// Ticks are virtual: the peers are ticked only until a leader is established and every
// follower serves; during the measurement nothing ticks (no heartbeats, no timeouts).
//
// Each configuration submits a fixed number of 100-byte writes through the client path
// (`submit`, then `ready().completions`) at the leader — or at a follower, which forwards them —
// keeping W of them outstanding, and reports, on the wall clock (steady_clock):
//   commits/s        completed writes / time from the first submit until the cluster is
//                    quiet again (every peer has received, logged and applied everything);
//   p50 / p99 us     submit → completion latency;
//   bytes/prop       frame bytes sent by all peers / committed proposals;
//   frames/prop      frames sent by all peers / committed proposals;
//   cpu %            process CPU time / wall time of the run: well below 100 means the
//                    shared machine took the core away, and commits/s is low for that;
//   allocs/commit    heap allocations (operator new, counted by this program) during the
//                    run / committed writes: what the core and this driver allocate per write.
// The writes that may be submitted at once (the window's free room) go in one
// `peer::submit_batch` call, as a driver hands over what arrived in one turn of its loop;
// `--per-write` submits them one `submit` at a time instead (one PROPOSAL each).
// Every run then checks that every peer applied every write (same count, same bytes, same
// last zxid as the leader's last committed one), and exits non-zero if not.
//
//   zab_protocol_ceiling_bench [--commits N] [--repeat R] [--quick] [--peers 3|5] [--window W]
//                              [--per-write]
//
// Defaults: 200,000 commits per run, each row the median of 3 runs (the machine is shared
// and noisy). `--quick` runs 5,000 commits once: it proves the benchmark runs, the numbers
// mean little. `--peers` and `--window` run only the rows with that group size or that W
// (for profiling one case).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/core/config.hpp"
#include "zab/core/options.hpp"
#include "zab/core/peer.hpp"
#include "zab/storage/memory_log.hpp"

// --- counting every allocation of the program ---------------------------------------------

namespace {
std::uint64_t allocations = 0;  // one thread: no atomics needed

// Out of line, so that the compiler, seeing malloc under `new` and free under `delete`
// through inlining, does not take the pair for a mismatch.
[[gnu::noinline]] void* counted_allocate(std::size_t size, std::size_t align) {
    ++allocations;
    void* p = align <= alignof(std::max_align_t)
                  ? std::malloc(size == 0 ? 1 : size)
                  : std::aligned_alloc(align, (size + align - 1) / align * align);
    if (p == nullptr) throw std::bad_alloc{};
    return p;
}
[[gnu::noinline]] void counted_release(void* p) noexcept { std::free(p); }
}  // namespace

void* operator new(std::size_t size) { return counted_allocate(size, 0); }
void* operator new[](std::size_t size) { return counted_allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) {
    return counted_allocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
    return counted_allocate(size, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { counted_release(p); }
void operator delete[](void* p) noexcept { counted_release(p); }
void operator delete(void* p, std::size_t) noexcept { counted_release(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_release(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_release(p); }

namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::size_t transaction_bytes = 100;

[[noreturn]] void fail(std::string_view why) {
    fmt::print(stderr, "protocol_ceiling_bench: error: {}\n", why);
    std::exit(1);
}

// --- the in-memory transport ---------------------------------------------------------------

/// What the loop delivers: a frame, or a connection coming up or going down.
struct envelope {
    enum class kind : std::uint8_t { frame, connected, disconnected };
    kind what = kind::frame;
    zab::peer_id from = 0;
    zab::peer_id to = 0;
    zab::connection_id connection = 0;
    zab::shared_bytes frame;
};

/// A FIFO of envelopes on a vector (a std::deque allocates a block every few frames, which
/// is the benchmark's cost, not the core's).
class envelope_fifo {
public:
    void push(envelope e) { items_.push_back(std::move(e)); }
    bool empty() const noexcept { return head_ == items_.size(); }

    envelope pop() {
        envelope e = std::move(items_[head_++]);
        if (head_ == items_.size()) {
            items_.clear();
            head_ = 0;
        } else if (head_ >= compact_after && head_ * 2 >= items_.size()) {
            items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
            head_ = 0;
        }
        return e;
    }

private:
    static constexpr std::size_t compact_after = 1 << 16;
    std::vector<envelope> items_;
    std::size_t head_ = 0;
};

/// Every connection of the group (one per pair of peers, as ZooKeeper keeps) and the one
/// queue their frames and notices travel on. Per-connection FIFO follows from the one FIFO.
class loop_network {
public:
    explicit loop_network(std::size_t peers) : peers_{peers}, current_(peers * peers, 0) {}

    /// Every pair connects; both ends hear of it through the queue.
    void connect_all() {
        for (zab::peer_id a = 1; a <= peers_; ++a)
            for (zab::peer_id b = a + 1; b <= peers_; ++b) connect(a, b);
    }

    void send(zab::peer_id from, zab::peer_id to, zab::connection_id c,
              const zab::shared_bytes& frame) {
        if (current(from, to) != c) {
            ++frames_dropped_;
            return;
        }
        ++frames_sent_;
        bytes_sent_ += frame.size();
        queue_.push({envelope::kind::frame, from, to, c, frame});
    }

    /// Breaks the connection now (both ends hear of it); a new one forms at the next tick,
    /// as a reconnect takes time.
    void close(zab::peer_id from, zab::peer_id to, zab::connection_id c) {
        if (current(from, to) != c) return;
        ++closes_;
        set_current(from, to, 0);
        queue_.push({envelope::kind::disconnected, to, from, c, {}});
        queue_.push({envelope::kind::disconnected, from, to, c, {}});
        reconnects_.emplace_back(from, to);
    }

    /// Called on a tick: the pairs closed since form new connections.
    void reconnect() {
        for (const auto& [a, b] : std::exchange(reconnects_, {}))
            if (current(a, b) == 0) connect(a, b);
    }

    bool idle() const noexcept { return queue_.empty(); }
    envelope next() { return queue_.pop(); }
    /// A frame still in flight on a connection that broke is lost with it.
    bool deliverable(const envelope& e) const {
        return e.what != envelope::kind::frame || current(e.from, e.to) == e.connection;
    }

    std::uint64_t frames_sent() const noexcept { return frames_sent_; }
    std::uint64_t bytes_sent() const noexcept { return bytes_sent_; }
    std::uint64_t frames_dropped() const noexcept { return frames_dropped_; }
    std::uint64_t closes() const noexcept { return closes_; }

private:
    void connect(zab::peer_id a, zab::peer_id b) {
        const zab::connection_id c = ++last_connection_;
        set_current(a, b, c);
        queue_.push({envelope::kind::connected, b, a, c, {}});
        queue_.push({envelope::kind::connected, a, b, c, {}});
    }
    zab::connection_id current(zab::peer_id a, zab::peer_id b) const {
        return current_[(a - 1) * peers_ + (b - 1)];
    }
    void set_current(zab::peer_id a, zab::peer_id b, zab::connection_id c) {
        current_[(a - 1) * peers_ + (b - 1)] = c;
        current_[(b - 1) * peers_ + (a - 1)] = c;
    }

    std::size_t peers_;
    std::vector<zab::connection_id> current_;  ///< peers × peers, 0: no connection
    std::vector<std::pair<zab::peer_id, zab::peer_id>> reconnects_;
    envelope_fifo queue_;
    zab::connection_id last_connection_ = 0;
    std::uint64_t frames_sent_ = 0;
    std::uint64_t bytes_sent_ = 0;
    std::uint64_t frames_dropped_ = 0;
    std::uint64_t closes_ = 0;
};

/// One peer's end of the loop network: models `zab::transport`.
class loop_transport {
public:
    loop_transport(loop_network& network, zab::peer_id self) : network_{&network}, self_{self} {}
    void send(zab::peer_id to, zab::connection_id c, const zab::shared_bytes& frame) {
        network_->send(self_, to, c, frame);
    }
    void close(zab::peer_id to, zab::connection_id c) { network_->close(self_, to, c); }

private:
    loop_network* network_;
    zab::peer_id self_;
};
static_assert(zab::transport<loop_transport>);

// --- the counting state machine --------------------------------------------------------------

class counting_machine {
public:
    void apply(zab::zxid z, zab::byte_view txn) {
        ++applied_;
        bytes_ += txn.size();
        last_ = z;
    }
    zab::zxid last_applied() const { return last_; }
    zab::shared_bytes snapshot() const {
        std::vector<std::byte> state(2 * sizeof(std::uint64_t));
        std::memcpy(state.data(), &applied_, sizeof applied_);
        std::memcpy(state.data() + sizeof applied_, &bytes_, sizeof bytes_);
        return zab::shared_bytes{std::move(state)};
    }
    zab::result<void> restore(zab::zxid z, zab::byte_view state) {
        if (state.size() != 2 * sizeof(std::uint64_t)) return make_error_code(zab::errc::corrupt);
        std::memcpy(&applied_, state.data(), sizeof applied_);
        std::memcpy(&bytes_, state.data() + sizeof applied_, sizeof bytes_);
        last_ = z;
        return zab::success();
    }
    std::uint64_t applied() const noexcept { return applied_; }
    std::uint64_t bytes() const noexcept { return bytes_; }

private:
    std::uint64_t applied_ = 0;
    std::uint64_t bytes_ = 0;
    zab::zxid last_;
};
static_assert(zab::state_machine<counting_machine>);

// --- the cluster and its driver loop ---------------------------------------------------------

using peer_type = zab::peer<loop_transport, zab::memory_log, counting_machine>;

struct node {
    node(loop_network& network, zab::peer_id id) : transport{network, id} {}
    loop_transport transport;
    zab::memory_log log;
    counting_machine machine;
    std::unique_ptr<peer_type> peer;
};

/// A client completion the driver took from peer `at`.
struct taken_completion {
    zab::peer_id at;
    zab::client_completion completion;
};

class cluster {
public:
    cluster(std::size_t voters, const zab::options& options)
        : network_{voters} {
        auto config = zab::configuration::numbered(voters);
        if (!config) fail("bad configuration");
        for (zab::peer_id id = 1; id <= voters; ++id) {
            nodes_.push_back(std::make_unique<node>(network_, id));
            node& n = *nodes_.back();
            auto created = peer_type::create(id, config.value(), options, n.transport, n.log,
                                             n.machine);
            if (!created) fail(fmt::format("peer {} failed to start: {}", id,
                                           created.error().message()));
            n.peer = std::move(created).value();
        }
    }

    /// Starts every peer and ticks them (virtual time) until a leader is established and
    /// every follower serves. Returns the leader's id.
    zab::peer_id establish(std::uint64_t max_ticks = 10'000) {
        for (auto& n : nodes_) {
            n->peer->start();
            settle(*n);
        }
        network_.connect_all();
        for (std::uint64_t tick = 0; tick < max_ticks; ++tick) {
            run_until_quiet();
            if (auto leader = established_leader()) return *leader;
            network_.reconnect();
            for (auto& n : nodes_) {
                n->peer->tick();
                settle(*n);
            }
        }
        fail(fmt::format("no established leader after {} ticks", max_ticks));
    }

    /// Delivers one queued event. False when the network is quiet.
    bool deliver_one() {
        if (network_.idle()) return false;
        const envelope e = network_.next();
        if (!network_.deliverable(e)) return true;
        node& n = at(e.to);
        switch (e.what) {
            case envelope::kind::frame: n.peer->on_receive(e.from, e.connection, e.frame); break;
            case envelope::kind::connected: n.peer->on_connected(e.from, e.connection); break;
            case envelope::kind::disconnected:
                n.peer->on_disconnected(e.from, e.connection);
                break;
        }
        settle(n);
        return true;
    }

    void run_until_quiet() {
        while (deliver_one()) {
        }
    }

    /// A client write at `id`; its completion shows up in `completions()`.
    zab::request_id submit(zab::peer_id id, zab::byte_view txn) {
        node& n = at(id);
        const zab::request_id request = n.peer->submit(txn);
        settle(n);
        return request;
    }

    /// Client writes at `id` in one call (consecutive request ids, the first returned).
    zab::request_id submit_batch(zab::peer_id id, std::span<const zab::byte_view> txns) {
        node& n = at(id);
        const zab::request_id request = n.peer->submit_batch(txns);
        settle(n);
        return request;
    }

    /// The client completions taken since the last `clear_completions()`.
    const std::vector<taken_completion>& completions() const noexcept { return completions_; }
    void clear_completions() { completions_.clear(); }

    node& at(zab::peer_id id) { return *nodes_[id - 1]; }
    const std::vector<std::unique_ptr<node>>& nodes() const noexcept { return nodes_; }
    const loop_network& network() const noexcept { return network_; }

private:
    /// After a step: the storage completions it asked for, each a step of its own, until
    /// none is owed; then the client completions.
    void settle(node& n) {
        for (;;) {
            zab::peer_ready ready = n.peer->ready();
            for (auto& c : ready.completions) completions_.push_back({n.peer->id(), std::move(c)});
            if (ready.snapshot) {  // serialized in place: this driver has one thread
                n.peer->on_snapshot_ready(ready.snapshot->at, ready.snapshot->serialize());
                continue;
            }
            if (!ready.flush_due) break;
            auto job = n.log.begin_flush();
            job.run();
            n.peer->on_flushed(n.log.finish_flush(std::move(job)));
        }
    }

    std::optional<zab::peer_id> established_leader() const {
        std::optional<zab::peer_id> leader;
        for (const auto& n : nodes_) {
            if (!n->peer->established()) return std::nullopt;
            if (n->peer->state() == zab::peer_state::leading) leader = n->peer->id();
        }
        return leader;
    }

    loop_network network_;
    std::vector<std::unique_ptr<node>> nodes_;
    std::vector<taken_completion> completions_;
};

// --- one configuration -----------------------------------------------------------------------

struct configuration_case {
    std::size_t voters = 3;
    bool at_follower = false;
    std::size_t window = 1;  ///< W: writes outstanding at once
    bool per_write = false;  ///< one `submit` per write instead of `submit_batch`
};

struct run_result {
    double commits_per_second = 0;
    double p50_us = 0;
    double p99_us = 0;
    double bytes_per_proposal = 0;
    double frames_per_proposal = 0;
    double cpu_percent = 0;
    double allocations_per_commit = 0;
};

zab::options options_for(std::size_t window) {
    zab::options o;
    const auto w = static_cast<std::uint32_t>(window);
    o.max_pending_requests = std::max(o.max_pending_requests, w);
    o.max_outstanding_proposals = std::max(o.max_outstanding_proposals, w);
    o.max_forwarded_per_learner = std::max(o.max_forwarded_per_learner, w);
    // The ceiling of the protocol alone: no compaction (its default, every 100,000
    // transactions, would leave the logs shorter than `verify` checks them to be).
    o.snapshot_every = 0;
    o.snapshot_every_bytes = 0;
    return o;
}

double percentile_us(std::vector<std::uint64_t>& nanoseconds, double p) {
    const auto k = std::min(nanoseconds.size() - 1,
                            static_cast<std::size_t>(p * static_cast<double>(nanoseconds.size())));
    std::nth_element(nanoseconds.begin(), nanoseconds.begin() + static_cast<std::ptrdiff_t>(k),
                     nanoseconds.end());
    return static_cast<double>(nanoseconds[k]) / 1000.0;
}

/// After a run: every peer received, logged and applied every write, and agrees with the
/// leader on the last committed zxid. Exits the program otherwise.
void verify(cluster& c, zab::peer_id leader, std::uint64_t commits, std::uint64_t closes_before,
            std::uint64_t dropped_before) {
    if (c.at(leader).peer->state() != zab::peer_state::leading)
        fail(fmt::format("peer {} no longer leads", leader));
    const zab::zxid committed = c.at(leader).peer->last_committed();
    for (const auto& n : c.nodes()) {
        const auto& p = *n->peer;
        const auto problem = [&](std::string_view what) {
            fail(fmt::format("peer {} ({}): {}", p.id(), p.state(), what));
        };
        if (!p.established()) problem("no longer established");
        if (n->machine.applied() != commits)
            problem(fmt::format("applied {} transactions, expected {}", n->machine.applied(),
                                commits));
        if (n->machine.bytes() != commits * transaction_bytes)
            problem(fmt::format("applied {} bytes, expected {}", n->machine.bytes(),
                                commits * transaction_bytes));
        if (p.last_committed() != committed || p.last_applied() != committed)
            problem(fmt::format("last committed {} / applied {}, the leader's last committed {}",
                                p.last_committed(), p.last_applied(), committed));
        if (n->log.last_zxid() != committed || n->log.contents().records.size() < commits)
            problem(fmt::format("log ends at {} with {} records", n->log.last_zxid(),
                                n->log.contents().records.size()));
    }
    if (c.network().closes() != closes_before) fail("a connection closed during the run");
    if (c.network().frames_dropped() != dropped_before) fail("frames were dropped during the run");
}

run_result run_once(const configuration_case& k, std::uint64_t commits) {
    const zab::options options = options_for(k.window);
    cluster c{k.voters, options};
    const zab::peer_id leader = c.establish();
    const zab::peer_id origin = k.at_follower ? (leader == 1 ? 2 : 1) : leader;
    c.clear_completions();

    const std::vector<std::byte> payload(transaction_bytes, std::byte{0x5a});
    std::vector<clock_type::time_point> submitted_at(static_cast<std::size_t>(commits));
    std::vector<std::uint64_t> latencies_ns;
    latencies_ns.reserve(static_cast<std::size_t>(commits));
    const std::uint64_t frames_before = c.network().frames_sent();
    const std::uint64_t bytes_before = c.network().bytes_sent();
    const std::uint64_t closes_before = c.network().closes();
    const std::uint64_t dropped_before = c.network().frames_dropped();

    std::uint64_t submitted = 0, completed = 0;
    std::optional<zab::request_id> first_request;
    std::vector<zab::byte_view> batch(k.window, zab::byte_view{payload});
    const std::uint64_t allocations_before = allocations;
    const std::clock_t cpu_start = std::clock();
    const auto start = clock_type::now();
    while (completed < commits) {
        while (submitted - completed < k.window && submitted < commits) {
            const auto now = clock_type::now();
            const auto room = static_cast<std::size_t>(
                k.per_write ? 1 : std::min(k.window - (submitted - completed), commits - submitted));
            const zab::request_id id =
                room == 1 ? c.submit(origin, payload)
                          : c.submit_batch(origin, std::span<const zab::byte_view>{batch}.first(room));
            if (!first_request) first_request = id;
            if (id - *first_request != submitted) fail("request ids are not consecutive");
            for (std::size_t i = 0; i < room; ++i)
                submitted_at[static_cast<std::size_t>(submitted++)] = now;
        }
        if (!c.completions().empty()) {
            const auto now = clock_type::now();
            for (const auto& [at, completion] : c.completions()) {
                if (at != origin) fail(fmt::format("a completion at peer {}", at));
                if (!completion.outcome)
                    fail(fmt::format("write {} failed: {}", completion.id,
                                     completion.outcome.error().message()));
                const auto index = static_cast<std::size_t>(completion.id - *first_request);
                latencies_ns.push_back(static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(now - submitted_at[index])
                        .count()));
                ++completed;
            }
            c.clear_completions();
            continue;
        }
        if (!c.deliver_one()) fail(fmt::format("stalled after {} commits", completed));
    }
    c.run_until_quiet();  // every peer has every COMMIT: the last ones count too
    const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    const double cpu_seconds =
        static_cast<double>(std::clock() - cpu_start) / static_cast<double>(CLOCKS_PER_SEC);
    const std::uint64_t allocated = allocations - allocations_before;

    verify(c, leader, commits, closes_before, dropped_before);
    const auto proposals = static_cast<double>(commits);
    run_result r;
    r.commits_per_second = proposals / seconds;
    r.p50_us = percentile_us(latencies_ns, 0.50);
    r.p99_us = percentile_us(latencies_ns, 0.99);
    r.bytes_per_proposal = static_cast<double>(c.network().bytes_sent() - bytes_before) / proposals;
    r.frames_per_proposal =
        static_cast<double>(c.network().frames_sent() - frames_before) / proposals;
    r.cpu_percent = 100.0 * cpu_seconds / seconds;
    r.allocations_per_commit = static_cast<double>(allocated) / proposals;
    return r;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

/// Runs a configuration `repeat` times; each column is the median of its runs.
run_result run_median(const configuration_case& k, std::uint64_t commits, int repeat) {
    std::vector<double> rate, p50, p99, bytes, frames, cpu, allocs;
    for (int i = 0; i < repeat; ++i) {
        const run_result r = run_once(k, commits);
        rate.push_back(r.commits_per_second);
        p50.push_back(r.p50_us);
        p99.push_back(r.p99_us);
        bytes.push_back(r.bytes_per_proposal);
        frames.push_back(r.frames_per_proposal);
        cpu.push_back(r.cpu_percent);
        allocs.push_back(r.allocations_per_commit);
    }
    return {median(rate),   median(p50), median(p99),   median(bytes),
            median(frames), median(cpu), median(allocs)};
}

struct arguments {
    std::uint64_t commits = 200'000;
    int repeat = 3;
    std::size_t only_peers = 0;   ///< 0: every group size
    std::size_t only_window = 0;  ///< 0: every W
    bool per_write = false;
};

arguments parse(int argc, char** argv) {
    arguments a;
    bool repeat_given = false;
    const auto usage = [&] {
        fmt::print(stderr,
                   "usage: {} [--commits N] [--repeat R] [--quick] [--peers 3|5] [--window W] "
                   "[--per-write]\n",
                   argv[0]);
        std::exit(2);
    };
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--quick") {
            a.commits = 5'000;
            if (!repeat_given) a.repeat = 1;
        } else if (arg == "--commits" && i + 1 < argc) {
            a.commits = std::strtoull(argv[++i], nullptr, 10);
        } else if (arg == "--per-write") {
            a.per_write = true;
        } else if (arg == "--peers" && i + 1 < argc) {
            a.only_peers = std::strtoull(argv[++i], nullptr, 10);
        } else if (arg == "--window" && i + 1 < argc) {
            a.only_window = std::strtoull(argv[++i], nullptr, 10);
        } else if (arg == "--repeat" && i + 1 < argc) {
            a.repeat = std::atoi(argv[++i]);
            repeat_given = true;
        } else {
            usage();
        }
    }
    if (a.commits == 0 || a.repeat <= 0) usage();
    return a;
}

}  // namespace

int main(int argc, char** argv) {
    const arguments args = parse(argc, argv);
    std::vector<configuration_case> cases;
    for (const std::size_t voters : {std::size_t{3}, std::size_t{5}}) {
        for (const std::size_t window : {1, 16, 256, 4096})
            cases.push_back({voters, false, window, args.per_write});
        cases.push_back({voters, true, 256, args.per_write});
    }

    fmt::print("zab protocol ceiling: {}-byte writes, in-memory transport, instant durability, "
               "one thread\n{} commits per run, median of {} run(s), {}\n",
               transaction_bytes, args.commits, args.repeat,
               args.per_write ? "one submit per write" : "the window's free room in one submit_batch");
    fmt::print("{:>5} {:>8} {:>5} {:>12} {:>9} {:>9} {:>11} {:>12} {:>6} {:>13}\n", "peers",
               "origin", "W", "commits/s", "p50 us", "p99 us", "bytes/prop", "frames/prop",
               "cpu %", "allocs/commit");
    for (const auto& k : cases) {
        if (args.only_peers != 0 && k.voters != args.only_peers) continue;
        if (args.only_window != 0 && k.window != args.only_window) continue;
        const run_result r = run_median(k, args.commits, args.repeat);
        fmt::print("{:>5} {:>8} {:>5} {:>12.0f} {:>9.1f} {:>9.1f} {:>11.1f} {:>12.2f} {:>6.0f} {:>13.2f}\n",
                   k.voters, k.at_follower ? "follower" : "leader", k.window,
                   r.commits_per_second, r.p50_us, r.p99_us, r.bytes_per_proposal,
                   r.frames_per_proposal, r.cpu_percent, r.allocations_per_commit);
        std::fflush(stdout);
    }
    return 0;
}
