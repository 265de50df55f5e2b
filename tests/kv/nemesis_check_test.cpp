// The nemesis test's log-based checks (nemesis/history_check.hpp) on small, hand-built logs
// and histories: each kind of violation is reported, and the histories the real system may
// produce are accepted.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kv/kv_command.hpp"
#include "nemesis/group_model.hpp"
#include "nemesis/history_check.hpp"
#include "nemesis/settle_unknowns.hpp"
#include "zab/testing/linearizability.hpp"

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

// --- the group model: MULTI/EXEC blocks and expiring keys --------------------------------------

namespace {

using model = nemesis::group_model;
using op_t = testing::operation<model>;

op_t done(std::uint64_t client, testing::history_time call, testing::history_time ret,
          model::input in, model::output out) {
    return {client, call, ret, std::move(in), std::move(out)};
}
op_t open(std::uint64_t client, testing::history_time call, model::input in) {
    return {client, call, std::nullopt, std::move(in), std::nullopt};
}

testing::linearizability_verdict verdict(const std::vector<op_t>& history) {
    auto report = testing::check_linearizability(history);
    REQUIRE(report);
    return report.value().verdict;
}

constexpr auto linearizable = testing::linearizability_verdict::linearizable;
constexpr auto violation = testing::linearizability_verdict::not_linearizable;

using values = std::vector<std::optional<std::string>>;
const std::vector<std::string> tkeys = {"t0", "t1", "tc"};

model::input block(const std::string& v) {
    return model::multi("t", {{"t0", v}, {"t1", v}, {"tc", std::nullopt}});
}
model::input mget() { return model::mget("t", tkeys); }
model::input put(const std::string& key, const std::string& v) { return model::put(key, key, v); }
model::input get(const std::string& key) { return model::get(key, key); }

}  // namespace

TEST_CASE("nemesis group model: a block is one operation on all its keys", "[kv][nemesis]") {
    std::vector<op_t> h = {
        done(1, 0, 10, model::put("t", "t0", "i"), model::write_returned()),
        done(1, 11, 20, model::put("t", "t1", "i"), model::write_returned()),
        done(2, 30, 100, block("a"), model::exec_returned({"OK", "OK", "1"})),
        done(3, 40, 50, mget(), model::read_returned({"i", "i", std::nullopt})),  // before
        done(4, 60, 70, mget(), model::read_returned({"a", "a", "1"})),  // after, concurrently
        done(3, 110, 200, block("b"), model::exec_returned({"OK", "OK", "2"})),
        done(4, 120, 130, mget(), model::read_returned({"a", "a", "1"})),
        done(4, 210, 220, mget(), model::read_returned({"b", "b", "2"})),
    };
    CHECK(verdict(h) == linearizable);

    SECTION("torn: one key's write visible and the other's not, at one point") {
        h.push_back(done(5, 40, 90, mget(), model::read_returned({"a", "i", "1"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("torn across two reads: t1 still old after t0 was seen new") {
        h.push_back(done(5, 35, 40, model::get("t", "t0"), model::read_returned({"a"})));
        h.push_back(done(5, 41, 45, model::get("t", "t1"), model::read_returned({"i"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("an INCR counted twice (the block applied twice)") {
        h.push_back(done(5, 230, 240, mget(), model::read_returned({"b", "b", "3"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("a block answered other replies than its writes give") {
        h[5].output = model::exec_returned({"OK", "OK", "1"});
        CHECK(verdict(h) == violation);
    }
    SECTION("a block of unknown outcome may have applied, or not") {
        h.push_back(open(5, 300, block("c")));
        h.push_back(done(4, 400, 410, mget(), model::read_returned({"c", "c", "3"})));
        CHECK(verdict(h) == linearizable);
        h.push_back(done(4, 420, 430, mget(), model::read_returned({"b", "b", "2"})));
        CHECK(verdict(h) == violation);  // back in time: c, then b again
    }
}

TEST_CASE("nemesis group model: a WATCHed CAS applies on what it saw, or has no effect",
          "[kv][nemesis]") {
    const auto wcas = [](std::optional<std::string> seen, const std::string& v) {
        return model::watch_cas("t", "t0", std::move(seen), {{"t0", v}, {"t1", v}});
    };
    std::vector<op_t> h = {
        done(1, 0, 10, model::put("t", "t0", "i"), model::write_returned()),
        done(2, 20, 30, wcas("i", "a"), model::exec_returned({"OK", "OK"})),
        done(3, 40, 50, wcas("i", "b"), model::exec_aborted()),  // t0 changed since it saw i
        done(4, 60, 70, model::mget("t", {"t0", "t1"}), model::read_returned({"a", "a"})),
    };
    CHECK(verdict(h) == linearizable);

    SECTION("applied although the key no longer held what the GET saw") {
        h.push_back(done(5, 80, 90, wcas("i", "c"), model::exec_returned({"OK", "OK"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("aborted, yet its write is seen") {
        h.push_back(done(4, 80, 90, model::get("t", "t1"), model::read_returned({"b"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("of unknown outcome on a stale value: never applies") {
        h.push_back(open(5, 80, wcas("i", "d")));
        h.push_back(done(4, 100, 110, model::get("t", "t0"), model::read_returned({"d"})));
        CHECK(verdict(h) == violation);
    }
}

TEST_CASE("nemesis group model: expiring keys", "[kv][nemesis]") {
    // SET e v PX 100 called at 0 (returned at 10): its expiry is open from 100 on.
    std::vector<op_t> h = {
        done(1, 0, 10, put("e", "v"), model::write_returned()),
        open(1, 100, model::expire("e", "e", "v")),
        done(2, 50, 60, get("e"), model::read_returned({"v"})),
    };
    CHECK(verdict(h) == linearizable);

    SECTION("after the deadline the value may still be read (the TICK not yet committed)") {
        h.push_back(done(2, 150, 160, get("e"), model::read_returned({"v"})));
        h.push_back(done(3, 170, 180, get("e"), model::read_returned({std::nullopt})));
        h.push_back(done(2, 190, 200, get("e"), model::read_returned({std::nullopt})));
        CHECK(verdict(h) == linearizable);
    }
    SECTION("a key absent before its earliest deadline") {
        h.push_back(done(2, 70, 80, get("e"), model::read_returned({std::nullopt})));
        CHECK(verdict(h) == violation);
    }
    SECTION("resurrection: the expired value read again after a read saw it gone") {
        h.push_back(done(3, 170, 180, get("e"), model::read_returned({std::nullopt})));
        h.push_back(done(2, 190, 200, get("e"), model::read_returned({"v"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("resurrection: an overwritten expiring value read again") {
        h.push_back(done(3, 120, 130, put("e", "w"), model::write_returned()));
        h.push_back(done(2, 140, 150, get("e"), model::read_returned({"w"})));
        h.push_back(done(2, 160, 170, get("e"), model::read_returned({"v"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("the expiry does not remove a later value") {
        h.push_back(done(3, 61, 70, put("e", "w"), model::write_returned()));
        h.push_back(done(2, 300, 310, get("e"), model::read_returned({"w"})));
        CHECK(verdict(h) == linearizable);
        h.push_back(done(2, 320, 330, get("e"), model::read_returned({std::nullopt})));
        CHECK(verdict(h) == violation);
    }
}

TEST_CASE("nemesis: blocks of unknown outcome are settled from the committed log where it "
          "can tell", "[kv][nemesis]") {
    // The log: blocks a (acknowledged), c (unknown outcome, applied), then nothing of d.
    const auto blk = [](const std::string& v) {
        return command{calls_op{{{"SET", "t0", v}, {"SET", "t1", v}, {"INCR", "tc"}}, {}, true},
                       {}, 1000};
    };
    const auto log = make_log({blk("a"), blk("c")});
    std::vector<op_t> h = {
        done(1, 0, 10, block("a"), model::exec_returned({"OK", "OK", "1"})),
        open(2, 20, block("c")),
        open(3, 30, block("d")),
        open(4, 5, block("early")),  // called before a returned: only a whole log can tell
    };
    SECTION("a whole log settles every block") {
        auto history = h;
        const auto settled = nemesis::settle_unknown_blocks(history, nemesis::replay_log(log), false);
        CHECK(settled.applied == 1);
        CHECK(settled.not_applied == 2);  // d and early: not in the log
        CHECK(settled.left == 0);
        REQUIRE(history.size() == 2);
        REQUIRE(history[1].outcome_known());
        CHECK(history[1].output->replies == std::vector<std::string>{"OK", "OK", "2"});
        CHECK(*history[1].return_time > 30);  // at the end of the history
        CHECK(verdict(history) == linearizable);
        // A read of the state c left, after everything: explained.
        history.push_back(done(5, 40, 50, mget(), model::read_returned({"c", "c", "2"})));
        CHECK(verdict(history) == linearizable);
        // One that says c never applied is not, now that the log says it did.
        history.back().output = model::read_returned({"a", "a", "1"});
        CHECK(verdict(history) == violation);
    }
    SECTION("a log from a snapshot settles only the blocks called after an acknowledged one "
            "it holds") {
        // The same transactions, the log's snapshot taken before a.
        auto history = h;
        const auto settled = nemesis::settle_unknown_blocks(history, nemesis::replay_log(log), true);
        CHECK(settled.applied == 1);
        CHECK(settled.not_applied == 1);  // d
        CHECK(settled.left == 1);         // early: it may be in the snapshot
        CHECK(history.size() == 3);
        CHECK_FALSE(history.back().outcome_known());
    }
    SECTION("with no acknowledged block after the snapshot nothing is settled") {
        std::vector<op_t> history = {open(2, 20, block("c")), open(3, 30, block("d"))};
        const auto settled = nemesis::settle_unknown_blocks(history, nemesis::replay_log(log), true);
        CHECK(settled.left == 2);
        CHECK(history.size() == 2);
    }
}

TEST_CASE("nemesis replay and sessions: blocks write several keys, expiry removes keys",
          "[kv][nemesis]") {
    // SET e v PX 100 stamped 1000 (deadline 1100); a block on t0, t1; a TICK at 1200.
    const command px{calls_op{{{"SET", "e", "v", "PX", "100"}}, {}, false}, request_tag{1, 1}, 1000};
    const command blk{calls_op{{{"SET", "t0", "a"}, {"SET", "t1", "a"}}, {}, true}, {}, 1010};
    const command tick{tick_op{}, {}, 1200};
    const auto r = nemesis::replay_log(make_log({px, blk, tick}));
    CHECK(r.problems.empty());
    REQUIRE(r.values.at("t1").size() == 2);
    CHECK(r.values.at("t1")[1] == std::pair<std::uint64_t, std::optional<std::string>>{2, "a"});
    REQUIRE(r.values.at("e").size() == 3);  // absent, v (deadline 1100), absent at 3
    CHECK(r.expiries.at("e")[1] == 1100);
    CHECK(r.values.at("e")[2] == std::pair<std::uint64_t, std::optional<std::string>>{3, std::nullopt});

    // Sessions: after the TICK (position 3) a nil read of e is explained.
    std::vector<std::string> problems;
    nemesis::check_sessions({{read(1, "t0", "a"), read(1, "e", std::nullopt)}}, r, problems);
    CHECK(problems.empty());

    // A write stamped past the deadline (a follower whose clock is ahead) is no TICK: e = v
    // stays until a TICK, here until w overwrites it at position 3.
    const command over{set_op{"e", "w"}, request_tag{1, 2}, 1150};
    const auto o = nemesis::replay_log(make_log({px, blk, over}));
    CHECK(o.values.at("e").size() == 3);  // absent, v, w: never absent in between
    // So a replica that answers nil past the deadline by its own clock, before any TICK,
    // is caught: v was current, and e absent only before position 1.
    nemesis::check_sessions({{read(1, "t0", "a"), read(1, "e", std::nullopt)}}, o, problems);
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], Catch::Contains("replaced at position 1"));
}

TEST_CASE("nemesis group model: conditional writes on expiring keys", "[kv][nemesis]") {
    // SET e v PX 100 called at 0 (returned at 10): its expiry is open from 100 on. A read
    // at 150-160 saw e gone: the expiry took effect by then, once, for every operation.
    const auto nx = [](const std::string& v) { return model::set_if_absent("e", "e", v); };
    const auto wcas = [](std::optional<std::string> seen, const std::string& v) {
        return model::watch_cas("e", "e", std::move(seen), {{"e", v}});
    };
    std::vector<op_t> h = {
        done(1, 0, 10, put("e", "v"), model::write_returned()),
        open(1, 100, model::expire("e", "e", "v")),
        done(2, 150, 160, get("e"), model::read_returned({std::nullopt})),
    };
    REQUIRE(verdict(h) == linearizable);

    SECTION("SET NX after the read succeeds") {
        h.push_back(done(3, 170, 180, nx("w"), model::cas_returned(true)));
        CHECK(verdict(h) == linearizable);
    }
    SECTION("SET NX after the read fails on the value the read saw expired") {
        h.push_back(done(3, 170, 180, nx("w"), model::cas_returned(false)));
        CHECK(verdict(h) == violation);
    }
    SECTION("SET NX concurrent with the read may fail: it applied before the expiry") {
        h.push_back(done(3, 90, 180, nx("w"), model::cas_returned(false)));
        CHECK(verdict(h) == linearizable);
    }
    SECTION("SET NX before the deadline succeeds on a key that had not expired") {
        h.push_back(done(3, 20, 30, nx("w"), model::cas_returned(true)));
        CHECK(verdict(h) == violation);
    }
    SECTION("a WATCHed CAS that saw v applies after a read saw v gone") {
        // The window the leader's clock closed: the block proposed before the deadline by a
        // follower, forwarded slowly, applied after the read; its new value w is read next.
        h.push_back(done(3, 90, 200, wcas("v", "x"), model::exec_returned({"OK"})));
        h.push_back(open(3, 290, model::expire("e", "e", "x")));
        h.push_back(done(2, 210, 220, get("e"), model::read_returned({"x"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("a WATCHed CAS that saw v aborts once v expired; one that saw nil applies") {
        h.push_back(done(3, 90, 200, wcas("v", "x"), model::exec_aborted()));
        h.push_back(done(4, 170, 200, wcas(std::nullopt, "y"), model::exec_returned({"OK"})));
        h.push_back(done(2, 210, 220, get("e"), model::read_returned({"y"})));
        CHECK(verdict(h) == linearizable);
    }
}

TEST_CASE("nemesis group model: expiries of values overwritten in time are dropped",
          "[kv][nemesis]") {
    std::vector<op_t> h = {
        done(1, 0, 10, put("e", "v"), model::write_returned()),
        open(1, 100, model::expire("e", "e", "v")),
        done(2, 20, 30, put("e", "w"), model::write_returned()),  // after v, before 100
        open(2, 120, model::expire("e", "e", "w")),                // nothing overwrites w
        done(3, 5, 90, put("e", "x"), model::write_returned()),   // concurrent with v
        open(3, 190, model::expire("e", "e", "x")),               // x may be last: kept
    };
    CHECK(nemesis::drop_moot_expiries(h) == 1);
    REQUIRE(h.size() == 5);
    CHECK(std::count_if(h.begin(), h.end(), [](const op_t& op) {
              return op.input.what == model::kind::expire && op.input.value == "v";
          }) == 0);
}

// --- the group model: collections (a list, a set) -----------------------------------------------

TEST_CASE("nemesis group model: a list pushed and popped concurrently", "[kv][nemesis]") {
    std::vector<op_t> h = {
        done(1, 0, 10, model::rpush("l", "a"), model::integer_returned(1)),
        done(2, 5, 30, model::rpush("l", "b"), model::integer_returned(2)),
        done(3, 20, 40, model::lrange("l"), model::elements_returned({"a"})),  // before b
        done(4, 50, 60, model::lpop("l"), model::popped("a")),
        done(5, 55, 70, model::lpop("l"), model::popped("b")),
        done(3, 80, 90, model::lpop("l"), model::popped(std::nullopt)),
        done(3, 95, 100, model::llen("l"), model::integer_returned(0)),
    };
    CHECK(verdict(h) == linearizable);

    SECTION("an element popped twice") {
        h.push_back(done(6, 52, 65, model::lpop("l"), model::popped("a")));
        CHECK(verdict(h) == violation);
    }
    SECTION("LRANGE shows the elements out of push order") {
        h.push_back(done(6, 35, 45, model::lrange("l"), model::elements_returned({"b", "a"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("LRANGE misses an element whose RPUSH returned before it began") {
        h.push_back(done(6, 31, 45, model::lrange("l"), model::elements_returned({"a"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("LPOP takes the element pushed last, not the first") {
        h[3].output = model::popped("b");
        h[4].output = model::popped("a");
        CHECK(verdict(h) == linearizable);  // the LPOPs overlap: "a" may be popped first
        h[4].call_time = 61;                // now they do not
        CHECK(verdict(h) == violation);
    }
    SECTION("RPUSH answered a length its order does not give") {
        h[1].output = model::integer_returned(1);
        CHECK(verdict(h) == violation);
    }
    SECTION("LLEN counts an element already popped") {
        h.back().output = model::integer_returned(1);
        CHECK(verdict(h) == violation);
    }
    SECTION("a RPUSH of unknown outcome may have applied, once, or not") {
        h.push_back(open(7, 75, model::rpush("l", "c")));
        h.push_back(done(3, 110, 120, model::lrange("l"), model::elements_returned({"c"})));
        CHECK(verdict(h) == linearizable);
        SECTION("not twice") {
            h.push_back(done(3, 130, 140, model::llen("l"), model::integer_returned(2)));
            CHECK(verdict(h) == violation);
        }
        SECTION("nor undone") {
            h.push_back(done(3, 130, 140, model::lrange("l"), model::elements_returned({})));
            CHECK(verdict(h) == violation);
        }
        SECTION("popped by a LPOP of unknown outcome") {
            h.push_back(open(8, 125, model::lpop("l")));
            h.push_back(done(3, 130, 140, model::lrange("l"), model::elements_returned({})));
            CHECK(verdict(h) == linearizable);
        }
    }
}

TEST_CASE("nemesis group model: a set added to and removed from concurrently",
          "[kv][nemesis]") {
    std::vector<op_t> h = {
        done(1, 0, 10, model::sadd("s", "x"), model::integer_returned(1)),
        done(2, 5, 20, model::sadd("s", "y"), model::integer_returned(1)),
        done(3, 15, 25, model::smembers("s"), model::members_returned({"y", "x"})),
        done(1, 30, 40, model::srem("s", "x"), model::integer_returned(1)),
        done(2, 35, 45, model::sadd("s", "x"), model::integer_returned(1)),  // after the SREM
        done(3, 50, 60, model::smembers("s"), model::members_returned({"x", "y"})),
        done(3, 61, 62, model::scard("s"), model::integer_returned(2)),
        done(3, 63, 64, model::sismember("s", "x"), model::integer_returned(1)),
        done(3, 65, 66, model::sismember("s", "z"), model::integer_returned(0)),
    };
    CHECK(verdict(h) == linearizable);

    SECTION("SMEMBERS misses an acknowledged SADD that returned before it began") {
        h.push_back(done(4, 21, 24, model::smembers("s"), model::members_returned({"x"})));
        CHECK(verdict(h) == violation);
    }
    SECTION("SADD of a present member answered 1") {
        h.push_back(done(4, 26, 28, model::sadd("s", "y"), model::integer_returned(1)));
        CHECK(verdict(h) == violation);
    }
    SECTION("two SREMs of one member both answered 1 with one SADD between") {
        h.push_back(done(4, 30, 40, model::srem("s", "x"), model::integer_returned(1)));
        CHECK(verdict(h) == violation);
    }
    SECTION("SCARD miscounts") {
        h[6].output = model::integer_returned(1);
        CHECK(verdict(h) == violation);
    }
    SECTION("SREM of an absent member answered 0; the set emptied is absent") {
        h.push_back(done(4, 70, 71, model::srem("s", "z"), model::integer_returned(0)));
        h.push_back(done(4, 72, 73, model::srem("s", "x"), model::integer_returned(1)));
        h.push_back(done(4, 74, 75, model::srem("s", "y"), model::integer_returned(1)));
        h.push_back(done(4, 76, 77, model::scard("s"), model::integer_returned(0)));
        h.push_back(done(4, 78, 79, model::smembers("s"), model::members_returned({})));
        CHECK(verdict(h) == linearizable);
    }
    SECTION("a SADD of unknown outcome may have applied, or not, but not come undone") {
        h.push_back(open(5, 70, model::sadd("s", "z")));
        h.push_back(
            done(3, 80, 90, model::smembers("s"), model::members_returned({"x", "y", "z"})));
        CHECK(verdict(h) == linearizable);
        h.push_back(done(3, 91, 95, model::sismember("s", "z"), model::integer_returned(0)));
        CHECK(verdict(h) == violation);
    }
}

TEST_CASE("nemesis replay and writes: collection commands are calls, answered their reply",
          "[kv][nemesis]") {
    const command push{calls_op{{{"RPUSH", "l", "a"}}, {}, false}, request_tag{1, 1}, 1000};
    const command pop{calls_op{{{"LPOP", "l"}}, {}, false}, request_tag{1, 2}, 1000};
    const auto r = nemesis::replay_log(make_log({push, set(2, 1, "a", "a1"), pop}));
    CHECK(r.problems.empty());
    CHECK(!r.values.contains("l"));  // a list is no string: the session check never reads it
    CHECK(r.values.at("a").size() == 2);
    const auto collection_write = [](std::uint64_t seq, std::string verb, std::string reply) {
        write_record w = written(1, seq, "l", "a", write_record::fate::acknowledged);
        w.verb = std::move(verb);
        w.reply = std::move(reply);
        return w;
    };
    std::vector<write_record> writes = {collection_write(1, "RPUSH", ":1\r\n"),
                                        collection_write(2, "LPOP", "$1\r\na\r\n")};
    std::vector<std::string> problems;
    nemesis::check_writes(writes, r, problems);
    CHECK(problems.empty());
    writes[1].reply = "$-1\r\n";  // answered nil, but the log's LPOP popped "a"
    nemesis::check_writes(writes, r, problems);
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], Catch::Contains("write 1/2 (LPOP l)"));
}
