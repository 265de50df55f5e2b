// Fuzz target for kv_server's client side without sockets: the RESP parser
// (examples/kv/resp_parser.hpp) and the per-connection session (examples/kv/resp_session.hpp)
// with pipelines and MULTI/EXEC/WATCH blocks.
//
// Input: the first 8 bytes seed the schedule (how the rest is cut into chunks, when writes
// and syncs complete, which fail, when the client reads its replies); the rest is what a
// client sends. Oracles, beyond "no crash, no sanitizer report, no hang":
// - the parser yields the same commands and the same error however the bytes are chunked
//   (fed at once, and in the schedule's pieces);
// - the parser and the session hold bounded input (limits below), whatever arrives;
// - every write the session proposes decodes as a kv command, and applies;
// - every complete command gets exactly one reply, in order: the replies, counted as RESP
//   values, are the commands up to QUIT (or all of them), plus the protocol error if the
//   bytes end in one; nothing follows QUIT's or the error's reply.
//
// Built as a libFuzzer binary with clang (ZAB_BUILD_FUZZERS=ON) and, with any compiler, as
// a replay program (replay_main.cpp) that runs the checked-in corpus as a regression test.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_requests.hpp"
#include "kv/kv_state_machine.hpp"
#include "kv/resp_session.hpp"

namespace {

[[noreturn]] void oracle_failed(const char* what) {
    std::fprintf(stderr, "resp_fuzzer: oracle failed: %s\n", what);
    std::abort();
}

void check(bool condition, const char* what) {
    if (!condition) oracle_failed(what);
}

/// splitmix64: the schedule, from the input's first bytes.
struct schedule {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

constexpr zab::kv::resp::limits parser_limits{4096, 256, 1024, 16384};

zab::kv::session_options session_limits() {
    zab::kv::session_options o;
    o.max_outstanding = 64;
    o.max_queued_bytes = 32 << 10;
    o.max_writes_in_flight = 8;
    o.output_soft_bytes = 16 << 10;
    o.output_hard_bytes = std::size_t{1} << 30;  // never reached here: the client reads
    o.max_txn_bytes = 32 << 10;
    o.parser_limits = parser_limits;
    o.client_id = 7;
    return o;
}

/// The session's backend: a real state machine, writes applied when they complete (or
/// failed with an error), syncs completed or failed, all when the schedule says.
struct backend {
    zab::kv::kv_state_machine machine;
    std::deque<std::pair<std::uint64_t, std::vector<std::byte>>> writes;
    std::deque<std::uint64_t> syncs;
    std::uint32_t counter = 0;
    std::uint64_t clock = 1'700'000'000'000;

    void propose(std::uint64_t ticket, std::vector<std::byte> txn) {
        check(static_cast<bool>(zab::kv::decode(zab::byte_view{txn.data(), txn.size()})),
              "the session proposed a write that does not decode");
        writes.emplace_back(ticket, std::move(txn));
    }
    void sync(std::uint64_t ticket) { syncs.push_back(ticket); }
    void transfer(std::uint64_t ticket, std::uint64_t) { syncs.push_back(ticket); }
    std::string read(const zab::kv::resp::command& args) {
        if (zab::kv::detail::upper(args[0]) == "INFO") {
            std::string out;
            zab::kv::resp::write_bulk_string(out, "role:leading\r\n");
            return out;
        }
        return zab::kv::execute_read(machine, args, 64 << 10, clock);
    }
    std::uint64_t now_ms() { return clock; }
    std::uint64_t version_of(std::string_view key) { return machine.version_of(key); }
    std::optional<std::string> redirect() { return std::nullopt; }
};

/// The length of the RESP value at the front of `in` (RESP2 and the RESP3 types HELLO 3
/// brings), 0 if it is incomplete or not one.
std::size_t value_bytes(std::string_view in, int depth = 0) {
    const std::size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos || eol == 0 || depth > 8) return 0;
    const std::string_view line = in.substr(1, eol - 1);
    std::size_t at = eol + 2;
    const auto count = [&]() -> std::optional<long long> {
        if (line.empty() || line.size() > 18) return std::nullopt;
        char* end = nullptr;
        const std::string text{line};
        const long long n = std::strtoll(text.c_str(), &end, 10);
        if (*end != '\0' || n < -1) return std::nullopt;
        return n;
    };
    switch (in[0]) {
        case '+': case '-': case ':': case '_': case ',': case '#': case '(': return at;
        case '$': case '=': case '!': {
            const auto n = count();
            if (!n) return 0;
            if (*n < 0) return at;
            const auto size = static_cast<std::size_t>(*n);
            if (in.size() < at + size + 2 || in.substr(at + size, 2) != "\r\n") return 0;
            return at + size + 2;
        }
        case '*': case '~': case '>': case '%': {
            auto n = count();
            if (!n) return 0;
            if (*n < 0) return at;
            const long long elements = in[0] == '%' ? 2 * *n : *n;
            for (long long i = 0; i < elements; ++i) {
                const std::size_t used = value_bytes(in.substr(at), depth + 1);
                if (used == 0) return 0;
                at += used;
            }
            return at;
        }
        default: return 0;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 8) return 0;
    std::uint64_t seed = 0;
    std::memcpy(&seed, data, 8);
    schedule rng{seed};
    const std::string_view input{reinterpret_cast<const char*>(data) + 8, size - 8};

    // The reference: the whole input at once.
    zab::kv::resp::parser whole{parser_limits};
    whole.feed(input);
    std::vector<zab::kv::resp::command> commands;
    while (auto c = whole.next()) commands.push_back(std::move(*c));

    // The same in the schedule's chunks: the same commands, the same error.
    {
        zab::kv::resp::parser pieces{parser_limits};
        std::size_t taken = 0;
        for (std::size_t at = 0; at < input.size();) {
            const std::size_t n = 1 + rng.below(rng.below(2) == 0 ? 8 : 512);
            pieces.feed(input.substr(at, n));
            at += std::min(n, input.size() - at);
            check(pieces.buffered_bytes() <= parser_limits.max_command_bytes +
                                                  parser_limits.max_inline_bytes +
                                                  parser_limits.max_bulk_bytes + 64 +
                                                  std::size_t{64} * 1024,
                  "the parser holds unbounded input");
            while (auto c = pieces.next()) {
                check(taken < commands.size() && *c == commands[taken],
                      "chunking changed the commands parsed");
                ++taken;
            }
        }
        check(taken == commands.size(), "chunking lost commands");
        check(pieces.failed() == whole.failed() && pieces.error() == whole.error(),
              "chunking changed the protocol error");
    }

    // The session, fed as a server feeds it: only while it wants input.
    std::size_t expected = commands.size();
    bool closes = whole.failed();
    for (std::size_t i = 0; i < commands.size(); ++i) {
        if (zab::kv::detail::upper(commands[i][0]) == "QUIT") {
            expected = i + 1;
            closes = false;  // QUIT's +OK is the last reply
            break;
        }
    }
    if (closes) ++expected;  // the protocol error's reply

    backend b;
    const zab::kv::session_options options = session_limits();
    zab::kv::resp_session<backend> session{b, options};
    std::string output;
    const auto complete_some = [&](bool all) {
        for (std::size_t n = all ? b.writes.size() : rng.below(b.writes.size() + 1); n > 0; --n) {
            auto [ticket, txn] = std::move(b.writes.front());
            b.writes.pop_front();
            b.clock += rng.below(50);
            std::string reply;
            if (rng.below(8) == 0) {
                zab::kv::resp::write_error(reply, "NOQUORUM no quorum (fuzz)");
            } else {
                const auto o = zab::kv::outcome_of_response(
                    b.machine
                        .apply(zab::zxid{1, ++b.counter}, zab::byte_view{txn.data(), txn.size()})
                        .view());
                check(o.has_value(), "the outcome of the apply is not in its response");
                reply = zab::kv::outcome_reply(*o);
            }
            session.write_done(ticket, std::move(reply));
        }
        for (std::size_t n = all ? b.syncs.size() : rng.below(b.syncs.size() + 1); n > 0; --n) {
            const std::uint64_t ticket = b.syncs.front();
            b.syncs.pop_front();
            std::optional<std::string> refused;
            if (rng.below(8) == 0) refused = "-NOQUORUM no quorum (fuzz)\r\n";
            session.sync_done(ticket, std::move(refused));
        }
    };
    const auto drain = [&] {
        const std::string part = session.take_output();
        output += part;
        session.output_written(part.size());
    };
    std::size_t at = 0;
    for (std::size_t rounds = 0; !session.closing() || !session.idle(); ++rounds) {
        check(rounds < 4 * (input.size() + 16), "the session makes no progress");
        if (at < input.size() && session.wants_input() && !session.closing()) {
            const std::size_t n = 1 + rng.below(rng.below(2) == 0 ? 16 : 1024);
            session.feed(input.substr(at, n));
            at += std::min(n, input.size() - at);
        }
        check(session.buffered_input_bytes() <=
                  options.max_queued_bytes + options.max_txn_bytes + 2 * parser_limits.max_command_bytes +
                      parser_limits.max_inline_bytes + std::size_t{64} * 1024,
              "the session holds unbounded input");
        const bool fed_all = at >= input.size() || session.closing();
        complete_some(fed_all);
        if (fed_all || rng.below(4) == 0 || !session.wants_input()) drain();
        if (fed_all && session.idle() && !session.has_output()) break;
    }
    drain();

    // Exactly one reply per command, in order; nothing after the last one.
    std::size_t replies = 0;
    for (std::string_view rest{output}; !rest.empty(); ++replies) {
        const std::size_t n = value_bytes(rest);
        check(n > 0, "the output is not a sequence of RESP values");
        rest.remove_prefix(n);
    }
    check(replies == expected, "not exactly one reply per command");
    return 0;
}
