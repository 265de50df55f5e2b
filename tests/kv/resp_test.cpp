// The kv example's RESP2 layer (examples/kv/resp*.hpp): the writers byte for byte; the parser
// on split input (every split point, one byte at a time, random chunks), pipelines, inline
// commands as redis-server splits them, binary-safe bulk strings, every protocol error with
// Redis's wording, and the limits.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "kv/resp.hpp"
#include "zab/testing/random.hpp"

using namespace zab::kv;
using namespace std::string_literals;
using resp::command;

namespace {

struct parsed {
    std::vector<command> commands;
    std::string error;  ///< empty: no protocol error
    bool operator==(const parsed&) const = default;
};

/// Feeds `input` in pieces cut at `cuts` (increasing offsets) and drains every command.
parsed parse_pieces(std::string_view input, const std::vector<std::size_t>& cuts,
                    resp::limits limits = {}) {
    resp::parser p{limits};
    parsed out;
    std::size_t from = 0;
    auto drain = [&] {
        while (auto c = p.next()) out.commands.push_back(std::move(*c));
    };
    for (const std::size_t cut : cuts) {
        p.feed(input.substr(from, cut - from));
        drain();
        from = cut;
    }
    p.feed(input.substr(from));
    drain();
    out.error = p.error();
    return out;
}

parsed parse(std::string_view input, resp::limits limits = {}) {
    return parse_pieces(input, {}, limits);
}

parsed byte_by_byte(std::string_view input, resp::limits limits = {}) {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < input.size(); ++i) cuts.push_back(i);
    return parse_pieces(input, cuts, limits);
}

/// The error `input` ends in, fed whole and one byte at a time (the two must agree).
std::string error_of(std::string_view input, resp::limits limits = {}) {
    const parsed whole = parse(input, limits);
    CHECK(byte_by_byte(input, limits) == whole);
    return whole.error;
}

}  // namespace

// --- writers ------------------------------------------------------------------------------

TEST_CASE("resp writers: each RESP2 type byte for byte", "[kv][resp]") {
    std::string out;
    resp::write_simple_string(out, "OK");
    resp::write_error(out, "ERR unknown command");
    resp::write_integer(out, -42);
    resp::write_integer(out, 0);
    resp::write_bulk_string(out, "a\r\nb\0c"s);
    resp::write_bulk_string(out, "");
    resp::write_null_bulk(out);
    resp::write_array_header(out, 2);
    resp::write_null_array(out);
    CHECK(out ==
          "+OK\r\n-ERR unknown command\r\n:-42\r\n:0\r\n$6\r\na\r\nb\0c\r\n$0\r\n\r\n"
          "$-1\r\n*2\r\n*-1\r\n"s);
}

TEST_CASE("resp writers: one-line replies cannot break the framing", "[kv][resp]") {
    std::string out;
    resp::write_error(out, "ERR bad\r\nthing");
    resp::write_simple_string(out, "a\nb");
    CHECK(out == "-ERR bad  thing\r\n+a b\r\n");
}

TEST_CASE("resp writers: commands round-trip through the parser", "[kv][resp]") {
    std::string out;
    resp::write_command(out, {"SET", "key", "value"});
    CHECK(out == "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
    zab::testing::prng rng{0x72657370};
    std::vector<command> sent;
    out.clear();
    for (int i = 0; i < 300; ++i) {
        command c(1 + rng.below(4));
        for (auto& arg : c) {
            arg.resize(rng.below(i % 50 == 0 ? 3000 : 12));
            for (auto& ch : arg) ch = static_cast<char>(rng.chance(0.3) ? '\r' : rng.next());
        }
        resp::write_command(out, c);
        sent.push_back(std::move(c));
    }
    CHECK(parse(out) == parsed{sent, ""});
}

// --- the parser ---------------------------------------------------------------------------

TEST_CASE("resp parser: arrays of bulk strings, binary safe", "[kv][resp]") {
    CHECK(parse("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") == parsed{{{"GET", "k"}}, ""});
    // CRLF and NUL inside a bulk string are data; so is a bulk string that looks like RESP.
    const std::string value = "a\r\n\0*1\r\n$1\r\nx\r\n"s;
    const std::string input =
        "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + std::to_string(value.size()) + "\r\n" + value + "\r\n";
    CHECK(parse(input) == parsed{{{"SET", "k", value}}, ""});
    CHECK(parse("*1\r\n$0\r\n\r\n") == parsed{{{""}}, ""});
    // Nothing is yielded until the whole command is there.
    resp::parser p;
    p.feed("*2\r\n$3\r\nGET\r\n$1\r\nk\r");
    CHECK_FALSE(p.next());
    p.feed("\n");
    CHECK(p.next() == command{"GET", "k"});
    CHECK_FALSE(p.failed());
}

TEST_CASE("resp parser: empty requests are ignored, as Redis does", "[kv][resp]") {
    CHECK(parse("*0\r\n*-1\r\n*-5\r\n\r\n\n   \r\n\t\r\nPING\r\n") == parsed{{{"PING"}}, ""});
}

TEST_CASE("resp parser: inline commands", "[kv][resp][inline]") {
    CHECK(parse("PING\r\n") == parsed{{{"PING"}}, ""});
    CHECK(parse("PING\n") == parsed{{{"PING"}}, ""});
    CHECK(parse("  SET   key\tvalue  \r\n") == parsed{{{"SET", "key", "value"}}, ""});
    CHECK(parse("SET k \"a b\\r\\n\\x41\\\"\"\r\n") == parsed{{{"SET", "k", "a b\r\nA\""}}, ""});
    CHECK(parse("SET k 'it\\'s \"x\"'\r\n") == parsed{{{"SET", "k", "it's \"x\""}}, ""});
    CHECK(parse("SET k \"\"\r\n") == parsed{{{"SET", "k", ""}}, ""});
    // A partial inline line waits for its LF.
    resp::parser p;
    p.feed("GET k");
    CHECK_FALSE(p.next());
    p.feed("\r\n");
    CHECK(p.next() == command{"GET", "k"});
}

TEST_CASE("resp inline: split as redis-server's sdssplitargs splits", "[kv][resp][inline]") {
    using args = std::vector<std::string>;
    CHECK(resp::split_inline("") == args{});
    CHECK(resp::split_inline(" \t\v\f ") == args{});
    CHECK(resp::split_inline("a b") == args{"a", "b"});
    // \xHH needs two hex digits; any other escaped character is itself (\xzz is xzz).
    CHECK(resp::split_inline("\"\\x41\\x4a\\xzz\\q\\n\\t\\b\\a\\\\\"") ==
          args{"AJxzzq\n\t\b\a\\"s});
    CHECK(resp::split_inline("ab\"c d\"") == args{"abc d"});  // a quote may start mid-argument
    CHECK(resp::split_inline("'a\\nb'") == args{"a\\nb"});    // single quotes escape only \'
    CHECK(resp::split_inline("a\0b c"s) == args{"a"});        // the line ends at NUL
    CHECK(resp::split_inline("\"\\x00\"") == args{"\0"s});    // but an escaped NUL is data
    CHECK(resp::split_inline("a\vb") == args{"a\vb"});        // \v separates only leading blanks
    for (const char* unbalanced : {"\"abc", "'abc", "\"a\"b", "'a'b", "\"abc\\\"", "a \"b"}) {
        INFO(unbalanced);
        CHECK_FALSE(resp::split_inline(unbalanced));
    }
}

TEST_CASE("resp parser: pipelines, split at every point", "[kv][resp]") {
    const std::string input =
        "*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$4\r\nv\r\n1\r\n"
        "PING\r\n"
        "*0\r\n"
        "*2\r\n$3\r\nGET\r\n$0\r\n\r\n"
        "SET k2 \"x y\"\n"
        "*1\r\n$4\r\nINCR\r\n";
    const parsed expected{
        {{"SET", "k1", "v\r\n1"}, {"PING"}, {"GET", ""}, {"SET", "k2", "x y"}, {"INCR"}}, ""};
    CHECK(parse(input) == expected);
    CHECK(byte_by_byte(input) == expected);
    for (std::size_t i = 0; i <= input.size(); ++i) {
        INFO("split at " << i);
        CHECK(parse_pieces(input, {i}) == expected);
        for (std::size_t j = i; j <= input.size(); j += 7) {
            INFO("and at " << j);
            CHECK(parse_pieces(input, {i, j}) == expected);
        }
    }
}

TEST_CASE("resp parser: each protocol error, in Redis's words", "[kv][resp][errors]") {
    CHECK(error_of("*abc\r\n") == "ERR Protocol error: invalid multibulk length");
    CHECK(error_of("*\r\n") == "ERR Protocol error: invalid multibulk length");
    CHECK(error_of("*+1\r\n") == "ERR Protocol error: invalid multibulk length");
    CHECK(error_of("*1\rX") == "ERR Protocol error: invalid multibulk length");
    CHECK(error_of("*1\r\n+OK\r\n") == "ERR Protocol error: expected '$', got '+'");
    CHECK(error_of("*2\r\n$1\r\na\r\n:1\r\n") == "ERR Protocol error: expected '$', got ':'");
    CHECK(error_of("*1\r\n$-1\r\n") == "ERR Protocol error: invalid bulk length");
    CHECK(error_of("*1\r\n$abc\r\n") == "ERR Protocol error: invalid bulk length");
    CHECK(error_of("*1\r\n$01\r\n") == "ERR Protocol error: invalid bulk length");
    CHECK(error_of("*1\r\n$1\rX") == "ERR Protocol error: invalid bulk length");
    CHECK(error_of("*1\r\n$3\r\nabcX\r\n") ==
          "ERR Protocol error: expected CRLF after bulk string");
    CHECK(error_of("*1\r\n$3\r\nabc\rX") == "ERR Protocol error: expected CRLF after bulk string");
    CHECK(error_of("SET k \"abc\r\n") == "ERR Protocol error: unbalanced quotes in request");
    CHECK(error_of("SET k 'a'b\r\n") == "ERR Protocol error: unbalanced quotes in request");
    // The error line itself stays one line, whatever byte was unexpected.
    std::string reply;
    resp::write_error(reply, error_of("*1\r\n\r\n"));
    CHECK(reply == "-ERR Protocol error: expected '$', got ' '\r\n");
}

TEST_CASE("resp parser: the cases of Redis's own protocol tests", "[kv][resp][errors]") {
    // redis/tests/unit/protocol.tcl: the same input gets the same answer here.
    CHECK(parse("\r\nPING\r\n") == parsed{{{"PING"}}, ""});      // empty query
    CHECK(parse("*-10\r\nPING\r\n") == parsed{{{"PING"}}, ""});  // negative multibulk length
    CHECK(error_of("*20000000\r\n") == "ERR Protocol error: invalid multibulk length");
    CHECK(error_of("*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n") ==
          "ERR Protocol error: expected '$', got 'f'");
    CHECK(error_of("*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n") ==
          "ERR Protocol error: invalid bulk length");
    CHECK(error_of("*1\r\n$2000000000\r\n") == "ERR Protocol error: invalid bulk length");
    CHECK(error_of("*20\r\n$-10\r\n") == "ERR Protocol error: invalid bulk length");
    CHECK(error_of("set \"\"\"test-key\"\"\" test-value\r\n") ==
          "ERR Protocol error: unbalanced quotes in request");
    CHECK(error_of("ping \"\"\"\r\n") == "ERR Protocol error: unbalanced quotes in request");
}

TEST_CASE("resp parser: an error is final; commands before it are still handed out",
          "[kv][resp][errors]") {
    resp::parser p;
    p.feed("PING\r\n*1\r\n$1\r\nx\r\n*1\r\n$-2\r\nPING\r\n");
    CHECK(p.failed());
    CHECK(p.ready() == 2);
    CHECK(p.next() == command{"PING"});
    CHECK(p.next() == command{"x"});
    CHECK_FALSE(p.next());
    p.feed("PING\r\n");  // ignored
    CHECK_FALSE(p.next());
    CHECK(p.error() == "ERR Protocol error: invalid bulk length");
}

TEST_CASE("resp parser: limits", "[kv][resp][limits]") {
    const resp::limits small{.max_bulk_bytes = 8,
                             .max_array_elements = 3,
                             .max_inline_bytes = 16,
                             .max_command_bytes = 20};
    SECTION("bulk length") {
        CHECK(parse("*1\r\n$8\r\n12345678\r\n", small) == parsed{{{"12345678"}}, ""});
        CHECK(error_of("*1\r\n$9\r\n", small) == "ERR Protocol error: invalid bulk length");
        // The default is Redis's 512 MB, checked before anything is allocated.
        CHECK(error_of("*1\r\n$536870913\r\n") == "ERR Protocol error: invalid bulk length");
        CHECK(error_of("*1\r\n$9223372036854775808\r\n") ==
              "ERR Protocol error: invalid bulk length");
        resp::parser p;
        p.feed("*1\r\n$536870912\r\nabc");
        CHECK_FALSE(p.failed());
    }
    SECTION("array elements") {
        CHECK(parse("*3\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n", small).commands.size() == 1);
        CHECK(error_of("*4\r\n", small) == "ERR Protocol error: invalid multibulk length");
        CHECK(error_of("*1048577\r\n") == "ERR Protocol error: invalid multibulk length");
        CHECK(error_of("*9223372036854775807\r\n") ==
              "ERR Protocol error: invalid multibulk length");
    }
    SECTION("inline length, with or without its newline") {
        CHECK(parse("0123456789abcdef\r\n", small) == parsed{{{"0123456789abcdef"}}, ""});
        CHECK(error_of("0123456789abcdefg\r\n", small) ==
              "ERR Protocol error: too big inline request");
        CHECK(error_of("0123456789abcdefg", small) == "ERR Protocol error: too big inline request");
        CHECK(error_of(std::string(70000, 'a')) == "ERR Protocol error: too big inline request");
    }
    SECTION("length lines") {
        CHECK(error_of("*00000000000000001", small) ==
              "ERR Protocol error: too big mbulk count string");
        CHECK(error_of("*1\r\n$00000000000000001", small) ==
              "ERR Protocol error: too big bulk count string");
    }
    SECTION("bytes in one command") {
        CHECK(
            parse("*3\r\n$8\r\n12345678\r\n$8\r\n12345678\r\n$4\r\n1234\r\n", small).error.empty());
        CHECK(error_of("*3\r\n$8\r\n12345678\r\n$8\r\n12345678\r\n$5\r\n", small) ==
              "ERR Protocol error: command too big");
    }
}

TEST_CASE("resp parser: random input parses the same however it is cut", "[kv][resp][fuzz]") {
    zab::testing::prng rng{0x63757473};
    const std::string alphabet = "*$\r\n\r\n0123-1 \"'\\xaAz";
    const resp::limits small{.max_bulk_bytes = 64,
                             .max_array_elements = 8,
                             .max_inline_bytes = 40,
                             .max_command_bytes = 100};
    int with_commands = 0, with_errors = 0;
    for (int i = 0; i < 3000; ++i) {
        // Valid commands with random bytes spliced in: both branches get exercised.
        std::string input;
        const auto parts = 1 + rng.below(5);
        for (std::uint64_t k = 0; k < parts; ++k) {
            if (rng.chance(0.6)) {
                command c(1 + rng.below(3));
                for (auto& arg : c) {
                    const auto length =
                        rng.below(5);  // draws in a fixed order, whatever the compiler
                    arg.assign(length, static_cast<char>('a' + rng.below(26)));
                }
                resp::write_command(input, c);
            } else {
                const auto n = rng.below(12);
                for (std::uint64_t b = 0; b < n; ++b)
                    input.push_back(rng.chance(0.8) ? alphabet[rng.below(alphabet.size())]
                                                    : static_cast<char>(rng.next()));
            }
        }
        const parsed whole = parse(input, small);
        std::vector<std::size_t> cuts;
        for (std::size_t at = 0; at < input.size(); at += 1 + rng.below(6)) cuts.push_back(at);
        INFO("case " << i);
        CHECK(parse_pieces(input, cuts, small) == whole);
        with_commands += whole.commands.empty() ? 0 : 1;
        with_errors += whole.error.empty() ? 0 : 1;
        if (!whole.error.empty()) CHECK(whole.error.starts_with("ERR Protocol error: "));
    }
    CHECK(with_commands > 300);
    CHECK(with_errors > 300);
}
