// Stateful fuzz target: a 3-voter cluster of real zab peers in the simulator
// (include/zab/testing/simulator.hpp), driven by a program the input spells
// (fuzz/cluster_program.hpp): the input chooses the seed, up to two joiners, and a sequence
// of events — virtual time passing, client writes and syncs, proposals, crashes, restarts,
// pauses, partitions, broken and stalled links, crashes armed at named points,
// reconfigurations (§9), leadership transfers (§6.4) — and forged frames: from a stranger
// (stranger_id, in no configuration) and from a member that lies, on its own authenticated
// connection (sim_network::inject). Forged frames are valid zab messages whose fields are
// chosen near the cluster's state (so that they pass the codec and reach the protocol's own
// checks), damaged ones, or raw bytes.
//
// The protocol observer, the §10 invariant checker and the election checker run after every
// event. At the end the faults stop: the network heals, paused replicas resume, crashed ones
// restart, and within a bound a leader must be established with every replica and a write
// applied everywhere. Then what fired is judged:
//
// Always, whatever the input (a member that lies included) — zab's integrity about its own
// state, which no frame may break (docs/design.md rules 6 and 9):
//   - no crash, no ZAB_ASSERT (the core's own invariants, peer_context::check_invariants
//     after every step, with ZAB_EXPENSIVE_INVARIANTS), no sanitizer report, memory bounded
//     (libFuzzer's -rss_limit_mb), no hang (-timeout);
//   - §10.10 epoch_monotonicity: a replica's epochs never go down and accepted ≥ current —
//     its own disk, whatever it was told;
//   - §10.13 contiguity: no hole in a replica's log within an epoch, nor in what a leader
//     broadcasts — the learner refuses a PROPOSAL that leaves a hole, whoever sent it.
//
// Only while every member is honest (no member_frame was delivered in the run; a stranger's
// frames do not count: a stranger must never break anything) — everything else the checkers
// check: the other §10 properties, §11.10 applied_committed, §6.1 quorum_durable, the
// election checker's decisions, and liveness after the heal. Zab is not Byzantine fault
// tolerant: one lying member is part of every quorum of three, so its forged ACKs commit what
// no quorum holds (quorum_durable, then durability after a crash), its forged COMMITs and
// proposals as leader make its followers apply what was never broadcast or committed
// (integrity, applied_committed, agreement, …), its forged votes and epoch messages can
// elect two leaders of one epoch (leadership), the observer checks each COMMIT it delivers
// as if the leader sent it (commit_order), a forged history under an honest leader's name is
// what a NEWLEADER ACK then vouches for (advertise_durable), and its lies can leave a
// replica waiting for a leader that never leads (liveness).
//
// Determinism: the input is the whole run (the seed is in it); the replay build runs every
// input twice and requires the same trace hash (ZAB_CLUSTER_FUZZ_CHECK_DETERMINISM).
// ZAB_CLUSTER_FUZZ_TRACE=1 in the environment prints the ops and the simulator's trace.
//
// Built as a libFuzzer binary with clang (ZAB_BUILD_FUZZERS=ON) and, with any compiler, as
// a replay program (replay_main.cpp) that runs the checked-in corpus as a regression test.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cluster_program.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/testing/election_checker.hpp"
#include "kv/kv_state_machine.hpp"
#include "zab/session/session_machine.hpp"
#include "zab/testing/invariant_checker.hpp"
#include "zab/testing/machine_variants.hpp"
#include "zab/testing/peer_internals.hpp"
#include "zab/testing/protocol_observer.hpp"
#include "zab/testing/simulator.hpp"

namespace {

using namespace zab;
using namespace zab::testing;
using zab::fuzz::op;
using zab::fuzz::program_reader;

constexpr peer_id stranger = zab::fuzz::stranger_id;
constexpr std::size_t max_ops = 256;
constexpr sim_time run_step = 20'000;                // one unit of `run`: 20 ms
constexpr sim_time fault_phase_max = 30'000'000;     // 30 s of virtual time of faults at most
constexpr sim_time recovery_bound = 60'000'000;      // then 60 s to recover

/// Properties a member that lies cannot make the core break (see the file comment).
constexpr bool holds_with_a_liar(property p) {
    return p == property::epoch_monotonicity || p == property::contiguity;
}

bool tracing() {
    static const bool on = [] {
        const char* value = std::getenv("ZAB_CLUSTER_FUZZ_TRACE");
        return value != nullptr && value[0] != '\0' && value[0] != '0';
    }();
    return on;
}

template <typename... Args>
void trace(fmt::format_string<Args...> format, Args&&... args) {
    if (tracing()) fmt::print(stderr, "fuzz: {}\n", fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] void oracle_failed(const std::string& what) {
    std::fprintf(stderr, "cluster_fuzzer: oracle failed: %s\n", what.c_str());
    std::abort();
}

/// Builds a forged frame from the program, near the state of the cluster.
template <typename Sim>
class frame_forger {
public:
    frame_forger(program_reader& in, Sim& sim, peer_id to, peer_id as)
        : in_{in}, sim_{sim} {
        if (const auto* p = sim.peer_of(to)) {
            receiver_logged_ = p->last_logged();
            epoch_ = p->durable_epochs().accepted;
            round_ = p->current_vote().round;
            config_version_ = p->status().config_version;
        }
        if (as != stranger)
            if (const auto* p = sim.peer_of(as)) sender_logged_ = p->last_logged();
    }

    shared_bytes forge() {
        const std::uint8_t form = in_.byte();
        if (form >= zab::fuzz::frame_raw) {
            const std::size_t length = in_.byte();
            return shared_bytes::make(length, [&](std::span<std::byte> out) {
                for (auto& b : out) b = static_cast<std::byte>(in_.byte());
            });
        }
        const std::size_t index = form % std::variant_size_v<wire::message>;
        const std::uint8_t header = in_.byte();
        frame_context context{0, config_version_};
        if (header & 1) context.group_id = in_.little_endian(8);
        if (header & 2) context.config_version = in_.little_endian(8);
        std::vector<shared_bytes> keep;  // byte fields live until encoded
        wire::message m = make(index);
        std::visit([&](auto& msg) { fill(msg, keep); }, m);
        shared_bytes frame = encode(context, m);
        if (form >= zab::fuzz::frame_truncated) {
            const std::size_t length = std::min<std::size_t>(in_.byte(), frame.size());
            return shared_bytes::copy_of(frame.view().first(length));
        }
        if (form >= zab::fuzz::frame_flipped) {
            std::vector<std::byte> bytes{frame.view().begin(), frame.view().end()};
            const std::size_t at = in_.byte() % bytes.size();
            bytes[at] ^= static_cast<std::byte>(in_.byte() | 1);
            return shared_bytes{std::move(bytes)};
        }
        return frame;
    }

private:
    template <std::size_t... I>
    static wire::message make(std::size_t index, std::index_sequence<I...>) {
        wire::message out;
        ((index == I ? (void)out.emplace<I>() : void()), ...);
        return out;
    }
    static wire::message make(std::size_t index) {
        return make(index, std::make_index_sequence<std::variant_size_v<wire::message>>{});
    }

    zxid zxid_field() {
        switch (in_.byte() % 8) {
            case 0: return zxid{};
            case 1: return receiver_logged_;
            case 2: return sender_logged_;
            case 3: {
                const zxid base = in_.byte() & 1 ? sender_logged_ : receiver_logged_;
                const auto delta = static_cast<std::int8_t>(in_.byte());
                const std::int64_t counter = std::int64_t{base.counter()} + delta;
                return zxid{base.epoch(), static_cast<std::uint32_t>(std::max<std::int64_t>(counter, 0))};
            }
            case 4: return zxid{epoch_field(), in_.byte() % 16u};
            case 5: return zxid{epoch_field(), 0};
            case 6: return zxid::from_value(in_.little_endian(8));
            default: return zxid{receiver_logged_.epoch(), receiver_logged_.counter() + 1};
        }
    }
    epoch_t epoch_field() {
        const std::uint8_t b = in_.byte();
        if (b >= 240) return static_cast<epoch_t>(in_.little_endian(4));
        const std::int64_t e = std::int64_t{epoch_} + b % 8 - 3;
        return static_cast<epoch_t>(std::max<std::int64_t>(e, 0));
    }
    peer_id peer_field() {
        const std::uint8_t b = in_.byte() % 8;
        if (b == 7) return in_.little_endian(8);
        return b == 6 ? stranger : b;
    }
    std::uint64_t counter_field(std::uint64_t near = 0) {
        const std::uint8_t b = in_.byte();
        if (b >= 240) return in_.little_endian(8);
        return near + b % 16;
    }
    std::vector<member> members_field() {
        const std::uint8_t voters = in_.byte();
        const std::uint8_t observers = in_.byte();
        std::vector<member> members;
        for (peer_id id = 1; id <= sim_.nodes().size(); ++id) {
            const std::uint8_t bit = static_cast<std::uint8_t>(1u << (id - 1));
            if (voters & bit) members.push_back({id, learner_type::participant});
            else if (observers & bit) members.push_back({id, learner_type::observer});
        }
        return members;
    }
    byte_view bytes_field(std::vector<shared_bytes>& keep) {
        switch (in_.byte() % 5) {
            case 0: return {};
            case 1: {
                const std::size_t length = in_.byte() % 32;
                keep.push_back(shared_bytes::make(length, [&](std::span<std::byte> out) {
                    for (auto& b : out) b = static_cast<std::byte>(in_.byte());
                }));
                break;
            }
            case 2: {
                reconfig_request request{members_field(), std::nullopt};
                if (const std::uint8_t cas = in_.byte(); cas != 0)
                    request.expected_version = config_version_ + cas - 1;
                keep.push_back(encode_reconfig(std::move(request)));
                break;
            }
            case 3: {
                const std::string txn = fmt::format("forged-{}", in_.byte());
                keep.push_back(shared_bytes::copy_of(as_bytes(txn)));
                break;
            }
            default: {
                // A recording_state_machine snapshot: (zxid, length, bytes) entries in order.
                const std::size_t entries = in_.byte() % 4;
                std::vector<std::byte> out;
                for (std::size_t i = 0; i < entries; ++i) {
                    const zxid id{epoch_, static_cast<std::uint32_t>(i + 1)};
                    for (int b = 0; b < 8; ++b) out.push_back(static_cast<std::byte>(id.value() >> (8 * b)));
                    const std::byte payload = static_cast<std::byte>(in_.byte());
                    for (int b = 0; b < 4; ++b) out.push_back(static_cast<std::byte>(b == 0 ? 1 : 0));
                    out.push_back(payload);
                }
                keep.push_back(shared_bytes{std::move(out)});
                break;
            }
        }
        return keep.back().view();
    }
    template <typename E>
    E enum_field() {
        return static_cast<E>(in_.byte() % 12);  // past the last value now and then
    }
    std::uint32_t protocol_field() {
        const std::uint8_t b = in_.byte();
        protocol_byte_ = b;
        return b < 224 ? protocol_version : b;
    }
    std::uint8_t protocol_byte_ = 0;

    void fill(wire::notification& m, std::vector<shared_bytes>&) {
        m.state = static_cast<peer_state>(in_.byte() % 5);
        m.leader = peer_field();
        m.leader_zxid = zxid_field();
        m.round = counter_field(round_);
        m.leader_epoch = epoch_field();
    }
    /// The options every replica must share (§4.2): mostly the cluster's own (all default),
    /// now and then a different lease promise or application fingerprint. Drawn from the
    /// protocol field's byte (read just before), so that programs written before the field
    /// existed still replay the same schedule.
    wire::agreed_options agreed_field() const {
        wire::agreed_options a = zab::options{}.agreed();
        if (protocol_byte_ >= 240) a.read_lease_ticks = protocol_byte_ & 7;
        if (protocol_byte_ >= 224 && protocol_byte_ < 240) a.fingerprint = protocol_byte_;
        return a;
    }
    void fill(wire::follower_info& m, std::vector<shared_bytes>&) {
        m.accepted_epoch = epoch_field();
        m.protocol = protocol_field();
        m.agreed = agreed_field();
    }
    void fill(wire::observer_info& m, std::vector<shared_bytes>&) {
        m.accepted_epoch = epoch_field();
        m.protocol = protocol_field();
        m.agreed = agreed_field();
    }
    void fill(wire::leader_info& m, std::vector<shared_bytes>&) {
        m.new_epoch = epoch_field();
        m.protocol = protocol_field();
        m.agreed = agreed_field();
    }
    void fill(wire::ack_epoch& m, std::vector<shared_bytes>&) {
        m.last_logged = zxid_field();
        if (in_.byte() & 1) m.current_epoch = epoch_field();
    }
    void fill(wire::diff& m, std::vector<shared_bytes>&) { m.last = zxid_field(); }
    void fill(wire::trunc& m, std::vector<shared_bytes>&) { m.truncate_to = zxid_field(); }
    void fill(wire::snap& m, std::vector<shared_bytes>& keep) {
        m.last_included = zxid_field();
        m.chunk = bytes_field(keep);
        const std::uint8_t sizes = in_.byte();
        m.total_size = sizes & 1 ? counter_field() : m.chunk.size();
        m.offset = sizes & 2 ? counter_field() : 0;
    }
    void fill(wire::snap_ack& m, std::vector<shared_bytes>&) { m.received = counter_field(); }
    void fill(wire::sync_ack& m, std::vector<shared_bytes>&) { m.received = zxid_field(); }
    void fill(wire::new_leader& m, std::vector<shared_bytes>&) { m.epoch_zxid = zxid_field(); }
    void fill(wire::ack& m, std::vector<shared_bytes>&) { m.acked = zxid_field(); }
    void fill(wire::up_to_date&, std::vector<shared_bytes>&) {}
    void fill(wire::proposal& m, std::vector<shared_bytes>& keep) {
        m.id = zxid_field();
        m.txn = bytes_field(keep);
    }
    void fill(wire::commit& m, std::vector<shared_bytes>&) { m.id = zxid_field(); }
    void fill(wire::inform& m, std::vector<shared_bytes>& keep) {
        m.id = zxid_field();
        m.txn = bytes_field(keep);
    }
    void fill(wire::forwarded_request& m, std::vector<shared_bytes>& keep) {
        m.request_id = counter_field();
        m.kind = enum_field<wire::request_kind>();
        m.txn = bytes_field(keep);
    }
    void fill(wire::ping& m, std::vector<shared_bytes>&) {
        m.last_proposed = zxid_field();
        m.round = counter_field();
    }
    void fill(wire::sync_answer& m, std::vector<shared_bytes>&) { m.request_id = counter_field(); }
    void fill(wire::forwarded_reply& m, std::vector<shared_bytes>&) {
        m.request_id = counter_field();
        m.outcome = enum_field<wire::reply_outcome>();
        m.id = zxid_field();
    }
    void fill(wire::handover& m, std::vector<shared_bytes>&) {
        m.leader = peer_field();
        m.leader_zxid = zxid_field();
        m.leader_epoch = epoch_field();
        m.round = counter_field(round_);
    }
    // A batch: the first zxid, then count % 5 entries of bytes fields, and a count that
    // agrees with them unless the next byte says otherwise (then the decoder refuses it).
    void fill(wire::proposal_batch& m, std::vector<shared_bytes>& keep) {
        m.first = zxid_field();
        m.txns = entries_field(keep, m.count);
    }
    // REQUESTS (§0.2): a request id, then entries as a batch's.
    void fill(wire::forwarded_batch& m, std::vector<shared_bytes>& keep) {
        m.first_request_id = counter_field();
        m.txns = entries_field(keep, m.count);
    }
    void fill(wire::reply_batch& m, std::vector<shared_bytes>&) {
        m.first_request_id = counter_field();
        m.count = in_.byte() % 9;  // 0 now and then: malformed
        m.outcome = enum_field<wire::reply_outcome>();
        m.first = zxid_field();
    }
    /// count % 5 entries of bytes fields, each a u32 length and its bytes, and in `count` a
    /// number that agrees with them unless the next byte says otherwise (then the decoder
    /// refuses the frame).
    byte_view entries_field(std::vector<shared_bytes>& keep, std::uint32_t& count) {
        const std::uint32_t entries = in_.byte() % 5;
        std::vector<std::byte> out;
        for (std::uint32_t i = 0; i < entries; ++i) {
            const byte_view txn = bytes_field(keep);
            const auto size = static_cast<std::uint32_t>(txn.size());
            for (int b = 0; b < 4; ++b) out.push_back(static_cast<std::byte>(size >> (8 * b)));
            out.insert(out.end(), txn.begin(), txn.end());
        }
        count = in_.byte() < 224 ? entries : entries + 1;
        keep.push_back(shared_bytes{std::move(out)});
        return keep.back().view();
    }

    program_reader& in_;
    Sim& sim_;
    zxid receiver_logged_;
    zxid sender_logged_;
    epoch_t epoch_ = 0;
    std::uint64_t round_ = 0;
    std::uint64_t config_version_ = 0;
};

template <typename Sim>
peer_id established_leader(const Sim& sim) {
    for (const auto& n : sim.nodes())
        if (n.peer && n.peer->state() == peer_state::leading && n.peer->established()) return n.id;
    return 0;
}

/// One run of a program on `Machine`; `encode` turns a write's text into the machine's
/// transaction (the identity, or a kv SET command).
template <typename Machine>
class cluster_run {
public:
    using sim_type = simulator<Machine>;
    using encoder = std::string (*)(std::string_view text);

    cluster_run(program_reader& in, encoder encode)
        : in_{in}, encode_{encode}, sim_{options(in)}, observer_{sim_, invariants_}, elections_{sim_} {
        sim_.network().add_node(stranger);  // connects to every replica; no peer behind it
        if (tracing()) sim_.set_trace([](std::string_view line) { fmt::print(stderr, "{}\n", line); });
        sim_.start();
    }

    /// Runs the program, then the recovery; aborts on a violation. The trace hash.
    std::uint64_t run() {
        std::size_t ops = 0;
        while (!in_.done() && ops++ < max_ops && sim_.now() < fault_phase_max) {
            step();
            note_unprovoked_failures();
        }
        recover();
        judge();
        for (const auto& n : sim_.nodes())
            if (n.peer) {
                const auto& c = n.peer->counters();
                trace("peer {}: compactions {} (postponed {}), syncs diff {} trunc {} snap {} "
                      "restarted {}, applied {}", n.id, c.compactions, c.compactions_postponed,
                      c.syncs_diff, c.syncs_trunc, c.syncs_snap, c.syncs_restarted,
                      n.peer->last_applied());
            }
        return sim_.trace_hash_value();
    }

private:
    static cluster_options options(program_reader& in) {
        cluster_options o;
        o.seed = in.little_endian(8);
        o.voters = 3;
        const std::uint8_t shape = in.byte();
        o.joiners = shape % 3;
        // Compaction every few applied transactions (zab::options::snapshot_every): SNAPs,
        // syncs that outlive a compaction, restores after restarts (issue 34, defects 1, 2).
        if (zab::fuzz::compacts(shape)) o.peer.snapshot_every = 4;
        o.peer.init_limit_ticks = 20;
        o.peer.sync_limit_ticks = 10;
        o.peer.transfer_timeout_ticks = 10;
        return o;
    }

    peer_id replica() { return static_cast<peer_id>(1 + in_.below(sim_.nodes().size())); }

    peer_id target_id() {
        const std::uint8_t b = in_.byte() % 8;
        return b == 7 ? stranger : b;  // 0: the best voter; 6, 7: no such replica
    }

    shared_bytes txn() {
        const std::size_t length = in_.byte() % 16;
        std::string txn = fmt::format("w{}-", ++writes_);
        for (std::size_t i = 0; i < length; ++i) txn.push_back(static_cast<char>(in_.byte()));
        return encoded(txn);
    }

    shared_bytes encoded(std::string_view text) const {
        if (encode_ == nullptr) return shared_bytes::copy_of(as_bytes(text));
        return shared_bytes::copy_of(as_bytes(encode_(text)));
    }

    /// No storage fault is ever injected here: a replica that fails its storage while every
    /// member is honest failed on its own (a read of its own log it could not serve — issue
    /// 34 defect 2's compacted history — or a snapshot it could not restore).
    void note_unprovoked_failures() {
        if (liar_) return;
        for (const auto& n : sim_.nodes())
            if (n.peer && n.peer->failed() && unprovoked_failure_.empty())
                unprovoked_failure_ = fmt::format("peer {} failed its storage with no storage fault "
                                                  "injected: {}", n.id,
                                                  n.peer->status().failure.message());
    }

    void step() {
        const auto o = static_cast<op>(in_.below(zab::fuzz::op_count));
        switch (o) {
            case op::run: {
                const sim_time d = (1 + sim_time{in_.byte()}) * run_step;
                trace("run {} us", d);
                sim_.run_for(d);
                break;
            }
            case op::submit: {
                const peer_id k = replica();
                const shared_bytes t = txn();
                trace("submit at {}", k);
                sim_.submit(k, t.view());
                break;
            }
            case op::sync: {
                const peer_id k = replica();
                trace("sync at {}", k);
                sim_.sync(k);
                break;
            }
            case op::propose: {
                const shared_bytes t = txn();
                if (const peer_id leader = established_leader(sim_)) {
                    trace("propose at {}", leader);
                    (void)observer_.propose(leader, t.view());
                }
                break;
            }
            case op::crash: {
                const peer_id k = replica();
                trace("crash {}", k);
                sim_.crash(k);
                break;
            }
            case op::restart: {
                const peer_id k = replica();
                trace("restart {}", k);
                sim_.restart(k);
                break;
            }
            case op::pause: {
                const peer_id k = replica();
                trace("pause {}", k);
                sim_.pause(k);
                break;
            }
            case op::resume: {
                const peer_id k = replica();
                trace("resume {}", k);
                sim_.resume(k);
                break;
            }
            case op::partition: {
                const std::uint8_t mask = in_.byte();
                std::vector<peer_id> side;
                for (const auto& n : sim_.nodes())
                    if (mask & (1u << (n.id - 1))) side.push_back(n.id);
                trace("partition {:#x}", mask);
                sim_.network().partition({side});
                break;
            }
            case op::heal:
                trace("heal");
                sim_.network().heal();
                break;
            case op::break_link:
            case op::block_one_way: {
                const peer_id a = replica();
                const peer_id b = replica();
                if (a == b) break;
                trace("{} {} {}", o == op::break_link ? "break" : "block", a, b);
                if (o == op::break_link) sim_.network().break_connection(a, b);
                else sim_.network().block_one_way(a, b);
                break;
            }
            case op::reconfigure: reconfigure(); break;
            case op::transfer: {
                const peer_id k = replica();
                const peer_id target = target_id();
                trace("transfer at {} to {}", k, target);
                sim_.transfer_leadership(k, target);
                break;
            }
            case op::crash_at: {
                const peer_id k = in_.below(sim_.nodes().size() + 1);  // 0: whoever is first
                const auto point = static_cast<crash_point>(in_.below(crash_point_count));
                trace("crash_at {} {}", k, to_string(point));
                sim_.crash_at(k, point);
                break;
            }
            case op::stranger_frame:
            case op::member_frame: {
                const peer_id k = replica();
                peer_id as = stranger;
                if (o == op::member_frame) {
                    as = replica();
                    if (as == k) as = k % sim_.nodes().size() + 1;
                }
                frame_forger<sim_type> forger{in_, sim_, k, as};
                const shared_bytes frame = forger.forge();
                const bool queued = sim_.network().inject(as, k, frame);
                trace("forged frame {} -> {} ({} bytes){}", as, k, frame.size(),
                      queued ? "" : ": no connection");
                if (queued && as != stranger) liar_ = true;
                break;
            }
            case op::stranger_reset: {
                const peer_id k = replica();
                trace("stranger reset {}", k);
                sim_.network().break_connection(stranger, k);
                break;
            }
        }
    }

    void reconfigure() {
        const peer_id k = replica();
        const std::uint8_t voters = in_.byte();
        const std::uint8_t observers = in_.byte();
        const std::uint8_t cas = in_.byte();
        std::vector<member> members;
        for (const auto& n : sim_.nodes()) {
            const unsigned bit = 1u << (n.id - 1);
            if (voters & bit) members.push_back({n.id, learner_type::participant});
            else if (observers & bit) members.push_back({n.id, learner_type::observer});
        }
        reconfig_request request{std::move(members), std::nullopt};
        if (cas != 0) {
            const auto* p = sim_.peer_of(k);
            const std::uint64_t committed = p ? p->status().config_version : 0;
            request.expected_version = committed + cas - 1;
        }
        trace("reconfigure at {}: voters {:#x} observers {:#x} cas {}", k, voters, observers, cas);
        sim_.reconfigure(k, std::move(request));
    }

    /// The faults stop; the replicas that are not removed must settle on one leader, and a
    /// write at it must be applied everywhere.
    void recover() {
        trace("recover");
        sim_.disarm();
        sim_.network().clear_frame_faults();
        sim_.network().heal();
        for (const auto& n : sim_.nodes()) {
            sim_.resume(n.id);
            if (!n.peer) sim_.restart(n.id);
        }
        const sim_time deadline = sim_.now() + recovery_bound;
        auto restart_failed = [&] {
            note_unprovoked_failures();
            for (const auto& n : sim_.nodes())
                if (n.peer && n.peer->failed()) {
                    sim_.crash(n.id);
                    sim_.restart(n.id);
                }
        };
        auto everyone_established = [&] {
            restart_failed();
            const peer_id leader = established_leader(sim_);
            if (leader == 0) return false;
            for (const auto& n : sim_.nodes()) {
                if (n.peer && n.peer->status().removed) continue;
                if (!n.peer || !n.peer->established() || n.peer->current_vote().leader != leader)
                    return false;
            }
            return true;
        };
        auto applied_everywhere = [&](zxid z) {
            for (const auto& n : sim_.nodes()) {
                if (n.peer && n.peer->status().removed) continue;
                if (!n.peer || n.peer->last_applied() < z) return false;
            }
            return true;
        };
        while (!live_ && sim_.run_until(everyone_established, deadline)) {
            const peer_id leader = established_leader(sim_);
            const shared_bytes final_write = encoded("final");
            auto proposed = observer_.propose(leader, final_write.view());
            if (!proposed) {
                sim_.run_for(sim_.options().tick_us);
                continue;
            }
            const zxid final_txn = proposed.value();
            const bool settled = sim_.run_until(
                [&] {
                    restart_failed();
                    const auto* p = sim_.peer_of(leader);
                    const bool still_leads = p != nullptr && p->established() &&
                                             internals(*p).leading &&
                                             internals(*p).leading->epoch == final_txn.epoch();
                    return applied_everywhere(final_txn) || !still_leads;
                },
                deadline);
            if (!settled) break;
            live_ = applied_everywhere(final_txn);
        }
        for (const auto& n : sim_.nodes()) sim_.stop_clients(n.id);
    }

    void judge() {
        std::string report;
        for (const auto& v : invariants_.violations()) {
            if (liar_ && !holds_with_a_liar(v.what)) continue;
            report += fmt::format("#{} {} ({}): {}\n", v.observation, to_string(v.what),
                                  citation(v.what), v.detail);
        }
        if (!liar_) {
            if (!unprovoked_failure_.empty()) report += unprovoked_failure_ + "\n";
            for (const auto& f : elections_.failures()) report += fmt::format("election: {}\n", f);
            if (!live_) {
                report += fmt::format("liveness: not recovered within {} us\n", recovery_bound);
                for (const auto& n : sim_.nodes())
                    if (n.peer)
                        report += fmt::format(
                            "  peer {}: {} {} leader {} epochs {}/{} applied {} logged {}{}{}\n",
                            n.id, n.peer->state(), n.peer->current_phase(),
                            n.peer->current_vote().leader, n.peer->durable_epochs().accepted,
                            n.peer->durable_epochs().current, n.peer->last_applied(),
                            n.peer->last_logged(), n.peer->failed() ? " FAILED" : "",
                            n.peer->status().removed ? " REMOVED" : "");
            }
        }
        if (!report.empty())
            oracle_failed(fmt::format("a member lied: {}\n{}", liar_ ? "yes" : "no", report));
    }

    program_reader& in_;
    encoder encode_;
    sim_type sim_;
    invariant_checker invariants_;
    protocol_observer<sim_type> observer_;
    election_checker<sim_type> elections_;
    std::uint64_t writes_ = 0;
    bool liar_ = false;  // a member's forged frame was delivered
    bool live_ = false;
    std::string unprovoked_failure_;
};

/// The kv example's transaction for a write of the program: a SET of one of 16 keys (chosen
/// by the text's hash, so that values are overwritten), untagged.
std::string kv_set_command(std::string_view text) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    const kv::command c{kv::set_op{fmt::format("k{}", h % 16), std::string{text}}, std::nullopt};
    auto bytes = kv::encode(c);
    if (!bytes) oracle_failed("a SET command of the fuzzer does not encode");
    const auto& b = bytes.value();
    return std::string{reinterpret_cast<const char*>(b.data()), b.size()};
}

template <typename Machine>
std::uint64_t run_on(program_reader& in, std::string (*encode)(std::string_view)) {
    cluster_run<Machine> run{in, encode};
    return run.run();
}

std::uint64_t run_once(const std::uint8_t* data, std::size_t size) {
    // The peers' warnings (no leader yet, a peer misbehaved) are what a fuzzer provokes.
    set_log_level(tracing() ? log_level::info : log_level::off);
    program_reader in{data, size};
    // The machine (cluster_program.hpp): the recording machine, which models every optional
    // concept, or one that models none, a session machine, or the kv example's own.
    switch (zab::fuzz::machine_of(size > 8 ? data[8] : 0)) {
        case zab::fuzz::machine::recording: return run_on<recording_state_machine>(in, nullptr);
        case zab::fuzz::machine::plain: return run_on<recorded<concept_machine<false, false, false>>>(in, nullptr);
        case zab::fuzz::machine::session:
            return run_on<recorded<session_machine<concept_machine<false, true, false>>>>(in, nullptr);
        case zab::fuzz::machine::kv: return run_on<recorded<kv::kv_state_machine>>(in, &kv_set_command);
    }
    oracle_failed("no such machine");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::uint64_t hash = run_once(data, size);
#ifdef ZAB_CLUSTER_FUZZ_CHECK_DETERMINISM
    if (run_once(data, size) != hash) oracle_failed("the same input gave two different runs");
#else
    (void)hash;
#endif
    return 0;
}
