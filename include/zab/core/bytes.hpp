// zab/core/bytes.hpp — byte views and reference-counted immutable byte buffers.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"

namespace zab {

/// A non-owning view of bytes. Decoded messages point into their frame with these.
using byte_view = std::span<const std::byte>;

inline byte_view as_bytes(std::string_view s) noexcept {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

inline std::string_view as_string_view(byte_view b) noexcept {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

/// An immutable, reference-counted byte buffer, or a slice of one. Copying shares the bytes:
/// a proposal is encoded once and the same bytes go to every follower and into the log
/// record (docs/design.md rule 10).
class shared_bytes {
public:
    shared_bytes() noexcept = default;

    /// Takes ownership of `bytes`.
    explicit shared_bytes(std::vector<std::byte> bytes)
        : owner_{std::make_shared<const std::vector<std::byte>>(std::move(bytes))} {
        const auto& v = *static_cast<const std::vector<std::byte>*>(owner_.get());
        view_ = byte_view{v.data(), v.size()};
    }

    /// A new buffer of `size` bytes that `write(std::span<std::byte>)` fills before anyone
    /// else can see it. The bytes and their reference count are one allocation (adopting a
    /// vector costs two): every frame sent or received is made this way.
    template <typename Write>
    static shared_bytes make(std::size_t size, Write&& write) {
        std::shared_ptr<std::byte[]> buffer = std::make_shared_for_overwrite<std::byte[]>(size);
        std::forward<Write>(write)(std::span<std::byte>{buffer.get(), size});
        shared_bytes s;
        s.view_ = byte_view{buffer.get(), size};
        s.owner_ = std::move(buffer);
        return s;
    }

    /// Copies `bytes` into a new buffer.
    static shared_bytes copy_of(byte_view bytes) {
        return make(bytes.size(), [&](std::span<std::byte> out) {
            if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
        });
    }

    /// A view of `part`, which must lie inside this buffer, sharing its ownership.
    shared_bytes slice(byte_view part) const noexcept {
        ZAB_ASSERT(part.empty() || (part.data() >= view_.data() &&
                                    part.data() + part.size() <= view_.data() + view_.size()),
                   "slice outside its buffer");
        shared_bytes s;
        s.owner_ = owner_;
        s.view_ = part;
        return s;
    }

    byte_view view() const noexcept { return view_; }
    const std::byte* data() const noexcept { return view_.data(); }
    std::size_t size() const noexcept { return view_.size(); }
    bool empty() const noexcept { return view_.empty(); }

    friend bool operator==(const shared_bytes& a, const shared_bytes& b) noexcept {
        return a.size() == b.size() &&
               (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
    }

private:
    std::shared_ptr<const void> owner_;
    byte_view view_;
};

}  // namespace zab
