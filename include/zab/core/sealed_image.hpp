// zab/core/sealed_image.hpp — the frame of a self-checking image (a state machine's
// snapshot, say): u32 magic, u8 version, the body, u32 CRC32C of every byte before it, all
// little-endian. One check of that frame for every format that uses it (zab::session_machine,
// the kv example's map), so each decoder starts from a body it knows is intact.
#pragma once

#include <cstddef>
#include <cstdint>

#include "zab/core/bytes.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"

namespace zab {

/// The body of `image` (between its version byte and its CRC) when its frame is intact.
/// Errors, in this order: `errc::corrupt` (shorter than the frame and `min_body` bytes, or
/// another magic), `errc::unsupported_version`, `errc::bad_checksum`.
inline result<byte_view> unseal_image(byte_view image, std::uint32_t magic, std::uint8_t version,
                                      std::size_t min_body = 0) {
    constexpr std::size_t header = 4 + 1, trailer = 4;
    if (image.size() < header + min_body + trailer) return make_error_code(errc::corrupt);
    const auto byte_at = [&](std::size_t i) { return std::to_integer<std::uint32_t>(image[i]); };
    const auto u32_at = [&](std::size_t i) {
        return byte_at(i) | byte_at(i + 1) << 8 | byte_at(i + 2) << 16 | byte_at(i + 3) << 24;
    };
    if (u32_at(0) != magic) return make_error_code(errc::corrupt);
    if (byte_at(4) != version) return make_error_code(errc::unsupported_version);
    if (crc32c(image.first(image.size() - trailer)) != u32_at(image.size() - trailer))
        return make_error_code(errc::bad_checksum);
    return image.subspan(header, image.size() - header - trailer);
}

}  // namespace zab
