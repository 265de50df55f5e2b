// examples/kv/binary_io.hpp — little-endian fields in and out of byte buffers, for the kv
// example's two binary formats (commands, kv_command.hpp; snapshots, kv_snapshot.hpp).
//
// Writing appends to a growing vector, a field at a time (a snapshot is millions of them).
// Reading treats its input as hostile (docs/design.md rule 9): every read is bounds-checked,
// the first failure sticks, and the caller checks once at the end which error it was.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"

namespace zab::kv::detail {

/// Appends little-endian fields to a byte vector.
class byte_writer {
public:
    explicit byte_writer(std::vector<std::byte>& out) noexcept : out_{out} {}

    void u8(std::uint8_t value) { out_.push_back(static_cast<std::byte>(value)); }
    void u32(std::uint32_t value) { put(value, 4); }
    void u64(std::uint64_t value) { put(value, 8); }

    /// The bytes of `s`, without a length.
    void raw(std::string_view s) {
        const auto* p = reinterpret_cast<const std::byte*>(s.data());
        out_.insert(out_.end(), p, p + s.size());
    }

    /// A u32 length followed by the bytes. The caller has checked that the length fits.
    void string(std::string_view s) {
        u32(static_cast<std::uint32_t>(s.size()));
        raw(s);
    }

private:
    // One insert per field rather than a push_back per byte: a snapshot is millions of fields.
    void put(std::uint64_t value, std::size_t width) {
        std::array<std::byte, 8> bytes{};
        for (std::size_t i = 0; i < width; ++i) bytes[i] = static_cast<std::byte>(value >> (8 * i));
        out_.insert(out_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(width));
    }

    std::vector<std::byte>& out_;
};

/// Reads little-endian fields from untrusted bytes. A failed read leaves its output untouched
/// and makes every later read fail too; `error()` is the first failure.
class byte_reader {
public:
    explicit byte_reader(byte_view in) noexcept : in_{in} {}

    bool u8(std::uint8_t& value) noexcept {
        std::uint64_t v = 0;
        if (!get(v, 1)) return false;
        value = static_cast<std::uint8_t>(v);
        return true;
    }
    bool u32(std::uint32_t& value) noexcept {
        std::uint64_t v = 0;
        if (!get(v, 4)) return false;
        value = static_cast<std::uint32_t>(v);
        return true;
    }
    bool u64(std::uint64_t& value) noexcept { return get(value, 8); }

    /// A u32 length, at most `max_bytes`, then that many bytes. `errc::oversized` for a
    /// length above `max_bytes` (checked before anything is allocated), `errc::truncated`
    /// when fewer bytes remain.
    bool string(std::string& value, std::size_t max_bytes) {
        std::uint32_t length = 0;
        if (!u32(length)) return false;
        if (length > max_bytes) return fail(errc::oversized);
        if (remaining() < length) return fail(errc::truncated);
        value.assign(reinterpret_cast<const char*>(in_.data()) + at_, length);
        at_ += length;
        return true;
    }

    /// Records `e` as the failure (unless one is already recorded) and returns false.
    bool fail(errc e) noexcept {
        if (!error_) error_ = make_error_code(e);
        return false;
    }

    bool failed() const noexcept { return static_cast<bool>(error_); }
    std::error_code error() const noexcept { return error_; }
    std::size_t remaining() const noexcept { return failed() ? 0 : in_.size() - at_; }
    std::size_t position() const noexcept { return at_; }

private:
    bool get(std::uint64_t& value, int width) noexcept {
        if (remaining() < static_cast<std::size_t>(width)) return fail(errc::truncated);
        std::uint64_t v = 0;
        for (int i = 0; i < width; ++i)
            v |=
                std::uint64_t{std::to_integer<std::uint8_t>(in_[at_ + static_cast<std::size_t>(i)])}
                << (8 * i);
        at_ += static_cast<std::size_t>(width);
        value = v;
        return true;
    }

    byte_view in_;
    std::size_t at_ = 0;
    std::error_code error_;
};

}  // namespace zab::kv::detail
