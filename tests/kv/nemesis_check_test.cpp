// The nemesis test's log-based checks (nemesis/history_check.hpp) on small, hand-built logs
// and histories: each kind of violation is reported, and the histories the real system may
// produce are accepted.
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kv/kv_command.hpp"
#include "nemesis/history_check.hpp"

using namespace zab;
using namespace zab::kv;
using nemesis::session_event;
using nemesis::write_record;

namespace {

/// A log: the tagged commands in order, zxids <1, 1>, <1, 2>, ...
std::vector<log_record> make_log(const std::vector<command>& commands) {
    std::vector<log_record> out;
    std::uint32_t counter = 0;
    for (const command& c : commands) {
        auto bytes = encode(c);
        REQUIRE(bytes);
        out.push_back({zxid{1, ++counter}, shared_bytes{std::move(bytes).value()}});
    }
    return out;
}

command set(std::uint64_t client, std::uint64_t seq, std::string key, std::string value) {
    return {set_op{std::move(key), std::move(value)}, request_tag{client, seq}};
}
command cas(std::uint64_t client, std::uint64_t seq, std::string key, std::string expected,
            std::string desired) {
    return {cas_op{std::move(key), std::move(expected), std::move(desired)},
            request_tag{client, seq}};
}

write_record written(std::uint64_t client, std::uint64_t seq, std::string key,
                     std::string value, write_record::fate fate) {
    write_record w;
    w.tag = {client, seq};
    w.key = std::move(key);
    w.value = std::move(value);
    w.result = fate;
    return w;
}

session_event read(std::uint64_t session, std::string key, std::optional<std::string> value) {
    return {session, true, std::move(key), std::move(value), {}};
}
session_event acked(std::uint64_t session, std::uint64_t client, std::uint64_t seq) {
    return {session, false, {}, {}, request_tag{client, seq}};
}

// The log used below: a = a1 (pos 1), b = b1 (2), a = a2 (3), a duplicate retry of a2 (4),
// a CAS on b expecting "x" that fails (5), a CAS b1 -> b2 (6).
const std::vector<command> base = {
    set(1, 1, "a", "a1"),        set(2, 1, "b", "b1"), set(1, 2, "a", "a2"),
    set(1, 2, "a", "a2"),        cas(2, 2, "b", "x", "never"),
    cas(2, 3, "b", "b1", "b2"),
};

}  // namespace

TEST_CASE("nemesis replay: positions, outcomes, duplicates and each key's values",
          "[kv][nemesis]") {
    const auto r = nemesis::replay_log(make_log(base));
    CHECK(r.problems.empty());
    CHECK(r.transactions == 6);
    CHECK(r.duplicates == 1);
    CHECK(r.last == zxid(1, 6));
    REQUIRE(r.applied.size() == 5);
    CHECK(r.applied.at({1, 2}).first == 3);  // the original, not the retry
    CHECK(r.applied.at({2, 2}).second.kind == outcome_kind::cas_mismatched);
    CHECK(r.applied.at({2, 3}).second.kind == outcome_kind::cas_matched);
    const auto& a = r.values.at("a");
    REQUIRE(a.size() == 3);
    CHECK(a[0] == std::pair<std::uint64_t, std::optional<std::string>>{0, std::nullopt});
    CHECK(a[1].first == 1);
    CHECK(a[2] == std::pair<std::uint64_t, std::optional<std::string>>{3, "a2"});
    CHECK(r.values.at("b").size() == 3);  // absent, b1, b2: the failed CAS changed nothing

    kv_state_machine same;
    for (const auto& rec : make_log(base)) same.apply(rec.id, rec.txn.view());
    CHECK(r.digest == same.digest());
}

TEST_CASE("nemesis writes: acknowledged present with its outcome, refused absent",
          "[kv][nemesis]") {
    const auto r = nemesis::replay_log(make_log(base));
    std::vector<write_record> writes = {
        written(1, 1, "a", "a1", write_record::fate::acknowledged),
        written(1, 2, "a", "a2", write_record::fate::acknowledged),
        written(9, 1, "a", "zz", write_record::fate::unknown),  // never applied: fine
    };
    auto mismatched = written(2, 2, "b", "never", write_record::fate::acknowledged);
    mismatched.expected = "x";
    mismatched.cas_matched = false;
    writes.push_back(mismatched);
    std::vector<std::string> problems;
    nemesis::check_writes(writes, r, problems);
    CHECK(problems.empty());

    SECTION("an acknowledged write missing from the log") {
        writes.push_back(written(3, 1, "a", "lost", write_record::fate::acknowledged));
        nemesis::check_writes(writes, r, problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("acknowledged but is not in the committed log"));
    }
    SECTION("a refused write in the log") {
        auto w = written(2, 1, "b", "b1", write_record::fate::refused);
        w.refusal = "NOQUORUM";
        writes.push_back(w);
        nemesis::check_writes(writes, r, problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("was refused (NOQUORUM)"));
    }
    SECTION("a CAS answered :1 that the log applies as a mismatch") {
        auto w = mismatched;
        w.cas_matched = true;
        writes.push_back(w);
        nemesis::check_writes(writes, r, problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("the client was answered"));
    }
}

TEST_CASE("nemesis sessions: read-your-writes and no going back in time, per connection",
          "[kv][nemesis]") {
    const auto r = nemesis::replay_log(make_log(base));
    std::vector<std::string> problems;

    SECTION("a history the positions explain passes") {
        nemesis::check_sessions({{read(1, "a", std::nullopt), read(1, "a", "a1"),
                                  read(1, "b", "b1"), acked(1, 1, 2), read(1, "a", "a2"),
                                  read(1, "b", "b1"),  // position 3..5: b is still b1
                                  read(2, "a", "a1")}},  // a new connection may be behind
                                r, problems);
        CHECK(problems.empty());
    }
    SECTION("going back in time on one key") {
        nemesis::check_sessions({{read(1, "a", "a2"), read(1, "a", "a1")}}, r, problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("replaced at position 3"));
    }
    SECTION("going back in time across keys") {
        // b2 becomes current at 6, when a is a2; a1 was replaced at 3.
        nemesis::check_sessions({{read(1, "b", "b2"), read(1, "a", "a1")}}, r, problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("its read of b"));
    }
    SECTION("not seeing its own write") {
        nemesis::check_sessions({{acked(1, 1, 2), read(1, "a", "a1")}}, r, problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("its write 1/2"));
    }
    SECTION("absent again after a DEL") {
        const auto with_del = nemesis::replay_log(make_log(
            {set(1, 1, "a", "a1"), {del_op{"a"}, request_tag{1, 2}}, set(1, 3, "a", "a3")}));
        nemesis::check_sessions({{read(1, "a", "a1"), read(1, "a", std::nullopt),
                                  read(1, "a", "a3")}},
                                with_del, problems);
        CHECK(problems.empty());
        nemesis::check_sessions({{read(1, "a", "a3"), read(1, "a", std::nullopt)}}, with_del,
                                problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("replaced at position 3"));
    }
    SECTION("a value no committed write stored") {
        nemesis::check_sessions({{read(1, "a", "ghost")}}, r, problems);
        REQUIRE(problems.size() == 1);
        CHECK_THAT(problems[0], Catch::Contains("no committed write stored it"));
    }
}
