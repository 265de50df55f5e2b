// The kv example's hashes, lists, sets and sorted sets (examples/kv/kv_collection_calls.hpp
// through kv_store.hpp): every command's replies and errors as Redis writes them, WRONGTYPE,
// the bounds, TYPE/SCAN TYPE/DEL/EXISTS/EXPIRE/WATCH over the new types, SPOP's
// deterministic picks, and the snapshot's version 3 (and version 2 still restoring).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kv/binary_io.hpp"
#include "kv/kv_command.hpp"
#include "kv/kv_requests.hpp"
#include "kv/kv_state_machine.hpp"
#include "zab/core/crc32c.hpp"

using namespace zab;
using namespace zab::kv;

namespace {

/// Redis commands applied as kv_server's transactions (zxids <1, n>), and local reads.
struct machine_driver {
    kv_state_machine machine;
    std::uint32_t counter = 0;
    std::uint64_t clock = 1'000'000;

    std::string apply(const command& c) {
        auto bytes = encode(c);
        REQUIRE(bytes);
        const auto result =
            outcome_of_response(machine.apply(zxid{1, ++counter}, bytes.value()).view());
        REQUIRE(result);
        return outcome_reply(*result);
    }
    std::string call(std::vector<std::string> args) {
        return apply({calls_op{{std::move(args)}, {}, false}, {}, clock});
    }
    std::string block(std::vector<std::vector<std::string>> calls,
                      std::vector<watched_key> watches = {}) {
        return apply({calls_op{std::move(calls), std::move(watches), true}, {}, clock});
    }
    std::string tick() { return apply({tick_op{}, {}, clock}); }
    std::string read(std::vector<std::string> args) { return machine.read_call(args, clock); }
    /// A write or a read, as kv_server routes it.
    std::string run(std::vector<std::string> args) {
        const command_info* info = find_command(args[0]);
        REQUIRE(info);
        return info->kind == call_kind::read ? read(std::move(args)) : call(std::move(args));
    }
};

std::string bulk(std::string_view s) {
    return "$" + std::to_string(s.size()) + "\r\n" + std::string{s} + "\r\n";
}
std::string array(std::vector<std::string> items) {
    std::string out = "*" + std::to_string(items.size()) + "\r\n";
    for (const auto& item : items) out += bulk(item);
    return out;
}

const std::string wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

}  // namespace

TEST_CASE("kv hashes: HSET HGET HMGET HGETALL HDEL HINCRBY HLEN HEXISTS", "[kv][collections]") {
    machine_driver d;
    CHECK(d.run({"HSET", "h", "a", "1", "b", "2"}) == ":2\r\n");
    CHECK(d.run({"HSET", "h", "a", "10", "c", "3"}) == ":1\r\n");
    CHECK(d.run({"HMSET", "h", "d", "4"}) == "+OK\r\n");
    CHECK(d.run({"HGET", "h", "a"}) == bulk("10"));
    CHECK(d.run({"HGET", "h", "zz"}) == "$-1\r\n");
    CHECK(d.run({"HGET", "nokey", "a"}) == "$-1\r\n");
    CHECK(d.run({"HMGET", "h", "a", "zz", "b"}) == "*3\r\n$2\r\n10\r\n$-1\r\n$1\r\n2\r\n");
    CHECK(d.run({"HGETALL", "h"}) == array({"a", "10", "b", "2", "c", "3", "d", "4"}));
    CHECK(d.run({"HGETALL", "nokey"}) == "*0\r\n");
    CHECK(d.run({"HLEN", "h"}) == ":4\r\n");
    CHECK(d.run({"HEXISTS", "h", "a"}) == ":1\r\n");
    CHECK(d.run({"HEXISTS", "h", "zz"}) == ":0\r\n");
    CHECK(d.run({"HINCRBY", "h", "a", "5"}) == ":15\r\n");
    CHECK(d.run({"HINCRBY", "h", "n", "-3"}) == ":-3\r\n");
    CHECK(d.run({"HSET", "h", "s", "text"}) == ":1\r\n");
    CHECK(d.run({"HINCRBY", "h", "s", "1"}) == "-ERR hash value is not an integer\r\n");
    CHECK(d.run({"HINCRBY", "h", "a", "x"}) == "-ERR value is not an integer or out of range\r\n");
    CHECK(d.run({"HSET", "h", "big", "9223372036854775807"}) == ":1\r\n");
    CHECK(d.run({"HINCRBY", "h", "big", "1"}) == "-ERR increment or decrement would overflow\r\n");
    CHECK(d.run({"HSET", "h", "a"}) == "-ERR wrong number of arguments for 'hset' command\r\n");
    CHECK(d.run({"HDEL", "h", "a", "zz", "b"}) == ":2\r\n");
    CHECK(d.run({"HDEL", "nokey", "a"}) == ":0\r\n");
    CHECK(d.run({"HDEL", "h", "c", "d", "n", "s", "big"}) == ":5\r\n");
    CHECK_FALSE(d.machine.exists("h"));  // the last field removed removes the key
}

TEST_CASE("kv lists: pushes, pops, LRANGE, LLEN, LINDEX, LTRIM, LREM", "[kv][collections]") {
    machine_driver d;
    CHECK(d.run({"RPUSH", "l", "a", "b", "c"}) == ":3\r\n");
    CHECK(d.run({"LPUSH", "l", "y", "z"}) == ":5\r\n");  // z y a b c
    CHECK(d.run({"LRANGE", "l", "0", "-1"}) == array({"z", "y", "a", "b", "c"}));
    CHECK(d.run({"LRANGE", "l", "-2", "100"}) == array({"b", "c"}));
    CHECK(d.run({"LRANGE", "l", "3", "1"}) == "*0\r\n");
    CHECK(d.run({"LRANGE", "l", "9", "10"}) == "*0\r\n");
    CHECK(d.run({"LRANGE", "nokey", "0", "-1"}) == "*0\r\n");
    CHECK(d.run({"LRANGE", "l", "a", "1"}) == "-ERR value is not an integer or out of range\r\n");
    CHECK(d.run({"LLEN", "l"}) == ":5\r\n");
    CHECK(d.run({"LLEN", "nokey"}) == ":0\r\n");
    CHECK(d.run({"LINDEX", "l", "0"}) == bulk("z"));
    CHECK(d.run({"LINDEX", "l", "-1"}) == bulk("c"));
    CHECK(d.run({"LINDEX", "l", "5"}) == "$-1\r\n");
    CHECK(d.run({"LPOP", "l"}) == bulk("z"));
    CHECK(d.run({"RPOP", "l"}) == bulk("c"));
    CHECK(d.run({"LPOP", "l", "2"}) == array({"y", "a"}));
    CHECK(d.run({"LPOP", "l", "0"}) == "*0\r\n");
    CHECK(d.run({"LPOP", "l", "-1"}) == "-ERR value is out of range, must be positive\r\n");
    CHECK(d.run({"LPOP", "l", "1", "2"}) == "-ERR wrong number of arguments for 'lpop' command\r\n");
    CHECK(d.run({"RPOP", "l", "5"}) == array({"b"}));
    CHECK_FALSE(d.machine.exists("l"));
    CHECK(d.run({"LPOP", "l"}) == "$-1\r\n");
    CHECK(d.run({"RPOP", "l", "2"}) == "*-1\r\n");

    CHECK(d.run({"RPUSH", "l", "a", "x", "a", "b", "a", "x", "a"}) == ":7\r\n");
    CHECK(d.run({"LREM", "l", "2", "a"}) == ":2\r\n");  // x b a x a
    CHECK(d.run({"LREM", "l", "-1", "x"}) == ":1\r\n");  // x b a a
    CHECK(d.run({"LRANGE", "l", "0", "-1"}) == array({"x", "b", "a", "a"}));
    CHECK(d.run({"LREM", "l", "0", "a"}) == ":2\r\n");
    CHECK(d.run({"LREM", "l", "0", "none"}) == ":0\r\n");
    CHECK(d.run({"RPUSH", "l", "c", "d", "e"}) == ":5\r\n");  // x b c d e
    CHECK(d.run({"LTRIM", "l", "1", "-2"}) == "+OK\r\n");
    CHECK(d.run({"LRANGE", "l", "0", "-1"}) == array({"b", "c", "d"}));
    CHECK(d.run({"LTRIM", "l", "5", "10"}) == "+OK\r\n");
    CHECK_FALSE(d.machine.exists("l"));
    CHECK(d.run({"LTRIM", "nokey", "0", "1"}) == "+OK\r\n");
}

TEST_CASE("kv sets: SADD SREM SPOP SMEMBERS SISMEMBER SCARD", "[kv][collections]") {
    machine_driver d;
    CHECK(d.run({"SADD", "s", "b", "a", "c", "a"}) == ":3\r\n");
    CHECK(d.run({"SADD", "s", "a"}) == ":0\r\n");
    CHECK(d.run({"SMEMBERS", "s"}) == array({"a", "b", "c"}));
    CHECK(d.run({"SMEMBERS", "nokey"}) == "*0\r\n");
    CHECK(d.run({"SISMEMBER", "s", "a"}) == ":1\r\n");
    CHECK(d.run({"SISMEMBER", "s", "z"}) == ":0\r\n");
    CHECK(d.run({"SCARD", "s"}) == ":3\r\n");
    CHECK(d.run({"SREM", "s", "a", "z"}) == ":1\r\n");
    CHECK(d.run({"SPOP", "s", "-1"}) == "-ERR value is out of range, must be positive\r\n");
    CHECK(d.run({"SPOP", "s", "0"}) == "*0\r\n");
    const std::string one = d.run({"SPOP", "s"});
    CHECK((one == bulk("b") || one == bulk("c")));
    CHECK(d.run({"SCARD", "s"}) == ":1\r\n");
    CHECK(d.run({"SPOP", "s", "5"}).starts_with("*1\r\n"));
    CHECK_FALSE(d.machine.exists("s"));
    CHECK(d.run({"SPOP", "s"}) == "$-1\r\n");
    CHECK(d.run({"SPOP", "s", "3"}) == "*0\r\n");
}

TEST_CASE("kv sets: SPOP picks the same members on every replica, from the zxid",
          "[kv][collections]") {
    machine_driver a, b;
    std::vector<std::string> members{"SADD", "s"};
    for (int i = 0; i < 200; ++i) members.push_back("m" + std::to_string(i));
    a.call(members);
    b.call(members);
    std::set<std::string> popped;
    for (int i = 0; i < 20; ++i) {
        const std::string reply = a.call({"SPOP", "s", "3"});
        CHECK(reply == b.call({"SPOP", "s", "3"}));
        popped.insert(reply);
    }
    CHECK(a.machine.snapshot() == b.machine.snapshot());
    CHECK(popped.size() > 1);  // not the same pick each time
    // Another zxid, another pick: the "randomness" is the transaction's.
    machine_driver c;
    c.call({"SET", "other", "x"});
    c.call(members);
    std::string first_a;
    machine_driver a2;
    a2.call(members);
    CHECK(a2.call({"SPOP", "s", "10"}) != c.call({"SPOP", "s", "10"}));
}

TEST_CASE("kv sorted sets: ZADD and its options, ZSCORE, ZINCRBY, ZREM, ZCARD",
          "[kv][collections]") {
    machine_driver d;
    CHECK(d.run({"ZADD", "z", "1", "a", "2", "b", "1.5", "c"}) == ":3\r\n");
    CHECK(d.run({"ZADD", "z", "1", "a"}) == ":0\r\n");
    CHECK(d.run({"ZSCORE", "z", "c"}) == bulk("1.5"));
    CHECK(d.run({"ZSCORE", "z", "zz"}) == "$-1\r\n");
    CHECK(d.run({"ZADD", "z", "CH", "5", "a", "7", "n"}) == ":2\r\n");
    CHECK(d.run({"ZADD", "z", "NX", "9", "a"}) == ":0\r\n");
    CHECK(d.run({"ZSCORE", "z", "a"}) == bulk("5"));
    CHECK(d.run({"ZADD", "z", "XX", "9", "new"}) == ":0\r\n");
    CHECK(d.run({"ZSCORE", "z", "new"}) == "$-1\r\n");
    CHECK(d.run({"ZADD", "z", "GT", "CH", "4", "a"}) == ":0\r\n");
    CHECK(d.run({"ZADD", "z", "LT", "CH", "4", "a"}) == ":1\r\n");
    CHECK(d.run({"ZADD", "z", "INCR", "0.1", "a"}) == bulk("4.1"));
    CHECK(d.run({"ZADD", "z", "NX", "INCR", "1", "a"}) == "$-1\r\n");
    CHECK(d.run({"ZADD", "z", "NX", "XX", "1", "a"}) ==
          "-ERR XX and NX options at the same time are not compatible\r\n");
    CHECK(d.run({"ZADD", "z", "GT", "LT", "1", "a"}) ==
          "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n");
    CHECK(d.run({"ZADD", "z", "INCR", "1", "a", "2", "b"}) ==
          "-ERR INCR option supports a single increment-element pair\r\n");
    CHECK(d.run({"ZADD", "z", "1", "a", "2"}) == "-ERR syntax error\r\n");
    CHECK(d.run({"ZADD", "z", "x", "a"}) == "-ERR value is not a valid float\r\n");
    CHECK(d.run({"ZADD", "z", "nan", "a"}) == "-ERR value is not a valid float\r\n");
    CHECK(d.run({"ZADD", "z", "+inf", "top", "-inf", "bottom"}) == ":2\r\n");
    CHECK(d.run({"ZSCORE", "z", "top"}) == bulk("inf"));
    CHECK(d.run({"ZSCORE", "z", "bottom"}) == bulk("-inf"));
    CHECK(d.run({"ZINCRBY", "z", "-inf", "top"}) == "-ERR resulting score is not a number (NaN)\r\n");
    CHECK(d.run({"ZINCRBY", "z", "2.5", "b"}) == bulk("4.5"));
    CHECK(d.run({"ZINCRBY", "z", "1e20", "fresh"}) == bulk("1e+20"));
    CHECK(d.run({"ZINCRBY", "z", "x", "b"}) == "-ERR value is not a valid float\r\n");
    CHECK(d.run({"ZADD", "z", "1.1", "p"}) == ":1\r\n");
    CHECK(d.run({"ZSCORE", "z", "p"}) == bulk("1.1"));  // shortest round-trip form
    CHECK(d.run({"ZCARD", "z"}) == ":8\r\n");
    CHECK(d.run({"ZCARD", "nokey"}) == ":0\r\n");
    CHECK(d.run({"ZREM", "z", "top", "bottom", "fresh", "p", "zz"}) == ":4\r\n");
    CHECK(d.run({"ZCARD", "z"}) == ":4\r\n");
}

TEST_CASE("kv sorted sets: ZRANGE, ZRANGEBYSCORE, ZRANK, ZPOPMIN", "[kv][collections]") {
    machine_driver d;
    CHECK(d.run({"ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d"}) == ":4\r\n");
    CHECK(d.run({"ZRANGE", "z", "0", "-1"}) == array({"a", "b", "c", "d"}));
    CHECK(d.run({"ZRANGE", "z", "1", "2", "WITHSCORES"}) == array({"b", "2", "c", "2"}));
    CHECK(d.run({"ZRANGE", "z", "0", "1", "REV"}) == array({"d", "c"}));
    CHECK(d.run({"ZRANGE", "z", "5", "9"}) == "*0\r\n");
    CHECK(d.run({"ZRANGE", "z", "(1", "3", "BYSCORE"}) == array({"b", "c", "d"}));
    CHECK(d.run({"ZRANGE", "z", "3", "(1", "BYSCORE", "REV", "LIMIT", "1", "1"}) == array({"c"}));
    CHECK(d.run({"ZRANGE", "z", "0", "1", "LIMIT", "0", "1"}) ==
          "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or "
          "BYLEX\r\n");
    CHECK(d.run({"ZRANGE", "z", "0", "1", "BOGUS"}) == "-ERR syntax error\r\n");
    CHECK(d.run({"ZRANGEBYSCORE", "z", "-inf", "+inf"}) == array({"a", "b", "c", "d"}));
    CHECK(d.run({"ZRANGEBYSCORE", "z", "2", "(3", "WITHSCORES"}) == array({"b", "2", "c", "2"}));
    CHECK(d.run({"ZRANGEBYSCORE", "z", "1", "3", "LIMIT", "1", "2"}) == array({"b", "c"}));
    CHECK(d.run({"ZRANGEBYSCORE", "z", "x", "3"}) == "-ERR min or max is not a float\r\n");
    CHECK(d.run({"ZRANK", "z", "c"}) == ":2\r\n");
    CHECK(d.run({"ZRANK", "z", "zz"}) == "$-1\r\n");
    CHECK(d.run({"ZRANK", "z", "d", "WITHSCORE"}) == "*2\r\n:3\r\n$1\r\n3\r\n");
    CHECK(d.run({"ZPOPMIN", "z"}) == array({"a", "1"}));
    CHECK(d.run({"ZPOPMIN", "z", "2"}) == array({"b", "2", "c", "2"}));
    CHECK(d.run({"ZPOPMIN", "z", "-1"}) == "-ERR value is out of range, must be positive\r\n");
    CHECK(d.run({"ZPOPMIN", "z", "9"}) == array({"d", "3"}));
    CHECK_FALSE(d.machine.exists("z"));
    CHECK(d.run({"ZPOPMIN", "z"}) == "*0\r\n");
}

TEST_CASE("kv collections: WRONGTYPE both ways, TYPE, SCAN TYPE, DEL, EXISTS", "[kv][collections]") {
    machine_driver d;
    d.call({"SET", "str", "v"});
    d.call({"HSET", "h", "f", "v"});
    d.call({"RPUSH", "l", "x"});
    d.call({"SADD", "s", "x"});
    d.call({"ZADD", "z", "1", "x"});
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"HSET", "l", "f", "v"}, {"HGET", "s", "f"}, {"LPUSH", "h", "x"},
             {"LRANGE", "z", "0", "1"}, {"SADD", "str", "x"}, {"SMEMBERS", "l"},
             {"ZADD", "s", "1", "x"}, {"ZSCORE", "h", "x"}, {"GET", "h"}, {"STRLEN", "l"},
             {"INCR", "s"}, {"APPEND", "z", "x"}, {"GETSET", "h", "x"}, {"INCRBYFLOAT", "l", "1"},
             {"SET", "h", "x", "GET"}, {"LPOP", "str"}, {"SPOP", "z"}, {"ZPOPMIN", "l"}}) {
        INFO(args[0] << " " << args[1]);
        CHECK(d.run(args) == wrongtype);
    }
    CHECK(d.apply({incr_op{"h"}, {}, 0}) == wrongtype);
    CHECK(d.run({"MGET", "str", "h"}) == "*2\r\n$1\r\nv\r\n$-1\r\n");
    CHECK(d.run({"TYPE", "str"}) == "+string\r\n");
    CHECK(d.run({"TYPE", "h"}) == "+hash\r\n");
    CHECK(d.run({"TYPE", "l"}) == "+list\r\n");
    CHECK(d.run({"TYPE", "s"}) == "+set\r\n");
    CHECK(d.run({"TYPE", "z"}) == "+zset\r\n");
    CHECK(d.run({"TYPE", "none"}) == "+none\r\n");
    CHECK(d.run({"SCAN", "0", "COUNT", "100", "TYPE", "list"}) == "*2\r\n$1\r\n0\r\n" + array({"l"}));
    CHECK(d.run({"SCAN", "0", "COUNT", "100", "TYPE", "zset"}) == "*2\r\n$1\r\n0\r\n" + array({"z"}));
    CHECK(d.run({"EXISTS", "h", "l", "s", "z", "none"}) == ":4\r\n");
    CHECK(d.run({"DBSIZE"}) == ":5\r\n");
    // SET and MSET replace a collection (as in Redis); CAS never matches one.
    CHECK(d.run({"SET", "h", "now a string"}) == "+OK\r\n");
    CHECK(d.run({"TYPE", "h"}) == "+string\r\n");
    CHECK(d.run({"CAS", "l", "x", "y"}) == ":0\r\n");
    CHECK(d.run({"DEL", "l", "s", "z"}) == ":3\r\n");
    CHECK(d.run({"DBSIZE"}) == ":2\r\n");
}

TEST_CASE("kv collections: expiry, WATCH versions and MULTI blocks cover them", "[kv][collections]") {
    machine_driver d;
    d.call({"RPUSH", "l", "a"});
    CHECK(d.run({"EXPIRE", "l", "10"}) == ":1\r\n");
    CHECK(d.run({"TTL", "l"}) == ":10\r\n");
    d.call({"RPUSH", "l", "b"});  // a push keeps the expiry, as in Redis
    CHECK(d.run({"TTL", "l"}) == ":10\r\n");
    d.clock += 10'000;
    d.tick();
    CHECK_FALSE(d.machine.exists("l"));

    d.call({"SADD", "s", "a"});
    const std::uint64_t v = d.machine.version_of("s");
    CHECK(v == zxid{1, d.counter}.value());
    d.call({"SADD", "s", "a"});  // no change: the version stays
    CHECK(d.machine.version_of("s") == v);
    CHECK(d.block({{"SADD", "s", "b"}, {"SCARD", "s"}, {"LPUSH", "s", "x"}}, {{"s", v}}) ==
          "*3\r\n:1\r\n:2\r\n" + wrongtype);
    CHECK(d.block({{"SADD", "s", "c"}}, {{"s", v}}) == "*-1\r\n");  // changed since v
    CHECK(d.run({"SMEMBERS", "s"}) == array({"a", "b"}));
}

TEST_CASE("kv collections: bounded elements, a clear error, nothing applied", "[kv][collections]") {
    machine_driver d;
    const std::string big(max_element_bytes + 1, 'x');
    const std::string too_large = "-ERR element too large: at most " +
                                  std::to_string(max_element_bytes) +
                                  " bytes per field, value, item or member\r\n";
    CHECK(d.run({"RPUSH", "l", big}) == too_large);
    CHECK(d.run({"HSET", "h", "f", big}) == too_large);
    CHECK(d.run({"SADD", "s", big}) == too_large);
    CHECK(d.run({"ZADD", "z", "1", big}) == too_large);
    CHECK(check_call({"SADD", "s", big}));  // refused before it is proposed
    CHECK(d.machine.size() == 0);
    // A reply larger than the read bound is an error, not a huge allocation.
    d.call({"RPUSH", "l", std::string(1000, 'a'), std::string(1000, 'b')});
    CHECK(d.machine.read_call({"LRANGE", "l", "0", "-1"}, 0, 1500).starts_with("-ERR reply too large"));
    CHECK(d.machine.read_call({"LRANGE", "l", "0", "0"}, 0, 1500).starts_with("*1\r\n"));
}

TEST_CASE("kv collections: the element-count bound refuses a write that passes it",
          "[kv][collections][.slow]") {
    machine_driver d;
    std::vector<std::string> args{"RPUSH", "l"};
    for (std::size_t i = 0; i < max_collection_elements; ++i) args.emplace_back("x");
    CHECK(d.call(args) == ":" + std::to_string(max_collection_elements) + "\r\n");
    CHECK(d.call({"RPUSH", "l", "y"}).starts_with("-ERR collection full"));
    CHECK(d.run({"LLEN", "l"}) == ":" + std::to_string(max_collection_elements) + "\r\n");
}

TEST_CASE("kv snapshot: version 3 holds every type; it restores byte for byte",
          "[kv][collections][snapshot]") {
    machine_driver d;
    d.call({"SET", "str", "v"});
    d.call({"HSET", "h", "f", "1", "g", "2"});
    d.call({"RPUSH", "l", "b", "a", "b"});
    d.call({"SADD", "s", "y", "x"});
    d.call({"ZADD", "z", "1.5", "m", "-inf", "n"});
    d.call({"EXPIRE", "l", "100"});
    const shared_bytes image = d.machine.snapshot();
    CHECK(snapshot_image_version(image.view()) == std::nullopt);  // session_machine's wrapper
    kv_state_machine copy;
    REQUIRE(copy.restore(d.machine.last_applied(), image.view()));
    CHECK(copy.state() == d.machine.state());
    CHECK(copy.snapshot() == image);
    CHECK(copy.read_call({"LRANGE", "l", "0", "-1"}, 0) == array({"b", "a", "b"}));
    CHECK(copy.read_call({"ZSCORE", "z", "n"}, 0) == bulk("-inf"));
    CHECK(copy.expiry_of("l") == d.clock + 100'000);

    // The map image inside (kv_store's) is version 3, and each collection is checked.
    const kv_store& store = d.machine.store();
    const shared_bytes map_image = store.snapshot();
    CHECK(snapshot_image_version(map_image.view()) == snapshot_version);
    kv_store other;
    REQUIRE(other.restore(store.last_applied(), map_image.view()));
    CHECK(other.state() == store.state());
    CHECK(other.snapshot() == map_image);

    // Hand-built images with a bad collection: refused, nothing installed.
    const auto image_with = [&](auto&& write_value) {
        std::vector<std::byte> bytes;
        zab::kv::detail::byte_writer w{bytes};
        w.u32(snapshot_magic);
        w.u8(snapshot_version);
        w.u64(zxid{1, 9}.value());
        w.u64(0);
        w.u64(1);
        w.string("k");
        write_value(w);
        w.u64(0);
        w.u64(zxid{1, 2}.value());
        w.u64(0);
        w.u32(crc32c(byte_view{bytes.data(), bytes.size()}));
        return bytes;
    };
    const auto restores = [&](const std::vector<std::byte>& bytes) {
        kv_store target;
        return static_cast<bool>(target.restore(zxid{1, 9}, bytes));
    };
    using writer = zab::kv::detail::byte_writer;
    CHECK(restores(image_with([](writer& w) { w.u8(3); w.u64(2); w.string("a"); w.string("b"); })));
    CHECK_FALSE(restores(image_with([](writer& w) { w.u8(3); w.u64(2); w.string("b"); w.string("a"); })));
    CHECK_FALSE(restores(image_with([](writer& w) { w.u8(3); w.u64(0); })));  // empty
    CHECK_FALSE(restores(image_with([](writer& w) { w.u8(9); w.u64(1); w.string("a"); })));
    CHECK_FALSE(restores(image_with([](writer& w) { w.u8(2); w.u64(UINT64_MAX); })));
    CHECK_FALSE(restores(image_with([](writer& w) {
        w.u8(4);
        w.u64(1);
        w.string("m");
        w.u64(0x7ff8000000000000ull);  // NaN
    })));
    CHECK(restores(image_with([](writer& w) { w.u8(1); w.u64(1); w.string("f"); w.string("v"); })));
}

TEST_CASE("kv snapshot: a version-2 image (the old writer's bytes) still restores",
          "[kv][collections][snapshot]") {
    // The layout before collections: key, value, expiry, version; no type byte. Checked-in
    // bytes, as a version-2 writer produced them for {"k" -> "v"} at <1, 9>.
    std::vector<std::byte> bytes;
    zab::kv::detail::byte_writer w{bytes};
    w.u32(snapshot_magic);
    w.u8(2);
    w.u64(zxid{1, 9}.value());
    w.u64(500);
    w.u64(1);
    w.string("k");
    w.string("v");
    w.u64(0);
    w.u64(zxid{1, 3}.value());
    w.u64(0);
    w.u32(crc32c(byte_view{bytes.data(), bytes.size()}));
    kv_store store;
    REQUIRE(store.restore(zxid{1, 9}, bytes));
    CHECK(store.get("k") == "v");
    CHECK(store.read_call({"TYPE", "k"}, 0) == "+string\r\n");
    CHECK(store.now_ms() == 500);
    CHECK(snapshot_image_version(store.snapshot().view()) == snapshot_version);  // rewritten as 3
}
