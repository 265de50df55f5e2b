// kv_server's per-connection logic without sockets: resp_session's reply ordering (writes in
// flight together, reads after the earlier writes, READMODE linearizable), its queue bound,
// QUIT and protocol errors; and kv_requests' command table and reply texts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_requests.hpp"
#include "kv/resp_session.hpp"

namespace {

using zab::kv::resp_session;

/// Records what the session starts; the test completes it when it likes (never inline, as
/// the contract asks). Reads answer from a map the test changes, to see *when* they ran.
struct fake_backend {
    std::vector<std::uint64_t> proposed;
    std::vector<std::uint64_t> synced;
    std::vector<std::string> reads;
    std::map<std::string, std::string> data;

    void propose(std::uint64_t ticket, std::vector<std::byte>) { proposed.push_back(ticket); }
    void sync(std::uint64_t ticket) { synced.push_back(ticket); }
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
    CHECK(reply({"CONFIG", "GET", "appendonly"}) == "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
    CHECK(reply({"TAGGED", "1", "x", "SET", "k", "v"}).starts_with("-ERR TAGGED client id"));
    CHECK(reply({"TAGGED", "1", "2", "GET", "k"}).starts_with("-ERR TAGGED takes"));
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
