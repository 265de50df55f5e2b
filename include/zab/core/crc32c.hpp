// zab/core/crc32c.hpp — CRC32C (Castagnoli), with the SSE4.2 instruction where the CPU has it.
//
// Every frame (codec.hpp) carries the CRC32C of its payload. Castagnoli rather than the IEEE
// CRC32 of zlib: it detects more error patterns at the lengths we use, and x86-64 (SSE4.2)
// and ARMv8 compute it in hardware, so checking every frame costs far less than receiving it.
//
// Two implementations are always compiled and tested against each other and against known
// vectors (tests/codec/crc32c_test.cpp): a portable slicing-by-8 one, and on x86-64 one using
// the `crc32` instruction. `zab::crc32c` picks the fastest one the running CPU supports; the
// choice is made once at runtime, so one binary runs on CPUs with and without SSE4.2.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "zab/core/bytes.hpp"

// The hardware path needs GCC/clang's target attribute and <nmmintrin.h>; anything else
// (another architecture, another compiler) uses the portable code only. Defining
// ZAB_CRC32C_NO_HARDWARE builds an x86-64 binary the way other architectures get it, which
// is how the fallback is compile-checked on x86-64.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(ZAB_CRC32C_NO_HARDWARE)
#define ZAB_CRC32C_HAVE_SSE42 1
#include <nmmintrin.h>
#else
#define ZAB_CRC32C_HAVE_SSE42 0
#endif

namespace zab {
namespace detail {

/// The Castagnoli polynomial 0x1EDC6F41, bit-reversed (CRC32C processes bits LSB first).
inline constexpr std::uint32_t crc32c_polynomial_reflected = 0x82F63B78u;

/// Slicing-by-8 tables. `crc32c_table[0]` is the classic byte-at-a-time table;
/// `crc32c_table[k][b]` is the CRC contribution of byte `b` followed by `k` zero bytes, which
/// lets the portable loop fold 8 input bytes with 8 independent lookups instead of 8
/// dependent ones.
using crc32c_tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr crc32c_tables make_crc32c_tables() noexcept {
    crc32c_tables tables{};
    for (std::uint32_t byte = 0; byte < 256; ++byte) {
        std::uint32_t crc = byte;
        for (int bit = 0; bit < 8; ++bit) {
            crc = (crc >> 1) ^ ((crc & 1u) != 0 ? crc32c_polynomial_reflected : 0u);
        }
        tables[0][byte] = crc;
    }
    for (std::size_t byte = 0; byte < 256; ++byte) {
        for (std::size_t k = 1; k < 8; ++k) {
            const std::uint32_t previous = tables[k - 1][byte];
            tables[k][byte] = (previous >> 8) ^ tables[0][previous & 0xffu];
        }
    }
    return tables;
}

inline constexpr crc32c_tables crc32c_table = make_crc32c_tables();

/// Loads 8 bytes as a little-endian integer; memcpy because `p` has any alignment.
inline std::uint64_t crc32c_load_le64(const std::byte* p) noexcept {
    std::uint64_t value;
    std::memcpy(&value, p, sizeof value);
    if constexpr (std::endian::native == std::endian::big) {
        value = __builtin_bswap64(value);
    }
    return value;
}

/// Portable CRC32C, slicing-by-8. Same contract as `zab::crc32c`.
inline std::uint32_t crc32c_portable(byte_view data, std::uint32_t seed = 0) noexcept {
    const auto& t = crc32c_table;
    std::uint32_t crc = ~seed;
    const std::byte* p = data.data();
    std::size_t n = data.size();
    while (n >= 8) {
        // The running CRC is xored into the first four bytes; each of the eight bytes is then
        // looked up in the table for "that byte followed by as many zero bytes as follow it".
        const std::uint64_t word = crc32c_load_le64(p) ^ crc;
        crc = t[7][word & 0xffu] ^ t[6][(word >> 8) & 0xffu] ^ t[5][(word >> 16) & 0xffu] ^
              t[4][(word >> 24) & 0xffu] ^ t[3][(word >> 32) & 0xffu] ^ t[2][(word >> 40) & 0xffu] ^
              t[1][(word >> 48) & 0xffu] ^ t[0][word >> 56];
        p += 8;
        n -= 8;
    }
    for (; n > 0; --n, ++p) {
        crc = (crc >> 8) ^ t[0][(crc ^ std::to_integer<std::uint32_t>(*p)) & 0xffu];
    }
    return ~crc;
}

#if ZAB_CRC32C_HAVE_SSE42
/// CRC32C with the SSE4.2 `crc32` instruction, 8 bytes per instruction. Only call it when
/// `crc32c_hardware_supported()`; otherwise it is an illegal instruction.
///
/// One dependency chain (latency 3 cycles per 8 bytes) already runs at several GB/s, far
/// above what the network delivers; interleaved streams would be faster but much longer.
[[gnu::target("sse4.2")]] inline std::uint32_t crc32c_hardware(byte_view data,
                                                               std::uint32_t seed = 0) noexcept {
    std::uint64_t crc = ~seed;
    const std::byte* p = data.data();
    std::size_t n = data.size();
    while (n >= 8) {
        std::uint64_t word;
        std::memcpy(&word, p, sizeof word);
        crc = _mm_crc32_u64(crc, word);
        p += 8;
        n -= 8;
    }
    auto crc32 = static_cast<std::uint32_t>(crc);
    if (n >= 4) {
        std::uint32_t word;
        std::memcpy(&word, p, sizeof word);
        crc32 = _mm_crc32_u32(crc32, word);
        p += 4;
        n -= 4;
    }
    if (n >= 2) {
        std::uint16_t word;
        std::memcpy(&word, p, sizeof word);
        crc32 = _mm_crc32_u16(crc32, word);
        p += 2;
        n -= 2;
    }
    if (n == 1) {
        crc32 = _mm_crc32_u8(crc32, std::to_integer<std::uint8_t>(*p));
    }
    return ~crc32;
}
#endif

/// True when `crc32c_hardware` exists in this build and the running CPU can execute it.
/// Asked once; the answer is cached.
inline bool crc32c_hardware_supported() noexcept {
#if ZAB_CRC32C_HAVE_SSE42
    // __builtin_cpu_init is required if this runs before main (a static initializer).
    static const bool supported = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("sse4.2") != 0;
    }();
    return supported;
#else
    return false;
#endif
}

}  // namespace detail

/// CRC32C (Castagnoli) of `data`, e.g. `crc32c(as_bytes("123456789")) == 0xE3069283`.
///
/// `seed` is a previous result, to checksum data that arrives in pieces:
/// `crc32c(b, crc32c(a)) == crc32c(a followed by b)`. The initial and final inversions are
/// done inside, so the default seed 0 is the CRC of nothing.
inline std::uint32_t crc32c(byte_view data, std::uint32_t seed = 0) noexcept {
#if ZAB_CRC32C_HAVE_SSE42
    if (detail::crc32c_hardware_supported()) {
        return detail::crc32c_hardware(data, seed);
    }
#endif
    return detail::crc32c_portable(data, seed);
}

}  // namespace zab
