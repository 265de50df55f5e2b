// examples/kv/resp_inline.hpp — Redis's inline command syntax: `SET k "a b"\r\n` typed into
// telnet. A line is split into arguments exactly as redis-server splits it (`sdssplitargs`
// in redis/src/sds.c), so what works against Redis works here:
//
// - arguments are separated by spaces, tabs, CR or LF (leading blanks also skip \v and \f);
// - "double quotes" allow \n \r \t \b \a \\ \" and \xHH escapes (any other \c is c);
// - 'single quotes' allow only \' as an escape;
// - a closing quote must be followed by a blank or the end of the line, and every opened
//   quote must be closed, otherwise the line is "unbalanced";
// - a quote may start in the middle of an argument: ab"c d" is the one argument "abc d";
// - the line ends at its first NUL byte, as the C string it is in Redis.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zab::kv::resp {

namespace detail {

constexpr bool is_blank(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

constexpr int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace detail

/// The arguments of inline command `line` (without its line terminator), or nullopt if its
/// quotes are unbalanced. A blank line has no arguments.
inline std::optional<std::vector<std::string>> split_inline(std::string_view line) {
    line = line.substr(0, line.find('\0'));
    // Past the end reads as NUL, the C string's terminator the Redis code relies on.
    const auto at = [line](std::size_t i) { return i < line.size() ? line[i] : '\0'; };
    std::vector<std::string> args;
    std::size_t p = 0;
    for (;;) {
        while (detail::is_blank(at(p))) ++p;
        if (at(p) == '\0') return args;
        std::string current;
        bool in_double = false, in_single = false, done = false;
        while (!done) {
            const char c = at(p);
            if (in_double) {
                if (c == '\\' && at(p + 1) == 'x' && detail::hex_value(at(p + 2)) >= 0 &&
                    detail::hex_value(at(p + 3)) >= 0) {
                    current.push_back(static_cast<char>(detail::hex_value(at(p + 2)) * 16 +
                                                        detail::hex_value(at(p + 3))));
                    p += 3;
                } else if (c == '\\' && at(p + 1) != '\0') {
                    ++p;
                    switch (at(p)) {
                        case 'n': current.push_back('\n'); break;
                        case 'r': current.push_back('\r'); break;
                        case 't': current.push_back('\t'); break;
                        case 'b': current.push_back('\b'); break;
                        case 'a': current.push_back('\a'); break;
                        default: current.push_back(at(p)); break;
                    }
                } else if (c == '"') {
                    if (at(p + 1) != '\0' && !detail::is_blank(at(p + 1))) return std::nullopt;
                    done = true;
                } else if (c == '\0') {
                    return std::nullopt;  // unterminated quotes
                } else {
                    current.push_back(c);
                }
            } else if (in_single) {
                if (c == '\\' && at(p + 1) == '\'') {
                    ++p;
                    current.push_back('\'');
                } else if (c == '\'') {
                    if (at(p + 1) != '\0' && !detail::is_blank(at(p + 1))) return std::nullopt;
                    done = true;
                } else if (c == '\0') {
                    return std::nullopt;
                } else {
                    current.push_back(c);
                }
            } else {
                switch (c) {
                    case ' ':
                    case '\n':
                    case '\r':
                    case '\t':
                    case '\0': done = true; break;
                    case '"': in_double = true; break;
                    case '\'': in_single = true; break;
                    default: current.push_back(c); break;
                }
            }
            if (at(p) != '\0') ++p;
        }
        args.push_back(std::move(current));
    }
}

}  // namespace zab::kv::resp
