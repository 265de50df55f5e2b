// The kv example's transaction format (examples/kv/kv_command.hpp) and its state machine
// (kv_state_machine.hpp, kv_snapshot.hpp): round trips and every malformed-input class,
// a seeded fuzz loop, each command's semantics, exactly-once retries with eviction, and
// snapshots that restore exactly or not at all.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "kv/binary_io.hpp"
#include "kv/decimal.hpp"
#include "kv/kv_command.hpp"
#include "kv/kv_requests.hpp"
#include "kv/kv_state_machine.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/testing/random.hpp"

using namespace zab;
using namespace zab::kv;
using namespace std::string_literals;

namespace {

using byte_vector = std::vector<std::byte>;

byte_vector encoded(const command& c) {
    auto bytes = encode(c);
    REQUIRE(bytes);
    return bytes.value();
}

byte_vector bytes_of(std::initializer_list<unsigned> values) {
    byte_vector out;
    for (const unsigned v : values) out.push_back(static_cast<std::byte>(v));
    return out;
}

std::error_code decode_error(const byte_vector& bytes) {
    const auto decoded = kv::decode(bytes);
    REQUIRE_FALSE(decoded);
    return decoded.error();
}

/// Applies commands to a machine with consecutive zxids in epoch 1 and returns outcomes.
struct driver {
    kv_state_machine machine;
    std::uint32_t counter = 0;

    explicit driver(kv_options options = {}) : machine{options} {}

    outcome apply_bytes(const byte_vector& txn) {
        const zxid z{1, ++counter};
        const auto result = outcome_of_response(machine.apply(z, txn).view());
        REQUIRE(result);
        return *result;
    }
    outcome run(const command& c) { return apply_bytes(encoded(c)); }
    outcome set(std::string k, std::string v, std::optional<request_tag> tag = {}) {
        return run({set_op{std::move(k), std::move(v)}, tag});
    }
    outcome incr(std::string k, std::optional<request_tag> tag = {}) {
        return run({incr_op{std::move(k)}, tag});
    }
};

std::string random_string(testing::prng& rng, std::size_t max_length) {
    std::string s(rng.below(max_length + 1), '\0');
    for (auto& c : s) c = static_cast<char>(rng.chance(0.5) ? 'a' + rng.below(3) : rng.next());
    return s;
}

command random_command(testing::prng& rng) {
    command c;
    std::string key = random_string(rng, 3);
    switch (rng.below(4)) {
        case 0: c.op = set_op{key, random_string(rng, 6)}; break;
        case 1: c.op = del_op{key}; break;
        case 2: c.op = incr_op{key}; break;
        default: {
            std::optional<std::string> expected;
            if (rng.chance(0.7)) expected = random_string(rng, 4);
            c.op = cas_op{key, expected, random_string(rng, 6)};
            break;
        }
    }
    if (rng.chance(0.3)) {
        // The stamped forms: a typed op with a clock, one call, a block, a tick.
        c.stamp_ms = 1 + rng.below(3);
        const std::vector<std::vector<std::string>> calls = {
            {"SET", key, "v", "PX", "1"}, {"INCRBY", key, "5"}, {"GET", key},
            {"EXPIRE", key, "1"}, {"DEL", key, "x"}, {"MSET", key, "1", "y", "2"}};
        switch (rng.below(4)) {
            case 0: c.op = calls_op{{calls[rng.below(calls.size())]}, {}, false}; break;
            case 1:
                c.op = calls_op{{calls[rng.below(calls.size())], calls[rng.below(calls.size())]},
                                {watched_key{key, rng.below(3)}},
                                true};
                break;
            case 2: c.op = tick_op{}; break;
            default: break;
        }
        c.legacy_clock = rng.chance(0.2);  // a version-2 record
    }
    if (rng.chance(0.5)) {
        std::uint64_t client_id = rng.below(4);
        if (rng.chance(0.1)) client_id += rng.next();
        c.tag = request_tag{client_id, rng.below(5)};
    }
    return c;
}

/// The decoding oracle: never crashes, and a success re-encodes to exactly the input.
void check_decode_oracle(const byte_vector& input) {
    const auto decoded = kv::decode(input);
    if (!decoded) {
        const int code = decoded.error().value();
        CHECK(decoded.error().category() == zab::error_category());
        CHECK(code >= static_cast<int>(errc::truncated));
        CHECK(code <= static_cast<int>(errc::malformed));
        return;
    }
    CHECK(encoded(decoded.value()) == input);
}

}  // namespace

// --- decimal ------------------------------------------------------------------------------

TEST_CASE("kv decimal: Redis's strict int64 form", "[kv][decimal]") {
    CHECK(parse_int64("0") == 0);
    CHECK(parse_int64("42") == 42);
    CHECK(parse_int64("-17") == -17);
    CHECK(parse_int64("9223372036854775807") == std::numeric_limits<std::int64_t>::max());
    CHECK(parse_int64("-9223372036854775808") == std::numeric_limits<std::int64_t>::min());
    for (const char* bad :
         {"", "-", "+1", " 1", "1 ", "01", "-0", "00", "1.5", "1e3", "abc", "9223372036854775808",
          "-9223372036854775809", "99999999999999999999", "123456789012345678901", "0x10"}) {
        INFO(bad);
        CHECK_FALSE(parse_int64(bad));
    }
    CHECK(format_int64(std::numeric_limits<std::int64_t>::min()) == "-9223372036854775808");
}

// --- the command codec --------------------------------------------------------------------

TEST_CASE("kv command: golden encodings", "[kv][codec]") {
    CHECK(encoded({set_op{"k", "v"}, {}}) == bytes_of({1, 1, 0, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'v'}));
    CHECK(encoded({del_op{"ab"}, {}}) == bytes_of({1, 2, 0, 2, 0, 0, 0, 'a', 'b'}));
    CHECK(encoded({incr_op{""}, request_tag{0x0102, 7}}) ==
          bytes_of({1, 3, 1, 2, 1, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
    CHECK(encoded({cas_op{"k", "x", "y"}, {}}) ==
          bytes_of({1, 4, 2, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'x', 1, 0, 0, 0, 'y'}));
    CHECK(encoded({cas_op{"k", std::nullopt, "y"}, {}}) ==
          bytes_of({1, 4, 0, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'y'}));
}

TEST_CASE("kv command: round trips, binary keys and values", "[kv][codec]") {
    const std::string binary = "a\0b\r\n\xff"s;
    const std::vector<command> samples = {
        {set_op{"", ""}, {}},
        {set_op{binary, binary + binary}, request_tag{UINT64_MAX, UINT64_MAX}},
        {del_op{binary}, request_tag{0, 0}},
        {incr_op{"counter"}, {}},
        {cas_op{"k", std::nullopt, ""}, request_tag{1, 2}},
        {cas_op{"k", "", binary}, {}},
        {set_op{"big", std::string(100000, 'x')}, {}},
    };
    for (const auto& c : samples) {
        const auto decoded = kv::decode(encoded(c));
        REQUIRE(decoded);
        CHECK(decoded.value() == c);
        CHECK(key_of(decoded.value()) == key_of(c));
    }
    testing::prng rng{0x6b76636f};
    for (int i = 0; i < 2000; ++i) {
        const command c = random_command(rng);
        const auto decoded = kv::decode(encoded(c));
        REQUIRE(decoded);
        CHECK(decoded.value() == c);
    }
}

TEST_CASE("kv command: every malformed-input class is rejected", "[kv][codec]") {
    SECTION("empty input") { CHECK(decode_error({}) == errc::truncated); }
    SECTION("every proper prefix of a valid encoding is truncated") {
        for (const command& c : {command{cas_op{"key", "old", "new"}, request_tag{9, 9}},
                                 command{set_op{"k", "value"}, {}}}) {
            const byte_vector full = encoded(c);
            for (std::size_t n = 0; n < full.size(); ++n) {
                INFO("prefix " << n);
                CHECK(decode_error(byte_vector(
                          full.begin(), full.begin() + static_cast<long>(n))) == errc::truncated);
            }
        }
    }
    SECTION("trailing bytes") {
        byte_vector bytes = encoded({del_op{"k"}, {}});
        bytes.push_back(std::byte{0});
        CHECK(decode_error(bytes) == errc::malformed);
    }
    SECTION("unknown versions") {
        CHECK(decode_error(bytes_of({0, 1, 0})) == errc::unsupported_version);
        CHECK(decode_error(bytes_of({4, 1, 0, 1, 0, 0, 0, 'k', 0, 0, 0, 0})) ==
              errc::unsupported_version);
        CHECK(decode_error(bytes_of({255})) == errc::unsupported_version);
    }
    SECTION("unknown ops") {
        for (const unsigned op : {0u, 5u, 6u, 255u}) {
            INFO("op " << op);
            CHECK(decode_error(bytes_of({1, op, 0, 1, 0, 0, 0, 'k'})) ==
                  errc::unknown_message_type);
        }
    }
    SECTION("reserved flag bits, and `expected` on a command other than CAS") {
        for (const unsigned flags : {4u, 8u, 0x80u, 0xffu}) {
            INFO("flags " << flags);
            CHECK(decode_error(bytes_of({1, 4, flags, 0, 0, 0, 0, 0, 0, 0, 0})) == errc::malformed);
        }
        for (const unsigned op : {1u, 2u, 3u}) {
            INFO("op " << op);
            CHECK(decode_error(bytes_of({1, op, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})) ==
                  errc::malformed);
        }
    }
    SECTION("lengths above max_string_bytes, checked before the bytes") {
        // 512 MiB + 1 and 4 GiB - 1 as the key length.
        CHECK(decode_error(bytes_of({1, 2, 0, 0x01, 0, 0, 0x20})) == errc::oversized);
        CHECK(decode_error(bytes_of({1, 2, 0, 0xff, 0xff, 0xff, 0xff})) == errc::oversized);
        // Exactly the maximum is allowed: the input is then merely short.
        CHECK(decode_error(bytes_of({1, 2, 0, 0, 0, 0, 0x20})) == errc::truncated);
        CHECK(decode_error(bytes_of({1, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})) ==
              errc::oversized);
    }
    SECTION("a length longer than the input") {
        CHECK(decode_error(bytes_of({1, 1, 0, 1, 0, 0, 0, 'k', 5, 0, 0, 0, 'a', 'b'})) ==
              errc::truncated);
    }
}

TEST_CASE("kv command: random bytes and mutations decode or are rejected, never crash",
          "[kv][codec][fuzz]") {
    testing::prng rng{0x66757a7a};
    byte_vector input;
    for (int i = 0; i < 20000; ++i) {
        input.resize(rng.below(i % 10 == 0 ? 200 : 24));
        // Small bytes make plausible versions, ops, flags and lengths.
        for (auto& b : input)
            b = static_cast<std::byte>(rng.chance(0.5) ? rng.below(5) : rng.next());
        INFO("garbage case " << i);
        check_decode_oracle(input);
    }
    int still_valid = 0;
    for (int i = 0; i < 20000; ++i) {
        input = encoded(random_command(rng));
        const auto mutations = 1 + rng.below(3);
        for (std::uint64_t m = 0; m < mutations && !input.empty(); ++m) {
            switch (rng.below(3)) {
                case 0: {
                    const std::size_t at = rng.below(input.size());
                    input[at] = static_cast<std::byte>(rng.next());
                    break;
                }
                case 1: input.resize(rng.below(input.size() + 1)); break;
                default: input.push_back(static_cast<std::byte>(rng.next())); break;
            }
        }
        INFO("mutation case " << i);
        check_decode_oracle(input);
        still_valid += kv::decode(input) ? 1 : 0;
    }
    CHECK(still_valid > 100);  // the oracle's success branch ran
}

// --- state machine semantics --------------------------------------------------------------

static_assert(zab::state_machine<kv_state_machine>);

TEST_CASE("kv state machine: SET, DEL, reads", "[kv][state_machine]") {
    driver d;
    CHECK(d.machine.size() == 0);
    CHECK(d.set("a", "1") == outcome::ok());
    CHECK(d.set("b", "x\0y"s) == outcome::ok());
    CHECK(d.set("a", "2") == outcome::ok());
    CHECK(d.machine.get("a") == "2");
    CHECK(d.machine.get("b") == "x\0y"s);
    CHECK(d.machine.exists("b"));
    CHECK_FALSE(d.machine.get("c"));
    CHECK(d.machine.size() == 2);
    CHECK(d.run({del_op{"a"}, {}}) == outcome::integer_value(1));
    CHECK(d.run({del_op{"a"}, {}}) == outcome::integer_value(0));
    CHECK_FALSE(d.machine.exists("a"));
    CHECK(d.machine.size() == 1);
    CHECK(d.machine.last_applied() == zxid{1, 5});
}

TEST_CASE("kv state machine: INCR has Redis semantics", "[kv][state_machine]") {
    driver d;
    SECTION("a missing key counts as 0") {
        CHECK(d.incr("n") == outcome::integer_value(1));
        CHECK(d.incr("n") == outcome::integer_value(2));
        CHECK(d.machine.get("n") == "2");
    }
    SECTION("negative values and the boundaries") {
        d.set("n", "-1");
        CHECK(d.incr("n") == outcome::integer_value(0));
        CHECK(d.machine.get("n") == "0");
        d.set("min", "-9223372036854775808");
        CHECK(d.incr("min") ==
              outcome::integer_value(std::numeric_limits<std::int64_t>::min() + 1));
        d.set("almost", "9223372036854775806");
        CHECK(d.incr("almost") == outcome::integer_value(std::numeric_limits<std::int64_t>::max()));
    }
    SECTION("a value that is not a strict int64 is an error, and unchanged") {
        for (const std::string bad :
             {"abc", "", " 1", "+1", "01", "-0", "1.5", "9223372036854775808"}) {
            INFO(bad);
            d.set("n", bad);
            const outcome o = d.incr("n");
            CHECK(o.kind == outcome_kind::error);
            CHECK(o.error == error_not_integer);
            CHECK(d.machine.get("n") == bad);
        }
    }
    SECTION("overflow is an error, not a wrap") {
        d.set("n", "9223372036854775807");
        const outcome o = d.incr("n");
        CHECK(o == outcome::failure(std::string{error_overflow}));
        CHECK(d.machine.get("n") == "9223372036854775807");
    }
}

TEST_CASE("kv state machine: CAS with present and absent expectations", "[kv][state_machine]") {
    driver d;
    // Expected absent: create-if-absent.
    CHECK(d.run({cas_op{"k", std::nullopt, "v1"}, {}}) == outcome::cas(true));
    CHECK(d.machine.get("k") == "v1");
    CHECK(d.run({cas_op{"k", std::nullopt, "v2"}, {}}) == outcome::cas(false));
    CHECK(d.machine.get("k") == "v1");
    // Expected present.
    CHECK(d.run({cas_op{"k", "v1", "v2"}, {}}) == outcome::cas(true));
    CHECK(d.machine.get("k") == "v2");
    CHECK(d.run({cas_op{"k", "v1", "v3"}, {}}) == outcome::cas(false));
    CHECK(d.machine.get("k") == "v2");
    // Expecting a value on a missing key mismatches and creates nothing.
    CHECK(d.run({cas_op{"missing", "", "v"}, {}}) == outcome::cas(false));
    CHECK_FALSE(d.machine.exists("missing"));
    // The empty value is a value.
    d.set("e", "");
    CHECK(d.run({cas_op{"e", std::nullopt, "v"}, {}}) == outcome::cas(false));
    CHECK(d.run({cas_op{"e", "", "v"}, {}}) == outcome::cas(true));
}

TEST_CASE("kv state machine: a transaction that does not decode is an outcome, not a failure",
          "[kv][state_machine]") {
    driver d;
    d.set("k", "v");
    const kv_state before = d.machine.state();
    const outcome o = d.apply_bytes(bytes_of({1, 9, 0}));
    CHECK(o.kind == outcome_kind::error);
    CHECK(o.error == std::string{error_malformed_prefix} + "unknown message type");
    CHECK(d.machine.contents() == before.data);
    CHECK(d.machine.last_applied() == zxid{1, 2});
    CHECK(d.apply_bytes({}).error == std::string{error_malformed_prefix} + "input truncated");
}

TEST_CASE("session_reply: applied_earlier carries no result and says it was not kept",
          "[kv][session]") {
    const auto encoded = session_reply{session_status::applied_earlier, false, {}}.encode();
    const auto decoded = session_reply::decode(encoded.view());
    REQUIRE(decoded);
    CHECK(decoded.value().status == session_status::applied_earlier);
    CHECK_FALSE(decoded.value().result_kept);
    // The former encoding (result_kept 1) reads alike; a result beside it is malformed.
    const std::byte former[] = {std::byte{3}, std::byte{1}};
    const auto old = session_reply::decode(byte_view{former, 2});
    REQUIRE(old);
    CHECK_FALSE(old.value().result_kept);
    const std::byte with_result[] = {std::byte{3}, std::byte{0}, std::byte{'x'}};
    CHECK_FALSE(session_reply::decode(byte_view{with_result, 3}));
    // "applied" without its result is no reply session_machine writes.
    const std::byte applied_unkept[] = {std::byte{1}, std::byte{0}};
    CHECK_FALSE(session_reply::decode(byte_view{applied_unkept, 2}));
}

TEST_CASE("kv state machine: exactly-once retries", "[kv][state_machine][dedupe]") {
    driver d;
    const request_tag first{7, 1};
    CHECK(d.incr("n", first) == outcome::integer_value(1));
    // The retry is not applied again; it answers the original outcome, marked duplicate.
    outcome retry = d.incr("n", first);
    CHECK(retry.duplicate);
    retry.duplicate = false;
    CHECK(retry == outcome::integer_value(1));
    CHECK(d.machine.get("n") == "1");
    // The same tag on another command is still the same request.
    CHECK(d.set("n", "100", first).duplicate);
    CHECK(d.machine.get("n") == "1");
    // The next sequence is applied; an older one was applied earlier (one request per
    // client at a time), its outcome not kept: answered so, not applied again.
    CHECK(d.incr("n", request_tag{7, 2}) == outcome::integer_value(2));
    const outcome earlier = d.incr("n", request_tag{7, 1});
    CHECK(earlier.duplicate);
    CHECK(earlier.kind == outcome_kind::error);
    CHECK(earlier.error == error_applied_earlier);
    CHECK(outcome_reply(earlier).starts_with("-APPLIED earlier"));
    CHECK(d.machine.get("n") == "2");
    // Sequences may skip; other clients are independent; untagged commands always apply.
    CHECK(d.incr("n", request_tag{7, 10}) == outcome::integer_value(3));
    CHECK(d.incr("n", request_tag{8, 1}) == outcome::integer_value(4));
    CHECK(d.incr("n") == outcome::integer_value(5));
    CHECK(d.incr("n") == outcome::integer_value(6));
    CHECK(d.machine.last_sequence(7) == 10u);
    CHECK(d.machine.last_sequence(8) == 1u);
    CHECK_FALSE(d.machine.last_sequence(9));
    // Refusals are recorded too: a retried failing INCR answers the same error.
    d.set("s", "text");
    CHECK(d.incr("s", request_tag{8, 2}).error == error_not_integer);
    d.set("s", "5");
    const outcome again = d.incr("s", request_tag{8, 2});
    CHECK(again.duplicate);
    CHECK(again.error == error_not_integer);
    CHECK(d.machine.get("s") == "5");
}

TEST_CASE("session_machine (issue 34 defect 6): (c,5) and (c,6) both committed and both "
          "retried: 6 answers its result, 5 that it was applied earlier, result not kept",
          "[kv][state_machine][dedupe][session]") {
    driver d;
    CHECK(d.incr("n", request_tag{42, 5}) == outcome::integer_value(1));
    CHECK(d.incr("n", request_tag{42, 6}) == outcome::integer_value(2));
    // Both retried, in order and reversed: neither applied again.
    for (int pass = 0; pass < 2; ++pass) {
        const outcome five = d.incr("n", request_tag{42, 5});
        CHECK(five.duplicate);
        CHECK(five.error == error_applied_earlier);
        outcome six = d.incr("n", request_tag{42, 6});
        CHECK(six.duplicate);
        six.duplicate = false;
        CHECK(six == outcome::integer_value(2));
    }
    CHECK(d.machine.get("n") == "2");
    // The session layer's reply: applied_earlier, no result, result_kept false (the kv
    // outcome above is its reading).
    const byte_vector five = encoded(command{incr_op{"n"}, request_tag{42, 5}});
    const auto reply = zab::session_reply::decode(d.machine.apply(zxid{1, ++d.counter}, five).view());
    REQUIRE(reply);
    CHECK(reply.value().status == session_status::applied_earlier);
    CHECK_FALSE(reply.value().result_kept);
    CHECK(reply.value().result.empty());
}

TEST_CASE("kv state machine: the client table evicts the least recently active client",
          "[kv][state_machine][dedupe]") {
    driver d{kv_options{.max_clients = 3}};
    d.incr("n", request_tag{1, 1});
    d.incr("n", request_tag{2, 1});
    d.incr("n", request_tag{3, 1});
    CHECK(d.machine.client_count() == 3);
    // Client 1 retries: a duplicate also counts as activity, so client 2 is now the oldest.
    CHECK(d.incr("n", request_tag{1, 1}).duplicate);
    d.incr("n", request_tag{4, 1});
    CHECK(d.machine.client_count() == 3);
    CHECK_FALSE(d.machine.last_sequence(2));
    CHECK(d.machine.last_sequence(1) == 1u);
    CHECK(d.machine.last_sequence(3) == 1u);
    CHECK(d.machine.last_sequence(4) == 1u);
    CHECK(d.machine.get("n") == "4");
    // The evicted client's retry is applied again: the documented bound of the promise.
    const outcome o = d.incr("n", request_tag{2, 1});
    CHECK_FALSE(o.duplicate);
    CHECK(o == outcome::integer_value(5));
    CHECK_FALSE(d.machine.last_sequence(3));  // now the oldest, evicted
    // A replica restored from this state evicts the same client next.
    kv_state_machine copy{kv_options{.max_clients = 3}};
    REQUIRE(copy.restore(d.machine.last_applied(), d.machine.snapshot().view()));
    const auto next = encoded({incr_op{"n"}, request_tag{5, 1}});
    d.apply_bytes(next);
    copy.apply(d.machine.last_applied(), next);
    CHECK(copy.state() == d.machine.state());
    CHECK(copy.snapshot() == d.machine.snapshot());
    CHECK_FALSE(copy.last_sequence(1));

    SECTION("max_clients 0 remembers nobody") {
        driver none{kv_options{.max_clients = 0}};
        CHECK(none.incr("n", request_tag{1, 1}) == outcome::integer_value(1));
        CHECK(none.incr("n", request_tag{1, 1}) == outcome::integer_value(2));
        CHECK(none.machine.client_count() == 0);
    }
}

TEST_CASE("kv state machine: apply returns the outcome (§6.6), kept nowhere else",
          "[kv][state_machine]") {
    kv_state_machine machine{kv_options{.max_clients = 8}};
    const auto outcome_at = [&](zxid z, const command& c) {
        const shared_bytes response = machine.apply(z, encoded(c));
        const auto reply = zab::session_reply::decode(response.view());
        REQUIRE(reply);
        CHECK(reply.value().status == zab::session_status::applied);
        CHECK(decode_outcome(reply.value().result) == outcome_of_response(response.view()));
        return outcome_of_response(response.view());
    };
    CHECK(outcome_at(zxid{1, 1}, {set_op{"k", "v"}, {}}) == outcome::ok());
    CHECK(outcome_at(zxid{1, 2}, {incr_op{"n"}, {}}) == outcome::integer_value(1));
    CHECK(outcome_at(zxid{2, 1}, {cas_op{"k", "v", "w"}, {}}) == outcome::cas(true));
    CHECK(outcome_at(zxid{2, 2}, {incr_op{"n"}, request_tag{3, 1}}) == outcome::integer_value(2));
    // A replica that restored the state answers the retry from the (replicated) sessions.
    kv_state_machine copy{kv_options{.max_clients = 8}};
    REQUIRE(copy.restore(zxid{2, 2}, machine.snapshot().view()));
    const auto retry = outcome_of_response(copy.apply(zxid{2, 3}, encoded({incr_op{"n"}, request_tag{3, 1}})).view());
    REQUIRE(retry);
    CHECK(retry->duplicate);
    CHECK(retry->integer == 2);
    CHECK(copy.get("n") == "2");
    // Bytes that are no session reply, and an outcome too large to keep, are "unknown".
    CHECK_FALSE(outcome_of_response(as_bytes("x")));
    kv_state_machine small{kv_options{.max_clients = 8, .max_outcome_bytes = 4}};
    CHECK(outcome_of_response(small.apply(zxid{1, 1}, encoded({incr_op{"n"}, request_tag{1, 1}})).view()) ==
          outcome::integer_value(1));
    CHECK_FALSE(outcome_of_response(small.apply(zxid{1, 2}, encoded({incr_op{"n"}, request_tag{1, 1}})).view()));
    CHECK(small.get("n") == "1");
}

// --- snapshots ----------------------------------------------------------------------------

namespace {

/// A machine with keys (binary ones included), counters, and clients with every outcome kind.
driver populated() {
    driver d{kv_options{.max_clients = 16}};
    d.set("alpha", "1");
    d.set("bin\0key"s, "v\r\n\0"s, request_tag{3, 1});
    d.incr("counter", request_tag{1, 4});
    d.run({cas_op{"alpha", "1", "2"}, request_tag{2, 9}});
    d.run({cas_op{"alpha", "1", "3"}, request_tag{4, 1}});
    d.set("text", "abc");
    d.incr("text", request_tag{5, 1});
    d.run({del_op{"nothing"}, request_tag{6, 1}});
    d.set("", "empty key");
    return d;
}

/// A hand-built image with a valid checksum, for structurally invalid states.
/// An image as the version-2 writer wrote it (every value a string, no type byte): the
/// format before collections, which must still restore.
struct image_builder {
    byte_vector bytes;
    zab::kv::detail::byte_writer w{bytes};
    image_builder(std::uint64_t last_applied, std::uint8_t version = snapshot_version_strings,
                  std::uint64_t now_ms = 0) {
        w.u32(snapshot_magic);
        w.u8(version);
        w.u64(last_applied);
        w.u64(now_ms);
    }
    /// One key: its value, expiry (0: none) and version.
    void key(std::string_view k, std::string_view v, std::uint64_t expires = 0,
             std::uint64_t version = 1) {
        w.string(k);
        w.string(v);
        w.u64(expires);
        w.u64(version);
    }
    byte_vector sealed() {
        byte_vector out = bytes;
        zab::kv::detail::byte_writer{out}.u32(crc32c(byte_view{bytes.data(), bytes.size()}));
        return out;
    }
};

void client(zab::kv::detail::byte_writer& w, std::uint64_t id, std::uint64_t active, unsigned kind,
            std::uint64_t integer, std::string_view text, std::string_view reply = {}) {
    w.u64(id);
    w.u64(1);
    w.u64(active);
    w.u8(static_cast<std::uint8_t>(kind));
    w.u64(integer);
    w.string(text);
    w.string(reply);
}

/// `machine` rejects `image` at `z` and is unchanged.
void check_rejected(kv_state_machine& machine, zxid z, byte_view image) {
    const shared_bytes before = machine.snapshot();
    const zxid applied = machine.last_applied();
    const auto restored = machine.restore(z, image);
    CHECK_FALSE(restored);
    CHECK(machine.snapshot() == before);
    CHECK(machine.last_applied() == applied);
}

}  // namespace

TEST_CASE("kv snapshot: restore round-trips byte for byte", "[kv][snapshot]") {
    driver d = populated();
    const shared_bytes image = d.machine.snapshot();
    kv_state_machine copy{kv_options{.max_clients = 16}};
    REQUIRE(copy.restore(d.machine.last_applied(), image.view()));
    CHECK(copy.state() == d.machine.state());
    CHECK(copy.snapshot() == image);
    CHECK(copy.digest() == d.machine.digest());
    CHECK(copy.get("bin\0key"s) == "v\r\n\0"s);
    CHECK(copy.client_count() == 6);
    // Retries answer the same on the copy: the client table came with the snapshot.
    const auto retry = encoded({incr_op{"counter"}, request_tag{1, 4}});
    const auto on_copy = outcome_of_response(copy.apply(zxid{2, 1}, retry).view());
    CHECK(on_copy == outcome_of_response(d.machine.apply(zxid{2, 1}, retry).view()));
    REQUIRE(on_copy);
    CHECK(on_copy->duplicate);
    CHECK(copy.snapshot() == d.machine.snapshot());

    SECTION("an empty machine") {
        kv_state_machine empty, other;
        REQUIRE(other.restore(zxid{}, empty.snapshot().view()));
        CHECK(other.snapshot() == empty.snapshot());
        REQUIRE(d.machine.restore(zxid{}, empty.snapshot().view()));
        CHECK(d.machine.size() == 0);
        CHECK(d.machine.client_count() == 0);
        CHECK(d.machine.last_applied() == zxid{});
    }
}

TEST_CASE("kv snapshot: truncated, extended or bit-flipped images are rejected, state unchanged",
          "[kv][snapshot]") {
    const driver source = populated();
    const shared_bytes image = source.machine.snapshot();
    const byte_view bytes = image.view();
    const zxid at = source.machine.last_applied();
    driver target;
    target.set("mine", "unchanged");
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        INFO("truncated to " << n);
        check_rejected(target.machine, at, bytes.first(n));
    }
    byte_vector longer(bytes.begin(), bytes.end());
    longer.push_back(std::byte{0});
    check_rejected(target.machine, at, longer);
    for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
        byte_vector flipped(bytes.begin(), bytes.end());
        flipped[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
        INFO("bit " << bit);
        check_rejected(target.machine, at, flipped);
    }
    // The right image at the wrong zxid.
    check_rejected(target.machine, zxid{at.epoch(), at.counter() + 1}, bytes);
    // Too many clients for this replica's bound.
    kv_state_machine small{kv_options{.max_clients = 2}};
    check_rejected(small, at, bytes);
    // The intact image restores.
    REQUIRE(target.machine.restore(at, bytes));
    CHECK(target.machine.state() == source.machine.state());
}

namespace {

/// `n` transactions over keys k0000..k1199 (a machine with k0000..k0999 gets new keys too):
/// writes, deletes, expiries and TICKs that remove keys, and random commands.
void change_keys(driver& d, testing::prng& rng, int n) {
    for (int i = 0; i < n; ++i) {
        const std::uint64_t stamp = 1'000'000 + 3 * std::uint64_t{d.counter};
        const std::string key = fmt::format("k{:04}", rng.below(1200));
        switch (rng.below(6)) {
            case 0: d.set(key, random_string(rng, 8)); break;
            case 1: d.run({del_op{key}, {}}); break;
            case 2: d.run({calls_op{{{"PEXPIRE", key, "2"}}, {}, false}, {}, stamp}); break;
            case 3: d.run({tick_op{}, {}, stamp}); break;
            case 4: d.run(random_command(rng)); break;
            default: d.run({calls_op{{{"APPEND", key, "+"}}, {}, false}, {}, stamp}); break;
        }
    }
}

driver with_keys(int keys) {
    driver d{kv_options{.max_clients = 16}};
    for (int i = 0; i < keys; ++i) d.set(fmt::format("k{:04}", i), std::string(20, 'v'));
    return d;
}

}  // namespace

TEST_CASE("kv snapshot: a deferred snapshot is the image of when it was taken, whatever is "
          "applied before it is written",
          "[kv][snapshot]") {
    testing::prng rng{0x64656665};
    driver d = with_keys(1000);
    change_keys(d, rng, 500);
    const zxid at = d.machine.last_applied();
    const shared_bytes image = d.machine.snapshot();
    const deferred_snapshot later = d.machine.snapshot_later();

    SECTION("written after the changes") {
        change_keys(d, rng, 3000);
        CHECK(d.machine.snapshot() != image);
        const shared_bytes written = later();
        CHECK(written == image);
        kv_state_machine copy{kv_options{.max_clients = 16}};
        REQUIRE(copy.restore(at, written.view()));
        CHECK(copy.snapshot() == image);
    }
    SECTION("written on another thread while the changes are applied") {
        shared_bytes written;
        std::thread writer{[&] { written = later(); }};
        change_keys(d, rng, 3000);
        writer.join();
        CHECK(written == image);
        // The machine went on as if no snapshot had been taken.
        driver twin = with_keys(1000);
        testing::prng same{0x64656665};
        change_keys(twin, same, 3500);
        CHECK(twin.machine.snapshot() == d.machine.snapshot());
    }
    SECTION("FLUSHDB before it is written") {
        change_keys(d, rng, 200);
        d.run({calls_op{{{"FLUSHDB"}}, {}, false}, {}, 1});
        change_keys(d, rng, 200);
        CHECK(later() == image);
    }
    SECTION("a restore before it is written") {
        REQUIRE(d.machine.restore(populated().machine.last_applied(),
                                  populated().machine.snapshot().view()));
        CHECK(later() == image);
    }
    SECTION("the machine replaced before it is written") {
        d = with_keys(3);
        CHECK(later() == image);
    }
    SECTION("a second one taken before the first is written") {
        change_keys(d, rng, 300);
        const shared_bytes second_image = d.machine.snapshot();
        const deferred_snapshot second = d.machine.snapshot_later();
        change_keys(d, rng, 300);
        CHECK(second() == second_image);
        CHECK(later() == image);
    }
}

TEST_CASE("kv snapshot: a deferred snapshot outlives its machine", "[kv][snapshot]") {
    testing::prng rng{0x6f75746c};
    std::optional<driver> d{with_keys(1000)};
    change_keys(*d, rng, 100);
    const shared_bytes image = d->machine.snapshot();
    const deferred_snapshot later = d->machine.snapshot_later();
    change_keys(*d, rng, 100);
    d.reset();
    CHECK(later() == image);
}

TEST_CASE("kv snapshot: a deferred snapshot dropped unwritten leaves the machine as it was",
          "[kv][snapshot]") {
    testing::prng rng{0x64726f70};
    driver d = with_keys(300);
    (void)d.machine.snapshot_later();
    change_keys(d, rng, 1000);
    const shared_bytes image = d.machine.snapshot();
    CHECK(d.machine.snapshot_later()() == image);
    driver twin = with_keys(300);
    testing::prng same{0x64726f70};
    change_keys(twin, same, 1000);
    CHECK(twin.machine.snapshot() == image);
}

TEST_CASE("kv snapshot: a valid checksum over an invalid state is rejected", "[kv][snapshot]") {
    driver target;
    target.set("mine", "unchanged");
    const zxid at{1, 100};
    const auto status = [&](image_builder& b) {
        const byte_vector image = b.sealed();
        const shared_bytes before = target.machine.snapshot();
        const auto restored = target.machine.restore(at, image);
        if (restored) return std::error_code{};
        CHECK(target.machine.snapshot() == before);
        CHECK(target.machine.get("mine") == "unchanged");
        return restored.error();
    };
    SECTION("a well-formed hand-built image restores (the builder is right)") {
        image_builder b{at.value()};
        b.w.u64(1);
        b.key("k", "v", 5000, zxid{1, 40}.value());
        b.w.u64(1);
        client(b.w, 1, zxid{1, 50}.value(), 2, 7, "");
        CHECK(status(b) == std::error_code{});
        CHECK(target.machine.get("k") == "v");
        CHECK(target.machine.expiry_of("k") == 5000u);
        CHECK(target.machine.version_of("k") == zxid{1, 40}.value());
        CHECK(target.machine.last_sequence(1) == 1u);
        CHECK(target.machine.last_applied() == at);
        // The image is a map with clients, as kv_server wrote before the sessions moved into
        // zab::session_machine: its client became a session, and a retry is answered from it.
        const auto retry = outcome_of_response(
            target.machine.apply(zxid{1, 101}, encoded({incr_op{"k"}, request_tag{1, 1}})).view());
        REQUIRE(retry);
        CHECK(retry->duplicate);
        CHECK(*retry == [] { auto o = outcome::integer_value(7); o.duplicate = true; return o; }());
        // The next snapshot is the new format, and restores.
        CHECK_FALSE(snapshot_image_version(target.machine.snapshot().view()));
        kv_state_machine again;
        REQUIRE(again.restore(zxid{1, 101}, target.machine.snapshot().view()));
        CHECK(again.snapshot() == target.machine.snapshot());
    }
    SECTION("another version, e.g. 1 (before expiry and versions): a clear error") {
        for (const std::uint8_t version : {std::uint8_t{1}, std::uint8_t{4}}) {
            image_builder b{at.value(), version};
            b.w.u64(0);
            b.w.u64(0);
            CHECK(status(b) == errc::unsupported_version);
            CHECK(snapshot_image_version(b.sealed()) == version);
        }
        CHECK(snapshot_version_problem(1).starts_with(
            "the kv snapshot is format version 1; this kv_server reads only versions 2 and 3"));
    }
    SECTION("a key expired by the image's clock, or written after last_applied") {
        for (const auto& [expires, version] :
             {std::pair<std::uint64_t, std::uint64_t>{900, 1}, {1000, 1}, {0, 0},
              {0, zxid{1, 101}.value()}}) {
            image_builder b{at.value(), snapshot_version_strings, 1000};
            b.w.u64(1);
            b.key("k", "v", expires, version);
            b.w.u64(0);
            CHECK(status(b) == errc::corrupt);
        }
    }
    SECTION("bad magic") {
        image_builder b{at.value()};
        b.w.u64(0);
        b.w.u64(0);
        b.bytes[0] = std::byte{'X'};
        CHECK(status(b) == errc::corrupt);
    }
    SECTION("keys out of order, or repeated") {
        for (const auto& [first, second] : {std::pair{"b", "a"}, std::pair{"a", "a"}}) {
            image_builder b{at.value()};
            b.w.u64(2);
            b.key(first, "1");
            b.key(second, "2");
            b.w.u64(0);
            CHECK(status(b) == errc::corrupt);
        }
    }
    SECTION("clients out of order") {
        image_builder b{at.value()};
        b.w.u64(0);
        b.w.u64(2);
        client(b.w, 2, 1, 1, 0, "");
        client(b.w, 1, 2, 1, 0, "");
        CHECK(status(b) == errc::corrupt);
    }
    SECTION("two clients last active at the same zxid") {
        image_builder b{at.value()};
        b.w.u64(0);
        b.w.u64(2);
        client(b.w, 1, 5, 1, 0, "");
        client(b.w, 2, 5, 1, 0, "");
        CHECK(status(b) == errc::corrupt);
    }
    SECTION("a client active after last_applied") {
        image_builder b{at.value()};
        b.w.u64(0);
        b.w.u64(1);
        client(b.w, 1, at.value() + 1, 1, 0, "");
        CHECK(status(b) == errc::corrupt);
    }
    SECTION("outcomes that apply() never records") {
        struct bad_outcome {
            unsigned kind;
            std::uint64_t integer;
            std::string_view text;
        };
        for (const bad_outcome& o :
             {bad_outcome{0, 0, ""}, bad_outcome{6, 0, ""}, bad_outcome{1, 1, ""},
              bad_outcome{3, 0, "text"}, bad_outcome{5, 0, ""}, bad_outcome{5, 1, "ERR x"}}) {
            INFO("kind " << o.kind);
            image_builder b{at.value()};
            b.w.u64(0);
            b.w.u64(1);
            client(b.w, 1, 1, o.kind, o.integer, o.text);
            CHECK(status(b) == errc::corrupt);
        }
        // A reply on any kind but `reply`, and kinds past the last.
        for (const unsigned kind : {1u, 5u, 7u}) {
            INFO("kind " << kind << " with a reply");
            image_builder b{at.value()};
            b.w.u64(0);
            b.w.u64(1);
            client(b.w, 1, 1, kind, 0, kind == 5 ? "ERR x" : "", "+OK\r\n");
            CHECK(status(b) == errc::corrupt);
        }
    }
    SECTION("counts beyond the bytes, and bytes beyond the counts") {
        image_builder huge{at.value()};
        huge.w.u64(UINT64_MAX);
        CHECK(status(huge) == errc::corrupt);
        image_builder extra{at.value()};
        extra.w.u64(0);
        extra.w.u64(0);
        extra.w.u8(0);
        CHECK(status(extra) == errc::corrupt);
        image_builder oversized{at.value()};
        oversized.w.u64(1);
        oversized.w.u32(0xffffffffu);
        CHECK(status(oversized) == errc::corrupt);
    }
}

TEST_CASE("kv state machine: replicas fed the same commands agree", "[kv][state_machine]") {
    testing::prng rng{0x7265706c};
    const kv_options options{.max_clients = 5};
    kv_state_machine a{options}, b{options}, late{options};
    std::vector<std::pair<zxid, byte_vector>> txns;
    for (std::uint32_t i = 1; i <= 3000; ++i) {
        // Some transactions are garbage; most are commands over a few keys and clients.
        byte_vector txn = rng.chance(0.02) ? byte_vector(rng.below(6), std::byte{1})
                                           : encoded(random_command(rng));
        txns.emplace_back(zxid{1 + i / 1000, i}, std::move(txn));
    }
    std::size_t duplicates = 0;
    for (std::size_t i = 0; i < txns.size(); ++i) {
        const auto& [z, txn] = txns[i];
        const auto from_a = outcome_of_response(a.apply(z, txn).view());
        CHECK(from_a == outcome_of_response(b.apply(z, txn).view()));
        REQUIRE(from_a);
        duplicates += from_a->duplicate ? 1 : 0;
        if (i == 1234) REQUIRE(late.restore(z, a.snapshot().view()));
        if (i > 1234) late.apply(z, txn);
    }
    CHECK(duplicates > 50);
    CHECK(a.state() == b.state());
    CHECK(a.digest() == b.digest());
    CHECK(a.snapshot() == b.snapshot());
    CHECK(late.state() == a.state());
    CHECK(late.digest() == a.digest());
    // A different history gives a different digest.
    b.apply(zxid{9, 1}, encoded({set_op{"extra", "x"}, {}}));
    CHECK(a.digest() != b.digest());
}

// --- Redis commands as CALLS, MULTI blocks, WATCH, expiry (issue 22) -----------------------

namespace {

/// Runs Redis commands on a machine as kv_server's transactions, answering as it does.
struct redis_driver : driver {
    std::uint64_t clock = 1'000'000;  ///< the proposer's wall clock, stamped into each

    std::string call(std::vector<std::string> args) {
        return outcome_reply(run({calls_op{{std::move(args)}, {}, false}, {}, clock}));
    }
    /// A call proposed by a replica whose clock reads `stamp` (a follower's, say).
    std::string call_stamped(std::uint64_t stamp, std::vector<std::string> args) {
        return outcome_reply(run({calls_op{{std::move(args)}, {}, false}, {}, stamp}));
    }
    std::string block(std::vector<std::vector<std::string>> calls,
                      std::vector<watched_key> watches = {}) {
        return outcome_reply(run({calls_op{std::move(calls), std::move(watches), true}, {}, clock}));
    }
    std::string tick() { return outcome_reply(run({tick_op{}, {}, clock})); }
    /// A local read by a replica whose clock reads `reader_clock` (by default `clock`).
    std::string read(std::vector<std::string> args,
                     std::optional<std::uint64_t> reader_clock = std::nullopt) {
        return machine.read_call(args, reader_clock.value_or(clock));
    }
    std::uint64_t last_zxid() const { return zxid{1, counter}.value(); }
};

}  // namespace

TEST_CASE("kv state machine: SET's options, SETNX, SETEX, GETSET, GETDEL", "[kv][redis]") {
    redis_driver d;
    CHECK(d.call({"SET", "k", "1", "NX"}) == "+OK\r\n");
    CHECK(d.call({"SET", "k", "2", "NX"}) == "$-1\r\n");
    CHECK(d.call({"SET", "missing", "2", "XX"}) == "$-1\r\n");
    CHECK_FALSE(d.machine.exists("missing"));
    CHECK(d.call({"SET", "k", "3", "XX", "GET"}) == "$1\r\n1\r\n");
    CHECK(d.call({"SET", "new", "v", "GET"}) == "$-1\r\n");
    CHECK(d.call({"SET", "k", "4", "EX", "10"}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("k") == d.clock + 10'000);
    CHECK(d.call({"SET", "k", "5", "KEEPTTL"}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("k") == d.clock + 10'000);
    CHECK(d.call({"SET", "k", "6"}) == "+OK\r\n");  // a plain SET clears the expiry
    CHECK_FALSE(d.machine.expiry_of("k"));
    CHECK(d.call({"SET", "k", "7", "PXAT", std::to_string(d.clock + 5)}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("k") == d.clock + 5);
    CHECK(d.call({"SET", "k", "8", "EXAT", "1"}) == "+OK\r\n");  // in the past: gone at once
    CHECK_FALSE(d.machine.exists("k"));
    CHECK(d.call({"SETNX", "k", "a"}) == ":1\r\n");
    CHECK(d.call({"SETNX", "k", "b"}) == ":0\r\n");
    CHECK(d.call({"SETEX", "k", "3", "c"}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("k") == d.clock + 3000);
    CHECK(d.call({"PSETEX", "k", "3", "c"}) == "+OK\r\n");
    CHECK(d.call({"GETSET", "k", "d"}) == "$1\r\nc\r\n");
    CHECK_FALSE(d.machine.expiry_of("k"));
    CHECK(d.call({"GETDEL", "k"}) == "$1\r\nd\r\n");
    CHECK(d.call({"GETDEL", "k"}) == "$-1\r\n");
    // Bytes from the log are checked again: a call that cannot run is answered, not run.
    CHECK(d.call({"SET", "k", "v", "NX", "XX"}) == "-ERR syntax error\r\n");
    CHECK(d.call({"NOSUCH"}) == "-ERR unknown command 'NOSUCH', with args beginning with: \r\n");
    CHECK(d.call({"MULTI"}).starts_with("-ERR unknown command 'MULTI'"));
    CHECK_FALSE(d.machine.exists("k"));
}

TEST_CASE("kv state machine: counters, multi-key commands, APPEND, STRLEN", "[kv][redis]") {
    redis_driver d;
    CHECK(d.call({"INCRBY", "n", "10"}) == ":10\r\n");
    CHECK(d.call({"DECR", "n"}) == ":9\r\n");
    CHECK(d.call({"DECRBY", "n", "-1"}) == ":10\r\n");
    CHECK(d.call({"INCRBY", "n", "9223372036854775797"}) == ":9223372036854775807\r\n");
    CHECK(d.call({"INCRBY", "n", "1"}) == "-ERR increment or decrement would overflow\r\n");
    CHECK(d.call({"SET", "low", "-9223372036854775807"}) == "+OK\r\n");
    CHECK(d.call({"DECRBY", "low", "2"}) == "-ERR increment or decrement would overflow\r\n");
    CHECK(d.call({"INCRBYFLOAT", "f", "10.5"}) == "$4\r\n10.5\r\n");
    CHECK(d.call({"INCRBYFLOAT", "f", "-0.5"}) == "$2\r\n10\r\n");
    CHECK(d.call({"INCRBYFLOAT", "f", "abc"}) == "-ERR value is not a valid float\r\n");
    CHECK(d.call({"SET", "s", "text"}) == "+OK\r\n");
    CHECK(d.call({"INCR", "s"}) == "-ERR value is not an integer or out of range\r\n");
    CHECK(d.call({"INCRBYFLOAT", "s", "1"}) == "-ERR value is not a valid float\r\n");
    CHECK(d.call({"APPEND", "s", "++"}) == ":6\r\n");
    CHECK(d.read({"STRLEN", "s"}) == ":6\r\n");
    CHECK(d.read({"STRLEN", "none"}) == ":0\r\n");
    CHECK(d.call({"MSET", "a", "1", "b", "2"}) == "+OK\r\n");
    CHECK(d.call({"MSETNX", "b", "3", "c", "4"}) == ":0\r\n");
    CHECK_FALSE(d.machine.exists("c"));
    CHECK(d.call({"MSETNX", "c", "3", "d", "4"}) == ":1\r\n");
    CHECK(d.read({"MGET", "a", "b", "c", "d", "e"}) ==
          "*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$-1\r\n");
    CHECK(d.read({"EXISTS", "a", "a", "e"}) == ":2\r\n");
    CHECK(d.call({"DEL", "a", "b", "a", "e"}) == ":2\r\n");
    CHECK(d.call({"UNLINK", "c"}) == ":1\r\n");
    CHECK(d.read({"TYPE", "d"}) == "+string\r\n");
    CHECK(d.read({"TYPE", "a"}) == "+none\r\n");
    CHECK(d.read({"DBSIZE"}) == ":5\r\n");  // n low f s d
    CHECK(d.call({"FLUSHDB"}) == "+OK\r\n");
    CHECK(d.read({"DBSIZE"}) == ":0\r\n");
    CHECK(d.machine.size() == 0);
}

TEST_CASE("kv state machine: KEYS and SCAN with MATCH and COUNT", "[kv][redis]") {
    redis_driver d;
    for (int i = 0; i < 50; ++i) d.call({"SET", "user:" + std::to_string(i), "x"});
    d.call({"SET", "other", "x"});
    d.call({"SET", "h[a]llo", "x"});
    CHECK(d.read({"KEYS", "user:1?"}).starts_with("*10\r\n$7\r\nuser:10\r\n"));
    CHECK(d.read({"KEYS", "h\\[a\\]*"}) == "*1\r\n$7\r\nh[a]llo\r\n");
    CHECK(d.read({"KEYS", "[^u]*"}) == "*2\r\n$7\r\nh[a]llo\r\n$5\r\nother\r\n");
    CHECK(glob_match("a*b*c", "axxbyyc"));
    CHECK_FALSE(glob_match("a*b*c", "axxbyy"));
    CHECK(glob_match("[a-c]?", "bz"));

    // A full scan with COUNT 3 returns each key exactly once, even with keys added and
    // removed meanwhile (those present throughout are all returned).
    std::multiset<std::string> seen;
    std::string cursor = "0";
    int calls = 0;
    do {
        // The reply: *2, the cursor as a bulk string, then *n and the keys.
        const std::string reply = d.read({"SCAN", cursor, "MATCH", "user:*", "COUNT", "3"});
        std::size_t at = reply.find("\r\n$") + 3;
        const std::size_t len_end = reply.find("\r\n", at);
        const std::size_t len = std::stoul(reply.substr(at, len_end - at));
        cursor = reply.substr(len_end + 2, len);
        at = reply.find("\r\n*", len_end) + 3;
        std::size_t count_end = reply.find("\r\n", at);
        const std::size_t count = std::stoul(reply.substr(at, count_end - at));
        at = count_end + 2;
        for (std::size_t i = 0; i < count; ++i) {
            const std::size_t e = reply.find("\r\n", at);
            const std::size_t n = std::stoul(reply.substr(at + 1, e - at - 1));
            seen.insert(reply.substr(e + 2, n));
            at = e + 2 + n + 2;
        }
        if (calls == 3) {
            d.call({"SET", "user:new", "x"});
            d.call({"DEL", "other"});
        }
        ++calls;
    } while (cursor != "0" && calls < 1000);
    CHECK(calls > 10);
    for (int i = 0; i < 50; ++i) CHECK(seen.count("user:" + std::to_string(i)) == 1);
    CHECK(seen.count("other") == 0);
    CHECK(d.read({"SCAN", "0", "COUNT", "1000", "TYPE", "hash"}) == "*2\r\n$1\r\n0\r\n*0\r\n");
}

TEST_CASE("kv state machine: a tagged call is applied once; its retry answers the reply",
          "[kv][redis][dedupe]") {
    redis_driver d;
    const command c{calls_op{{{"INCRBY", "n", "5"}}, {}, false}, request_tag{3, 1}, d.clock};
    const outcome first = d.run(c);
    CHECK(outcome_reply(first) == ":5\r\n");
    const outcome retry = d.run(c);
    CHECK(retry.duplicate);
    CHECK(outcome_reply(retry) == ":5\r\n");
    CHECK(d.machine.get("n") == "5");
    // The recorded reply travels with the snapshot.
    kv_state_machine copy;
    REQUIRE(copy.restore(d.machine.last_applied(), d.machine.snapshot().view()));
    CHECK(outcome_reply(*outcome_of_response(copy.apply(zxid{2, 1}, encoded(c)).view())) ==
          ":5\r\n");
    CHECK(copy.get("n") == "5");
}

TEST_CASE("kv state machine: a MULTI block is one transaction; runtime errors do not stop it",
          "[kv][redis][multi]") {
    redis_driver d;
    d.call({"SET", "s", "text"});
    const std::uint32_t before = d.counter;
    CHECK(d.block({{"SET", "a", "1"}, {"INCR", "s"}, {"INCRBY", "n", "5"}, {"GET", "a"},
                   {"TTL", "a"}}) ==
          "*5\r\n+OK\r\n-ERR value is not an integer or out of range\r\n:5\r\n$1\r\n1\r\n:-1\r\n");
    CHECK(d.counter == before + 1);  // one zxid for the whole block
    const std::uint64_t block_zxid = d.last_zxid();
    CHECK(d.machine.version_of("a") == block_zxid);
    CHECK(d.machine.version_of("n") == block_zxid);
    CHECK(d.block({}) == "*0\r\n");
}

TEST_CASE("kv state machine: WATCH versions decide at apply; a changed key applies nothing",
          "[kv][redis][watch]") {
    redis_driver d;
    d.call({"SET", "k", "1"});
    const std::uint64_t v1 = d.machine.version_of("k");
    CHECK(v1 == d.last_zxid());
    CHECK(d.machine.version_of("absent") == 0);
    // Watched at v1, unchanged: applies.
    CHECK(d.block({{"SET", "k", "2"}, {"SET", "x", "1"}}, {{"k", v1}, {"absent", 0}}) ==
          "*2\r\n+OK\r\n+OK\r\n");
    // Watched at v1 but written since (by the block itself): nothing of the next applies.
    const kv_state before = d.machine.state();
    CHECK(d.block({{"SET", "k", "3"}, {"DEL", "x"}}, {{"k", v1}}) == "*-1\r\n");
    CHECK(d.machine.get("k") == "2");
    CHECK(d.machine.get("x") == "1");
    CHECK(d.machine.state().data == before.data);
    // A watched absent key that appeared, and a watched key deleted, both abort.
    CHECK(d.block({{"SET", "y", "1"}}, {{"x", 0}}) == "*-1\r\n");
    d.call({"DEL", "x"});
    CHECK(d.block({{"SET", "y", "1"}}, {{"x", 0}}) == "*1\r\n+OK\r\n");
    // EXPIRE changes a key's version too (Redis counts it as a touch).
    const std::uint64_t v2 = d.machine.version_of("k");
    d.call({"EXPIRE", "k", "100"});
    CHECK(d.machine.version_of("k") != v2);
}

TEST_CASE("kv state machine: EXPIRE, TTL, PERSIST and removal by the stamped clock",
          "[kv][redis][expiry]") {
    redis_driver d;
    d.call({"SET", "k", "v"});
    CHECK(d.read({"TTL", "k"}) == ":-1\r\n");
    CHECK(d.read({"TTL", "none"}) == ":-2\r\n");
    CHECK(d.call({"EXPIRE", "none", "10"}) == ":0\r\n");
    CHECK(d.call({"EXPIRE", "k", "10"}) == ":1\r\n");
    CHECK(d.read({"TTL", "k"}) == ":10\r\n");
    CHECK(d.read({"PTTL", "k"}) == ":10000\r\n");
    CHECK(d.call({"EXPIRE", "k", "5", "GT"}) == ":0\r\n");
    CHECK(d.call({"EXPIRE", "k", "5", "LT"}) == ":1\r\n");
    CHECK(d.call({"EXPIRE", "k", "50", "NX"}) == ":0\r\n");
    CHECK(d.call({"PEXPIRE", "k", "5000", "XX"}) == ":1\r\n");
    CHECK(d.read({"PEXPIRETIME", "k"}) == ":" + std::to_string(d.clock + 5000) + "\r\n");
    CHECK(d.call({"PERSIST", "k"}) == ":1\r\n");
    CHECK(d.call({"PERSIST", "k"}) == ":0\r\n");
    CHECK(d.call({"PEXPIREAT", "k", std::to_string(d.clock + 100)}) == ":1\r\n");
    // A reader whose clock passed the expiry still sees the key until a TICK removes it;
    // its clock only shows in the time left.
    CHECK(d.read({"GET", "k"}, d.clock + 100) == "$1\r\nv\r\n");
    CHECK(d.read({"PTTL", "k"}, d.clock + 100) == ":0\r\n");
    CHECK(d.read({"PTTL", "k"}, d.clock + 40) == ":60\r\n");
    CHECK(d.read({"DBSIZE"}, d.clock + 100) == ":1\r\n");
    CHECK(d.machine.exists("k"));  // still in the map: the map's clock has not passed it
    CHECK(d.machine.next_expiry() == d.clock + 100);
    d.clock += 100;
    d.tick();
    CHECK_FALSE(d.machine.exists("k"));
    CHECK_FALSE(d.machine.next_expiry());
    CHECK(d.machine.now_ms() == d.clock);
    // A past time deletes at once; a stamp older than the clock does not move it back.
    d.call({"SET", "p", "v", "PX", "50"});
    d.clock -= 30'000;  // a new leader with a slow clock
    CHECK(d.call({"SET", "q", "v", "PX", "10"}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("q") == d.machine.now_ms() + 10);  // from the map's clock
    CHECK(d.call({"EXPIRE", "q", "-1"}) == ":1\r\n");
    CHECK_FALSE(d.machine.exists("q"));
    CHECK(d.machine.exists("p"));
    const std::uint64_t clock_before = d.machine.now_ms();
    d.tick();  // the slow leader's TICK: the clock stays, p stays
    CHECK(d.machine.now_ms() == clock_before);
    CHECK(d.machine.exists("p"));
}

TEST_CASE("kv state machine: a write stamped by a clock ahead of the leader's expires nothing",
          "[kv][redis][expiry]") {
    // The leader's TICK sets the map's clock to C; a follower whose clock is a minute ahead
    // proposes writes. Before, any stamp advanced the map's clock: the follower's write
    // removed every key due within that minute, on every replica.
    redis_driver d;
    const std::uint64_t c = d.clock;
    d.tick();
    REQUIRE(d.machine.now_ms() == c);
    CHECK(d.call({"SET", "a", "v", "PX", "100"}) == "+OK\r\n");
    const std::uint64_t ahead = c + 60'000;
    CHECK(d.call_stamped(ahead, {"SET", "b", "w"}) == "+OK\r\n");
    CHECK(d.call_stamped(ahead, {"SET", "e", "x", "PX", "1000"}) == "+OK\r\n");
    CHECK(d.machine.now_ms() == c);  // no stamp but a TICK's moves the clock
    CHECK(d.machine.get("a") == "v");
    // Its stamp is only the base of the expiries it sets itself.
    CHECK(d.machine.expiry_of("e") == ahead + 1000);
    CHECK(d.machine.next_expiry() == c + 100);
    // A follower's typed write (SET/DEL/INCR/CAS, stamped too) moves nothing either.
    CHECK(outcome_reply(d.run({set_op{"f", "1"}, {}, ahead})) == "+OK\r\n");
    CHECK(d.machine.now_ms() == c);
    CHECK(d.machine.get("a") == "v");
    // The leader's TICK past the deadline removes a, nothing else.
    d.clock = c + 100;
    d.tick();
    CHECK_FALSE(d.machine.exists("a"));
    CHECK(d.machine.get("b") == "w");
    CHECK(d.machine.get("e") == "x");
    CHECK(d.machine.now_ms() == c + 100);
}

TEST_CASE("kv state machine: every read sees a key until a TICK past its deadline applies",
          "[kv][redis][expiry]") {
    // Presence is the map's alone: a reader whose clock passed the deadline (a follower with
    // a fast clock, or any replica between the deadline and the TICK) still sees the key,
    // through every read command, in or out of a block; WATCH records its version.
    redis_driver d;
    const std::uint64_t c = d.clock;
    d.tick();
    d.call({"SET", "k", "v", "PX", "100"});
    const std::uint64_t version = d.machine.version_of("k");
    REQUIRE(version != 0);
    for (const std::uint64_t reader : {c, c + 100, c + 5'000, std::uint64_t{0}}) {
        INFO("reader clock " << reader);
        CHECK(d.read({"GET", "k"}, reader) == "$1\r\nv\r\n");
        CHECK(d.read({"MGET", "k", "none"}, reader) == "*2\r\n$1\r\nv\r\n$-1\r\n");
        CHECK(d.read({"EXISTS", "k"}, reader) == ":1\r\n");
        CHECK(d.read({"TYPE", "k"}, reader) == "+string\r\n");
        CHECK(d.read({"STRLEN", "k"}, reader) == ":1\r\n");
        CHECK(d.read({"DBSIZE"}, reader) == ":1\r\n");
        CHECK(d.read({"KEYS", "*"}, reader) == "*1\r\n$1\r\nk\r\n");
        CHECK(d.read({"SCAN", "0"}, reader) == "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n");
        CHECK(d.read({"PEXPIRETIME", "k"}, reader) == ":" + std::to_string(c + 100) + "\r\n");
    }
    CHECK(d.read({"PTTL", "k"}, c + 5'000) == ":0\r\n");  // due, not yet removed
    CHECK(d.read({"TTL", "k"}, c + 5'000) == ":0\r\n");
    CHECK(d.machine.version_of("k") == version);
    // Inside a block stamped past the deadline, by a proposer whose clock is ahead.
    d.clock = c + 5'000;
    CHECK(d.block({{"GET", "k"}, {"EXISTS", "k"}, {"PTTL", "k"}, {"DBSIZE"}}) ==
          "*4\r\n$1\r\nv\r\n:1\r\n:0\r\n:1\r\n");
    CHECK(d.block({{"SET", "w", "1"}}, {{"k", version}}) == "*1\r\n+OK\r\n");  // unchanged
    // A TICK short of the deadline removes nothing; one at it removes the key.
    d.clock = c + 99;
    d.tick();
    CHECK(d.read({"GET", "k"}, c + 5'000) == "$1\r\nv\r\n");
    d.clock = c + 100;
    d.tick();
    CHECK(d.read({"GET", "k"}, c) == "$-1\r\n");
    CHECK(d.read({"EXISTS", "k"}, c) == ":0\r\n");
    CHECK(d.read({"TTL", "k"}, c) == ":-2\r\n");
    CHECK(d.read({"DBSIZE"}, c) == ":1\r\n");  // w
    CHECK(d.machine.version_of("k") == 0);
    // A watch taken before the expiry sees the key changed.
    CHECK(d.block({{"SET", "w", "2"}}, {{"k", version}}) == "*-1\r\n");
}

TEST_CASE("kv state machine: relative expiries count from the command's time; the stamp "
          "never moves the clock",
          "[kv][redis][expiry]") {
    // The command's time is the later of the map's clock (the last TICK) and its stamp (its
    // proposer's clock): both are in the log, so every replica computes the same deadline.
    redis_driver d;
    const std::uint64_t c = d.clock;
    d.tick();
    // A proposer ahead of the map's clock: its own clock is the base.
    CHECK(d.call_stamped(c + 500, {"SET", "a", "v", "PX", "100"}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("a") == c + 600);
    CHECK(d.call_stamped(c + 500, {"SETEX", "b", "2", "v"}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("b") == c + 2'500);
    // A proposer behind it: the map's clock is the base (a key never gets a deadline the
    // clock already passed from a relative TTL).
    CHECK(d.call_stamped(c - 500, {"SET", "s", "v", "EX", "1"}) == "+OK\r\n");
    CHECK(d.machine.expiry_of("s") == c + 1'000);
    CHECK(d.call_stamped(c - 500, {"PEXPIRE", "s", "300"}) == ":1\r\n");
    CHECK(d.machine.expiry_of("s") == c + 300);
    // A deadline at or before the command's time removes the key at once: a non-positive
    // EXPIRE, or an absolute time its proposer's clock has passed.
    d.call({"SET", "x", "v"});
    d.call({"SET", "y", "v"});
    CHECK(d.call_stamped(c + 500, {"EXPIRE", "x", "0"}) == ":1\r\n");
    CHECK_FALSE(d.machine.exists("x"));
    CHECK(d.call_stamped(c + 500, {"PEXPIREAT", "y", std::to_string(c + 200)}) == ":1\r\n");
    CHECK_FALSE(d.machine.exists("y"));
    // Inside a block, TTL shows the time left from the block's time.
    CHECK(d.machine.now_ms() == c);
    const command block{calls_op{{{"SET", "z", "v", "PX", "1000"}, {"PTTL", "z"}, {"PTTL", "a"}},
                                 {},
                                 true},
                        {},
                        c + 550};
    CHECK(outcome_reply(d.run(block)) == "*3\r\n+OK\r\n:1000\r\n:50\r\n");
    CHECK(d.machine.expiry_of("z") == c + 1'550);
    // None of these moved the map's clock.
    CHECK(d.machine.now_ms() == c);
    CHECK(d.machine.exists("a"));
}

TEST_CASE("kv state machine: a conditional write on an expiring key agrees with every read "
          "(two replicas, any clocks)",
          "[kv][redis][expiry]") {
    // The linearizability window the leader's clock closes: a key due at D; a SET NX (and
    // an INCR, a WATCHed block) proposed by a follower whose clock reads just before D is
    // forwarded slowly; meanwhile a replica whose clock is past D answers a read. Before, that
    // read answered nil by its own clock while the write then applied against the value.
    // Now both replicas, whatever their readers' clocks, answer the key present until the
    // same TICK, and every write's answer agrees with those reads.
    const std::uint64_t c = 1'000'000, due = c + 100;
    const auto call = [](std::uint64_t stamp, std::vector<std::vector<std::string>> calls,
                         std::vector<watched_key> watches = {}, bool multi = false) {
        return encoded({calls_op{std::move(calls), std::move(watches), multi}, {}, stamp});
    };
    const auto tick = [](std::uint64_t stamp) { return encoded({tick_op{}, {}, stamp}); };
    const std::vector<byte_vector> log = {
        tick(c),
        call(c, {{"SET", "k", "v", "PX", "100"}}),
        call(c, {{"SET", "n", "5", "PX", "100"}}),
        call(due - 1, {{"SET", "k", "nx", "NX"}}),  // the follower, just before D
        call(due + 50, {{"INCR", "n"}}),            // a follower past D: n still holds 5
        // WATCHed at k's version (the SET PX's zxid); KEEPTTL: still due at D.
        call(due + 50, {{"SET", "k", "w", "KEEPTTL"}}, {{"k", zxid{1, 2}.value()}}, true),
        tick(due),                                  // the leader's clock passes D
        call(due + 1, {{"SET", "k", "nx2", "NX"}}),
    };
    kv_state_machine a, b;
    // Replica a's reader clock is far ahead, b's behind; both answer the same after each
    // transaction, and as the writes found it.
    const std::uint64_t clock_a = c + 60'000, clock_b = c - 60'000;
    std::vector<std::string> answers;
    for (std::uint32_t i = 0; i < log.size(); ++i) {
        const zxid z{1, i + 1};
        const auto from_a = outcome_of_response(a.apply(z, log[i]).view());
        REQUIRE(from_a == outcome_of_response(b.apply(z, log[i]).view()));
        REQUIRE(from_a);
        answers.push_back(outcome_reply(*from_a));
        for (const char* key : {"k", "n"}) {
            CHECK(a.read_call({"GET", key}, clock_a) == b.read_call({"GET", key}, clock_b));
            CHECK(a.read_call({"EXISTS", key}, clock_a) == b.read_call({"EXISTS", key}, clock_b));
        }
        if (i == 2) {
            // Past D by a's clock, before the TICK: present, so the NX must fail next.
            CHECK(a.read_call({"GET", "k"}, clock_a) == "$1\r\nv\r\n");
        }
    }
    CHECK(answers[3] == "$-1\r\n");             // NX: k still held v
    CHECK(answers[4] == ":6\r\n");              // INCR counted from the value, kept its TTL
    CHECK(answers[5] == "*1\r\n+OK\r\n");     // the watch saw k unchanged
    CHECK(answers[7] == "+OK\r\n");             // after the TICK: k absent, NX applies
    CHECK(a.read_call({"GET", "k"}, clock_b) == "$3\r\nnx2\r\n");
    CHECK(a.get("k") == "nx2");
    CHECK_FALSE(a.exists("n"));  // INCR kept n's deadline; the TICK removed it
    CHECK(a.state() == b.state());
}

TEST_CASE("kv command: version-2 records replay as before (every stamp moved the clock)",
          "[kv][codec][expiry]") {
    // A log an older kv_server wrote: a version-2 SET PX, then a version-2 SET stamped past
    // its deadline, which then removed the key on every replica. Replayed today, it must
    // still (a replica restored from an older snapshot replays the records after it).
    const auto v2 = [](std::uint64_t stamp, std::vector<std::string> args) {
        command c{calls_op{{std::move(args)}, {}, false}, {}, stamp};
        c.legacy_clock = true;
        return encoded(c);
    };
    const byte_vector px = v2(1000, {"SET", "k", "v", "PX", "100"});
    CHECK(px.front() == std::byte{2});
    const auto decoded = kv::decode(px);
    REQUIRE(decoded);
    CHECK(decoded.value().legacy_clock);
    kv_state_machine m;
    m.apply(zxid{1, 1}, px);
    CHECK(m.now_ms() == 1000);
    m.apply(zxid{1, 2}, v2(1100, {"SET", "other", "w"}));
    CHECK(m.now_ms() == 1100);
    CHECK_FALSE(m.exists("k"));
    // The same as version 3: only the TICK moves the clock.
    const auto v3 = [](std::uint64_t stamp, std::vector<std::string> args) {
        return encoded({calls_op{{std::move(args)}, {}, false}, {}, stamp});
    };
    kv_state_machine n;
    n.apply(zxid{1, 1}, v3(1000, {"SET", "k", "v", "PX", "100"}));
    n.apply(zxid{1, 2}, v3(1100, {"SET", "other", "w"}));
    CHECK(n.now_ms() == 0);
    CHECK(n.exists("k"));
    n.apply(zxid{1, 3}, encoded({tick_op{}, {}, 1100}));
    CHECK_FALSE(n.exists("k"));
}

TEST_CASE("kv state machine: replicas agree on every key and expiry whatever their clocks",
          "[kv][redis][expiry]") {
    // The same stamped transactions on two machines: applying reads no clock, so the states
    // (keys, values, expiries, versions, the clock) are equal; the readers' own clocks only
    // change what a local read shows, never the state.
    testing::prng rng{0x65787079};
    std::vector<std::pair<zxid, byte_vector>> txns;
    std::uint64_t stamp = 5'000'000;
    for (std::uint32_t i = 1; i <= 2000; ++i) {
        stamp += rng.below(40);
        if (rng.chance(0.05)) stamp -= rng.below(200);  // proposers' clocks disagree
        const std::string key = "k" + std::to_string(rng.below(20));
        std::vector<std::vector<std::string>> choices = {
            {"SET", key, "v", "PX", std::to_string(1 + rng.below(300))},
            {"SET", key, "w"},
            {"EXPIRE", key, std::to_string(rng.below(3))},
            {"PEXPIRE", key, std::to_string(1 + rng.below(500))},
            {"INCR", key},
            {"PERSIST", key},
            {"GETDEL", key}};
        command c{calls_op{{choices[rng.below(choices.size())]}, {}, false}, {}, stamp};
        if (rng.chance(0.1)) c.op = tick_op{};
        if (rng.chance(0.1))
            c.op = calls_op{{choices[rng.below(choices.size())], choices[rng.below(choices.size())]},
                            {{key, rng.below(2)}},
                            true};
        txns.emplace_back(zxid{1, i}, encoded(c));
    }
    kv_state_machine a, b;
    for (const auto& [z, txn] : txns) {
        REQUIRE(outcome_of_response(a.apply(z, txn).view()) ==
                outcome_of_response(b.apply(z, txn).view()));
        for (int k = 0; k < 20; ++k) {
            const std::string key = "k" + std::to_string(k);
            // Reads with different clocks: equal once both clocks are at or below the map's.
            CHECK(a.read_call({"PTTL", key}, 0) ==
                  b.read_call({"PTTL", key}, a.now_ms() > 0 ? a.now_ms() - 1 : 0));
            // Presence is the map's alone, whatever the reader's clock.
            CHECK(a.read_call({"EXISTS", key}, 0) == b.read_call({"EXISTS", key}, ~0ull));
        }
    }
    CHECK(a.state() == b.state());
    CHECK(a.snapshot() == b.snapshot());
    // The map never holds a key expired by its own clock.
    for (const auto& [key, entry] : a.contents())
        CHECK((entry.expires_ms == 0 || entry.expires_ms > a.now_ms()));
    // And a replica restored from the snapshot has the same keys, expiries and clock.
    kv_state_machine restored;
    REQUIRE(restored.restore(a.last_applied(), a.snapshot().view()));
    CHECK(restored.state() == a.state());
    CHECK(restored.next_expiry() == a.next_expiry());
}

TEST_CASE("kv command: version-1 records (before stamps) still decode, CALLS and TICK round-trip",
          "[kv][codec]") {
    // What kv_server wrote before this version: the golden SET of version 1.
    const auto old = kv::decode(bytes_of({1, 1, 0, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'v'}));
    REQUIRE(old);
    CHECK(old.value() == command{set_op{"k", "v"}, {}, 0});
    // Stamped: version 3, the stamp after the flags; version 2 the same bytes (legacy_clock).
    CHECK(encoded({set_op{"k", "v"}, {}, 0x0102}) ==
          bytes_of({3, 1, 0, 2, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'v'}));
    CHECK(encoded({tick_op{}, {}, 7}) == bytes_of({3, 6, 0, 7, 0, 0, 0, 0, 0, 0, 0}));
    const auto v2_tick = kv::decode(bytes_of({2, 6, 0, 7, 0, 0, 0, 0, 0, 0, 0}));
    REQUIRE(v2_tick);
    CHECK(v2_tick.value() == command{tick_op{}, {}, 7, true});
    CHECK(decode_error(bytes_of({4, 6, 0, 7, 0, 0, 0, 0, 0, 0, 0})) == errc::unsupported_version);
    // A version-2 or -3 typed op stamped 0 would be a second encoding of the version-1 bytes.
    for (const unsigned version : {2u, 3u})
        CHECK(decode_error(bytes_of({version, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'k', 1,
                                     0, 0, 0, 'v'})) == errc::malformed);
    // CALLS that is not a block holds exactly one call and no watches; no empty call.
    byte_vector two_calls = encoded({calls_op{{{"GET", "a"}, {"GET", "b"}}, {}, true}, {}, 1});
    two_calls[2] = std::byte{0};  // clear the block flag
    CHECK(decode_error(two_calls) == errc::malformed);
    byte_vector empty_call = encoded({calls_op{{{"X"}}, {}, false}, {}, 1});
    empty_call[11 + 4 + 4] = std::byte{0};  // the argument count
    CHECK(decode_error(empty_call) == errc::malformed);
    // A count the input cannot hold is truncation, found before anything is reserved.
    CHECK(decode_error(bytes_of({2, 5, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})) ==
          errc::truncated);
    const command block{calls_op{{{"SET", "a\0b"s, "1"}, {"GET", ""}}, {{"w", 42}}, true},
                        request_tag{1, 2}, 99};
    const auto decoded = kv::decode(encoded(block));
    REQUIRE(decoded);
    CHECK(decoded.value() == block);
}

TEST_CASE("kv state machine: every read and write of the command table runs", "[kv][redis]") {
    redis_driver d;
    for (const command_info& info : command_table) {
        if (info.kind == call_kind::connection) continue;
        std::vector<std::string> args{std::string{info.name}};
        const int n = info.arity > 0 ? info.arity : -info.arity;
        for (int i = 1; i < n; ++i) args.emplace_back(i == 1 ? "k" : "1");
        if (info.name == "scan") args[1] = "0";
        INFO(info.name);
        const std::string reply = info.kind == call_kind::write ? d.call(args) : d.read(args);
        CHECK(reply.find("not a") == std::string::npos);
        CHECK(reply.find("unknown command") == std::string::npos);
        CHECK_FALSE(check_call(args));
    }
}

TEST_CASE("kv state machine: a version-2 TAGGED retry answered by the sessions still moves the "
          "clock, as kv_server applied it before (old logs replay alike)",
          "[kv][state_machine][dedupe]") {
    driver d;
    command first{set_op{"k", "v"}, request_tag{1, 1}, 1000};
    first.legacy_clock = true;
    CHECK(d.run(first) == outcome::ok());
    CHECK(d.machine.now_ms() == 1000u);
    command retry = first;
    retry.stamp_ms = 2000;
    CHECK(d.run(retry).duplicate);
    CHECK(d.machine.now_ms() == 2000u);
    CHECK(d.machine.state().last_applied == d.machine.last_applied());  // the map saw it
    // A version-3 retry's stamp is only the base of its expiries: the clock stays.
    command v3 = retry;
    v3.legacy_clock = false;
    v3.stamp_ms = 3000;
    CHECK(d.run(v3).duplicate);
    CHECK(d.machine.now_ms() == 2000u);
}
