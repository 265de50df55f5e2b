// examples/kv/resp_writer.hpp — RESP2 replies (and commands) appended to an output buffer.
//
// Each writer appends one RESP2 value to `out`, so a connection can gather a pipeline's
// replies into one buffer and write it once. Nothing here does I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

namespace zab::kv::resp {

namespace detail {

/// Simple strings and errors are one line: CR and LF become spaces, as Redis does for
/// error texts, so a reply can never break the framing.
inline void append_line(std::string& out, std::string_view text) {
    const std::size_t from = out.size();
    out.append(text);
    for (std::size_t i = from; i < out.size(); ++i)
        if (out[i] == '\r' || out[i] == '\n') out[i] = ' ';
    out.append("\r\n");
}

}  // namespace detail

/// `+text\r\n`, e.g. `write_simple_string(out, "OK")`.
inline void write_simple_string(std::string& out, std::string_view text) {
    out.push_back('+');
    detail::append_line(out, text);
}

/// `-text\r\n`. `text` starts with an error code, e.g. "ERR unknown command 'FOO'".
inline void write_error(std::string& out, std::string_view text) {
    out.push_back('-');
    detail::append_line(out, text);
}

/// `:value\r\n`.
inline void write_integer(std::string& out, std::int64_t value) {
    out.push_back(':');
    out.append(std::to_string(value));
    out.append("\r\n");
}

/// `$length\r\nbytes\r\n`: binary safe.
inline void write_bulk_string(std::string& out, std::string_view bytes) {
    out.push_back('$');
    out.append(std::to_string(bytes.size()));
    out.append("\r\n");
    out.append(bytes);
    out.append("\r\n");
}

/// `$-1\r\n`: the null bulk string (GET of a missing key).
inline void write_null_bulk(std::string& out) { out.append("$-1\r\n"); }

/// `*count\r\n`; the `count` elements follow, written by the other writers.
inline void write_array_header(std::string& out, std::size_t count) {
    out.push_back('*');
    out.append(std::to_string(count));
    out.append("\r\n");
}

/// `*-1\r\n`: the null array.
inline void write_null_array(std::string& out) { out.append("*-1\r\n"); }

namespace detail {

/// The header line of the RESP value at `in[at]`: its type byte, the rest of the line, and
/// where the value's body starts; nullopt if the line is not complete.
struct value_header {
    char type;
    std::string_view head;
    std::size_t next;
};
inline std::optional<value_header> header_at(std::string_view in, std::size_t at) {
    if (at >= in.size()) return std::nullopt;
    const std::size_t eol = in.find("\r\n", at);
    if (eol == std::string_view::npos) return std::nullopt;
    return value_header{in[at], in.substr(at + 1, eol - at - 1), eol + 2};
}

/// A header's count or length (an array's elements, a bulk string's bytes): nullopt if
/// `head` is not a decimal number of at most about 2^40.
inline std::optional<std::size_t> header_count(std::string_view head) {
    std::size_t n = 0;
    for (const char c : head) {
        if (c < '0' || c > '9' || n > (std::size_t{1} << 40)) return std::nullopt;
        n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    return n;
}

/// Copies the RESP value at `in[at]` to `out` with its nulls in RESP3's form; false (and
/// `out` unspecified) if it is not a complete value.
inline bool copy_as_resp3(std::string_view in, std::size_t& at, std::string& out, int depth) {
    if (depth > 64) return false;
    const auto header = header_at(in, at);
    if (!header) return false;
    const auto [type, head, next] = *header;
    if ((type == '$' || type == '*') && head == "-1") {
        out.append("_\r\n");
        at = next;
        return true;
    }
    out.append(in.substr(at, next - at));
    at = next;
    if (type != '$' && type != '*' && type != '%') return true;
    const auto count = header_count(head);
    if (!count) return false;
    const std::size_t n = *count;
    if (type == '$') {
        if (in.size() - at < n + 2) return false;
        out.append(in.substr(at, n + 2));
        at += n + 2;
        return true;
    }
    const std::size_t elements = type == '%' ? 2 * n : n;
    for (std::size_t i = 0; i < elements; ++i)
        if (!copy_as_resp3(in, at, out, depth + 1)) return false;
    return true;
}

}  // namespace detail

/// `replies` (whole RESP2 values, as the writers above build them) for a client that asked
/// for RESP3 (HELLO 3): the null bulk string and the null array become RESP3's null `_`;
/// everything else kv_server sends is the same in both. Input that is not whole values is
/// returned unchanged.
inline std::string to_resp3(std::string_view replies) {
    std::string out;
    out.reserve(replies.size());
    std::size_t at = 0;
    while (at < replies.size())
        if (!detail::copy_as_resp3(replies, at, out, 0)) return std::string{replies};
    return out;
}

/// A command as a client sends it: an array of bulk strings. `args` is any range of
/// things convertible to std::string_view.
template <typename Range>
void write_command(std::string& out, const Range& args) {
    write_array_header(out, static_cast<std::size_t>(std::size(args)));
    for (const auto& arg : args) write_bulk_string(out, std::string_view{arg});
}

/// `write_command(out, {"SET", "key", "value"})`.
inline void write_command(std::string& out, std::initializer_list<std::string_view> args) {
    write_command<std::initializer_list<std::string_view>>(out, args);
}

}  // namespace zab::kv::resp
