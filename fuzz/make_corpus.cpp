// Writes the seed corpus of the decode fuzzer: one valid frame of every message type, and one
// frame for each decoding error. libFuzzer mutates from these, so every payload decoder and
// every error branch is reachable from the first run.
//
//   zab_fuzz_make_corpus write DIR   write the seeds into DIR (fuzz/corpus/decode/)
//   zab_fuzz_make_corpus check DIR   fail unless DIR holds every seed, byte for byte
//
// `check` runs under ctest: after a format change the seeds would stop being valid frames
// and the fuzzer would start far from the decoders; regenerate them with `write`.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

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
    std::vector<std::pair<std::string, bytes>> out;
    const std::vector<wire::message> valid{
        wire::notification{peer_state::looking, 1, zxid{1, 3}, 2, 1},
        wire::follower_info{1, protocol_version},
        wire::observer_info{1, protocol_version},
        wire::leader_info{2, protocol_version},
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
    payload = payload_of(proposal_frame);
    payload[8] = std::byte{0xff};  // the txn's length now runs past the payload
    out.emplace_back("invalid-length_overrun", with_payload(proposal_frame, payload));
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
    if (argc != 3 || (std::strcmp(argv[1], "write") != 0 && std::strcmp(argv[1], "check") != 0)) {
        std::fprintf(stderr, "usage: %s write|check DIR\n", argv[0]);
        return 2;
    }
    const bool write = std::strcmp(argv[1], "write") == 0;
    const std::filesystem::path dir{argv[2]};
    int problems = 0;
    for (const auto& [name, frame] : seeds()) {
        // The seeds are what they claim: valid ones decode, invalid ones do not.
        const bool decodes = static_cast<bool>(decode(frame));
        if (decodes != name.starts_with("valid-")) {
            std::fprintf(stderr, "seed %s: decodes=%d\n", name.c_str(), decodes ? 1 : 0);
            ++problems;
        }
        const auto path = dir / name;
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
    std::printf("%zu seeds %s, %d problems\n", seeds().size(), write ? "written" : "checked",
                problems);
    return problems == 0 ? 0 : 1;
}
