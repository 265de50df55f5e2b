// kv_server's per-connection logic without sockets: resp_session's reply ordering (writes in
// flight together, reads after the earlier writes, READMODE linearizable), its queue bound,
// QUIT and protocol errors, TAGGED's one request per client; the server's write pool and
// output budget; and kv_requests' command table and reply texts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_clients.hpp"
#include "kv/kv_metrics.hpp"
#include "kv/kv_requests.hpp"
#include "kv/kv_sentinel.hpp"
#include "kv/output_budget.hpp"
#include "kv/resp_session.hpp"
#include "kv/write_pool.hpp"

namespace {

using zab::kv::resp_session;

/// Records what the session starts; the test completes it when it likes (never inline, as
/// the contract asks). Reads answer from a map the test changes, to see *when* they ran.
struct fake_backend {
    std::vector<std::uint64_t> proposed;
    std::vector<std::vector<std::byte>> txns;  ///< what each proposal carried
    std::vector<std::uint64_t> synced;
    std::vector<std::string> reads;
    std::map<std::string, std::string> data;
    std::map<std::string, std::uint64_t> versions;  ///< what WATCH reads
    std::uint64_t clock = 1000;
    std::optional<std::string> leader;  ///< redirect(): set when "not the leader"

    void propose(std::uint64_t ticket, std::vector<std::byte> txn) {
        proposed.push_back(ticket);
        txns.push_back(std::move(txn));
    }
    std::uint64_t now_ms() { return clock; }
    std::uint64_t version_of(std::string_view key) {
        const auto it = versions.find(std::string{key});
        return it == versions.end() ? 0 : it->second;
    }
    std::optional<std::string> redirect() { return leader; }
    void sync(std::uint64_t ticket) { synced.push_back(ticket); }
    void transfer(std::uint64_t ticket, std::uint64_t target) {
        synced.push_back(ticket);
        transfers.push_back(target);
    }
    std::vector<std::uint64_t> transfers;
    void reconfigure(std::uint64_t ticket, zab::kv::reconfig_spec spec) {
        synced.push_back(ticket);
        reconfigs.push_back(std::move(spec));
    }
    std::vector<zab::kv::reconfig_spec> reconfigs;
    std::string read(const zab::kv::resp::command& args) {
        const std::string key = args.size() > 1 ? args[1] : std::string{};  // INFO: ""
        reads.push_back(key);
        const auto it = data.find(key);
        std::string out;
        if (it == data.end())
            zab::kv::resp::write_null_bulk(out);
        else
            zab::kv::resp::write_bulk_string(out, it->second);
        return out;
    }
};

std::string request_bytes(std::initializer_list<std::string_view> args) {
    std::string out;
    zab::kv::resp::write_command(out, args);
    return out;
}

}  // namespace

TEST_CASE("resp_session: pipelined writes are all in flight at once, replies in order") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"SET", "a", "1"}) + request_bytes({"SET", "b", "2"}) +
                 request_bytes({"INCR", "c"}));
    REQUIRE(backend.proposed.size() == 3);
    CHECK_FALSE(session.has_output());

    // Completions out of order: nothing goes out before the first reply is known.
    session.write_done(backend.proposed[2], ":7\r\n");
    session.write_done(backend.proposed[1], "+OK\r\n");
    CHECK_FALSE(session.has_output());
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(session.take_output() == "+OK\r\n+OK\r\n:7\r\n");
    CHECK(session.idle());
}

TEST_CASE("resp_session: a read waits for the writes before it, a write waits for that read") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"PING"}) + request_bytes({"SET", "k", "1"}) + request_bytes({"GET", "k"}) +
                 request_bytes({"SET", "k", "2"}));
    // PING answered at once; the first SET in flight; the GET waits; the second SET too.
    CHECK(session.take_output() == "+PONG\r\n");
    REQUIRE(backend.proposed.size() == 1);
    CHECK(backend.reads.empty());

    backend.data["k"] = "1";  // the first SET applied
    session.write_done(backend.proposed[0], "+OK\r\n");
    REQUIRE(backend.reads.size() == 1);
    REQUIRE(backend.proposed.size() == 2);  // started only after the read executed
    CHECK(session.take_output() == "+OK\r\n$1\r\n1\r\n");
    session.write_done(backend.proposed[1], "+OK\r\n");
    CHECK(session.take_output() == "+OK\r\n");
}

TEST_CASE("resp_session: READMODE linearizable syncs before each read") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"READMODE", "linearizable"}) + request_bytes({"GET", "x"}) +
                 request_bytes({"GET", "y"}) + request_bytes({"INFO"}));
    CHECK(session.take_output() == "+OK\r\n");
    REQUIRE(backend.synced.size() == 2);  // both syncs asked at once; INFO never syncs
    CHECK(backend.reads.empty());

    // The second sync completing first does not let the second read overtake the first.
    session.sync_done(backend.synced[1], std::nullopt);
    CHECK(backend.reads.empty());
    session.sync_done(backend.synced[0], std::nullopt);
    CHECK(backend.reads == std::vector<std::string>{"x", "y", ""});
    CHECK(session.take_output().starts_with("$-1\r\n$-1\r\n"));

    // A failed sync answers its read with the error.
    session.feed(request_bytes({"GET", "z"}));
    REQUIRE(backend.synced.size() == 3);
    session.sync_done(backend.synced[2], "-NOQUORUM no leader\r\n");
    CHECK(session.take_output() == "-NOQUORUM no leader\r\n");

    session.feed(request_bytes({"READMODE", "local"}) + request_bytes({"GET", "z"}));
    CHECK(backend.synced.size() == 3);
    CHECK(session.take_output() == "+OK\r\n$-1\r\n");
}

TEST_CASE("resp_session: SYNC and ZSYNC answer +OK when the sync completes, in order") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"SET", "a", "1"}) + request_bytes({"ZSYNC"}) + request_bytes({"SYNC"}));
    REQUIRE(backend.proposed.size() == 1);
    REQUIRE(backend.synced.size() == 2);
    session.sync_done(backend.synced[0], std::nullopt);
    session.sync_done(backend.synced[1], std::nullopt);
    CHECK_FALSE(session.has_output());
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(session.take_output() == "+OK\r\n+OK\r\n+OK\r\n");
}

TEST_CASE("resp_session: ZTRANSFER asks the backend for a transfer to the replica named, in "
          "order; bad targets are refused") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"ZTRANSFER", "2"}) + request_bytes({"ZTRANSFER", "any"}) +
                 request_bytes({"ZTRANSFER", "0"}) + request_bytes({"ZTRANSFER", "x"}) +
                 request_bytes({"ZTRANSFER"}));
    REQUIRE(backend.transfers == std::vector<std::uint64_t>{2, 0});
    REQUIRE(backend.synced.size() == 2);
    CHECK_FALSE(session.has_output());
    session.sync_done(backend.synced[1], "-TIMEOUT late\r\n");
    CHECK_FALSE(session.has_output());  // in order: the first is still running
    session.sync_done(backend.synced[0], std::nullopt);
    CHECK(session.take_output() ==
          "+OK\r\n-TIMEOUT late\r\n"
          "-ERR ZTRANSFER takes a replica id or ANY\r\n"
          "-ERR ZTRANSFER takes a replica id or ANY\r\n"
          "-ERR wrong number of arguments for 'ztransfer' command\r\n");
}

TEST_CASE("resp_session: ZRECONFIG hands the parsed change to the backend and answers its reply "
          "in order; a malformed one is refused at once") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"SET", "a", "1"}) +
                 request_bytes({"ZRECONFIG", "add", "4", "127.0.0.1:7004"}) +
                 request_bytes({"ZRECONFIG", "REMOVE", "x"}) +
                 request_bytes({"ZRECONFIG", "VERSION", "9", "REMOVE", "2"}));
    REQUIRE(backend.reconfigs.size() == 2);
    CHECK(backend.reconfigs[0].what == zab::kv::reconfig_spec::kind::add);
    CHECK(backend.reconfigs[0].members.at(0).id == 4);
    CHECK(backend.reconfigs[1].removed == 2);
    CHECK(backend.reconfigs[1].expected_version == 9u);
    CHECK(session.awaiting_cluster());
    session.reconfig_done(backend.synced[1], "-BUSY another reconfiguration\r\n");
    session.reconfig_done(backend.synced[0], "+OK 4294967298\r\n");
    CHECK_FALSE(session.has_output());  // the SET is first
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(session.take_output() ==
          "+OK\r\n+OK 4294967298\r\n-ERR ZRECONFIG REMOVE takes one replica id\r\n"
          "-BUSY another reconfiguration\r\n");
    CHECK_FALSE(session.awaiting_cluster());
    // Not inside MULTI.
    session.feed(request_bytes({"MULTI"}) + request_bytes({"ZRECONFIG", "REMOVE", "2"}) +
                 request_bytes({"EXEC"}));
    CHECK(session.take_output() ==
          "+OK\r\n-ERR ZRECONFIG is not allowed inside MULTI here\r\n"
          "-EXECABORT Transaction discarded because of previous errors.\r\n");
    CHECK(backend.reconfigs.size() == 2);
}

TEST_CASE("resp_session: a backend without reconfigure refuses ZRECONFIG") {
    struct plain_backend {
        void propose(std::uint64_t, std::vector<std::byte>) {}
        std::uint64_t now_ms() { return 0; }
        std::uint64_t version_of(std::string_view) { return 0; }
        std::optional<std::string> redirect() { return std::nullopt; }
        void sync(std::uint64_t) {}
        void transfer(std::uint64_t, std::uint64_t) {}
        std::string read(const zab::kv::resp::command&) { return "$-1\r\n"; }
    } backend;
    resp_session<plain_backend> session{backend};
    session.feed(request_bytes({"ZRECONFIG", "REMOVE", "2"}) + request_bytes({"PING"}));
    CHECK(session.take_output() == "-ERR ZRECONFIG is not available here\r\n+PONG\r\n");
    CHECK_FALSE(session.awaiting_cluster());
}

TEST_CASE("resp_session: the queue bound stops input until replies drain") {
    fake_backend backend;
    zab::kv::session_options options;
    options.max_outstanding = 2;
    resp_session<fake_backend> session{backend, options};
    session.feed(request_bytes({"SET", "a", "1"}) + request_bytes({"SET", "b", "2"}) +
                 request_bytes({"SET", "c", "3"}));
    CHECK(backend.proposed.size() == 2);
    CHECK_FALSE(session.wants_input());
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(backend.proposed.size() == 3);  // the parsed third command moved in
    CHECK(session.outstanding() == 2);
    session.write_done(backend.proposed[1], "+OK\r\n");
    session.write_done(backend.proposed[2], "+OK\r\n");
    CHECK(session.wants_input());
    CHECK(session.take_output() == "+OK\r\n+OK\r\n+OK\r\n");
}

TEST_CASE("resp_session: QUIT and protocol errors close after the earlier replies") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"SET", "a", "1"}) + request_bytes({"QUIT"}) + request_bytes({"SET", "b", "2"}));
    CHECK(session.closing());
    CHECK(backend.proposed.size() == 1);  // nothing after QUIT runs
    CHECK_FALSE(session.idle());
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(session.take_output() == "+OK\r\n+OK\r\n");
    CHECK(session.idle());

    fake_backend other;
    resp_session<fake_backend> broken{other};
    broken.feed(request_bytes({"PING"}) + "*1\r\n$x\r\n");
    CHECK(broken.closing());
    CHECK(broken.take_output() == "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
    CHECK(broken.idle());
    // A completion for a ticket the session no longer has is ignored.
    broken.write_done(12345, "+OK\r\n");
    CHECK_FALSE(broken.has_output());
}

TEST_CASE("kv_requests: Redis-style errors for unknown commands and arities") {
    const auto reply = [](zab::kv::resp::command args) {
        auto r = zab::kv::classify(args, 1 << 20);
        REQUIRE(std::holds_alternative<zab::kv::request::immediate>(r));
        return std::get<zab::kv::request::immediate>(r).reply;
    };
    CHECK(reply({"foo", "a", "b"}) ==
          "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n");
    CHECK(reply({"GET"}) == "-ERR wrong number of arguments for 'get' command\r\n");
    CHECK(reply({"cas", "k", "v"}) == "-ERR wrong number of arguments for 'cas' command\r\n");
    CHECK(reply({"PING", "hi"}) == "$2\r\nhi\r\n");
    CHECK(reply({"COMMAND", "DOCS"}) == "*0\r\n");
    // Answered by the server, which knows its settings (config_reply).
    CHECK(std::holds_alternative<zab::kv::request::read>(zab::kv::classify({"CONFIG", "GET", "x"}, 1 << 20)));
    CHECK(reply({"TAGGED", "1", "x", "SET", "k", "v"}).starts_with("-ERR TAGGED client id"));
    CHECK(reply({"TAGGED", "1", "2", "GET", "k"}).starts_with("-ERR TAGGED takes"));
    CHECK(reply({"TAGGED", "1", "2", "MULTI"}).starts_with("-ERR TAGGED takes a write"));
    CHECK(reply({"TAGGED", "1", "2", "SET", "k", "v", "get"}).starts_with("-ERR TAGGED does not"));
    CHECK(reply({"TAGGED", "1", "2", "GETDEL", "k"}).starts_with("-ERR TAGGED does not"));
    CHECK(reply({"TAGGED", "1", "2", "INCRBY", "k", "x"}) ==
          "-ERR value is not an integer or out of range\r\n");
    // A write whose encoding exceeds the transaction limit is refused before the core.
    auto too_large = zab::kv::classify({"SET", "k", std::string(2000, 'v')}, 1000);
    REQUIRE(std::holds_alternative<zab::kv::request::immediate>(too_large));
    CHECK(std::get<zab::kv::request::immediate>(too_large).reply ==
          "-ERR value too large (limit 935 bytes)\r\n");
}

TEST_CASE("kv_requests: writes encode the kv command, CAS.ABSENT expects no value") {
    const auto txn = [](zab::kv::resp::command args) {
        auto r = zab::kv::classify(args, 1 << 20);
        REQUIRE(std::holds_alternative<zab::kv::request::write>(r));
        const auto& bytes = std::get<zab::kv::request::write>(r).txn;
        auto decoded = zab::kv::decode(zab::byte_view{bytes.data(), bytes.size()});
        REQUIRE(decoded);
        return decoded.value();
    };
    using namespace zab::kv;
    CHECK(txn({"set", "k", "v"}) == command{set_op{"k", "v"}, {}});
    CHECK(txn({"CAS", "k", "NX", "v"}) == command{cas_op{"k", "NX", "v"}, {}});
    CHECK(txn({"CAS.ABSENT", "k", "v"}) == command{cas_op{"k", std::nullopt, "v"}, {}});
    CHECK(txn({"TAGGED", "7", "9", "INCR", "n"}) == command{incr_op{"n"}, request_tag{7, 9}});
    CHECK(txn({"TAGGED", "7", "10", "INCRBY", "n", "5"}) ==
          command{calls_op{{{"INCRBY", "n", "5"}}, {}, false}, request_tag{7, 10}});
}

TEST_CASE("kv_requests: node errors become the documented RESP errors") {
    using zab::errc;
    CHECK(zab::kv::error_reply(make_error_code(errc::not_leader), 2, "127.0.0.1:7002") ==
          "-NOQUORUM no leader is established (last known leader: 2 at 127.0.0.1:7002)\r\n");
    CHECK(zab::kv::error_reply(make_error_code(errc::not_leader), 0, "") ==
          "-NOQUORUM no leader is established (last known leader: none)\r\n");
    CHECK(zab::kv::error_reply(make_error_code(errc::backpressure), 0, "").starts_with("-BUSY "));
    CHECK(zab::kv::error_reply(make_error_code(errc::outcome_unknown), 0, "") ==
          "-UNKNOWN the write may or may not have been applied; retry with TAGGED to be "
          "safe\r\n");
    CHECK(zab::kv::error_reply(make_error_code(errc::shutting_down), 0, "")
              .starts_with("-SHUTDOWN "));
    CHECK(zab::kv::error_reply(make_error_code(errc::storage_failed), 0, "")
              .starts_with("-IOERR "));
}

TEST_CASE("resp_session: unread replies pause reads and input at the soft bound") {
    fake_backend backend;
    backend.data["v"] = std::string(1000, 'x');
    zab::kv::session_options options;
    options.output_soft_bytes = 2500;
    options.output_hard_bytes = 10'000;
    resp_session<fake_backend> session{backend, options};
    std::string pipeline;
    for (int i = 0; i < 100; ++i) pipeline += request_bytes({"GET", "v"});
    session.feed(pipeline);
    // Each reply is 1009 bytes ("$1000\r\n" + 1000 + CRLF): the third reaches the bound,
    // and the fourth GET does not execute, nor is more input wanted.
    constexpr std::size_t reply = 1009;
    CHECK(backend.reads.size() == 3);
    CHECK(session.unsent_bytes() == 3 * reply);
    CHECK_FALSE(session.wants_input());
    // Taking the output to write it does not make room: only bytes written do.
    std::string out = session.take_output();
    CHECK(out.size() == 3 * reply);
    CHECK(backend.reads.size() == 3);
    CHECK(session.unsent_bytes() == 3 * reply);
    session.output_written(reply);  // 2018 unsent: one more read, then paused again
    CHECK(backend.reads.size() == 4);
    CHECK(session.unsent_bytes() == 3 * reply);
    CHECK_FALSE(session.output_overflow());
    // Draining everything answers all 100, never more than soft + one reply unsent.
    std::size_t answered = 3, peak = 0;
    session.output_written(out.size() - reply);
    while (session.has_output()) {
        out = session.take_output();
        answered += out.size() / reply;
        peak = std::max(peak, session.unsent_bytes());
        session.output_written(out.size());
    }
    CHECK(answered == 100);
    CHECK(peak <= 2500 + reply);
    CHECK(session.idle());
    CHECK(session.wants_input());
}

TEST_CASE("resp_session: past the hard bound of unsent replies the server must disconnect") {
    fake_backend backend;
    zab::kv::session_options options;
    options.output_soft_bytes = 10;
    options.output_hard_bytes = 100;
    resp_session<fake_backend> session{backend, options};
    // An immediate reply is built when it is read: ECHO of 200 bytes goes past the bound.
    session.feed(request_bytes({"ECHO", std::string(200, 'e')}));
    CHECK(session.output_overflow());
}

TEST_CASE("resp_session: at most max_writes_in_flight writes are proposed; the rest wait") {
    fake_backend backend;
    zab::kv::session_options options;
    options.max_writes_in_flight = 3;
    resp_session<fake_backend> session{backend, options};
    std::string pipeline;
    for (int i = 0; i < 10; ++i) pipeline += request_bytes({"SET", "k", std::to_string(i)});
    session.feed(pipeline);
    CHECK(backend.proposed.size() == 3);
    CHECK(session.outstanding() == 10);  // read and queued: the client is not refused
    CHECK(session.awaiting_cluster());
    // Each completion starts the next, in order.
    session.write_done(backend.proposed[1], "+OK\r\n");
    CHECK(backend.proposed == std::vector<std::uint64_t>{0, 1, 2, 3});
    for (std::size_t i = 0; i < backend.proposed.size(); ++i)
        session.write_done(backend.proposed[i], "+OK\r\n");
    CHECK(backend.proposed.size() == 10);
    CHECK_FALSE(session.awaiting_cluster());
    std::string expected;
    for (int i = 0; i < 10; ++i) expected += "+OK\r\n";
    CHECK(session.take_output() == expected);
}

TEST_CASE("resp_session: a write waiting for room stops input until it is proposed") {
    fake_backend backend;
    zab::kv::session_options options;
    options.max_writes_in_flight = 2;
    resp_session<fake_backend> session{backend, options};
    CHECK(session.wants_input());
    session.feed(request_bytes({"SET", "a", "1"}) + request_bytes({"SET", "b", "2"}) +
                 request_bytes({"SET", "c", "3"}));
    CHECK(backend.proposed.size() == 2);
    CHECK(session.write_waiting());
    CHECK_FALSE(session.wants_input());  // the connection stops reading: TCP pushes back
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(backend.proposed.size() == 3);
    CHECK_FALSE(session.write_waiting());
    CHECK(session.wants_input());
}

namespace {

/// A backend whose writes need a slot of a zab::kv::write_pool shared with other sessions.
struct pooled_backend : fake_backend {
    zab::kv::write_pool* pool = nullptr;
    std::uint64_t id = 0;
    bool acquire_write() { return pool->acquire(id); }
};

}  // namespace

TEST_CASE("resp_session: with a backend's write slots, a write waits for its slot and resume()") {
    zab::kv::write_pool pool{2};
    pooled_backend a, b;
    a.pool = b.pool = &pool;
    a.id = 1;
    b.id = 2;
    resp_session<pooled_backend> heavy{a}, bystander{b};
    std::string pipeline;
    for (int i = 0; i < 5; ++i) pipeline += request_bytes({"SET", "k", std::to_string(i)});
    heavy.feed(pipeline);
    CHECK(a.proposed.size() == 2);  // the pool's two slots
    CHECK_FALSE(heavy.wants_input());
    bystander.feed(request_bytes({"SET", "mine", "x"}));
    CHECK(b.proposed.empty());  // in line behind the heavy connection, not refused
    CHECK_FALSE(bystander.wants_input());
    CHECK(pool.waiting() == 2);

    // The heavy connection's first write completes: its slot goes to the first in line (the
    // heavy one), the next to the bystander.
    heavy.write_done(a.proposed[0], "+OK\r\n");
    REQUIRE(pool.release() == std::optional<std::uint64_t>{1});
    heavy.resume();
    CHECK(a.proposed.size() == 3);
    heavy.write_done(a.proposed[1], "+OK\r\n");
    REQUIRE(pool.release() == std::optional<std::uint64_t>{2});
    bystander.resume();
    REQUIRE(b.proposed.size() == 1);
    CHECK(bystander.wants_input());
    bystander.write_done(b.proposed[0], "+OK\r\n");
    CHECK(bystander.take_output() == "+OK\r\n");
}

TEST_CASE("write_pool: slots go to the connections in line in turn; a closed one passes its "
          "grant on") {
    zab::kv::write_pool pool{3};
    CHECK(pool.acquire(1));
    CHECK(pool.acquire(1));
    CHECK(pool.acquire(1));
    CHECK_FALSE(pool.acquire(1));
    CHECK_FALSE(pool.acquire(1));  // queued once
    CHECK_FALSE(pool.acquire(2));
    CHECK_FALSE(pool.acquire(3));
    CHECK(pool.waiting() == 3);
    // Slots freed: 1, 2, 3 in turn, then 1 again (it asked again at the back of the line).
    CHECK(pool.release() == std::optional<std::uint64_t>{1});
    CHECK(pool.acquire(1));
    CHECK_FALSE(pool.acquire(1));
    CHECK(pool.release() == std::optional<std::uint64_t>{2});
    CHECK(pool.release() == std::optional<std::uint64_t>{3});
    // 2 closes before using its grant: the slot goes to the next in line (1).
    CHECK(pool.forget(2) == std::vector<std::uint64_t>{1});
    CHECK(pool.acquire(3));
    CHECK(pool.acquire(1));
    CHECK(pool.in_use() == 3);
    CHECK(pool.waiting() == 0);
    // Nobody in line: a released slot is free for whoever asks first.
    CHECK_FALSE(pool.release());
    CHECK(pool.acquire(4));
    // A fresh connection never jumps the line.
    CHECK_FALSE(pool.acquire(5));
    CHECK_FALSE(pool.acquire(6));
    CHECK(pool.release() == std::optional<std::uint64_t>{5});
    CHECK_FALSE(pool.acquire(7));
    CHECK(pool.release() == std::optional<std::uint64_t>{6});
    CHECK(pool.release() == std::optional<std::uint64_t>{7});
}

TEST_CASE("write_pool: k connections pipelining share the slots about equally") {
    zab::kv::write_pool pool{10};
    std::map<std::uint64_t, int> in_flight, proposed;
    std::vector<std::uint64_t> order;  // the writes in flight, oldest first
    auto try_all = [&](std::uint64_t id) {
        while (pool.acquire(id)) {
            ++in_flight[id];
            ++proposed[id];
            order.push_back(id);
        }
    };
    for (std::uint64_t id = 1; id <= 4; ++id) try_all(id);  // 1 takes all ten first
    CHECK(proposed[1] == 10);
    for (int step = 0; step < 4000; ++step) {
        // The oldest write completes; its slot goes to the next in line, which uses it.
        const std::uint64_t done = order.front();
        order.erase(order.begin());
        --in_flight[done];
        if (const auto next = pool.release()) try_all(*next);
        try_all(done);
    }
    for (std::uint64_t id = 1; id <= 4; ++id) {
        INFO("connection " << id);
        CHECK(proposed[id] >= 990);
        CHECK(proposed[id] <= 1020);
    }
}

TEST_CASE("output_budget: the connections holding most are closed first, never one holding "
          "less than the asker; a reply that still does not fit is refused") {
    zab::kv::output_budget budget{100};
    budget.set(1, 40);
    budget.set(2, 30);
    budget.set(3, 10);
    CHECK(budget.held() == 80);
    std::vector<std::uint64_t> closed;
    auto evict = [&](std::uint64_t id) {
        closed.push_back(id);
        budget.forget(id);
    };
    CHECK(budget.make_room(3, 20, evict));  // fits: 100
    CHECK(closed.empty());
    budget.set(3, 30);
    // 4 asks for 25: 1 (40) is closed; 2 and 3 (30 each) then leave room.
    CHECK(budget.make_room(4, 25, evict));
    CHECK(closed == std::vector<std::uint64_t>{1});
    budget.set(4, 25);
    CHECK(budget.held() == 85);
    // 4 asks for 20 more (45): 2 and 3 hold less than it would: refused, nobody closed.
    CHECK_FALSE(budget.make_room(4, 20, evict));
    CHECK(closed.size() == 1);
    // 5 asks for 20 (it would hold 20): one of the biggest, 2 or 3 (30), is closed.
    CHECK(budget.make_room(5, 20, evict));
    CHECK(closed.size() == 2);
    CHECK(budget.held() == 55);
    CHECK(budget.evicted() == 2);
    // Larger than the whole limit: refused, whoever holds what.
    CHECK_FALSE(budget.make_room(6, 101, evict));
    budget.forget(4);
    CHECK(budget.held_by(4) == 0);
}

TEST_CASE("resp_session: one TAGGED request per client outstanding on a connection") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"TAGGED", "7", "1", "SET", "a", "1"}) +
                 request_bytes({"TAGGED", "7", "2", "SET", "a", "2"}) +
                 request_bytes({"TAGGED", "8", "1", "SET", "b", "1"}));
    // 7's second request is refused before it is proposed; client 8 is independent.
    REQUIRE(backend.proposed.size() == 2);
    session.write_done(backend.proposed[0], "+OK\r\n");
    session.write_done(backend.proposed[1], "+OK\r\n");
    const std::string out = session.take_output();
    CHECK(out.starts_with("+OK\r\n-ERR TAGGED: client 7 already has a request outstanding"));
    CHECK(out.ends_with("+OK\r\n"));
    // Answered: client 7's next request goes.
    session.feed(request_bytes({"TAGGED", "7", "2", "SET", "a", "2"}));
    CHECK(backend.proposed.size() == 3);
}

TEST_CASE("resp_session (issue 34 defect 6): a client pipelining TAGGED (c,5),(c,6) has 6 "
          "refused unproposed, so 6 cannot be applied while 5 is lost; it retries 5, then 6") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"TAGGED", "42", "5", "INCR", "n"}) +
                 request_bytes({"TAGGED", "42", "6", "INCR", "n"}));
    REQUIRE(backend.proposed.size() == 1);  // 6 never reached the cluster
    // 5's replica lost the leader: its outcome is unknown.
    session.write_done(backend.proposed[0], "-UNKNOWN outcome unknown\r\n");
    const std::string out = session.take_output();
    CHECK(out.starts_with("-UNKNOWN outcome unknown\r\n-ERR TAGGED: client 42 already has"));
    // The client retries 5 until answered, then sends 6: each proposed in turn.
    session.feed(request_bytes({"TAGGED", "42", "5", "INCR", "n"}));
    REQUIRE(backend.proposed.size() == 2);
    session.write_done(backend.proposed[1], ":1\r\n");
    session.feed(request_bytes({"TAGGED", "42", "6", "INCR", "n"}));
    REQUIRE(backend.proposed.size() == 3);
    session.write_done(backend.proposed[2], ":2\r\n");
    CHECK(session.take_output() == ":1\r\n:2\r\n");
}

namespace {

/// Applies `txn` to `machine` at the next zxid and answers as kv_server does.
std::string apply_and_reply(zab::kv::kv_state_machine& machine, const std::vector<std::byte>& txn,
                            std::uint32_t& counter) {
    const zab::zxid z{1, ++counter};
    return zab::kv::outcome_reply(*zab::kv::outcome_of_response(
        machine.apply(z, zab::byte_view{txn.data(), txn.size()}).view()));
}

}  // namespace

TEST_CASE("resp_session: MULTI queues, EXEC is one transaction of every queued command") {
    fake_backend backend;
    backend.clock = 5000;
    resp_session<fake_backend> session{backend};
    // What ioredis and node-redis send for a transaction: one pipeline.
    session.feed(request_bytes({"MULTI"}) + request_bytes({"SET", "a", "1", "EX", "10"}) +
                 request_bytes({"INCR", "n"}) + request_bytes({"GET", "a"}) +
                 request_bytes({"EXEC"}) + request_bytes({"SET", "after", "1"}));
    CHECK(session.take_output() == "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n");
    REQUIRE(backend.proposed.size() == 2);  // the block, then the SET after it
    CHECK(backend.reads.empty());           // the GET runs inside the transaction
    const auto block = zab::kv::decode(zab::byte_view{backend.txns[0].data(), backend.txns[0].size()});
    REQUIRE(block);
    CHECK(block.value().stamp_ms == 5000);
    const auto& calls = std::get<zab::kv::calls_op>(block.value().op);
    CHECK(calls.multi);
    CHECK(calls.calls == std::vector<zab::kv::resp::command>{
                             {"SET", "a", "1", "EX", "10"}, {"INCR", "n"}, {"GET", "a"}});

    zab::kv::kv_state_machine machine;
    std::uint32_t counter = 0;
    session.write_done(backend.proposed[0], apply_and_reply(machine, backend.txns[0], counter));
    session.write_done(backend.proposed[1], apply_and_reply(machine, backend.txns[1], counter));
    CHECK(session.take_output() == "*3\r\n+OK\r\n:1\r\n$1\r\n1\r\n+OK\r\n");
    CHECK(machine.expiry_of("a") == 15000u);  // EX counts from the stamp

    // DISCARD drops the queue; EXEC and DISCARD outside MULTI, a nested MULTI, are errors.
    session.feed(request_bytes({"MULTI"}) + request_bytes({"MULTI"}) + request_bytes({"DEL", "a"}) +
                 request_bytes({"DISCARD"}) + request_bytes({"EXEC"}) + request_bytes({"DISCARD"}));
    CHECK(session.take_output() ==
          "+OK\r\n-ERR MULTI calls can not be nested\r\n+QUEUED\r\n+OK\r\n"
          "-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n");
    CHECK(backend.proposed.size() == 2);
    session.feed(request_bytes({"MULTI"}) + request_bytes({"QUIT"}));
    CHECK(session.closing());
}

TEST_CASE("resp_session: a command that cannot run aborts the whole EXEC; nothing is proposed") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"MULTI"}) + request_bytes({"SET", "a", "1"}) +
                 request_bytes({"INCRBY", "n", "x"}) + request_bytes({"NOSUCH", "k"}) +
                 request_bytes({"SET", "b"}) + request_bytes({"SYNC"}) + request_bytes({"EXEC"}) +
                 request_bytes({"GET", "a"}));
    CHECK(session.take_output() ==
          "+OK\r\n+QUEUED\r\n-ERR value is not an integer or out of range\r\n"
          "-ERR unknown command 'NOSUCH', with args beginning with: 'k' \r\n"
          "-ERR wrong number of arguments for 'set' command\r\n"
          "-ERR SYNC is not allowed inside MULTI here\r\n"
          "-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n");
    CHECK(backend.proposed.empty());
}

TEST_CASE("resp_session: WATCH records versions after the earlier writes; EXEC carries them") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"SET", "k", "1"}) + request_bytes({"WATCH", "k", "other"}) +
                 request_bytes({"MULTI"}) + request_bytes({"SET", "k", "2"}) +
                 request_bytes({"EXEC"}));
    // The WATCH waits for the SET before it, and the EXEC for the WATCH.
    REQUIRE(backend.proposed.size() == 1);
    backend.versions["k"] = 77;  // the SET applied at zxid value 77
    session.write_done(backend.proposed[0], "+OK\r\n");
    REQUIRE(backend.proposed.size() == 2);
    const auto block = zab::kv::decode(zab::byte_view{backend.txns[1].data(), backend.txns[1].size()});
    REQUIRE(block);
    const auto& calls = std::get<zab::kv::calls_op>(block.value().op);
    CHECK(calls.watches ==
          std::vector<zab::kv::watched_key>{{"k", 77}, {"other", 0}});
    session.write_done(backend.proposed[1], "*-1\r\n");
    CHECK(session.take_output() == "+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*-1\r\n");

    // EXEC forgot the watches; UNWATCH forgets them too; WATCH inside MULTI is refused.
    session.feed(request_bytes({"WATCH", "k"}) + request_bytes({"UNWATCH"}) +
                 request_bytes({"MULTI"}) + request_bytes({"WATCH", "x"}) +
                 request_bytes({"INCR", "n"}) + request_bytes({"EXEC"}));
    REQUIRE(backend.proposed.size() == 3);
    const auto next = zab::kv::decode(zab::byte_view{backend.txns[2].data(), backend.txns[2].size()});
    REQUIRE(next);
    CHECK(std::get<zab::kv::calls_op>(next.value().op).watches.empty());
}

TEST_CASE("resp_session: HELLO, CLIENT, SELECT, RESET and CLIENT REDIRECT, as clients use them") {
    fake_backend backend;
    zab::kv::session_options options;
    options.client_id = 42;
    resp_session<fake_backend> session{backend, options};
    session.feed(request_bytes({"HELLO", "3", "SETNAME", "app"}));
    const std::string hello3 = session.take_output();
    CHECK(hello3.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"));
    CHECK(hello3.find("$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:42\r\n") != std::string::npos);
    CHECK(session.client_name() == "app");
    // In RESP3 nulls are `_`, also inside arrays (EXEC's, MGET's).
    session.feed(request_bytes({"GET", "missing"}));
    CHECK(session.take_output() == "_\r\n");
    CHECK(zab::kv::resp::to_resp3("*3\r\n$1\r\nx\r\n$-1\r\n*-1\r\n:1\r\n") ==
          "*3\r\n$1\r\nx\r\n_\r\n_\r\n:1\r\n");
    CHECK(zab::kv::resp::to_resp3("$5\r\n$-1\r\n\r\n") == "$5\r\n$-1\r\n\r\n");  // a value
    CHECK(zab::kv::resp::to_resp3("*2\r\n$-1\r\n") == "*2\r\n$-1\r\n");  // not whole: as is
    session.feed(request_bytes({"HELLO", "2"}) + request_bytes({"HELLO", "4"}));
    const std::string hello2 = session.take_output();
    CHECK(hello2.starts_with("*14\r\n"));
    CHECK(hello2.ends_with("-NOPROTO unsupported protocol version\r\n"));
    session.feed(request_bytes({"CLIENT", "SETNAME", "my name"}) +
                 request_bytes({"CLIENT", "GETNAME"}) + request_bytes({"CLIENT", "ID"}) +
                 request_bytes({"CLIENT", "SETINFO", "LIB-NAME", "ioredis"}) +
                 request_bytes({"SELECT", "0"}) + request_bytes({"SELECT", "1"}));
    CHECK(session.take_output() ==
          "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
          "$3\r\napp\r\n:42\r\n+OK\r\n+OK\r\n"
          "-ERR DB index is out of range (kv_server has one keyspace: database 0 only)\r\n");
    // After a refused SELECT every data command is refused until SELECT 0: a client that
    // carries on (ioredis with {db: 1}) must not write into database 0 unawares.
    session.feed(request_bytes({"SET", "k", "v"}) + request_bytes({"MULTI"}) +
                 request_bytes({"PING"}) + request_bytes({"SELECT", "0"}) +
                 request_bytes({"GET", "k"}));
    CHECK(backend.proposed.empty());
    const std::string refused =
        "-ERR this connection selected database 1, which kv_server does not have (only "
        "database 0): SELECT 0 first\r\n";
    CHECK(session.take_output() == refused + refused + "+PONG\r\n+OK\r\n$-1\r\n");

    // REDIRECT on: a write on a replica that is not the leader names the leader instead.
    backend.leader = "127.0.0.1:6382";
    session.feed(request_bytes({"CLIENT", "REDIRECT", "on"}) + request_bytes({"SET", "k", "v"}) +
                 request_bytes({"MULTI"}) + request_bytes({"INCR", "k"}) + request_bytes({"EXEC"}));
    CHECK(session.take_output() ==
          "+OK\r\n-REDIRECT 127.0.0.1:6382\r\n+OK\r\n+QUEUED\r\n-REDIRECT 127.0.0.1:6382\r\n");
    CHECK(backend.proposed.empty());
    // RESET: redirects off, name gone, out of MULTI.
    session.feed(request_bytes({"MULTI"}) + request_bytes({"RESET"}) + request_bytes({"SET", "k", "v"}) +
                 request_bytes({"CLIENT", "GETNAME"}));
    CHECK(backend.proposed.size() == 1);
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(session.take_output() == "+OK\r\n+RESET\r\n+OK\r\n$-1\r\n");
}

TEST_CASE("resp_session: after HELLO 3 the replies take RESP3's types as redis-server 7 sends "
          "them, inside MULTI too") {
    // Reads and writes against the real state machine; the expected bytes are what
    // redis-server 7.0.15 answered to the same commands (tests/kv/redis_diff_test.sh compares
    // the two servers directly).
    struct machine_backend : fake_backend {
        zab::kv::kv_state_machine machine;
        std::string read(const zab::kv::resp::command& args) {
            return zab::kv::execute_read(machine, args);
        }
    };
    machine_backend backend;
    resp_session<machine_backend> session{backend};
    std::uint32_t counter = 0;
    const auto run = [&](std::initializer_list<std::string_view> args) {
        session.feed(request_bytes(args));
        while (backend.proposed.size() > 0) {
            const std::uint64_t ticket = backend.proposed.front();
            const auto txn = backend.txns.front();
            backend.proposed.erase(backend.proposed.begin());
            backend.txns.erase(backend.txns.begin());
            session.write_done(ticket, apply_and_reply(backend.machine, txn, counter));
        }
        return session.take_output();
    };
    // RESP2 first: the flat forms.
    CHECK(run({"HSET", "h", "a", "1", "b", "2"}) == ":2\r\n");
    CHECK(run({"HGETALL", "h"}) == "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n");
    CHECK(run({"ZADD", "z", "1.5", "m", "2", "n"}) == ":2\r\n");
    CHECK(run({"ZSCORE", "z", "m"}) == "$3\r\n1.5\r\n");
    run({"HELLO", "3"});
    CHECK(run({"HGETALL", "h"}) == "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n");
    CHECK(run({"hgetall", "nx"}) == "%0\r\n");
    CHECK(run({"SADD", "s", "x"}) == ":1\r\n");
    CHECK(run({"SMEMBERS", "s"}) == "~1\r\n$1\r\nx\r\n");
    CHECK(run({"SMEMBERS", "nx"}) == "~0\r\n");
    CHECK(run({"SPOP", "s", "1"}) == "~1\r\n$1\r\nx\r\n");
    CHECK(run({"SPOP", "nx"}) == "_\r\n");
    CHECK(run({"ZSCORE", "z", "m"}) == ",1.5\r\n");
    CHECK(run({"ZSCORE", "z", "q"}) == "_\r\n");
    CHECK(run({"ZINCRBY", "z", "1", "m"}) == ",2.5\r\n");
    CHECK(run({"ZADD", "z", "INCR", "1", "m"}) == ",3.5\r\n");
    CHECK(run({"ZADD", "z", "XX", "incr", "1", "zz"}) == "_\r\n");
    CHECK(run({"ZADD", "z", "5", "m"}) == ":0\r\n");  // no INCR: an integer still
    CHECK(run({"ZADD", "z", "3.5", "m"}) == ":0\r\n");
    const std::string pairs = "*2\r\n*2\r\n$1\r\nn\r\n,2\r\n*2\r\n$1\r\nm\r\n,3.5\r\n";
    CHECK(run({"ZRANGE", "z", "0", "-1", "WITHSCORES"}) == pairs);
    CHECK(run({"ZRANGEBYSCORE", "z", "-inf", "+inf", "withscores"}) == pairs);
    CHECK(run({"ZRANGE", "z", "0", "-1"}) == "*2\r\n$1\r\nn\r\n$1\r\nm\r\n");
    CHECK(run({"ZRANK", "z", "m", "WITHSCORE"}) == "*2\r\n:1\r\n,3.5\r\n");  // Redis 7.2
    CHECK(run({"ZRANK", "z", "m"}) == ":1\r\n");
    CHECK(run({"ZPOPMIN", "z"}) == "*2\r\n$1\r\nn\r\n,2\r\n");
    CHECK(run({"ZADD", "z", "1", "a", "2", "b"}) == ":2\r\n");
    CHECK(run({"ZPOPMIN", "z", "1"}) == "*1\r\n*2\r\n$1\r\na\r\n,1\r\n");
    CHECK(run({"ZPOPMIN", "z", "5"}) == "*2\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\nm\r\n,3.5\r\n");
    CHECK(run({"ZPOPMIN", "nx"}) == "*0\r\n");
    CHECK(run({"ZADD", "z", "inf", "a"}) == ":1\r\n");
    CHECK(run({"ZSCORE", "z", "a"}) == ",inf\r\n");
    // Errors keep their form whatever the command's shape.
    CHECK(run({"ZSCORE", "h", "a"}).starts_with("-WRONGTYPE"));
    // In a transaction each of EXEC's elements has its own command's shape.
    CHECK(run({"MULTI"}) == "+OK\r\n");
    CHECK(run({"HGETALL", "h"}) == "+QUEUED\r\n");
    CHECK(run({"ZSCORE", "z", "a"}) == "+QUEUED\r\n");
    CHECK(run({"GET", "missing"}) == "+QUEUED\r\n");
    CHECK(run({"EXEC"}) ==
          "*3\r\n%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n,inf\r\n_\r\n");
    // Back in RESP2: flat again.
    run({"HELLO", "2"});
    CHECK(run({"ZSCORE", "z", "a"}) == "$3\r\ninf\r\n");

    using zab::kv::resp::resp3_shape;
    // A reply not of the shape's form changes only its nulls.
    CHECK(zab::kv::resp::to_resp3("*3\r\n$1\r\na\r\n$-1\r\n$1\r\nb\r\n", resp3_shape::map) ==
          "*3\r\n$1\r\na\r\n_\r\n$1\r\nb\r\n");
    CHECK(zab::kv::resp::to_resp3(":1\r\n", resp3_shape::score) == ":1\r\n");
    const resp3_shape two[] = {resp3_shape::score, resp3_shape::set};
    CHECK(zab::kv::resp::exec_to_resp3("*-1\r\n", two) == "_\r\n");  // a WATCH abort
    CHECK(zab::kv::resp::exec_to_resp3("*1\r\n$1\r\n2\r\n", two) == "*1\r\n$1\r\n2\r\n");
}

TEST_CASE("kv_requests: COMMAND lists the table; COUNT, INFO and DOCS answer from it") {
    const auto reply = [](zab::kv::resp::command args) {
        auto r = zab::kv::classify(args, 1 << 20);
        REQUIRE(std::holds_alternative<zab::kv::request::immediate>(r));
        return std::get<zab::kv::request::immediate>(r).reply;
    };
    const std::string count = std::to_string(zab::kv::command_table.size());
    CHECK(reply({"COMMAND", "COUNT"}) == ":" + count + "\r\n");
    CHECK(reply({"COMMAND"}).starts_with("*" + count + "\r\n*6\r\n$3\r\nset\r\n:-3\r\n*1\r\n+write\r\n:1\r\n:1\r\n:1\r\n"));
    CHECK(reply({"COMMAND", "INFO", "mget", "nope"}) ==
          "*2\r\n*6\r\n$4\r\nmget\r\n:-2\r\n*1\r\n+readonly\r\n:1\r\n:-1\r\n:1\r\n*-1\r\n");
    CHECK(reply({"SET", "k", "v", "NX", "XX"}) == "-ERR syntax error\r\n");
    CHECK(reply({"SET", "k", "v", "EX", "0"}) == "-ERR invalid expire time in 'set' command\r\n");
    CHECK(reply({"MSET", "a", "1", "b"}) == "-ERR wrong number of arguments for 'mset' command\r\n");
    CHECK(reply({"SCAN", "x"}) == "-ERR invalid cursor\r\n");
    CHECK(reply({"EXPIRE", "k", "10", "NX", "XX"}).starts_with("-ERR NX and XX, GT or LT"));
}

TEST_CASE("resp_session: buffered input counts the partial command and the queued ones") {
    fake_backend backend;
    zab::kv::session_options options;
    options.max_writes_in_flight = 1;
    options.max_queued_bytes = 3000;
    resp_session<fake_backend> session{backend, options};
    CHECK(session.buffered_input_bytes() == 0);
    // A partial 1 MB value: what has arrived of it is held (by capacity).
    session.feed("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n" + std::string(100'000, 'v'));
    CHECK(session.buffered_input_bytes() >= 100'000);
    CHECK(session.buffered_input_bytes() < 300'000);
    session.feed(std::string(900'000, 'v') + "\r\n");
    CHECK(backend.proposed.size() == 1);  // proposed: its bytes are the node's now
    CHECK(session.buffered_input_bytes() < 1000);

    // Queued commands waiting for the write before them hold their bytes, up to the bound.
    std::string pipeline;
    for (int i = 0; i < 10; ++i) pipeline += request_bytes({"SET", "k", std::string(1000, 'w')});
    session.feed(pipeline);
    CHECK(backend.proposed.size() == 1);
    CHECK(session.outstanding() == 4);  // 1 in flight + 3 queued (3 x 1004 bytes >= 3000)
    CHECK_FALSE(session.wants_input());
    const std::size_t held = session.buffered_input_bytes();
    CHECK(held >= 10 * 1000);  // the 7 the parser still holds count too
    session.write_done(backend.proposed[0], "+OK\r\n");
    CHECK(session.buffered_input_bytes() < held);
}

TEST_CASE("kv_requests: a GET or MGET reply above the bound is refused before it is built") {
    zab::kv::kv_state_machine machine;
    zab::kv::command c{zab::kv::set_op{"v", std::string(1000, 'x')}, {}};
    const auto txn = zab::kv::encode(c);
    REQUIRE(txn);
    machine.apply(zab::zxid{1, 1}, zab::byte_view{txn.value().data(), txn.value().size()});
    zab::kv::resp::command mget{"MGET"};
    for (int i = 0; i < 10; ++i) mget.push_back("v");
    mget.push_back("missing");
    // 10 x "$1000\r\n...\r\n" + "$-1\r\n" + "*11\r\n"
    const std::size_t exact = 10 * 1009 + 5 + 5;
    CHECK(zab::kv::execute_read(machine, mget, exact).size() == exact);
    CHECK(zab::kv::execute_read(machine, mget, exact - 1) ==
          "-ERR reply too large: more than " + std::to_string(exact - 1) +
              " bytes; ask for fewer keys\r\n");
    CHECK(zab::kv::execute_read(machine, {"GET", "v"}, 1009) == "$1000\r\n" + std::string(1000, 'x') + "\r\n");
    CHECK(zab::kv::execute_read(machine, {"GET", "v"}, 1008).starts_with("-ERR reply too large"));
}

namespace {

std::shared_ptr<const zab::kv::user_table> users(std::optional<std::string> requirepass,
                                                 std::string admin = {},
                                                 std::string admin_pass = {}) {
    auto table = std::make_shared<zab::kv::user_table>();
    table->default_password = std::move(requirepass);
    table->admin_name = std::move(admin);
    table->admin_password = std::move(admin_pass);
    return table;
}

struct counting_backend : fake_backend {
    int failures = 0;
    void auth_failed() { ++failures; }
};

const std::string noauth = "-NOAUTH Authentication required.\r\n";
const std::string wrongpass =
    "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

}  // namespace

TEST_CASE("kv_auth: passwords compare equal only when equal, whatever their lengths") {
    using zab::kv::constant_time_equal;
    CHECK(constant_time_equal("secret", "secret"));
    CHECK(constant_time_equal("", ""));
    CHECK_FALSE(constant_time_equal("secreT", "secret"));
    CHECK_FALSE(constant_time_equal("secret", "secret2"));
    CHECK_FALSE(constant_time_equal("secret2", "secret"));
    CHECK_FALSE(constant_time_equal("", "secret"));
    CHECK_FALSE(constant_time_equal("secret", ""));
    CHECK_FALSE(constant_time_equal(std::string_view{"a\0b", 3}, std::string_view{"a\0c", 3}));
    CHECK_FALSE(constant_time_equal(std::string_view{"a\0", 2}, "a"));  // a NUL is no end
}

TEST_CASE("resp_session: with requirepass, -NOAUTH for everything but AUTH/HELLO/QUIT/RESET") {
    counting_backend backend;
    zab::kv::session_options options;
    options.users = users("pw");
    resp_session<counting_backend> session{backend, options};
    CHECK_FALSE(session.authenticated());
    // Nothing runs before AUTH: no write proposed, no read, no sync, no transfer, no MULTI.
    session.feed(request_bytes({"SET", "k", "v"}) + request_bytes({"GET", "k"}) +
                 request_bytes({"ZSYNC"}) + request_bytes({"ZTRANSFER", "ANY"}) +
                 request_bytes({"MULTI"}) + request_bytes({"PING"}) + request_bytes({"INFO"}) +
                 request_bytes({"CLIENT", "SETNAME", "x"}) + request_bytes({"NOSUCH"}));
    CHECK(backend.proposed.empty());
    CHECK(backend.reads.empty());
    CHECK(backend.synced.empty());
    CHECK_FALSE(session.in_multi());
    CHECK(session.client_name().empty());
    std::string nine;
    for (int i = 0; i < 9; ++i) nine += noauth;
    CHECK(session.take_output() == nine);

    // Wrong passwords and unknown users: WRONGPASS, counted, still unauthenticated.
    session.feed(request_bytes({"AUTH", "nope"}) + request_bytes({"AUTH", "default", "nope"}) +
                 request_bytes({"AUTH", "root", "pw"}) + request_bytes({"AUTH"}) +
                 request_bytes({"AUTH", "a", "b", "c"}) + request_bytes({"GET", "k"}));
    CHECK(session.take_output() == wrongpass + wrongpass + wrongpass +
                                       "-ERR wrong number of arguments for 'auth' command\r\n"
                                       "-ERR syntax error\r\n" +
                                       noauth);
    CHECK(session.auth_failures() == 3);
    CHECK(backend.failures == 3);

    // HELLO without AUTH is refused (and does not switch the protocol); with a wrong one too.
    session.feed(request_bytes({"HELLO", "3"}) +
                 request_bytes({"HELLO", "3", "AUTH", "default", "nope"}) +
                 request_bytes({"GET", "k"}));
    const std::string refused = session.take_output();
    CHECK(refused.starts_with("-NOAUTH HELLO must be called with the client already "
                              "authenticated"));
    CHECK(refused.ends_with("\r\n" + wrongpass + noauth));  // RESP2 still: `-`, not `!`

    // The right password: the commands pipelined after it run.
    session.feed(request_bytes({"AUTH", "pw"}) + request_bytes({"SET", "k", "v"}) +
                 request_bytes({"CLIENT", "INFO"}));
    CHECK(session.authenticated());
    CHECK(session.user() == "default");
    CHECK(backend.proposed.size() == 1);
    session.write_done(backend.proposed[0], "+OK\r\n");
    const std::string ok = session.take_output();
    CHECK(ok.starts_with("+OK\r\n+OK\r\n$"));
    CHECK(ok.find(" user=default ") != std::string::npos);
    // No admin user: the default user may run the admin commands.
    session.feed(request_bytes({"ZTRANSFER", "2"}));
    CHECK(backend.transfers == std::vector<std::uint64_t>{2});

    // A failed AUTH does not log an authenticated connection out; RESET does.
    session.feed(request_bytes({"AUTH", "wrong"}) + request_bytes({"PING"}));
    session.sync_done(backend.synced.back(), std::nullopt);
    CHECK(session.take_output() == "+OK\r\n" + wrongpass + "+PONG\r\n");
    session.feed(request_bytes({"RESET"}) + request_bytes({"PING"}) + request_bytes({"QUIT"}));
    CHECK_FALSE(session.authenticated());
    CHECK(session.take_output() == "+RESET\r\n" + noauth + "+OK\r\n");
    CHECK(session.closing());
}

TEST_CASE("resp_session: HELLO AUTH authenticates and switches protocol in one command") {
    fake_backend backend;
    zab::kv::session_options options;
    options.users = users("pw");
    options.client_id = 7;
    resp_session<fake_backend> session{backend, options};
    // node-redis and ioredis with a password send exactly this.
    session.feed(request_bytes({"HELLO", "3", "AUTH", "default", "pw", "SETNAME", "app"}) +
                 request_bytes({"GET", "missing"}));
    const std::string out = session.take_output();
    CHECK(out.starts_with("%7\r\n"));
    CHECK(out.ends_with("_\r\n"));
    CHECK(session.authenticated());
    CHECK(session.client_name() == "app");
}

TEST_CASE("resp_session: admin commands need the admin user once one is configured") {
    fake_backend backend;
    zab::kv::session_options options;
    options.users = users("pw", "ops", "ops-secret");
    resp_session<fake_backend> session{backend, options};
    session.feed(request_bytes({"AUTH", "pw"}) + request_bytes({"ZTRANSFER", "ANY"}) +
                 request_bytes({"ztransfer", "2"}) + request_bytes({"MULTI"}) +
                 request_bytes({"ZTRANSFER", "2"}) + request_bytes({"EXEC"}));
    CHECK(backend.synced.empty());
    const std::string noperm =
        "-NOPERM User default has no permissions to run the 'ztransfer' command\r\n";
    // Inside MULTI the refusal is queued as an error, which aborts the EXEC.
    CHECK(session.take_output() ==
          "+OK\r\n" + noperm + noperm + "+OK\r\n" + noperm +
              "-EXECABORT Transaction discarded because of previous errors.\r\n");
    // The admin's password under the default user's name is refused, and the reverse.
    session.feed(request_bytes({"AUTH", "default", "ops-secret"}) +
                 request_bytes({"AUTH", "ops", "pw"}) + request_bytes({"AUTH", "ops-secret"}));
    CHECK(session.take_output() == wrongpass + wrongpass + wrongpass);
    session.feed(request_bytes({"ZRECONFIG", "REMOVE", "2"}));
    CHECK(session.take_output() ==
          "-NOPERM User default has no permissions to run the 'zreconfig' command\r\n");
    CHECK(backend.reconfigs.empty());
    session.feed(request_bytes({"AUTH", "ops", "ops-secret"}) + request_bytes({"ZTRANSFER", "3"}));
    CHECK(session.take_output() == "+OK\r\n");
    session.feed(request_bytes({"ZRECONFIG", "REMOVE", "2"}));
    CHECK(backend.reconfigs.size() == 1);
    CHECK(session.user() == "ops");
    CHECK(backend.transfers == std::vector<std::uint64_t>{3});
    // HELLO AUTH as the admin works too; RESET goes back to the default user, logged out.
    session.feed(request_bytes({"RESET"}) + request_bytes({"ZTRANSFER", "3"}) +
                 request_bytes({"HELLO", "2", "AUTH", "ops", "ops-secret"}) +
                 request_bytes({"ZTRANSFER", "ANY"}));
    CHECK(session.user() == "ops");
    CHECK(backend.transfers == std::vector<std::uint64_t>{3, 0});
}

TEST_CASE("resp_session: an admin user without requirepass: everyone is the default user") {
    fake_backend backend;
    zab::kv::session_options options;
    options.users = users(std::nullopt, "ops", "s");
    resp_session<fake_backend> session{backend, options};
    CHECK(session.authenticated());
    session.feed(request_bytes({"PING"}) + request_bytes({"AUTH", "x"}) +
                 request_bytes({"AUTH", "default", "anything"}) + request_bytes({"ZTRANSFER", "2"}) +
                 request_bytes({"AUTH", "ops", "s"}) + request_bytes({"ZTRANSFER", "2"}));
    CHECK(session.take_output() ==
          "+PONG\r\n-ERR AUTH <password> called without any password configured for the "
          "default user. Are you sure your configuration is correct?\r\n+OK\r\n"
          "-NOPERM User default has no permissions to run the 'ztransfer' command\r\n+OK\r\n");
    CHECK(backend.transfers == std::vector<std::uint64_t>{2});
}

// --- issue 33: INFO's format, Sentinel, CONFIG GET, CLIENT LIST / KILL, pub/sub -------------

namespace {

/// The RESP bulk strings of a flat array reply, in order (nested arrays flattened).
std::vector<std::string> bulks(std::string_view reply) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at < reply.size()) {
        const std::size_t eol = reply.find("\r\n", at);
        if (eol == std::string_view::npos) break;
        if (reply[at] == '$' && reply.substr(at, eol - at) != "$-1") {
            const std::size_t n = std::stoul(std::string{reply.substr(at + 1, eol - at - 1)});
            out.emplace_back(reply.substr(eol + 2, n));
            at = eol + 2 + n + 2;
        } else {
            at = eol + 2;
        }
    }
    return out;
}

/// The value after field `name` in a flat field/value list, or "" if absent.
std::string value_of(const std::vector<std::string>& fields, std::string_view name) {
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2)
        if (fields[i] == name) return fields[i + 1];
    return {};
}

zab::kv::sentinel_view three_replicas() {
    zab::kv::sentinel_view v;
    v.name = "zab";
    v.myid = zab::kv::sentinel_runid(7, 1);
    v.epoch = 3;
    v.quorum = 2;
    v.master = zab::kv::sentinel_node{2, "127.0.0.1", 6382, zab::kv::sentinel_runid(7, 2)};
    v.replicas = {{1, "127.0.0.1", 6381, zab::kv::sentinel_runid(7, 1), true, false, 9},
                  {3, "127.0.0.1", 6383, zab::kv::sentinel_runid(7, 3), false, true, 0}};
    v.sentinels = {*v.master, v.replicas[1]};
    return v;
}

}  // namespace

TEST_CASE("kv_sentinel: Sentinel's reply shapes for the leader, its replicas and sentinels") {
    const auto v = three_replicas();
    using zab::kv::sentinel_reply;
    CHECK(sentinel_reply({"SENTINEL", "get-master-addr-by-name", "zab"}, v) ==
          "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6382\r\n");
    CHECK(zab::kv::sentinel_runid(7, 2) == "2ab00000" "0000000000000007" "0000000000000002");
    CHECK(zab::kv::sentinel_runid(7, 2).size() == 40);
    CHECK(zab::kv::sentinel_runid(7, 2) != zab::kv::sentinel_runid(7, 3));

    const std::string masters = sentinel_reply({"SENTINEL", "MASTERS"}, v);
    CHECK(masters.starts_with("*1\r\n*40\r\n"));
    const auto m = bulks(masters);
    CHECK(value_of(m, "name") == "zab");
    CHECK(value_of(m, "ip") == "127.0.0.1");
    CHECK(value_of(m, "port") == "6382");
    CHECK(value_of(m, "flags") == "master");
    CHECK(value_of(m, "runid") == zab::kv::sentinel_runid(7, 2));
    CHECK(value_of(m, "num-slaves") == "1");  // the reachable one
    CHECK(value_of(m, "num-other-sentinels") == "2");
    CHECK(value_of(m, "quorum") == "2");
    CHECK(value_of(m, "config-epoch") == "3");
    CHECK(bulks(sentinel_reply({"SENTINEL", "master", "zab"}, v)) == m);

    const std::string replicas = sentinel_reply({"SENTINEL", "replicas", "zab"}, v);
    CHECK(replicas.starts_with("*2\r\n*42\r\n"));
    CHECK(sentinel_reply({"SENTINEL", "SLAVES", "zab"}, v) == replicas);
    const auto r = bulks(replicas);
    CHECK(r[1] == "127.0.0.1:6381");  // name: ip:port, as Sentinel names a replica
    CHECK(value_of(r, "flags") == "slave");
    CHECK(value_of(r, "master-host") == "127.0.0.1");
    CHECK(value_of(r, "master-port") == "6382");
    CHECK(value_of(r, "slave-repl-offset") == "9");
    // The second replica: unreachable (flagged as the clients skip it) and an observer.
    const std::vector<std::string> second(r.begin() + 42, r.end());
    CHECK(value_of(second, "flags") == "slave,s_down,disconnected");
    CHECK(value_of(second, "master-link-status") == "err");
    CHECK(value_of(second, "slave-priority") == "0");

    const auto s = bulks(sentinel_reply({"SENTINEL", "sentinels", "zab"}, v));
    CHECK(s.size() == 2 * 28);
    CHECK(value_of(s, "flags") == "sentinel");
    CHECK(value_of(s, "port") == "6382");
    CHECK(sentinel_reply({"SENTINEL", "MYID"}, v) == "$40\r\n" + v.myid + "\r\n");
    CHECK(sentinel_reply({"SENTINEL", "CKQUORUM", "zab"}, v).starts_with("+OK 2 usable Sentinels"));

    // Another name, or no leader established: what Sentinel answers for a name it does not
    // monitor.
    auto electing = v;
    electing.master.reset();
    for (const auto& view : {electing, v}) {
        const std::string name = view.master ? "other" : "zab";
        CHECK(sentinel_reply({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name}, view) == "*-1\r\n");
        CHECK(sentinel_reply({"SENTINEL", "MASTER", name}, view) ==
              "-ERR No such master with that name\r\n");
        CHECK(sentinel_reply({"SENTINEL", "REPLICAS", name}, view) ==
              "-ERR No such master with that name\r\n");
        CHECK(sentinel_reply({"SENTINEL", "SENTINELS", name}, view) ==
              "-ERR No such master with that name\r\n");
    }
    CHECK(sentinel_reply({"SENTINEL", "MASTERS"}, electing) == "*0\r\n");
    // RESP3 (HELLO 3, node-redis's default): each instance a map, as Sentinel answers it.
    CHECK(sentinel_reply({"SENTINEL", "MASTER", "zab"}, v, true).starts_with("%20\r\n$4\r\nname\r\n"));
    CHECK(sentinel_reply({"SENTINEL", "REPLICAS", "zab"}, v, true).starts_with("*2\r\n%21\r\n"));
    CHECK(bulks(sentinel_reply({"SENTINEL", "MASTER", "zab"}, v, true)) == m);
    CHECK(sentinel_reply({"SENTINEL", "FAILOVER", "zab"}, v).starts_with("-ERR unknown subcommand"));
    CHECK(sentinel_reply({"SENTINEL"}, v).starts_with("-ERR wrong number of arguments"));

    // ROLE: master with its reachable replicas; a follower names its leader.
    CHECK(zab::kv::role_reply(true, v, 12) ==
          "*3\r\n$6\r\nmaster\r\n:12\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n6381\r\n$1\r\n9\r\n");
    CHECK(zab::kv::role_reply(false, v, 12) ==
          "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6382\r\n$9\r\nconnected\r\n:12\r\n");
    CHECK(zab::kv::role_reply(false, electing, 12) ==
          "*5\r\n$5\r\nslave\r\n$1\r\n?\r\n:0\r\n$7\r\nconnect\r\n:12\r\n");
    CHECK(zab::kv::split_host_port("[::1]:6381") == std::pair<std::string, std::uint16_t>{"::1", 6381});
    CHECK_FALSE(zab::kv::split_host_port("nohost"));
    CHECK_FALSE(zab::kv::split_host_port("h:99999"));
}

TEST_CASE("kv_requests: CONFIG GET matches Redis's glob patterns, case-insensitive, each once") {
    const std::vector<zab::kv::config_parameter> table{
        {"maxmemory", "0"}, {"maxclients", "10000"}, {"save", ""}, {"appendonly", "yes"}};
    using zab::kv::config_reply;
    CHECK(config_reply({"CONFIG", "GET", "appendonly"}, table) ==
          "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n");
    CHECK(bulks(config_reply({"config", "get", "MAX*"}, table)) ==
          std::vector<std::string>{"maxmemory", "0", "maxclients", "10000"});
    CHECK(bulks(config_reply({"CONFIG", "GET", "save", "*"}, table)).size() == 8);  // each once
    CHECK(bulks(config_reply({"CONFIG", "GET", "max?lients", "s[a-b]ve"}, table)) ==
          std::vector<std::string>{"maxclients", "10000", "save", ""});
    CHECK(config_reply({"CONFIG", "GET", "nope"}, table) == "*0\r\n");
    CHECK(config_reply({"CONFIG", "GET", "save"}, table, true) == "%1\r\n$4\r\nsave\r\n$0\r\n\r\n");
    CHECK(config_reply({"CONFIG", "GET"}, table) ==
          "-ERR wrong number of arguments for 'config|get' command\r\n");
    CHECK(config_reply({"CONFIG", "SET", "maxmemory", "1"}, table).starts_with("-ERR CONFIG SET is not supported"));
    CHECK(config_reply({"CONFIG", "RESETSTAT"}, table) == "+OK\r\n");
}

TEST_CASE("kv_clients: CLIENT LIST's line and CLIENT KILL's filters, as Redis has them") {
    zab::kv::client_description c;
    c.id = 7;
    c.addr = "127.0.0.1:5000";
    c.laddr = "127.0.0.1:6381";
    c.fd = 9;
    c.name = "app";
    c.age_s = 3;
    c.idle_s = 1;
    c.last_command = "client|list";
    c.lib_name = "redis-py";
    CHECK(zab::kv::client_line(c) ==
          "id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6381 fd=9 name=app age=3 idle=1 flags=N "
          "db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 "
          "rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=client|list user=default redir=-1 "
          "resp=2 lib-name=redis-py lib-ver=");
    using zab::kv::client_filter;
    using zab::kv::parse_client_filter;
    const auto filter = [](zab::kv::resp::command args, bool kill) {
        auto parsed = parse_client_filter(args, kill);
        REQUIRE(std::holds_alternative<client_filter>(parsed));
        return std::get<client_filter>(parsed);
    };
    const auto old = filter({"CLIENT", "KILL", "127.0.0.1:5000"}, true);
    CHECK(old.old_form);
    CHECK(zab::kv::client_matches(old, c, 7));  // the old form kills the asking one too
    CHECK_FALSE(zab::kv::client_matches(filter({"CLIENT", "KILL", "127.0.0.1:5001"}, true), c, 1));
    CHECK(zab::kv::client_matches(filter({"CLIENT", "KILL", "ID", "7"}, true), c, 1));
    CHECK_FALSE(zab::kv::client_matches(filter({"CLIENT", "KILL", "ID", "7"}, true), c, 7));  // SKIPME
    CHECK(zab::kv::client_matches(filter({"CLIENT", "KILL", "ID", "7", "SKIPME", "no"}, true), c, 7));
    CHECK(zab::kv::client_matches(
        filter({"CLIENT", "KILL", "ADDR", "127.0.0.1:5000", "LADDR", "127.0.0.1:6381"}, true), c, 1));
    CHECK_FALSE(zab::kv::client_matches(filter({"CLIENT", "KILL", "USER", "admin"}, true), c, 1));
    CHECK_FALSE(zab::kv::client_matches(filter({"CLIENT", "KILL", "MAXAGE", "10"}, true), c, 1));
    CHECK(zab::kv::client_matches(filter({"CLIENT", "KILL", "TYPE", "normal"}, true), c, 1));
    CHECK(zab::kv::client_matches(filter({"CLIENT", "LIST"}, false), c, 7));  // LIST shows itself
    CHECK(zab::kv::client_matches(filter({"CLIENT", "LIST", "ID", "3", "7"}, false), c, 7));
    CHECK_FALSE(zab::kv::client_matches(filter({"CLIENT", "LIST", "TYPE", "pubsub"}, false), c, 7));
    const auto refused = [](zab::kv::resp::command args, bool kill) {
        auto parsed = parse_client_filter(args, kill);
        REQUIRE(std::holds_alternative<std::string>(parsed));
        return std::get<std::string>(parsed);
    };
    CHECK(refused({"CLIENT", "KILL", "ID", "0"}, true) == "ERR client-id should be greater than 0");
    CHECK(refused({"CLIENT", "KILL", "SKIPME", "maybe"}, true) == "ERR syntax error");
    CHECK(refused({"CLIENT", "KILL", "ID", "7", "SKIPME"}, true) == "ERR syntax error");
    CHECK(refused({"CLIENT", "LIST", "TYPE", "x"}, false) == "ERR Unknown client type 'x'");
    CHECK(refused({"CLIENT", "KILL"}, true).starts_with("ERR wrong number of arguments"));
}

TEST_CASE("kv_metrics: zab's figures as INFO lines in Redis's format") {
    std::string out;
    zab::kv::info_writer w{out};
    w.section("Zab counters");
    w.family("zab_commits_total", "counter", "");
    w.sample("zab_commits_total", "", 5);
    w.family("zab_syncs_total", "counter", "");
    w.sample("zab_syncs_total", "kind=\"diff\"", 1);
    w.sample("zab_syncs_total", "kind=\"snap\"", 2);
    w.family("zab_learner_lag", "gauge", "");
    w.sample("zab_learner_lag", "learner=\"2\"", 0);
    w.section("Zab state");
    w.sample("zab_leader", "", 3);
    w.family("zab_role", "gauge", "");
    w.sample("zab_role", "role=\"lead ing\"", 1);
    w.finish();
    CHECK(out == "# Zab counters\r\nzab_commits_total:5\r\nzab_syncs_total:diff=1,snap=2\r\n"
                 "zab_learner_lag:learner_2=0\r\n# Zab state\r\nzab_leader:3\r\n"
                 "zab_role:lead_ing=1\r\n");
}

TEST_CASE("resp_session: SUBSCRIBE and PSUBSCRIBE, Redis's subscribed mode, published events") {
    fake_backend backend;
    resp_session<fake_backend> session{backend};
    session.feed(request_bytes({"PSUBSCRIBE", "*switch-master", "[-+]sdown"}) +
                 request_bytes({"GET", "k"}) + request_bytes({"PING"}));
    CHECK(session.subscribed());
    CHECK(session.take_output() ==
          "*3\r\n$10\r\npsubscribe\r\n$14\r\n*switch-master\r\n:1\r\n"
          "*3\r\n$10\r\npsubscribe\r\n$9\r\n[-+]sdown\r\n:2\r\n"
          "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
          "RESET are allowed in this context\r\n"
          "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    CHECK(backend.reads.empty());
    session.publish("+switch-master", "zab 127.0.0.1 1 127.0.0.1 2");
    CHECK(session.take_output() ==
          "*4\r\n$8\r\npmessage\r\n$14\r\n*switch-master\r\n$14\r\n+switch-master\r\n"
          "$27\r\nzab 127.0.0.1 1 127.0.0.1 2\r\n");
    session.publish("+odown", "x");  // no subscription matches
    CHECK_FALSE(session.has_output());
    session.feed(request_bytes({"SUBSCRIBE", "news"}));
    session.publish("news", "hi");
    CHECK(session.take_output() == "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:3\r\n"
                                   "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
    zab::kv::client_description d;
    session.describe(d);
    CHECK(zab::kv::client_line(d).find(" flags=P db=0 sub=1 psub=2 ") != std::string::npos);
    session.feed(request_bytes({"PUNSUBSCRIBE"}) + request_bytes({"UNSUBSCRIBE"}) +
                 request_bytes({"UNSUBSCRIBE"}));
    CHECK(session.take_output() ==
          "*3\r\n$12\r\npunsubscribe\r\n$14\r\n*switch-master\r\n:2\r\n"
          "*3\r\n$12\r\npunsubscribe\r\n$9\r\n[-+]sdown\r\n:1\r\n"
          "*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:0\r\n"
          "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    CHECK_FALSE(session.subscribed());
    // Out of subscribed mode: commands run again; CLIENT SETINFO shows in CLIENT INFO.
    session.feed(request_bytes({"CLIENT", "SETINFO", "LIB-NAME", "redis-py"}) +
                 request_bytes({"CLIENT", "SETINFO", "LIB-VER", "bad value"}) +
                 request_bytes({"CLIENT", "INFO"}));
    const std::string info = session.take_output();
    CHECK(info.starts_with("+OK\r\n-ERR lib-ver cannot contain spaces"));
    CHECK(info.find(" lib-name=redis-py lib-ver=\n") != std::string::npos);
    CHECK(info.find(" cmd=client|info ") != std::string::npos);
}
