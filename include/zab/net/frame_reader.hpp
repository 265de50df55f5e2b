// zab/net/frame_reader.hpp — cuts a TCP byte stream into whole zab frames.
//
// The stream transport reads into `read_buffer()`, reports how much arrived with
// `commit(n)`, then calls `next()` until it says "need more bytes". Small frames are read in
// bulk into a staging buffer (many frames per read system call) and copied out one by one;
// once the header of a frame larger than what is buffered has been checked, the frame gets
// its own buffer and the rest of it is read straight into it (a 5 MB SNAP is not copied
// twice). That buffer grows with the bytes that really arrive — by doubling, from
// `large_step_bytes` — never to the announced size at once: a peer that announces 64 MiB
// and sends nothing costs a megabyte, not 64 (issue 15 defect 6).
//
// Every header is validated with `zab::decode_header` (codec.hpp) before anything is
// allocated for its payload, so a peer cannot make us allocate more than `max_frame_size`
// (docs/design.md rule 9). The payload itself is not decoded here: the peer decodes the frame,
// checks its CRC and rejects what is malformed. After an error the reader stays failed; the
// connection is to be closed.
//
// Pure code (no Boost.Asio, no I/O).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/error.hpp"

namespace zab::asio {

class frame_reader {
public:
    /// Default size of the staging buffer that small frames are read into.
    static constexpr std::size_t default_staging_bytes = 64 * 1024;

    /// `max_frame_size`: the largest whole frame (header and payload) accepted; at least
    /// `frame_header_size`. The staging buffer is allocated on the first `read_buffer()`.
    explicit frame_reader(std::size_t max_frame_size,
                          std::size_t staging_bytes = default_staging_bytes) noexcept
        : staging_bytes_{std::max(staging_bytes, frame_header_size)} {
        ZAB_ASSERT(max_frame_size >= frame_header_size, "frame_reader: max_frame_size too small");
        // The header's length field is a u32: a bound above what it can express is no bound.
        const std::size_t max_payload = max_frame_size - frame_header_size;
        limits_.max_payload_bytes = static_cast<std::uint32_t>(
            std::min<std::size_t>(max_payload, std::numeric_limits<std::uint32_t>::max()));
    }

    /// Where the next read should put its bytes: never empty while the reader has not failed.
    std::span<std::byte> read_buffer() {
        if (large_active_) {
            if (large_filled_ == large_.size()) grow_large();
            return std::span<std::byte>{large_}.subspan(large_filled_);
        }
        if (staging_.empty()) {
            staging_.resize(staging_bytes_);
        }
        return std::span<std::byte>{staging_}.subspan(end_);
    }

    /// `bytes` bytes were read into the span last returned by `read_buffer()`.
    void commit(std::size_t bytes) noexcept {
        if (large_active_) {
            ZAB_ASSERT(bytes <= large_.size() - large_filled_, "frame_reader: commit past buffer");
            large_filled_ += bytes;
        } else {
            ZAB_ASSERT(bytes <= staging_.size() - end_, "frame_reader: commit past buffer");
            end_ += bytes;
        }
    }

    /// The next whole frame (header and payload) if one has arrived; `std::nullopt` if more
    /// bytes are needed. Errors (the connection must then be closed): `oversized` for a
    /// payload length above the limit, and the other errors of `decode_header` (`bad_magic`,
    /// `unsupported_version`, `unknown_message_type`, `malformed`) for a header that is not a
    /// zab frame header.
    result<std::optional<shared_bytes>> next() {
        if (failure_) {
            return failure_;
        }
        if (large_active_) {
            if (large_filled_ < large_expected_) {
                return std::optional<shared_bytes>{};
            }
            large_active_ = false;
            large_filled_ = 0;
            return std::optional<shared_bytes>{shared_bytes{std::exchange(large_, {})}};
        }
        const std::size_t available = end_ - begin_;
        if (available < frame_header_size) {
            compact();
            return std::optional<shared_bytes>{};
        }
        const byte_view buffered{staging_.data() + begin_, available};
        const auto header = decode_header(buffered, limits_);
        if (!header) {
            failure_ = header.error();
            return failure_;
        }
        const std::size_t frame_size = header.assume_value().frame_size();
        if (available >= frame_size) {
            begin_ += frame_size;
            return std::optional<shared_bytes>{shared_bytes::copy_of(buffered.first(frame_size))};
        }
        // Only part of a frame is here: give it its own buffer and read the rest into it.
        large_expected_ = frame_size;
        large_.resize(std::min(frame_size, available + large_step_bytes));
        std::memcpy(large_.data(), buffered.data(), available);
        large_filled_ = available;
        large_active_ = true;
        begin_ = end_ = 0;
        return std::optional<shared_bytes>{};
    }

    /// Bytes received and not yet returned as frames.
    std::size_t buffered_bytes() const noexcept {
        return (end_ - begin_) + (large_active_ ? large_filled_ : 0);
    }

    /// The first growth of a large frame's buffer beyond what had arrived with its header.
    static constexpr std::size_t large_step_bytes = std::size_t{1} << 20;

private:
    // The large frame's buffer is full but the frame is not: double it (at most to the
    // frame's size). What was read is kept; each byte is copied O(1) times on average.
    void grow_large() {
        const std::size_t grown = std::min(large_expected_, std::max(large_.size() * 2,
                                                                     large_step_bytes));
        large_.resize(grown);
    }

    // Moves a partial header to the front, so the staging buffer always has room to read.
    void compact() noexcept {
        if (begin_ == 0) {
            return;
        }
        const std::size_t available = end_ - begin_;
        if (available > 0) {
            std::memmove(staging_.data(), staging_.data() + begin_, available);
        }
        begin_ = 0;
        end_ = available;
    }

    codec_limits limits_;
    std::size_t staging_bytes_;
    std::vector<std::byte> staging_;  // [begin_, end_) holds received bytes not yet framed
    std::size_t begin_ = 0;
    std::size_t end_ = 0;
    std::vector<std::byte> large_;    // a frame that did not fit in what was buffered
    std::size_t large_filled_ = 0;
    std::size_t large_expected_ = 0;  // the large frame's whole size (its header's)
    bool large_active_ = false;
    std::error_code failure_;
};

}  // namespace zab::asio
