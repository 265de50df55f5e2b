// zab/testing/explorer_model.hpp — the cluster the explorer (explorer.hpp) model-checks: N real
// zab peers whose every step is an explicit choice.
//
// What it is: the production `zab::peer` with the real (or a test's) policies, each over a
// `sim_log` (the simulator's disk model) and the explorer's network (explorer_network.hpp:
// FIFO channels per direction). Nothing happens by itself: there is no time and no random
// draw. A state is a path of `choice`s from the initial state (every peer started, every pair
// connected), and the same path always gives the same state (docs/design.md rule 11), which
// is what lets the explorer search by replay.
//
// The choices (`enabled()` lists those enabled now, in a fixed order):
//   deliver a b      the head of the channel a → b reaches b (a frame, or a connection notice)
//   durable-log i    i's oldest pending log sync completes (syncs complete in issue order)
//   durable-epochs i i's oldest pending epoch write completes (independently of log syncs)
//   tick i           i's clock jumps to its next deadline (`peer::next_deadline`)
//   crash i          power loss at i: every un-synced write and epoch write is lost
//   crash-keep i     power loss at i: every un-synced write survives (offered only when
//                    something is un-synced; the two extremes of sim_log's crash model)
//   restart i        a crashed i starts again from what its disk recovered
//   write i / sync i / lease-sync i   a client call at i
//   reconfig i       i is asked to add every joiner as a voter (§9)
//   transfer i       i is asked to hand its leadership to the lowest other voter (§6.4)
//   break a b        the connection a-b resets (a new one follows at once)
//   jump i           i's clock steps `jump_ticks` ahead at once (lease mode's clock fault)
// each within the bounds of `explorer_bounds`. One more kind is never offered by `enabled()`:
//   settle           the fair drain (`drain_fairly`: every channel head and every pending
//                    durability operation served in turn, no tick) until nothing is left;
//                    a prefix (`explorer_bounds::prefix`) or a replayed path may take it to
//                    get past a stretch of the protocol without the search paying for it
//                    one choice at a time.
//
// Checks after every choice: the §10 invariant checker fed by protocol_observer (the same
// feed as the simulator's sweeps), the client checker, and "no replica stopped on a storage
// failure" (no storage fault is injected, so one is a bug). `violation()` reports the first.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "zab/core/assert.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/config.hpp"
#include "zab/core/options.hpp"
#include "zab/core/peer.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/testing/client_checker.hpp"
#include "zab/testing/event_queue.hpp"
#include "zab/testing/explorer_network.hpp"
#include "zab/testing/invariant_checker.hpp"
#include "zab/testing/peer_internals.hpp"
#include "zab/testing/protocol_observer.hpp"
#include "zab/testing/random.hpp"
#include "zab/testing/recording_state_machine.hpp"
#include "zab/testing/sim_log.hpp"
#include "zab/testing/trace_hash.hpp"

namespace zab::testing {

/// The model's size and the budget of each kind of choice along one path.
struct explorer_bounds {
    std::size_t voters = 3;
    std::size_t joiners = 0;          ///< replicas outside the initial configuration (§9)
    std::uint32_t crashes = 1;
    std::uint32_t restarts = 1;
    std::uint32_t writes = 2;
    std::uint32_t syncs = 0;
    std::uint32_t lease_syncs = 0;
    std::uint32_t reconfigs = 0;
    std::uint32_t transfers = 0;
    std::uint32_t breaks = 0;
    std::uint32_t ticks = 8;          ///< deadline firings, all peers together
    std::uint32_t clock_jumps = 0;
    std::uint32_t jump_ticks = 3;
    bool crash_keep = true;           ///< offer crash-keep as well as crash
    /// Client calls only once some leader is established (they are refused before: a
    /// branch that only shows `not_leader` again).
    bool calls_after_leader = true;
    /// Start the search from an established group instead of from the first election: the
    /// initial state is where a fair run (every channel and disk served in turn, every clock
    /// advancing together) first has an established leader followed by every voter.
    bool start_established = false;
    /// A path (parse_path's syntax: "write 3; settle; crash 1; restart 1; settle") the model
    /// takes after the initial state (after the warm-up if `start_established`): the search
    /// starts where it leads. Its choices are taken within these bounds like any others (a
    /// crash in it uses up the crash budget), so a path found from there, appended to it,
    /// replays the same without it. A step that is not enabled stops it there:
    /// `explorer_model::prefix_problem` says which (check it before searching).
    std::string prefix;
    zab::options peer;                ///< every replica's options
};

/// Options that make elections and syncs take few ticks: the explorer pays for every tick.
inline zab::options explorer_peer_options() {
    zab::options o;
    o.finalize_wait_ticks = 1;
    o.notification_timeout_min_ticks = 1;
    o.notification_timeout_max_ticks = 4;
    o.sync_limit_ticks = 4;
    o.init_limit_ticks = 8;
    o.transfer_timeout_ticks = 8;
    o.disk_stall_ticks = 1000;  // a disk is "slow" only by the explorer's choice, never stalled
    return o;
}

/// One step of a path.
struct choice {
    enum class kind : std::uint8_t {
        deliver, durable_log, durable_epochs, tick, crash, crash_keep, restart, write, sync,
        lease_sync, reconfig, transfer, break_link, jump,
        settle,  ///< the fair drain until quiescent: never in enabled(), only in a given path
    };
    kind what = kind::deliver;
    peer_id a = 0;
    peer_id b = 0;
    friend bool operator==(const choice&, const choice&) = default;
};

constexpr std::string_view to_string(choice::kind k) noexcept {
    switch (k) {
        case choice::kind::deliver: return "deliver";
        case choice::kind::durable_log: return "durable-log";
        case choice::kind::durable_epochs: return "durable-epochs";
        case choice::kind::tick: return "tick";
        case choice::kind::crash: return "crash";
        case choice::kind::crash_keep: return "crash-keep";
        case choice::kind::restart: return "restart";
        case choice::kind::write: return "write";
        case choice::kind::sync: return "sync";
        case choice::kind::lease_sync: return "lease-sync";
        case choice::kind::reconfig: return "reconfig";
        case choice::kind::transfer: return "transfer";
        case choice::kind::break_link: return "break";
        case choice::kind::jump: return "jump";
        case choice::kind::settle: return "settle";
    }
    return "?";
}

/// "deliver 1 2", "tick 3", "settle": the form `parse_path` reads back (the replay command's).
inline std::string to_string(const choice& c) {
    if (c.what == choice::kind::settle) return std::string{to_string(c.what)};
    if (c.what == choice::kind::deliver || c.what == choice::kind::break_link)
        return fmt::format("{} {} {}", to_string(c.what), c.a, c.b);
    return fmt::format("{} {}", to_string(c.what), c.a);
}

inline std::string to_string(const std::vector<choice>& path) {
    std::string out;
    for (const auto& c : path) {
        if (!out.empty()) out += "; ";
        out += to_string(c);
    }
    return out;
}

/// A replica id in a path's text: decimal digits only (nothing else: false).
inline bool parse_id(std::string_view word, peer_id& out) {
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), out);
    return error == std::errc{} && end == word.data() + word.size();
}

/// Reads "deliver 1 2; tick 3; settle; ..." back; nothing on a malformed entry.
inline std::optional<std::vector<choice>> parse_path(std::string_view text) {
    std::vector<choice> out;
    while (!text.empty()) {
        const auto end = text.find(';');
        std::string_view item = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
        std::vector<std::string_view> words;
        while (!item.empty()) {
            while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
            const auto space = item.find(' ');
            if (!item.empty()) words.push_back(item.substr(0, space));
            item = space == std::string_view::npos ? std::string_view{} : item.substr(space);
        }
        if (words.empty()) continue;
        std::optional<choice::kind> kind;
        for (int k = 0; k <= static_cast<int>(choice::kind::settle); ++k)
            if (to_string(static_cast<choice::kind>(k)) == words[0]) kind = static_cast<choice::kind>(k);
        if (!kind) return std::nullopt;
        const bool pair = *kind == choice::kind::deliver || *kind == choice::kind::break_link;
        const bool bare = *kind == choice::kind::settle;
        if (words.size() != (bare ? 1u : pair ? 3u : 2u)) return std::nullopt;
        choice c{*kind};
        if (!bare && !parse_id(words[1], c.a)) return std::nullopt;
        if (pair && !parse_id(words[2], c.b)) return std::nullopt;
        out.push_back(c);
    }
    return out;
}

/// What one replica did in one choice, for transcripts (explorer_main.cpp prints them).
struct model_trace_line {
    peer_id replica;
    std::string text;   ///< "> from 2: <frame>" inputs, "to 2: <frame>" outputs, "role ..."
};

template <typename Policies = default_policies>
class explorer_model {
public:
    using peer_type = peer<explorer_transport, sim_log, recording_state_machine, Policies>;

    /// One replica: its disk survives crashes; its peer object and state machine do not.
    struct node {
        peer_id id = 0;
        std::unique_ptr<event_queue> disk_events;  // never run: completions are choices
        std::unique_ptr<prng> disk_random;         // draws nothing that matters (fates are 0/1)
        std::unique_ptr<sim_log> log;
        std::unique_ptr<recording_state_machine> machine;
        std::unique_ptr<peer_type> peer;
        std::uint64_t incarnation = 0;
        zab::options options;
    };

    explicit explorer_model(const explorer_bounds& bounds)
        : bounds_{bounds}, network_{bounds.voters + bounds.joiners} {
        auto config = configuration::numbered(bounds.voters);
        ZAB_ASSERT(config.has_value(), "explorer: invalid cluster size");
        config_ = config.value();
        nodes_.resize(bounds.voters + bounds.joiners);
        for (peer_id id = 1; id <= nodes_.size(); ++id) {
            node& n = at(id);
            n.id = id;
            n.options = bounds.peer;
            if (!config_.contains(id)) n.options.non_voter_until_synced = true;
            n.disk_events = std::make_unique<event_queue>();
            n.disk_random = std::make_unique<prng>(id);
            n.log = std::make_unique<sim_log>(*n.disk_events, *n.disk_random, disk_options{});
            n.log->set_completion_handler([this, id](const storage_completion& c) {
                node& m = at(id);
                if (!m.peer) return;
                switch (c.what) {
                    case storage_completion::kind::log_durable: m.peer->on_log_durable(c.op); break;
                    case storage_completion::kind::epochs_durable: m.peer->on_epochs_durable(c.op); break;
                    case storage_completion::kind::failed: m.peer->on_storage_failed(c.error); break;
                }
            });
        }
        network_.add_observer([this](const network_event& e) { on_network(e); });
        observer_ = std::make_unique<protocol_observer<explorer_model>>(*this, checker_);
        for (node& n : nodes_) boot(n);
        // The initial state: every replica started and told of its connection to every other
        // (in id order), so that the search starts where the protocol does.
        for (peer_id to = 1; to <= nodes_.size(); ++to)
            for (peer_id from = 1; from <= nodes_.size(); ++from)
                if (from != to && !network_.channel(from, to).empty() &&
                    network_.channel(from, to).front().what == channel_item::kind::connected)
                    deliver(from, to);
        run_checkers();
        if (bounds.start_established) warm_up();
        take_prefix();
    }

    explorer_model(const explorer_model&) = delete;
    explorer_model& operator=(const explorer_model&) = delete;
    ~explorer_model() { observer_.reset(); }

    // --- the choices ------------------------------------------------------------------------

    /// Every choice enabled now, in a fixed order (deliveries first: they are most of a run).
    std::vector<choice> enabled() const {
        std::vector<choice> out;
        const std::size_t n = nodes_.size();
        for (peer_id to = 1; to <= n; ++to)
            for (peer_id from = 1; from <= n; ++from)
                if (from != to && !network_.channel(from, to).empty())
                    out.push_back({choice::kind::deliver, from, to});
        for (const node& x : nodes_) {
            if (!x.peer) continue;
            if (x.log->pending_syncs() > 0) out.push_back({choice::kind::durable_log, x.id});
            if (x.log->pending_epoch_writes() > 0) out.push_back({choice::kind::durable_epochs, x.id});
        }
        if (used_.ticks < bounds_.ticks)
            for (const node& x : nodes_)
                if (x.peer && !x.peer->failed() && x.peer->next_deadline())
                    out.push_back({choice::kind::tick, x.id});
        const bool leader_known = !bounds_.calls_after_leader || leader_established_;
        for (const node& x : nodes_) {
            if (!x.peer || x.peer->failed()) continue;
            if (leader_known && used_.writes < bounds_.writes) out.push_back({choice::kind::write, x.id});
            if (leader_known && used_.syncs < bounds_.syncs) out.push_back({choice::kind::sync, x.id});
            if (leader_known && used_.lease_syncs < bounds_.lease_syncs)
                out.push_back({choice::kind::lease_sync, x.id});
            if (leader_known && used_.reconfigs < bounds_.reconfigs && config_.contains(x.id))
                out.push_back({choice::kind::reconfig, x.id});
            if (used_.transfers < bounds_.transfers && x.peer->state() == peer_state::leading &&
                x.peer->established())
                out.push_back({choice::kind::transfer, x.id});
            if (used_.clock_jumps < bounds_.clock_jumps) out.push_back({choice::kind::jump, x.id});
        }
        if (used_.crashes < bounds_.crashes)
            for (const node& x : nodes_)
                if (x.peer) {
                    out.push_back({choice::kind::crash, x.id});
                    if (bounds_.crash_keep && has_unsynced(x))
                        out.push_back({choice::kind::crash_keep, x.id});
                }
        if (used_.restarts < bounds_.restarts)
            for (const node& x : nodes_)
                if (!x.peer) out.push_back({choice::kind::restart, x.id});
        if (used_.breaks < bounds_.breaks)
            for (peer_id a = 1; a <= n; ++a)
                for (peer_id b = a + 1; b <= n; ++b)
                    if (network_.current(a, b) != 0) out.push_back({choice::kind::break_link, a, b});
        return out;
    }

    /// Takes choice `c`; false (and nothing changed) if it is not enabled (`settle` always is).
    bool apply(const choice& c) {
        if (!is_enabled(c)) return false;
        ++steps_;
        switch (c.what) {
            case choice::kind::deliver: deliver(c.a, c.b); break;
            case choice::kind::settle:
                if (!drain_fairly() && !settle_failure_)
                    settle_failure_ = "settle: the cluster does not quiesce (a livelock of messages)";
                break;
            case choice::kind::durable_log:
                trace(c.a, "> durable  # explorer: durable-log");
                at(c.a).log->complete_next_sync_now();
                settle(at(c.a));
                break;
            case choice::kind::durable_epochs:
                trace(c.a, "> durable  # explorer: durable-epochs");
                at(c.a).log->complete_next_epoch_write_now();
                settle(at(c.a));
                break;
            case choice::kind::tick: {
                ++used_.ticks;
                node& x = at(c.a);
                const std::uint64_t now = x.peer->now_tick();
                const std::uint64_t due = *x.peer->next_deadline();
                const std::uint64_t ticks = due > now ? due - now : 1;
                trace(c.a, ticks == 1 ? std::string{"> tick"} : fmt::format("> tick {}", ticks));
                x.peer->tick(ticks);
                settle(x);
                break;
            }
            case choice::kind::jump: {
                ++used_.clock_jumps;
                node& x = at(c.a);
                trace(c.a, fmt::format("> tick {}  # explorer: clock jump", bounds_.jump_ticks));
                x.peer->tick(bounds_.jump_ticks);
                settle(x);
                break;
            }
            case choice::kind::crash:
            case choice::kind::crash_keep:
                ++used_.crashes;
                power_off(at(c.a), c.what == choice::kind::crash_keep);
                break;
            case choice::kind::restart:
                ++used_.restarts;
                boot(at(c.a));
                break;
            case choice::kind::write: {
                ++used_.writes;
                node& x = at(c.a);
                const std::string txn = fmt::format("w{}", used_.writes);
                trace(c.a, fmt::format("> submit {}", txn));
                const request_id id = x.peer->submit(as_bytes(std::string_view{txn}));
                calls_.insert({c.a, x.incarnation, id});
                clients_.submitted(c.a, x.incarnation, id, client_op::write, txn);
                settle(x);
                break;
            }
            case choice::kind::sync:
            case choice::kind::lease_sync: {
                node& x = at(c.a);
                const bool lease = c.what == choice::kind::lease_sync;
                ++(lease ? used_.lease_syncs : used_.syncs);
                trace(c.a, "> sync");
                const request_id id = lease ? x.peer->lease_sync() : x.peer->sync();
                calls_.insert({c.a, x.incarnation, id});
                clients_.submitted(c.a, x.incarnation, id, client_op::sync);
                settle(x);
                break;
            }
            case choice::kind::reconfig: {
                ++used_.reconfigs;
                node& x = at(c.a);
                reconfig_request r;
                for (peer_id id = 1; id <= nodes_.size(); ++id)
                    r.members.push_back({id, learner_type::participant});
                trace(c.a, "# explorer: reconfig (every joiner a voter)");
                const request_id id = x.peer->reconfigure(std::move(r));
                calls_.insert({c.a, x.incarnation, id});
                // Not the client checker's: its bytes are zab's encoding, not a client's.
                reconfig_requests_.insert({c.a, x.incarnation, id});
                settle(x);
                break;
            }
            case choice::kind::transfer: {
                ++used_.transfers;
                node& x = at(c.a);
                peer_id target = 0;
                for (const member& m : x.peer->configuration_in_force().members())
                    if (m.id != c.a && m.type == learner_type::participant) {
                        target = m.id;
                        break;
                    }
                trace(c.a, fmt::format("# explorer: transfer to {}", target));
                const request_id id = x.peer->transfer_leadership(target);
                calls_.insert({c.a, x.incarnation, id});
                transfer_targets_[{c.a, x.incarnation, id}] = target;
                settle(x);
                break;
            }
            case choice::kind::break_link:
                ++used_.breaks;
                network_.break_connection(c.a, c.b);
                break;
        }
        run_checkers();
        return true;
    }

    /// Whether `apply(c)` would take it: `c` is in enabled(), or is a settle.
    bool is_enabled(const choice& c) const {
        if (c.what == choice::kind::settle) return true;
        const auto all = enabled();
        return std::find(all.begin(), all.end(), c) != all.end();
    }

    /// Why `explorer_bounds::prefix` was not taken whole, if it was not: the text does not
    /// parse, or the step it names (1-based) was not enabled there (and what was). The model
    /// is then at the state before that step; a search from it would not be the one asked for.
    const std::optional<std::string>& prefix_problem() const noexcept { return prefix_problem_; }

    // --- checks -----------------------------------------------------------------------------

    /// The first thing found wrong so far, if any: a §10 property, a client promise, a
    /// replica stopped by a storage failure nobody injected.
    std::optional<std::string> violation() const {
        if (!checker_.violations().empty()) {
            const auto& v = checker_.violations().front();
            return fmt::format("{} ({}): {}", to_string(v.what), citation(v.what), v.detail);
        }
        if (!clients_.ok()) return fmt::format("client: {}", clients_.failures().front());
        if (start_failure_) return *start_failure_;
        if (settle_failure_) return *settle_failure_;
        if (stuck_transfer_) return *stuck_transfer_;
        for (const node& x : nodes_)
            if (x.peer && x.peer->failed())
                return fmt::format("replica {} stopped: storage failed ({})", x.id,
                                   x.peer->failure().message());
        return std::nullopt;
    }

    /// Liveness from this state (it is changed): every crashed replica restarts, no more
    /// faults, every channel and disk is served in turn and every clock advances together (a
    /// connection a replica closes is dialed again at the next tick, as after a backoff);
    /// within `ticks` ticks an established leader must have a quorum of established voters
    /// following it and every client call must have completed. Then the client checker's
    /// end-of-run check. Safety checks keep running meanwhile. Nothing: it held.
    std::optional<std::string> check_liveness(std::uint64_t ticks) {
        healed_ = true;
        network_.defer_redials(true);
        for (node& x : nodes_)
            if (!x.peer) boot(x);
        if (start_failure_) return *start_failure_;
        run_checkers();
        for (std::uint64_t t = 0;; ++t) {
            if (!drain_fairly()) return "the healed cluster does not quiesce (a livelock of messages)";
            if (auto v = violation()) return v;
            if (live()) break;
            if (t == ticks) return fmt::format("after {} healed ticks: {}", ticks, why_not_live());
            for (node& x : nodes_)
                if (x.peer && !x.peer->failed()) {
                    network_.redial(x.id);
                    x.peer->tick(1);
                    settle(x);
                }
            run_checkers();
        }
        std::vector<std::vector<recording_state_machine::applied_txn>> applied;
        for (const node& x : nodes_)
            if (x.machine) applied.push_back(x.machine->applied());
        clients_.finish(applied);
        return violation();
    }

    // --- the state ------------------------------------------------------------------------

    /// A hash of the whole cluster state, for pruning revisited states. It covers: each
    /// replica's protocol state (`peer::digest`: role, phase, vote, durable epochs, last
    /// logged/committed/applied, its clock, frame counters, failure), its leader or learner
    /// stage with each link's stage and acknowledged zxid, its disk (every visible and every
    /// durable record's zxid and bytes, the snapshots' zxids, visible and durable epochs, the
    /// un-synced and pending operation counts), what its state machine applied, whether it is
    /// up; every channel's items (kind, current connection or not, a frame's bytes); the
    /// budget used of each kind of choice; the client calls not yet completed. It does not
    /// cover the checkers' memories of the past (what was committed or acknowledged earlier):
    /// two paths to one cluster state with different histories are merged, as TLC merges
    /// states whose history variables it is not told about.
    std::uint64_t hash() const {
        trace_hash h;
        for (const node& x : nodes_) {
            h.add(x.peer ? 1 : 0);
            if (x.peer) {
                x.peer->digest(h);
                const auto& ctx = internals(*x.peer);
                if (ctx.leading) {
                    h.add(static_cast<std::uint64_t>(ctx.leading->at));
                    h.add(ctx.leading->epoch);
                    h.add(ctx.leading->outstanding.size());
                    h.add(ctx.leading->last_proposed.value());
                    for (const auto& link : ctx.leading->links) {
                        h.add(link.id);
                        h.add(static_cast<std::uint64_t>(link.at));
                        h.add(link.last_acked.value());
                    }
                }
                if (ctx.learning) {
                    h.add(static_cast<std::uint64_t>(ctx.learning->at));
                    h.add(ctx.learning->leader);
                    h.add(ctx.learning->epoch);
                    h.add(ctx.learning->known_committed.value());
                    h.add(ctx.learning->unapplied.size());
                }
                h.add(x.machine->applied().size());
            }
            const sim_log& log = *x.log;
            for (const auto& r : log.records()) {
                h.add(r.id.value());
                h.add(r.txn.view());
            }
            h.add(0xfeed);
            for (const auto& r : log.durable_records()) {
                h.add(r.id.value());
                h.add(r.txn.view());
            }
            h.add(log.snapshot() ? log.snapshot()->last_included.value() + 1 : 0);
            h.add(log.durable_snapshot() ? log.durable_snapshot()->last_included.value() + 1 : 0);
            h.add(log.stored_epochs().accepted);
            h.add(log.stored_epochs().current);
            h.add(log.durable_epochs().accepted);
            h.add(log.durable_epochs().current);
            h.add(log.unsynced_operations());
            h.add(log.pending_syncs());
            h.add(log.pending_epoch_writes());
        }
        network_.digest(h);
        for (const std::uint32_t u : {used_.crashes, used_.restarts, used_.writes, used_.syncs,
                                      used_.lease_syncs, used_.reconfigs, used_.transfers,
                                      used_.breaks, used_.ticks, used_.clock_jumps})
            h.add(u);
        h.add(leader_established_ ? 1 : 0);
        for (const auto& [id, incarnation, request] : calls_) {
            h.add(id);
            h.add(incarnation == at(id).incarnation ? 1 : 0);
            h.add(request);
        }
        return h.value();
    }

    /// Connections made or broken so far (a choice that moved it touched others' links).
    std::uint64_t structure_changes() const noexcept { return network_.structure_changes(); }
    std::uint64_t steps() const noexcept { return steps_; }

    /// Per-replica lines for transcripts, when switched on (`record_transcripts`).
    void record_transcripts(bool on) { transcripts_ = on; }
    const std::vector<model_trace_line>& transcript_lines() const noexcept { return lines_; }
    /// Formats a frame as transcript text (explorer_main.cpp sets it; empty: not recorded).
    std::function<std::string(const shared_bytes&)> frame_text;

    // --- what protocol_observer reads (the simulator's calls) -----------------------------

    std::vector<node>& nodes() noexcept { return nodes_; }
    const std::vector<node>& nodes() const noexcept { return nodes_; }
    node& at(peer_id id) {
        ZAB_ASSERT(id >= 1 && id <= nodes_.size(), "explorer: no such replica");
        return nodes_[id - 1];
    }
    const node& at(peer_id id) const {
        ZAB_ASSERT(id >= 1 && id <= nodes_.size(), "explorer: no such replica");
        return nodes_[id - 1];
    }
    peer_type* peer_of(peer_id id) { return at(id).peer.get(); }
    const peer_type* peer_of(peer_id id) const { return at(id).peer.get(); }
    const configuration& config() const noexcept { return config_; }
    explorer_network& network() noexcept { return network_; }

    using message_observer =
        std::function<void(peer_id receiver, peer_id sender, const wire::message&)>;
    std::uint64_t add_message_observer(message_observer observer) {
        const std::uint64_t id = next_observer_++;
        message_observers_.emplace_back(id, std::move(observer));
        return id;
    }
    void remove_message_observer(std::uint64_t id) {
        std::erase_if(message_observers_, [id](const auto& o) { return o.first == id; });
    }
    void add_checker(std::function<void(explorer_model&)> check) { checkers_.push_back(std::move(check)); }

    const invariant_checker& checker() const noexcept { return checker_; }
    const client_checker& clients() const noexcept { return clients_; }

private:
    struct budget_used {
        std::uint32_t crashes = 0, restarts = 0, writes = 0, syncs = 0, lease_syncs = 0,
                      reconfigs = 0, transfers = 0, breaks = 0, ticks = 0, clock_jumps = 0;
    };
    using call_key = std::tuple<peer_id, std::uint64_t, request_id>;

    static bool has_unsynced(const node& x) {
        return x.log->unsynced_operations() > 0 || x.log->pending_epoch_writes() > 0 ||
               x.log->stored_epochs() != x.log->durable_epochs();
    }

    void trace(peer_id id, std::string text) {
        if (transcripts_) lines_.push_back({id, std::move(text)});
    }

    void boot(node& n) {
        ++n.incarnation;
        n.machine = std::make_unique<recording_state_machine>();
        auto created = peer_type::create(n.id, config_, n.options, network_.transport(n.id),
                                         *n.log, *n.machine);
        if (!created) {
            // A replica that cannot restart from what its log kept (a snapshot that does not
            // restore, a damaged configuration) is a finding, not an abort of the search:
            // it stays down, and the path is reported with the reason.
            if (!start_failure_)
                start_failure_ = fmt::format("replica {} cannot restart (incarnation {}): {}",
                                             n.id, n.incarnation, created.error().message());
            return;
        }
        n.peer = std::move(created).value();
        network_.node_up(n.id);
        if (transcripts_) {
            lines_.push_back({n.id, fmt::format("# explorer: incarnation {}, log ends at <{}, {}>, "
                                                "epochs {}/{}",
                                                n.incarnation, n.log->last_zxid().epoch(),
                                                n.log->last_zxid().counter(),
                                                n.log->stored_epochs().accepted,
                                                n.log->stored_epochs().current)});
            lines_.push_back({n.id, fmt::format("> peer {} of {}", n.id, bounds_.voters)});
            last_role_[n.id].clear();
            lines_.push_back({n.id, "> start"});
        }
        n.peer->start();
        settle(n);
    }

    void power_off(node& n, bool keep_unsynced) {
        if (!n.peer) return;
        trace(n.id, keep_unsynced ? "# explorer: crash, un-synced writes kept"
                                  : "# explorer: crash, un-synced writes lost");
        n.peer->shutdown();
        settle(n);
        n.peer.reset();
        n.machine.reset();
        network_.node_down(n.id);
        disk_options d;
        d.crash_keep = keep_unsynced ? 1.0 : 0.0;
        d.crash_drop = keep_unsynced ? 0.0 : 1.0;
        d.crash_tear = 0.0;
        n.log->set_options(d);
        n.log->crash();
    }

    void deliver(peer_id from, peer_id to) {
        channel_item item = network_.take(from, to);
        node& n = at(to);
        ZAB_ASSERT(n.peer != nullptr, "explorer: a channel toward a crashed replica");
        switch (item.what) {
            case channel_item::kind::connected:
                trace(to, fmt::format("> connect {}", from));
                n.peer->on_connected(from, item.connection);
                break;
            case channel_item::kind::disconnected:
                trace(to, fmt::format("> disconnect {}", from));
                n.peer->on_disconnected(from, item.connection);
                break;
            case channel_item::kind::frame:
                if (transcripts_ && frame_text)
                    trace(to, fmt::format("> from {}: {}", from, frame_text(item.frame)));
                if (!message_observers_.empty())
                    if (auto decoded = decode(item.frame.view()))
                        for (const auto& [unused, observer] : message_observers_)
                            observer(to, from, decoded.value().msg);
                n.peer->on_receive(from, item.connection, item.frame);
                break;
        }
        settle(n);
    }

    /// The driver contract after a call into `n`'s peer (zab/core/driver.hpp): completions
    /// to the client checker, snapshot work done at once (a compaction is part of the step).
    void settle(node& n) {
        for (int rounds = 0; n.peer && rounds < 16; ++rounds) {
            peer_ready ready = n.peer->ready();
            for (const auto& c : ready.completions) {
                calls_.erase({n.id, n.incarnation, c.id});
                if (transcripts_)
                    lines_.push_back({n.id, c.outcome ? fmt::format("done #{}: <{}, {}>", c.id,
                                                                    c.outcome.value().epoch(),
                                                                    c.outcome.value().counter())
                                                      : fmt::format("done #{}: {}", c.id,
                                                                    c.outcome.error().message())});
                if (c.op == client_op::transfer) {
                    note_transfer_outcome(n, c);
                    continue;
                }
                if (reconfig_requests_.erase({n.id, n.incarnation, c.id}) > 0) continue;
                clients_.completed(n.id, n.incarnation, c, n.machine->applied(),
                                   n.machine->last_applied());
            }
            note_role(n);
            if (!ready.snapshot) break;
            const shared_bytes bytes = ready.snapshot->serialize();
            n.peer->on_snapshot_ready(ready.snapshot->at, bytes);
        }
    }

    /// A transfer is a client call like any other for liveness, with one more demand: in the
    /// healed run (check_liveness: every frame delivered before each tick), a transfer may
    /// time out only if its target was not caught up. A target that follows this leader,
    /// established, holding its last proposal, when the transfer gives up, is one the leader
    /// failed to recognise as caught up (issue 34 defect 8: a target synced after the last
    /// write has no ACK of its own on the new link).
    void note_transfer_outcome(const node& leader, const client_completion& c) {
        const auto key = call_key{leader.id, leader.incarnation, c.id};
        const auto it = transfer_targets_.find(key);
        if (it == transfer_targets_.end()) return;
        const peer_id target = it->second;
        transfer_targets_.erase(it);
        if (!healed_ || stuck_transfer_ || c.outcome || c.outcome.error() != errc::timed_out)
            return;
        const node& t = at(target);
        if (!t.peer || !t.peer->established() || t.peer->status().leader != leader.id) return;
        const zxid last = leader.peer->last_logged();
        if (t.peer->last_logged() < last) return;
        stuck_transfer_ = fmt::format(
            "replica {}'s transfer to {} timed out in the healed run though {} followed it, "
            "established, with its last proposal <{}, {}>",
            leader.id, target, target, last.epoch(), last.counter());
    }

    void note_role(const node& n) {
        if (n.peer->state() == peer_state::leading && n.peer->established()) leader_established_ = true;
        if (!transcripts_) return;
        const std::string role = fmt::format("{}{}", n.peer->state(),
                                             n.peer->established() ? " established" : "");
        if (role != last_role_[n.id]) {
            last_role_[n.id] = role;
            lines_.push_back({n.id, fmt::format("role {}", role)});
        }
    }

    void on_network(const network_event& e) {
        if (!transcripts_ || e.what != network_event::kind::send || !frame_text) return;
        lines_.push_back({e.from, fmt::format("to {}: {}", e.to, frame_text(e.frame))});
    }

    void run_checkers() {
        for (auto& check : checkers_) check(*this);
    }

    /// Serves every channel head and every pending disk operation in turn until none is
    /// left; false if that does not end (bounded).
    bool drain_fairly() {
        for (int round = 0; round < 10'000; ++round) {
            bool moved = false;
            const std::size_t n = nodes_.size();
            for (peer_id to = 1; to <= n; ++to)
                for (peer_id from = 1; from <= n; ++from)
                    if (from != to && !network_.channel(from, to).empty()) {
                        deliver(from, to);
                        run_checkers();
                        moved = true;
                    }
            for (node& x : nodes_) {
                if (!x.peer) continue;
                if (x.log->complete_next_sync_now()) moved = true, settle(x), run_checkers();
                if (x.peer && x.log->complete_next_epoch_write_now())
                    moved = true, settle(x), run_checkers();
            }
            if (!moved) return true;
        }
        return false;
    }

    /// explorer_bounds::prefix, choice by choice, until one is not enabled (prefix_problem).
    void take_prefix() {
        if (bounds_.prefix.empty()) return;
        const auto path = parse_path(bounds_.prefix);
        if (!path) {
            prefix_problem_ = fmt::format("cannot read the prefix '{}'", bounds_.prefix);
            return;
        }
        for (std::size_t i = 0; i < path->size(); ++i)
            if (!apply((*path)[i])) {
                prefix_problem_ = fmt::format("prefix step {} ({}) is not enabled there; enabled: {}",
                                              i + 1, to_string((*path)[i]),
                                              enabled().empty() ? "nothing" : to_string(enabled()));
                return;
            }
    }

    /// The fair run to an established group (start_established).
    void warm_up() {
        for (int t = 0; t < 200; ++t) {
            drain_fairly();
            if (live() && all_established()) break;
            for (node& x : nodes_)
                if (x.peer && !x.peer->failed()) {
                    x.peer->tick(1);
                    settle(x);
                }
            run_checkers();
        }
        ZAB_ASSERT(all_established(), "explorer: the warm-up established no group");
    }

    bool all_established() const {
        for (const node& x : nodes_)
            if (config_.contains(x.id) && (!x.peer || !x.peer->established())) return false;
        return true;
    }

    bool live() const {
        if (!calls_.empty()) return false;
        for (const node& x : nodes_) {
            if (!x.peer || x.peer->state() != peer_state::leading || !x.peer->established()) continue;
            peer_set following;
            following.insert(x.id);
            for (const node& y : nodes_)
                if (y.peer && y.id != x.id && y.peer->established() &&
                    y.peer->status().leader == x.id)
                    following.insert(y.id);
            if (quorum_of(x, following)) return true;
        }
        return false;
    }

    bool quorum_of(const node& leader, const peer_set& ids) const {
        return make_verifier(leader.peer->configuration_in_force())->contains_quorum(ids);
    }

    std::string why_not_live() const {
        std::string out;
        for (const node& x : nodes_) {
            if (!out.empty()) out += "; ";
            if (!x.peer) {
                out += fmt::format("{} down", x.id);
                continue;
            }
            const auto s = x.peer->status();
            out += fmt::format("{} {}{} leader {}", x.id, s.role, s.established ? " established" : "",
                               s.leader);
        }
        if (!calls_.empty()) out += fmt::format("; {} client call(s) pending", calls_.size());
        return out;
    }

    explorer_bounds bounds_;
    explorer_network network_;
    configuration config_;
    std::vector<node> nodes_;
    invariant_checker checker_;
    client_checker clients_;
    std::unique_ptr<protocol_observer<explorer_model>> observer_;
    std::vector<std::function<void(explorer_model&)>> checkers_;
    std::vector<std::pair<std::uint64_t, message_observer>> message_observers_;
    std::uint64_t next_observer_ = 1;
    budget_used used_;
    std::set<call_key> calls_;              // client calls not yet completed
    std::set<call_key> reconfig_requests_;
    std::map<call_key, peer_id> transfer_targets_;  // each transfer in flight: its target
    bool healed_ = false;                   // in check_liveness's healed run
    std::optional<std::string> stuck_transfer_;  // note_transfer_outcome's finding
    bool leader_established_ = false;       // some leader was established on this path
    std::optional<std::string> start_failure_;  // a replica that could not start (boot)
    std::optional<std::string> settle_failure_;  // a settle choice that did not quiesce
    std::optional<std::string> prefix_problem_;  // take_prefix's finding
    std::uint64_t steps_ = 0;
    bool transcripts_ = false;
    std::vector<model_trace_line> lines_;
    std::map<peer_id, std::string> last_role_;
};

}  // namespace zab::testing
