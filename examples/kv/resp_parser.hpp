// examples/kv/resp_parser.hpp — an incremental RESP2 request parser, as redis-server reads
// its clients (processMultibulkBuffer / processInlineBuffer in redis/src/networking.c).
//
// Feed it bytes as they arrive, in pieces of any size (one byte at a time works); it yields
// each complete command — an array of bulk strings `*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, or an
// inline line `GET k\r\n` (resp_inline.hpp). Like Redis it ignores empty inline lines and
// arrays of length <= 0. Everything is bounded by `limits`, checked as soon as a length is
// read, before anything is allocated for it.
//
// A protocol error is final: `error()` is the reply Redis sends ("ERR Protocol error: ..."),
// after which the server closes the connection. Commands completed before the error are
// still handed out, as Redis runs them before it replies with the error:
//
//     parser.feed(received);
//     while (auto cmd = parser.next()) run(*cmd);
//     if (parser.failed()) { resp::write_error(out, parser.error()); close_after_write(); }
//
// Stricter than Redis in one place: a bulk string must be followed by CRLF (Redis skips two
// bytes without looking) — error "ERR Protocol error: expected CRLF after bulk string".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "decimal.hpp"
#include "resp_inline.hpp"

namespace zab::kv::resp {

/// The bounds on what one client may send. Defaults are redis-server's.
struct limits {
    /// Longest bulk string (proto-max-bulk-len): "invalid bulk length" above it.
    std::size_t max_bulk_bytes = std::size_t{512} << 20;
    /// Most elements in one array: "invalid multibulk length" above it.
    std::size_t max_array_elements = std::size_t{1} << 20;
    /// Longest inline command, and longest `*<n>` / `$<n>` line (PROTO_INLINE_MAX_SIZE).
    std::size_t max_inline_bytes = std::size_t{64} << 10;
    /// Most bytes of arguments in one command (like client-query-buffer-limit): "command
    /// too big" above it. Without it 2^20 elements of 512 MiB each would be accepted.
    std::size_t max_command_bytes = std::size_t{1} << 30;
};

/// One command: its arguments, the command name first. Binary safe.
using command = std::vector<std::string>;

class parser {
public:
    explicit parser(limits bounds = {}) : limits_{bounds} {
        // Far above any sane bound, and keeps `max_inline_bytes + 1` from wrapping.
        limits_.max_inline_bytes = std::min(limits_.max_inline_bytes, SIZE_MAX / 2);
    }

    /// Consumes all of `input`. Complete commands queue up for `next()`; after a protocol
    /// error the rest of the input (and of any later feed) is ignored.
    void feed(std::string_view input) {
        std::size_t at = 0;
        while (at < input.size() && !failed()) at += step(input.substr(at));
    }

    /// The next complete command, in arrival order; nullopt if none is complete yet.
    std::optional<command> next() {
        if (ready_.empty()) return std::nullopt;
        command c = std::move(ready_.front());
        ready_.pop_front();
        ready_bytes_ -= argument_bytes(c);
        return c;
    }

    /// Complete commands waiting in `next()`.
    std::size_t ready() const noexcept { return ready_.size(); }

    /// Bytes of client input this parser holds: the commands waiting in `next()` and the one
    /// being read (its partial argument counted by capacity, which is what it occupies).
    /// What a server adds up to cap the memory its clients' unfinished commands take.
    std::size_t buffered_bytes() const noexcept {
        std::size_t partial = line_.size();  // at most max_inline_bytes
        if (!args_.empty()) partial += command_bytes_ - current_bulk_bytes_ + args_.back().capacity();
        return ready_bytes_ + partial;
    }

    /// True after a protocol error: answer `error()` and close the connection.
    bool failed() const noexcept { return !error_.empty(); }
    /// The error reply, e.g. "ERR Protocol error: invalid bulk length" (write it with
    /// resp::write_error). Empty while `!failed()`.
    const std::string& error() const noexcept { return error_; }

private:
    enum class state {
        request_start,  ///< the first byte decides: '*' an array, anything else inline
        inline_line,    ///< an inline command, up to LF
        count_line,     ///< the digits of `*<n>`, up to CR
        count_lf,       ///< the LF after them
        bulk_start,     ///< '$' of the next element
        length_line,    ///< the digits of `$<n>`, up to CR
        length_lf,      ///< the LF after them
        bulk_data,      ///< the element's bytes
        bulk_cr,        ///< CR after them
        bulk_lf,        ///< LF after that
    };

    /// Consumes a prefix of `in` (at least one byte) and returns its length.
    std::size_t step(std::string_view in) {
        if (state_ == state::bulk_data) {
            const std::size_t n = std::min(in.size(), bulk_remaining_);
            args_.back().append(in.data(), n);
            bulk_remaining_ -= n;
            if (bulk_remaining_ == 0) state_ = state::bulk_cr;
            return n;
        }
        if (state_ == state::inline_line) return inline_bytes(in);
        byte(in.front());
        return 1;
    }

    /// Takes inline bytes up to and including LF, checking the length bound as they come.
    std::size_t inline_bytes(std::string_view in) {
        const std::size_t lf = in.find('\n');
        const std::size_t take = lf == std::string_view::npos ? in.size() : lf;
        // The line is never buffered beyond its bound plus a CR: more cannot be valid.
        const std::size_t room = limits_.max_inline_bytes + 1 - line_.size();
        if (take > room) return too_big_inline(in);
        line_.append(in.data(), take);
        // A CR last may be the line's terminator, which does not count towards its length.
        const bool ends_in_cr = !line_.empty() && line_.back() == '\r';
        if (line_.size() - (ends_in_cr ? 1 : 0) > limits_.max_inline_bytes)
            return too_big_inline(in);
        if (lf == std::string_view::npos) return take;
        if (ends_in_cr) line_.pop_back();
        auto args = split_inline(line_);
        line_.clear();
        state_ = state::request_start;
        if (!args) {
            fail("unbalanced quotes in request");
        } else if (!args->empty()) {
            push_ready(std::move(*args));
        }
        return take + 1;
    }

    std::size_t too_big_inline(std::string_view in) {
        fail("too big inline request");
        return in.size();
    }

    void byte(char c) {
        switch (state_) {
            case state::request_start:
                line_.clear();
                if (c == '*') {
                    state_ = state::count_line;
                } else {
                    state_ = state::inline_line;
                    inline_bytes(std::string_view{&c, 1});
                }
                return;
            case state::count_line:
                if (c == '\r') {
                    state_ = state::count_lf;
                } else if (!line_char(c)) {
                    fail("too big mbulk count string");
                }
                return;
            case state::count_lf:
                return c == '\n' ? start_array() : fail("invalid multibulk length");
            case state::bulk_start:
                if (c != '$') return fail(std::string{"expected '$', got '"} + c + "'");
                line_.clear();
                state_ = state::length_line;
                return;
            case state::length_line:
                if (c == '\r') {
                    state_ = state::length_lf;
                } else if (!line_char(c)) {
                    fail("too big bulk count string");
                }
                return;
            case state::length_lf: return c == '\n' ? start_bulk() : fail("invalid bulk length");
            case state::bulk_cr:
                if (c != '\r') return fail("expected CRLF after bulk string");
                state_ = state::bulk_lf;
                return;
            case state::bulk_lf:
                if (c != '\n') return fail("expected CRLF after bulk string");
                return end_bulk();
            case state::inline_line:
            case state::bulk_data: break;  // handled by step()
        }
    }

    /// Appends a byte of a `*<n>` / `$<n>` line; false once the line is too long.
    bool line_char(char c) {
        line_.push_back(c);
        return line_.size() <= limits_.max_inline_bytes;
    }

    void start_array() {
        const auto count = parse_int64(line_);
        if (!count ||
            (*count > 0 && static_cast<std::uint64_t>(*count) > limits_.max_array_elements))
            return fail("invalid multibulk length");
        if (*count <= 0) {  // Redis ignores "*0" and "*-1" requests
            state_ = state::request_start;
            return;
        }
        args_.clear();
        args_.reserve(std::min<std::size_t>(static_cast<std::size_t>(*count), 64));
        command_bytes_ = 0;
        elements_remaining_ = static_cast<std::size_t>(*count);
        state_ = state::bulk_start;
    }

    void start_bulk() {
        const auto length = parse_int64(line_);
        if (!length || *length < 0 || static_cast<std::uint64_t>(*length) > limits_.max_bulk_bytes)
            return fail("invalid bulk length");
        bulk_remaining_ = static_cast<std::size_t>(*length);
        if (bulk_remaining_ > limits_.max_command_bytes - command_bytes_)
            return fail("command too big");
        command_bytes_ += bulk_remaining_;
        current_bulk_bytes_ = bulk_remaining_;
        args_.emplace_back();
        state_ = bulk_remaining_ == 0 ? state::bulk_cr : state::bulk_data;
    }

    void end_bulk() {
        if (--elements_remaining_ > 0) {
            state_ = state::bulk_start;
            return;
        }
        push_ready(std::move(args_));
        args_ = {};
        state_ = state::request_start;
    }

    static std::size_t argument_bytes(const command& c) noexcept {
        std::size_t n = 0;
        for (const auto& arg : c) n += arg.size();
        return n;
    }

    void push_ready(command c) {
        ready_bytes_ += argument_bytes(c);
        ready_.push_back(std::move(c));
    }

    void fail(const std::string& what) {
        error_ = "ERR Protocol error: " + what;
        line_.clear();
        args_.clear();
    }

    limits limits_;
    state state_ = state::request_start;
    std::string line_;  ///< the inline command or length line being read
    command args_;      ///< the array being read
    std::size_t elements_remaining_ = 0;
    std::size_t bulk_remaining_ = 0;
    std::size_t command_bytes_ = 0;  ///< argument bytes of the array being read
    std::size_t current_bulk_bytes_ = 0;  ///< the declared length of its last argument
    std::deque<command> ready_;
    std::size_t ready_bytes_ = 0;  ///< argument bytes of `ready_`
    std::string error_;
};

}  // namespace zab::kv::resp
