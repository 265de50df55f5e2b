// Fuzz target for the frame decoder (include/zab/core/codec.hpp).
//
// Input: arbitrary bytes, taken as one frame. Oracles, beyond "no crash, no sanitizer
// report":
// - decode_header and decode agree: on the header's fields, and on the error when the
//   header is already bad;
// - every error is one of the codec's own (truncated … malformed);
// - a tighter payload limit changes nothing but turning longer frames into `oversized`;
// - decode∘encode is the identity: a frame that decodes re-encodes, with the same group id
//   and config version, to exactly the input bytes.
//
// Built as a libFuzzer binary with clang (ZAB_BUILD_FUZZERS=ON) and, with any compiler, as
// a replay program (replay_main.cpp) that runs the checked-in corpus as a regression test.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "zab/core/codec.hpp"

namespace {

[[noreturn]] void oracle_failed(const char* what) {
    std::fprintf(stderr, "decode_fuzzer: oracle failed: %s\n", what);
    std::abort();
}

void check(bool condition, const char* what) {
    if (!condition) oracle_failed(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const zab::byte_view input{reinterpret_cast<const std::byte*>(data), size};

    const auto header = zab::decode_header(input);
    const auto decoded = zab::decode(input);

    constexpr std::uint32_t tight_limit = 64;
    const auto tight = zab::decode(input, zab::codec_limits{tight_limit});
    if (header && header.value().payload_length > tight_limit) {
        check(!tight && tight.error() == zab::errc::oversized, "tight limit not enforced");
    } else if (decoded) {
        check(tight && tight.value().msg == decoded.value().msg, "tight limit changed a message");
    } else {
        check(!tight && tight.error() == decoded.error(), "tight limit changed an error");
    }

    if (!decoded) {
        const std::error_code code = decoded.error();
        check(code.category() == zab::error_category(), "decode error of another category");
        check(code.value() >= static_cast<int>(zab::errc::truncated) &&
                  code.value() <= static_cast<int>(zab::errc::malformed),
              "decode error outside the codec's range");
        if (!header) {
            check(header.error() == code, "decode and decode_header disagree on a bad header");
        }
        return 0;
    }

    check(header.has_value(), "decode succeeded where decode_header failed");
    const zab::frame_header& h = decoded.value().header;
    check(h == header.value(), "decode and decode_header disagree on the header");
    check(h.frame_size() == size, "decoded a frame of another size");
    check(zab::wire::type_of(decoded.value().msg) == h.type, "message type differs from the header");
    check(zab::encoded_size(decoded.value().msg) == size, "encoded_size differs from the input");

    const zab::shared_bytes again =
        zab::encode({h.group_id, h.config_version}, decoded.value().msg);
    check(again.size() == size && (size == 0 || std::memcmp(again.data(), data, size) == 0),
          "decode∘encode is not the identity");
    return 0;
}
