// Writes the seed corpus of the decode fuzzer: one valid frame of every message type, and one
// frame for each decoding error. libFuzzer mutates from these, so every payload decoder and
// every error branch is reachable from the first run. With RESP_DIR, also the seeds of the
// RESP fuzzer (resp_fuzzer.cpp): an 8-byte schedule, then what a client sends — pipelines,
// MULTI/EXEC/WATCH blocks, RESP3, inline commands, and malformed frames. With CLUSTER_DIR,
// also the seeds of the cluster fuzzer (cluster_fuzzer.cpp): programs in its byte code
// (cluster_program.hpp) — a quiet cluster, writes, syncs, crashes, partitions, stalls,
// reconfigurations, transfers, armed crashes, and every message type forged by a stranger and
// by a member, each to every replica.
//
//   zab_fuzz_make_corpus write DIR [RESP_DIR [CLUSTER_DIR]]   write the seeds (fuzz/corpus/
//                                                             decode/, resp/, cluster/)
//   zab_fuzz_make_corpus check DIR [RESP_DIR [CLUSTER_DIR]]   fail unless the dirs hold
//                                                             every seed, byte for byte
//
// `check` runs under ctest: after a format change the seeds would stop being valid frames
// and the fuzzer would start far from the decoders; regenerate them with `write`.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "cluster_program.hpp"
#include "zab/core/codec.hpp"

namespace {

using namespace zab;
using bytes = std::vector<std::byte>;

bytes to_bytes(byte_view view) { return {view.begin(), view.end()}; }

bytes encoded(const wire::message& m) {
    // Small, distinctive group id and config version: the fuzzer learns they are free.
    return to_bytes(encode({3, 2}, m).view());
}

/// `frame` with its payload replaced, and the header's length and CRC recomputed.
bytes with_payload(bytes frame, const bytes& payload) {
    frame.resize(frame_header_size);
    frame.insert(frame.end(), payload.begin(), payload.end());
    const auto length = static_cast<std::uint32_t>(payload.size());
    const std::uint32_t crc = crc32c(payload);
    std::memcpy(frame.data() + 24, &length, 4);  // the generator runs on little-endian hosts
    std::memcpy(frame.data() + 28, &crc, 4);
    return frame;
}

bytes payload_of(const bytes& frame) { return {frame.begin() + frame_header_size, frame.end()}; }

std::vector<std::pair<std::string, bytes>> seeds() {
    static_assert(std::endian::native == std::endian::little);
    const byte_view txn = as_bytes("set x=1");
    // Two entries of a PROPOSALS batch: "set x=1" and "y".
    const bytes batch_bytes{std::byte{7}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{'s'},
                            std::byte{'e'}, std::byte{'t'}, std::byte{' '}, std::byte{'x'},
                            std::byte{'='}, std::byte{'1'}, std::byte{1}, std::byte{0},
                            std::byte{0}, std::byte{0}, std::byte{'y'}};
    const byte_view batch_entries{batch_bytes};
    std::vector<std::pair<std::string, bytes>> out;
    const std::vector<wire::message> valid{
        wire::notification{peer_state::looking, 1, zxid{1, 3}, 2, 1},
        wire::follower_info{1, protocol_version, {10, 100'000, 0x5eed}},
        wire::observer_info{1, protocol_version, {}},
        wire::leader_info{2, protocol_version, {10, 100'000, 0x5eed}},
        wire::ack_epoch{zxid{1, 3}, 1u},
        wire::diff{zxid{1, 3}},
        zab::wire::trunc{zxid{1, 2}},
        wire::snap{zxid{1, 3}, 8, 0, as_bytes("snapshot")},
        wire::snap_ack{8},
        wire::sync_ack{zxid{2, 1}},
        wire::new_leader{zxid{2, 0}},
        wire::ack{zxid{2, 1}},
        wire::up_to_date{},
        wire::proposal{zxid{2, 1}, txn},
        wire::commit{zxid{2, 1}},
        wire::inform{zxid{2, 1}, txn},
        wire::forwarded_request{7, wire::request_kind::write, txn},
        wire::ping{zxid{2, 1}, 4},
        zab::wire::sync_answer{7},
        wire::forwarded_reply{9, wire::reply_outcome::backpressure, zxid{}},
        wire::handover{2, zxid{2, 1}, 2, 3},
        wire::proposal_batch{zxid{2, 1}, 2, batch_entries},
        wire::forwarded_batch{7, 2, batch_entries},
        wire::reply_batch{7, 2, wire::reply_outcome::accepted, zxid{2, 1}},
    };
    for (const auto& m : valid) {
        std::string name{to_string(type_of(m))};
        for (auto& c : name) c = static_cast<char>(c - 'A' + 'a');
        out.emplace_back("valid-" + name, encoded(m));
    }
    out.emplace_back("valid-ackepoch-absent", encoded(wire::ack_epoch{zxid{1, 3}, std::nullopt}));
    out.emplace_back("valid-request-sync", encoded(wire::forwarded_request{8, wire::request_kind::sync, {}}));

    const bytes commit_frame = encoded(wire::commit{zxid{2, 1}});
    const bytes proposal_frame = encoded(wire::proposal{zxid{2, 1}, txn});
    auto patched = [](bytes frame, std::size_t at, std::uint8_t value) {
        frame[at] = std::byte{value};
        return frame;
    };
    out.emplace_back("invalid-empty", bytes{});
    out.emplace_back("invalid-bad_magic", patched(commit_frame, 0, 'z'));
    out.emplace_back("invalid-version", patched(commit_frame, 4, frame_version + 1));
    out.emplace_back("invalid-unknown_type", patched(commit_frame, 5, 99));
    out.emplace_back("invalid-flags", patched(commit_frame, 6, 1));
    out.emplace_back("invalid-oversized", patched(commit_frame, 27, 0xff));
    out.emplace_back("invalid-truncated_header",
                     bytes(commit_frame.begin(), commit_frame.begin() + 20));
    out.emplace_back("invalid-truncated_payload",
                     bytes(proposal_frame.begin(), proposal_frame.end() - 1));
    out.emplace_back("invalid-bad_checksum",
                     patched(proposal_frame, proposal_frame.size() - 1, '2'));
    bytes longer = commit_frame;
    longer.push_back(std::byte{0});
    out.emplace_back("invalid-extra_byte", longer);

    // Bad payloads behind a correct CRC, so that they reach the payload decoders.
    bytes payload = payload_of(commit_frame);
    payload.push_back(std::byte{0});
    out.emplace_back("invalid-trailing_payload_byte", with_payload(commit_frame, payload));
    const bytes vote = encoded(wire::notification{peer_state::looking, 1, zxid{1, 3}, 2, 1});
    payload = payload_of(vote);
    payload[0] = std::byte{4};  // no peer_state 4
    out.emplace_back("invalid-enum", with_payload(vote, payload));
    const bytes promise = encoded(wire::ack_epoch{zxid{1, 3}, 1u});
    payload = payload_of(promise);
    payload[8] = std::byte{2};
    out.emplace_back("invalid-optional_flag", with_payload(promise, payload));
    // FOLLOWERINFO in frame version 4's layout: an epoch and a protocol, no agreed options.
    const bytes info_frame = encoded(wire::follower_info{1, protocol_version, {10, 100'000, 0x5eed}});
    payload = payload_of(info_frame);
    payload.resize(8);
    out.emplace_back("invalid-followerinfo_v4_layout", with_payload(info_frame, payload));
    payload = payload_of(proposal_frame);
    payload[8] = std::byte{0xff};  // the txn's length now runs past the payload
    out.emplace_back("invalid-length_overrun", with_payload(proposal_frame, payload));
    // A batch that claims three transactions and holds two; one that starts at counter 0.
    const bytes batch_frame = encoded(wire::proposal_batch{zxid{2, 1}, 2, batch_entries});
    payload = payload_of(batch_frame);
    payload[8] = std::byte{3};
    out.emplace_back("invalid-batch_count", with_payload(batch_frame, payload));
    payload = payload_of(batch_frame);
    payload[0] = std::byte{0};
    out.emplace_back("invalid-batch_counter_zero", with_payload(batch_frame, payload));
    // docs/protocol.md §0.2: a type of frame version 6 in a frame of version 5, one of 5 in
    // 6; REQUESTS that miscount their writes, REPLIES that refuse with a zxid.
    const bytes requests_frame = encoded(wire::forwarded_batch{7, 2, batch_entries});
    out.emplace_back("invalid-requests_in_v5", patched(requests_frame, 4, 5));
    out.emplace_back("invalid-commit_in_v6", patched(commit_frame, 4, 6));
    payload = payload_of(requests_frame);
    payload[8] = std::byte{3};
    out.emplace_back("invalid-requests_count", with_payload(requests_frame, payload));
    const bytes replies_frame = encoded(wire::reply_batch{7, 2, wire::reply_outcome::backpressure, zxid{}});
    payload = payload_of(replies_frame);
    payload[13] = std::byte{1};  // the first zxid of a refusal is not zero
    out.emplace_back("invalid-replies_refusal_zxid", with_payload(replies_frame, payload));
    return out;
}

/// The RESP fuzzer's seeds.
std::vector<std::pair<std::string, bytes>> resp_seeds() {
    const auto cmd = [](std::initializer_list<std::string_view> args) {
        std::string out = "*" + std::to_string(args.size()) + "\r\n";
        for (const auto a : args) out += "$" + std::to_string(a.size()) + "\r\n" + std::string{a} + "\r\n";
        return out;
    };
    const auto seed = [](std::uint64_t schedule, const std::string& stream) {
        bytes out(8);
        std::memcpy(out.data(), &schedule, 8);
        for (const char c : stream) out.push_back(static_cast<std::byte>(c));
        return out;
    };
    std::vector<std::pair<std::string, bytes>> out;
    out.emplace_back("pipeline", seed(1, cmd({"SET", "a", "1"}) + cmd({"GET", "a"}) +
                                             cmd({"INCR", "c"}) + cmd({"MGET", "a", "c", "z"}) +
                                             cmd({"DEL", "a"}) + cmd({"PING"}) +
                                             cmd({"EXISTS", "a", "c"})));
    out.emplace_back("multi", seed(2, cmd({"MULTI"}) + cmd({"SET", "a", "1"}) + cmd({"INCR", "c"}) +
                                          cmd({"GET", "a"}) + cmd({"APPEND", "a", "x"}) +
                                          cmd({"EXEC"}) + cmd({"GET", "a"})));
    out.emplace_back("watch", seed(3, cmd({"WATCH", "a", "b"}) + cmd({"GET", "a"}) +
                                          cmd({"MULTI"}) + cmd({"SET", "a", "2"}) +
                                          cmd({"SET", "b", "2"}) + cmd({"EXEC"}) +
                                          cmd({"WATCH", "a"}) + cmd({"SET", "a", "3"}) +
                                          cmd({"MULTI"}) + cmd({"INCR", "a"}) + cmd({"EXEC"}) +
                                          cmd({"UNWATCH"})));
    out.emplace_back("multi-aborted", seed(4, cmd({"MULTI"}) + cmd({"SET", "a"}) +
                                                  cmd({"NOSUCHCMD"}) + cmd({"EXEC"}) +
                                                  cmd({"MULTI"}) + cmd({"MULTI"}) +
                                                  cmd({"WATCH", "a"}) + cmd({"DISCARD"}) +
                                                  cmd({"EXEC"}) + cmd({"DISCARD"})));
    out.emplace_back("expiry", seed(5, cmd({"SET", "e", "v", "PX", "10"}) + cmd({"PTTL", "e"}) +
                                           cmd({"EXPIRE", "e", "100"}) + cmd({"TTL", "e"}) +
                                           cmd({"SET", "f", "v", "EX", "1", "NX", "GET"}) +
                                           cmd({"PERSIST", "e"}) + cmd({"GET", "e"})));
    out.emplace_back("readmode", seed(6, cmd({"READMODE", "linearizable"}) + cmd({"GET", "a"}) +
                                             cmd({"SET", "a", "1"}) + cmd({"MGET", "a", "b"}) +
                                             cmd({"SYNC"}) + cmd({"INFO"}) +
                                             cmd({"READMODE", "local"}) + cmd({"GET", "a"})));
    out.emplace_back("resp3", seed(7, cmd({"HELLO", "3"}) + cmd({"GET", "missing"}) +
                                          cmd({"WATCH", "k"}) + cmd({"SET", "k", "1"}) +
                                          cmd({"MULTI"}) + cmd({"GET", "k"}) + cmd({"EXEC"}) +
                                          cmd({"RESET"}) + cmd({"GET", "missing"})));
    out.emplace_back("tagged", seed(8, cmd({"TAGGED", "1", "1", "SET", "k", "v"}) +
                                           cmd({"TAGGED", "1", "1", "SET", "k", "v"}) +
                                           cmd({"TAGGED", "1", "2", "CAS", "k", "v", "w"}) +
                                           cmd({"TAGGED", "x", "1", "GET", "k"})));
    out.emplace_back("inline", seed(9, "PING\r\nSET k \"a b\"\r\n\r\nGET k\nMULTI\r\n"
                                           "INCR n\r\nEXEC\r\n"));
    out.emplace_back("quit", seed(10, cmd({"SET", "a", "1"}) + cmd({"QUIT"}) + cmd({"GET", "a"})));
    out.emplace_back("bad-bulk-length", seed(11, cmd({"PING"}) + "*2\r\n$3\r\nGET\r\n$99999\r\n"));
    out.emplace_back("bad-array-length", seed(12, cmd({"MULTI"}) + "*x\r\n"));
    out.emplace_back("bad-crlf", seed(13, "*1\r\n$4\r\nPINGxx" + cmd({"PING"})));
    out.emplace_back("bad-quotes", seed(14, "SET k \"unbalanced\r\n"));
    out.emplace_back("unfinished", seed(15, cmd({"MULTI"}) + cmd({"SET", "a", "1"}) +
                                                "*3\r\n$3\r\nSET\r\n$1\r\nb"));
    return out;
}

// --- cluster fuzzer seeds --------------------------------------------------------------------

using zab::fuzz::op;
using zab::fuzz::program_writer;
using program = std::vector<std::uint8_t>;

bytes to_seed(const program_writer& p) {
    bytes out;
    for (const std::uint8_t b : p.bytes()) out.push_back(static_cast<std::byte>(b));
    return out;
}

/// The frame operand of a forged message of variant index `index` (wire::message), with its
/// fields spelled near the cluster's state (cluster_program.hpp: zxid mode 1 is the receiver's
/// last logged, 7 the one after it, 5 with epoch byte 3/4 the epoch marker of the accepted
/// epoch/the next; epoch byte 3 is the receiver's accepted epoch).
program forged(std::size_t index) {
    static const std::array<program, 24> fields{{
        {0, 1, 1, 0, 3},        // NOTIFICATION: LOOKING, for 1, the receiver's zxid and epoch
        {3, 0},                 // FOLLOWERINFO: accepted epoch, protocol version
        {3, 0},                 // OBSERVERINFO
        {4, 0},                 // LEADERINFO: the next epoch
        {1, 1, 3},              // ACKEPOCH: last logged, current epoch
        {1},                    // DIFF
        {3, 0, 0xff},           // TRUNC: one below the receiver's last logged
        {5, 3, 4, 2, 7, 8, 0},  // SNAP: at (e, 0), a snapshot of two entries
        {0},                    // SNAPACK
        {1},                    // SYNCACK
        {5, 3},                 // NEWLEADER (e, 0)
        {7},                    // ACK of the zxid after the receiver's last logged
        {},                     // UPTODATE
        {7, 3, 42},             // PROPOSAL of the next zxid
        {1},                    // COMMIT of the receiver's last logged
        {7, 3, 1},              // INFORM of the next zxid
        {1, 0, 3, 5},           // REQUEST: a write
        {1, 0},                 // PING
        {1},                    // SYNC answer
        {1, 0, 1},              // REPLY: accepted
        {2, 1, 3, 0},           // HANDOVER to 2
        {7, 2, 3, 42, 3, 43, 0},  // PROPOSALS: the next two zxids, short txns
        {1, 2, 3, 42, 3, 43, 0},  // REQUESTS: two short writes
        {1, 2, 0, 7},             // REPLIES: two accepted from the zxid after the receiver's
    }};
    program out{static_cast<std::uint8_t>(index), 0};
    out.insert(out.end(), fields[index].begin(), fields[index].end());
    return out;
}

constexpr const char* message_names[24] = {
    "notification", "followerinfo", "observerinfo", "leaderinfo", "ackepoch", "diff", "trunc",
    "snap", "snapack", "syncack", "newleader", "ack", "uptodate", "proposal", "commit", "inform",
    "request", "ping", "sync", "reply", "handover", "proposals", "requests", "replies"};
static_assert(std::size(message_names) == std::variant_size_v<wire::message>);

program operands(std::initializer_list<std::uint8_t> first, const program& rest) {
    program out{first};
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
}

std::vector<std::pair<std::string, bytes>> cluster_seeds() {
    const auto r = program_writer::replica;
    std::vector<std::pair<std::string, bytes>> out;
    auto add = [&](std::string name, const program_writer& p) {
        out.emplace_back("cluster-" + std::move(name), to_seed(p));
    };
    auto writes = [&](program_writer& p, int n) {
        for (int i = 0; i < n; ++i) p(op::submit, {r(1 + i % 3), 2, 'a', 'b'});
        p(op::propose, {1, 'p'});
    };
    {
        program_writer p{1};
        p(op::run, {255})(op::run, {255});
        add("quiet", p);
    }
    {
        program_writer p{2};
        p(op::run, {150});
        writes(p, 6);
        p(op::run, {20});
        writes(p, 3);
        p(op::run, {100});
        add("writes", p);
    }
    {
        program_writer p{3};
        p(op::run, {150})(op::sync, {r(1)})(op::sync, {r(2)})(op::submit, {r(3), 0})(op::sync, {r(3)});
        p(op::run, {100});
        add("syncs", p);
    }
    {
        program_writer p{4};
        p(op::run, {150});
        for (std::uint8_t k = 1; k <= 3; ++k) {
            writes(p, 3);
            p(op::crash, {r(k)})(op::run, {60})(op::restart, {r(k)})(op::run, {80});
        }
        add("crash-restart", p);
    }
    {
        program_writer p{5};
        p(op::run, {150})(op::partition, {0x1});
        writes(p, 3);
        p(op::run, {120})(op::partition, {0x6})(op::run, {120})(op::heal)(op::run, {150});
        add("partition", p);
    }
    {
        program_writer p{6};
        p(op::run, {150})(op::pause, {r(1)})(op::pause, {r(2)});
        writes(p, 3);
        p(op::run, {100})(op::resume, {r(1)})(op::run, {50})(op::resume, {r(2)})(op::run, {150});
        add("pause-resume", p);
    }
    {
        program_writer p{7};
        p(op::run, {150});
        writes(p, 2);
        p(op::break_link, {r(1), r(2)})(op::block_one_way, {r(2), r(3)});
        writes(p, 2);
        p(op::run, {200})(op::block_one_way, {r(3), r(1)})(op::run, {50})(op::heal)(op::run, {150});
        add("links", p);
    }
    {
        program_writer p{8, 1};  // one joiner, replica 4
        p(op::run, {150});
        writes(p, 3);
        p(op::reconfigure, {r(1), 0x0f, 0, 1})(op::run, {150});
        writes(p, 3);
        p(op::run, {100});
        add("reconfig-add-voter", p);
    }
    {
        program_writer p{9, 2};  // two joiners
        p(op::run, {150})(op::reconfigure, {r(2), 0x07, 0x18, 0})(op::run, {150});
        writes(p, 2);
        p(op::reconfigure, {r(1), 0x0b, 0, 1})(op::run, {150});
        writes(p, 2);
        p(op::run, {100});
        add("reconfig-observers-replace", p);
    }
    {
        program_writer p{10};
        p(op::run, {150})(op::reconfigure, {r(3), 0x03, 0x04, 1})(op::run, {150});
        writes(p, 2);
        p(op::reconfigure, {r(1), 0x07, 0, 5})(op::reconfigure, {r(1), 0x00, 0x07, 0});
        p(op::run, {100});
        add("reconfig-flip-stale-invalid", p);
    }
    {
        program_writer p{11};
        p(op::run, {150});
        writes(p, 2);
        p(op::transfer, {r(1), 0})(op::transfer, {r(2), 3})(op::transfer, {r(3), 7});
        p(op::run, {100})(op::transfer, {r(1), 2});
        writes(p, 2);
        p(op::run, {100});
        add("transfer", p);
    }
    // Issue 34's combinations on machines unlike the recording one (cluster_program.hpp's
    // shape byte), compacting every 4 applied: a replica down across a reconfiguration and
    // compactions, the leader restarted (its successor reads its history from a snapshot),
    // then the replica restarted (a SNAP) and the leadership transferred to it; and a
    // restarted replica synced while writes go on and replicas compact.
    const std::pair<zab::fuzz::machine, const char*> machines[] = {
        {zab::fuzz::machine::plain, "plain"}, {zab::fuzz::machine::session, "session"},
        {zab::fuzz::machine::kv, "kv"}};
    for (std::size_t m = 0; m < std::size(machines); ++m) {
        const auto [machine, name] = machines[m];
        {
            program_writer p{30 + m, zab::fuzz::shape_of(1, machine, true)};
            p(op::run, {150});
            writes(p, 3);
            p(op::run, {20})(op::crash, {r(1)});
            writes(p, 9);
            p(op::reconfigure, {r(2), 0x0f, 0, 1})(op::run, {150});
            writes(p, 9);
            p(op::run, {20})(op::crash, {r(3)})(op::run, {100})(op::restart, {r(3)})(op::run, {150});
            writes(p, 5);
            p(op::run, {20})(op::restart, {r(1)})(op::run, {150})(op::transfer, {r(2), 1});
            p(op::run, {100});
            writes(p, 3);
            p(op::run, {100});
            add(std::string{"combined-reconfig-restart-"} + name, p);
        }
        {
            program_writer p{40 + m, zab::fuzz::shape_of(0, machine, true)};
            p(op::run, {150});
            writes(p, 5);
            p(op::run, {20})(op::crash, {r(2)});
            writes(p, 12);
            p(op::run, {20})(op::crash, {r(3)})(op::run, {100})(op::restart, {r(3)})(op::run, {100});
            writes(p, 5);
            p(op::restart, {r(2)});
            for (int i = 0; i < 6; ++i) {
                writes(p, 2);
                p(op::run, {2});
            }
            p(op::run, {150});
            add(std::string{"combined-sync-compaction-"} + name, p);
        }
    }
    for (std::uint8_t batch = 0; batch < 3; ++batch) {
        program_writer p{12u + batch};
        for (std::uint8_t i = 0; i < 5; ++i)
            p(op::crash_at, {static_cast<std::uint8_t>(i % 4), static_cast<std::uint8_t>(batch * 5 + i)});
        p(op::run, {150});
        writes(p, 3);
        p(op::crash, {r(1)})(op::run, {100})(op::restart, {r(1)});
        writes(p, 3);
        p(op::run, {150});
        add("crash-points-" + std::to_string(batch), p);
    }
    {
        // Every message type from a stranger, to every replica, while the cluster works.
        program_writer p{20};
        p(op::run, {150});
        for (std::size_t i = 0; i < std::size(message_names); ++i) {
            for (std::uint8_t k = 1; k <= 3; ++k) p(op::stranger_frame, operands({r(k)}, forged(i)));
            if (i % 5 == 4) writes(p, 1);
            p(op::run, {5});
        }
        p(op::stranger_reset, {r(1)})(op::run, {100});
        add("stranger-every-message", p);
    }
    {
        // Damaged frames: flipped, cut short, raw bytes, another group, a newer configuration.
        program_writer p{21};
        p(op::run, {150});
        for (std::uint8_t k = 1; k <= 3; ++k) {
            p(op::stranger_frame, {r(k), zab::fuzz::frame_flipped + 14, 0, 1, 40, 0x10});
            p(op::stranger_frame, {r(k), zab::fuzz::frame_truncated + 11, 0, 7, 33});
            p(op::stranger_frame, {r(k), zab::fuzz::frame_raw, 6, 0x5a, 0x41, 0x42, 0x31, 3, 0});
            p(op::member_frame, {r(k), r(k % 3 + 1), 14, 1, 9, 0, 0, 0, 0, 0, 0, 0, 1});
            p(op::member_frame, {r(k), r(k % 3 + 1), 17, 2, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0});
        }
        writes(p, 2);
        p(op::run, {150});
        add("damaged-frames", p);
    }
    for (std::size_t i = 0; i < std::size(message_names); ++i) {
        // Message type i forged by every member to every other, as leader and as learner.
        program_writer p{100 + i, static_cast<std::uint8_t>(i % 3)};
        p(op::run, {150});
        writes(p, 2);
        p(op::run, {10});
        for (std::uint8_t k = 1; k <= 3; ++k)
            for (std::uint8_t j = 1; j <= 3; ++j)
                if (j != k) p(op::member_frame, operands({r(k), r(j)}, forged(i)));
        writes(p, 2);
        p(op::run, {150});
        add(std::string{"member-"} + message_names[i], p);
    }
    return out;
}

bytes read_file(const std::filesystem::path& path) {
    std::ifstream in{path, std::ios::binary};
    const std::vector<char> chars{std::istreambuf_iterator<char>{in},
                                  std::istreambuf_iterator<char>{}};
    bytes out(chars.size());
    if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5 ||
        (std::strcmp(argv[1], "write") != 0 && std::strcmp(argv[1], "check") != 0)) {
        std::fprintf(stderr, "usage: %s write|check DIR [RESP_DIR [CLUSTER_DIR]]\n", argv[0]);
        return 2;
    }
    const bool write = std::strcmp(argv[1], "write") == 0;
    int problems = 0;
    std::vector<std::pair<std::filesystem::path, bytes>> files;
    for (auto& [name, frame] : seeds()) {
        // The seeds are what they claim: valid ones decode, invalid ones do not.
        const bool decodes = static_cast<bool>(decode(frame));
        if (decodes != name.starts_with("valid-")) {
            std::fprintf(stderr, "seed %s: decodes=%d\n", name.c_str(), decodes ? 1 : 0);
            ++problems;
        }
        files.emplace_back(std::filesystem::path{argv[2]} / name, std::move(frame));
    }
    if (argc >= 4)
        for (auto& [name, stream] : resp_seeds())
            files.emplace_back(std::filesystem::path{argv[3]} / name, std::move(stream));
    if (argc == 5)
        for (auto& [name, program] : cluster_seeds())
            files.emplace_back(std::filesystem::path{argv[4]} / name, std::move(program));
    for (const auto& [path, frame] : files) {
        const std::filesystem::path dir = path.parent_path();
        const std::string name = path.filename().string();
        if (write) {
            std::ofstream out{path, std::ios::binary | std::ios::trunc};
            out.write(reinterpret_cast<const char*>(frame.data()),
                      static_cast<std::streamsize>(frame.size()));
            if (!out) {
                std::fprintf(stderr, "cannot write %s\n", path.c_str());
                ++problems;
            }
        } else if (!std::filesystem::is_regular_file(path) || read_file(path) != frame) {
            std::fprintf(stderr, "seed %s is missing or stale in %s: run `%s write %s`\n",
                         name.c_str(), dir.c_str(), argv[0], dir.c_str());
            ++problems;
        }
    }
    std::printf("%zu seeds %s, %d problems\n", files.size(), write ? "written" : "checked",
                problems);
    return problems == 0 ? 0 : 1;
}
