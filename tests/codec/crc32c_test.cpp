// CRC32C: known vectors, extend semantics, and the hardware and portable implementations
// against each other and against a bit-at-a-time reference on random inputs.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "zab/core/crc32c.hpp"

namespace {

using zab::byte_view;
using zab::test::bytes_of;

/// The definition of CRC32C, one bit at a time: slow, obviously right, shares nothing with
/// the implementations under test.
std::uint32_t crc32c_reference(byte_view data, std::uint32_t seed = 0) {
    std::uint32_t crc = ~seed;
    for (std::byte b : data) {
        crc ^= std::to_integer<std::uint32_t>(b);
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    }
    return ~crc;
}

/// Every implementation available on this machine, by name.
std::vector<std::pair<const char*, std::uint32_t (*)(byte_view, std::uint32_t)>> implementations() {
    std::vector<std::pair<const char*, std::uint32_t (*)(byte_view, std::uint32_t)>> all{
        {"reference", &crc32c_reference},
        {"portable",
         [](byte_view d, std::uint32_t s) { return zab::detail::crc32c_portable(d, s); }},
        {"dispatch", [](byte_view d, std::uint32_t s) { return zab::crc32c(d, s); }},
    };
#if ZAB_CRC32C_HAVE_SSE42
    if (zab::detail::crc32c_hardware_supported()) {
        all.emplace_back("hardware", [](byte_view d, std::uint32_t s) {
            return zab::detail::crc32c_hardware(d, s);
        });
    }
#endif
    return all;
}

}  // namespace

TEST_CASE("crc32c: known vectors (RFC 3720 B.4 and the usual check value)") {
    std::vector<std::byte> zeros(32, std::byte{0});
    std::vector<std::byte> ones(32, std::byte{0xff});
    std::vector<std::byte> ascending(32);
    std::vector<std::byte> descending(32);
    for (std::size_t i = 0; i < 32; ++i) {
        ascending[i] = static_cast<std::byte>(i);
        descending[i] = static_cast<std::byte>(31 - i);
    }
    // An iSCSI SCSI Read (10) command PDU, RFC 3720 B.4.
    const auto iscsi_read = bytes_of({
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    });

    for (const auto& [name, crc] : implementations()) {
        INFO(name);
        CHECK(crc(zab::as_bytes("123456789"), 0) == 0xE3069283u);
        CHECK(crc(zeros, 0) == 0x8A9136AAu);
        CHECK(crc(ones, 0) == 0x62A8AB43u);
        CHECK(crc(ascending, 0) == 0x46DD794Eu);
        CHECK(crc(descending, 0) == 0x113FDB5Cu);
        CHECK(crc(iscsi_read, 0) == 0xD9963A56u);
        CHECK(crc(byte_view{}, 0) == 0u);
        CHECK(crc(zab::as_bytes("a"), 0) == 0xC1D04330u);
    }
}

TEST_CASE("crc32c: the seed extends a previous CRC, crc(b, crc(a)) == crc(a + b)") {
    zab::test::splitmix64 rng{0xc7c32c};
    std::vector<std::byte> data(3000);
    for (auto& b : data) b = static_cast<std::byte>(rng.next());
    const byte_view all{data};
    for (const auto& [name, crc] : implementations()) {
        INFO(name);
        const std::uint32_t whole = crc(all, 0);
        for (int i = 0; i < 200; ++i) {
            const std::size_t split = rng.below(data.size() + 1);
            INFO("split at " << split);
            CHECK(crc(all.subspan(split), crc(all.first(split), 0)) == whole);
        }
    }
}

TEST_CASE("crc32c: all implementations agree on random lengths and alignments") {
    zab::test::splitmix64 rng{20240611};
    std::vector<std::byte> buffer(70000 + 64);
    for (auto& b : buffer) b = static_cast<std::byte>(rng.next());
    const auto all = implementations();
    for (int i = 0; i < 3000; ++i) {
        // Mostly short inputs (every tail length and alignment), sometimes long ones.
        const std::size_t offset = rng.below(64);
        const std::size_t length = rng.one_in(20) ? rng.below(70000) : rng.below(300);
        const std::uint32_t seed = rng.one_in(2) ? 0 : static_cast<std::uint32_t>(rng.next());
        const byte_view data{buffer.data() + offset, length};
        INFO("case " << i << ": offset " << offset << ", length " << length << ", seed " << seed);
        const std::uint32_t expected = all.front().second(data, seed);
        for (const auto& [name, crc] : all) {
            INFO(name);
            CHECK(crc(data, seed) == expected);
        }
    }
}

TEST_CASE("crc32c: dispatch uses the hardware instruction when the CPU has it") {
#if ZAB_CRC32C_HAVE_SSE42
    // Every x86-64 CPU zab targets has SSE4.2; say so when it is missing instead of failing,
    // as the portable path is then the one in use and is tested above.
    if (!zab::detail::crc32c_hardware_supported()) {
        WARN("this CPU has no SSE4.2: only the portable CRC32C was tested");
    }
    CHECK(zab::detail::crc32c_hardware_supported() == (__builtin_cpu_supports("sse4.2") != 0));
#else
    CHECK_FALSE(zab::detail::crc32c_hardware_supported());
#endif
}
