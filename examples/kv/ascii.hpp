// examples/kv/ascii.hpp — ASCII case helpers for command names and options (Redis compares
// them case-insensitively, bytes outside A-Z unchanged).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zab::kv::detail {

inline std::string lower(std::string_view s) {
    std::string out{s};
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

inline std::string upper(std::string_view s) {
    std::string out{s};
    for (char& c : out)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return out;
}

inline bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto fold = [](char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; };
        if (fold(a[i]) != fold(b[i])) return false;
    }
    return true;
}

}  // namespace zab::kv::detail
