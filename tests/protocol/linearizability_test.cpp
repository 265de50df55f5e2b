// The linearizability checker (issue #5, item 5): hand-made register, compare-and-set and
// key-value histories with a known verdict, the gave-up path, and random histories drawn
// from a real sequential execution (linearizable by construction) then corrupted.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/testing/linearizability.hpp"
#include "zab/testing/linearizability_models.hpp"
#include "zab/testing/random.hpp"

using zab::testing::check_linearizability;
using zab::testing::history_time;
using zab::testing::kv_model;
using zab::testing::linearizability_model;
using zab::testing::linearizability_options;
using zab::testing::linearizability_report;
using zab::testing::linearizability_verdict;
using zab::testing::operation;
using zab::testing::partitioned_model;
using zab::testing::prng;
using zab::testing::register_model;

namespace Catch {
template <>
struct StringMaker<linearizability_verdict> {
    static std::string convert(linearizability_verdict v) {
        return std::string{zab::testing::to_string(v)};
    }
};
}  // namespace Catch

namespace {

using reg = register_model;
using reg_op = operation<reg>;
using kv_op = operation<kv_model>;

/// An operation that returned at `returned` with `out`.
template <typename Model>
operation<Model> done(std::uint64_t client, history_time called, history_time returned,
                      typename Model::input in, typename Model::output out) {
    return {client, called, returned, std::move(in), std::move(out)};
}

/// An operation whose outcome the client never learned.
template <typename Model>
operation<Model> unknown(std::uint64_t client, history_time called, typename Model::input in) {
    return {client, called, std::nullopt, std::move(in), std::nullopt};
}

reg_op read(std::uint64_t c, history_time t0, history_time t1, std::int64_t v) {
    return done<reg>(c, t0, t1, reg::read(), reg::read_returned(v));
}
reg_op write(std::uint64_t c, history_time t0, history_time t1, std::int64_t v) {
    return done<reg>(c, t0, t1, reg::write(v), reg::write_returned());
}
reg_op cas(std::uint64_t c, history_time t0, history_time t1, std::int64_t expected,
           std::int64_t desired, bool succeeded) {
    return done<reg>(c, t0, t1, reg::cas(expected, desired), reg::cas_returned(succeeded));
}

template <typename Model>
linearizability_report check(const std::vector<operation<Model>>& history,
                             const linearizability_options& options = {}) {
    auto report = check_linearizability(history, options);
    REQUIRE(report.has_value());
    INFO(report.value().summary() << "\n" << report.value().explanation);
    CHECK(report.value().ok() == (report.value().verdict == linearizability_verdict::linearizable));
    CHECK((report.value().explanation.empty()) == report.value().ok());
    return report.value();
}

template <typename Model>
linearizability_verdict verdict(const std::vector<operation<Model>>& history) {
    return check(history).verdict;
}

constexpr auto linearizable = linearizability_verdict::linearizable;
constexpr auto not_linearizable = linearizability_verdict::not_linearizable;
constexpr auto gave_up = linearizability_verdict::gave_up;

/// A model missing `hash`: not a model.
struct no_hash_model {
    using state = int;
    struct input {};
    struct output {};
    static state init() { return 0; }
    static std::optional<state> step(const state& s, const input&, const std::optional<output>&) {
        return s;
    }
    static std::string describe_operation(const input&, const std::optional<output>&) {
        return "";
    }
    static std::string describe_state(const state&) { return ""; }
};

}  // namespace

TEST_CASE("the model concepts accept the shipped models and reject others",
          "[linearizability]") {
    STATIC_REQUIRE(linearizability_model<register_model>);
    STATIC_REQUIRE(linearizability_model<kv_model>);
    STATIC_REQUIRE(partitioned_model<kv_model>);
    STATIC_REQUIRE_FALSE(partitioned_model<register_model>);
    STATIC_REQUIRE_FALSE(linearizability_model<no_hash_model>);
    STATIC_REQUIRE_FALSE(linearizability_model<int>);
}

TEST_CASE("malformed histories are errors, not verdicts", "[linearizability]") {
    const auto error = zab::make_error_code(zab::errc::invalid_argument);
    CHECK(check_linearizability(std::vector{write(1, 10, 5, 1)}).error() == error);
    reg_op no_output = write(1, 0, 5, 1);
    no_output.output.reset();
    CHECK(check_linearizability(std::vector{no_output}).error() == error);
    reg_op unknown_with_output = write(1, 0, 5, 1);
    unknown_with_output.return_time.reset();
    CHECK(check_linearizability(std::vector{unknown_with_output}).error() == error);
}

TEST_CASE("the empty history is linearizable", "[linearizability]") {
    const auto report = check(std::vector<reg_op>{});
    CHECK(report.ok());
    CHECK(report.operations == 0);
    CHECK(report.partitions == 0);
}

TEST_CASE("sequential register histories", "[linearizability]") {
    SECTION("reads see the last write, and the initial 0 before any") {
        const std::vector history{read(1, 0, 1, 0), write(1, 2, 3, 1), read(2, 4, 5, 1),
                                  write(2, 6, 7, 2), read(1, 8, 9, 2), read(3, 10, 11, 2)};
        const auto report = check(history);
        CHECK(report.ok());
        CHECK(report.operations == 6);
        CHECK(report.partitions == 1);
        CHECK(report.partitions_checked == 1);
        CHECK(report.max_concurrency == 1);
        CHECK(report.unknown_outcomes == 0);
        CHECK(report.steps >= 6);
    }
    SECTION("a read of the value before the last completed write is not") {
        CHECK(verdict(std::vector{write(1, 0, 1, 1), write(1, 2, 3, 2), read(2, 4, 5, 1)}) ==
              not_linearizable);
    }
}

TEST_CASE("overlapping writes: a read may see either, but not both in the wrong order",
          "[linearizability]") {
    // write(1) [0, 10] and write(2) [5, 15] overlap; the reads come after both.
    const auto w1 = write(1, 0, 10, 1);
    const auto w2 = write(2, 5, 15, 2);
    CHECK(verdict(std::vector{w1, w2, read(3, 20, 25, 1)}) == linearizable);
    CHECK(verdict(std::vector{w1, w2, read(3, 20, 25, 2)}) == linearizable);
    CHECK(verdict(std::vector{w1, w2, read(3, 20, 25, 1), read(3, 30, 35, 1)}) == linearizable);
    // Once both are done, the initial value is gone.
    CHECK(verdict(std::vector{w1, w2, read(3, 20, 25, 0)}) == not_linearizable);
    // Two sequential reads cannot see 2 then 1: that would need write(1) after write(2), and
    // then 1 stays.
    CHECK(verdict(std::vector{w1, w2, read(3, 20, 25, 2), read(3, 30, 35, 1)}) ==
          not_linearizable);
    // A read concurrent with a write sees the old or the new value.
    CHECK(verdict(std::vector{w1, read(3, 2, 8, 0)}) == linearizable);
    CHECK(verdict(std::vector{w1, read(3, 2, 8, 1)}) == linearizable);
    CHECK(check(std::vector{w1, w2, read(3, 7, 9, 2)}).max_concurrency == 3);
    // Calls and returns at the same instant are concurrent.
    CHECK(verdict(std::vector{write(1, 0, 10, 1), read(2, 10, 12, 0)}) == linearizable);
}

TEST_CASE("a stale read after a completed write is not linearizable, and the report says why",
          "[linearizability]") {
    const std::vector history{write(1, 0, 10, 1), write(1, 20, 30, 2), read(2, 40, 50, 1)};
    const auto report = check(history);
    REQUIRE(report.verdict == not_linearizable);
    CHECK_FALSE(report.ok());
    CHECK(report.partitions_checked == 1);
    // The operations with their times, the prefix, and the read that cannot follow it.
    CHECK_THAT(report.explanation, Catch::Contains("#2 client 2 [40, 50] read() -> 1"));
    CHECK_THAT(report.explanation, Catch::Contains("got furthest in time): 2 operations"));
    CHECK_THAT(report.explanation, Catch::Contains("-> state 2"));
    CHECK_THAT(report.explanation, Catch::Contains("read() -> 1: impossible from state 2"));
    CHECK_THAT(report.explanation, Catch::Contains("must have taken effect by its return at 50"));
}

TEST_CASE("a read of a value never written is not linearizable", "[linearizability]") {
    CHECK(verdict(std::vector{read(1, 0, 5, 7)}) == not_linearizable);
    CHECK(verdict(std::vector{write(1, 0, 10, 1), write(2, 0, 10, 2), read(3, 0, 10, 3)}) ==
          not_linearizable);
}

TEST_CASE("compare-and-set on the register", "[linearizability]") {
    SECTION("sequential successes and failures") {
        CHECK(verdict(std::vector{cas(1, 0, 1, 0, 5, true), cas(1, 2, 3, 0, 6, false),
                                  read(2, 4, 5, 5), cas(2, 6, 7, 5, 6, true),
                                  read(1, 8, 9, 6)}) == linearizable);
    }
    SECTION("a success whose expected value was not there is not") {
        CHECK(verdict(std::vector{write(1, 0, 1, 3), cas(2, 2, 3, 0, 5, true)}) ==
              not_linearizable);
    }
    SECTION("a failure although the expected value was there is not") {
        CHECK(verdict(std::vector{write(1, 0, 1, 3), cas(2, 2, 3, 3, 5, false)}) ==
              not_linearizable);
    }
    SECTION("a read after a successful cas must see its value") {
        CHECK(verdict(std::vector{cas(1, 0, 1, 0, 5, true), read(2, 2, 3, 0)}) ==
              not_linearizable);
    }
    SECTION("concurrent cas on the same value: one wins") {
        CHECK(verdict(std::vector{cas(1, 0, 10, 0, 1, true), cas(2, 0, 10, 0, 2, false),
                                  read(3, 11, 12, 1)}) == linearizable);
        CHECK(verdict(std::vector{cas(1, 0, 10, 0, 1, true), cas(2, 0, 10, 0, 2, true)}) ==
              not_linearizable);
        CHECK(verdict(std::vector{cas(1, 0, 10, 0, 1, false), cas(2, 0, 10, 0, 2, false)}) ==
              not_linearizable);
    }
    SECTION("a cas chain only fits one order") {
        // cas(0→1) and cas(1→2) both succeed concurrently: 0→1 must come first, so 2 stays.
        CHECK(verdict(std::vector{cas(2, 0, 10, 1, 2, true), cas(1, 0, 10, 0, 1, true),
                                  read(3, 11, 12, 2)}) == linearizable);
        CHECK(verdict(std::vector{cas(2, 0, 10, 1, 2, true), cas(1, 0, 10, 0, 1, true),
                                  read(3, 11, 12, 1)}) == not_linearizable);
    }
}

TEST_CASE("writes of unknown outcome stay open to the end of the history",
          "[linearizability]") {
    const auto lost = unknown<reg>(1, 10, reg::write(5));
    SECTION("seen by a later read") {
        const auto report = check(std::vector{lost, read(2, 100, 110, 5)});
        CHECK(report.ok());
        CHECK(report.unknown_outcomes == 1);
    }
    SECTION("seen long after every other operation returned") {
        CHECK(verdict(std::vector{write(2, 0, 5, 1), lost, read(2, 20, 30, 1),
                                  write(3, 40, 50, 2), read(2, 60, 70, 5)}) == linearizable);
    }
    SECTION("never seen") {
        CHECK(verdict(std::vector{lost, read(2, 100, 110, 0), read(2, 120, 130, 0)}) ==
              linearizable);
    }
    SECTION("seen before its call is not") {
        CHECK(verdict(std::vector{read(2, 0, 5, 5), lost}) == not_linearizable);
    }
    SECTION("seen, then gone without another write, is not") {
        CHECK(verdict(std::vector{lost, read(2, 20, 30, 5), read(2, 40, 50, 0)}) ==
              not_linearizable);
    }
    SECTION("a cas of unknown outcome took effect or not") {
        const auto maybe = unknown<reg>(1, 10, reg::cas(0, 7));
        CHECK(verdict(std::vector{maybe, read(2, 20, 30, 7)}) == linearizable);
        CHECK(verdict(std::vector{maybe, read(2, 20, 30, 0)}) == linearizable);
        // It can only succeed from 0.
        CHECK(verdict(std::vector{write(3, 0, 5, 4), maybe, read(2, 20, 30, 7)}) ==
              not_linearizable);
    }
    SECTION("they are counted apart from the concurrency of the others") {
        const auto report = check(std::vector{lost, unknown<reg>(3, 12, reg::write(6)),
                                              read(2, 100, 110, 6), read(2, 120, 130, 5)});
        CHECK(report.ok());
        CHECK(report.operations == 4);
        CHECK(report.unknown_outcomes == 2);
        CHECK(report.max_concurrency == 1);
    }
}

TEST_CASE("the key-value model checks each key on its own", "[linearizability]") {
    using kv = kv_model;
    const auto get = [](std::uint64_t c, history_time t0, history_time t1,
                        std::optional<std::string> v) {
        return done<kv>(c, t0, t1, kv::get("?"), kv::get_returned(std::move(v)));
    };
    const auto on = [](kv_op op, std::string key) {
        op.input.key = std::move(key);
        return op;
    };
    SECTION("gets, puts, deletes and cas per key") {
        const std::vector history{
            on(get(1, 0, 1, std::nullopt), "a"),
            done<kv>(1, 2, 3, kv::put("a", "x"), kv::put_returned()),
            done<kv>(2, 2, 3, kv::put("b", "y"), kv::put_returned()),
            on(get(3, 4, 5, "x"), "a"),
            done<kv>(1, 6, 7, kv::cas("a", "x", "z"), kv::cas_returned(true)),
            done<kv>(2, 6, 7, kv::cas("b", "x", "z"), kv::cas_returned(false)),
            done<kv>(3, 8, 9, kv::del("b"), kv::del_returned()),
            on(get(1, 10, 11, "z"), "a"),
            on(get(2, 10, 11, std::nullopt), "b"),
            done<kv>(3, 12, 13, kv::cas("b", "y", "w"), kv::cas_returned(false)),
        };
        const auto report = check(history);
        CHECK(report.ok());
        CHECK(report.partitions == 2);
        CHECK(report.partitions_checked == 2);
        CHECK(report.max_concurrency == 2);
        CHECK(report.max_partition_concurrency == 1);
    }
    SECTION("a violation on one key is found, the other keys are fine") {
        // Keys a and c are linearizable; on key b a get misses a completed put.
        std::vector<kv_op> history;
        for (const std::string key : {"a", "b", "c"}) {
            history.push_back(done<kv>(1, 0, 10, kv::put(key, "1"), kv::put_returned()));
            history.push_back(done<kv>(2, 5, 15, kv::put(key, "2"), kv::put_returned()));
            history.push_back(on(get(3, 20, 30, key == "b" ? "1" : "2"), key));
            history.push_back(on(get(4, 40, 50, "2"), key));
        }
        // On b, "1" then "2" after both puts returned: impossible.
        const auto report = check(history);
        CHECK(report.verdict == not_linearizable);
        CHECK(report.partitions == 3);
        CHECK(report.partitions_checked == 3);
        CHECK(report.max_partition_concurrency == 2);
        CHECK_THAT(report.explanation, Catch::StartsWith("key b (4 operations)"));
        CHECK_THAT(report.explanation, Catch::Contains("get(\"b\") -> \"2\""));
        CHECK_THAT(report.explanation, Catch::Contains("get(\"b\") -> \"2\": impossible from state \"1\""));
        CHECK_THAT(report.explanation, !Catch::Contains("\"a\""));
        CHECK_THAT(report.explanation, !Catch::Contains("\"c\""));
    }
    SECTION("the smallest failing key is explained") {
        std::vector<kv_op> history;
        for (int i = 0; i < 5; ++i)
            history.push_back(done<kv>(1, 10 * i, 10 * i + 5, kv::put("big", std::to_string(i)),
                                       kv::put_returned()));
        history.push_back(on(get(1, 100, 105, "0"), "big"));
        history.push_back(on(get(1, 0, 5, "never"), "small"));
        const auto report = check(history);
        CHECK(report.verdict == not_linearizable);
        CHECK_THAT(report.explanation, Catch::StartsWith("key small (1 operations)"));
    }
    SECTION("an unknown put is seen on its own key only") {
        const std::vector history{
            unknown<kv>(1, 0, kv::put("a", "x")),
            on(get(2, 10, 20, "x"), "a"),
            on(get(2, 10, 20, std::nullopt), "b"),
        };
        CHECK(verdict(history) == linearizable);
        auto wrong = history;
        wrong[2] = on(get(2, 10, 20, "x"), "b");
        CHECK(verdict(wrong) == not_linearizable);
    }
}

namespace {

/// A register history drawn from a real sequential execution: operation i takes effect at
/// 100·i; its call and return are up to `spread` before and after. Writes and cas of unknown
/// outcome sometimes never take effect at all. Written values are in [1, 5].
std::vector<reg_op> random_register_history(prng& random, std::size_t size,
                                            std::uint64_t spread) {
    std::vector<reg_op> history;
    std::int64_t value = 0;
    for (std::size_t i = 0; i < size; ++i) {
        const auto at = static_cast<history_time>(100 * i + spread);
        reg_op op;
        op.client = random.below(16);
        op.call_time = at - static_cast<history_time>(random.below(spread));
        op.return_time = at + static_cast<history_time>(random.below(spread));
        const auto roll = random.below(10);
        const auto v = static_cast<std::int64_t>(random.between(1, 5));
        if (roll < 4) {
            op.input = reg::read();
            op.output = reg::read_returned(value);
        } else if (roll < 7) {
            op.input = reg::write(v);
            op.output = reg::write_returned();
        } else {
            op.input = reg::cas(static_cast<std::int64_t>(random.between(0, 5)), v);
            op.output = reg::cas_returned(op.input.expected == value);
        }
        const bool lost = op.input.what != reg::kind::read && random.chance(0.1);
        const bool took_effect = !lost || random.chance(0.5);
        if (took_effect) value = *reg::step(value, op.input, std::nullopt);
        if (lost) {
            op.return_time.reset();
            op.output.reset();
        }
        history.push_back(op);
    }
    random.shuffle(history);  // the checker must not depend on the order of the vector
    return history;
}

/// The same for the key-value model over `keys` keys; values are "v<n>".
std::vector<kv_op> random_kv_history(prng& random, std::size_t size, std::size_t keys,
                                     std::uint64_t spread) {
    std::vector<kv_op> history;
    std::vector<kv_model::state> values(keys);
    for (std::size_t i = 0; i < size; ++i) {
        const auto at = static_cast<history_time>(100 * i + spread);
        const std::size_t k = random.below(keys);
        const std::string key = "k" + std::to_string(k);
        const std::string v = "v" + std::to_string(random.between(1, 4));
        kv_op op;
        op.client = random.below(16);
        op.call_time = at - static_cast<history_time>(random.below(spread));
        op.return_time = at + static_cast<history_time>(random.below(spread));
        const auto roll = random.below(10);
        if (roll < 4) {
            op.input = kv_model::get(key);
            op.output = kv_model::get_returned(values[k]);
        } else if (roll < 7) {
            op.input = kv_model::put(key, v);
            op.output = kv_model::put_returned();
        } else if (roll < 8) {
            op.input = kv_model::del(key);
            op.output = kv_model::del_returned();
        } else {
            op.input = kv_model::cas(key, "v" + std::to_string(random.between(1, 4)), v);
            op.output = kv_model::cas_returned(values[k] == op.input.expected);
        }
        const bool lost = op.input.what != kv_model::kind::get && random.chance(0.1);
        if (!lost || random.chance(0.5)) values[k] = *kv_model::step(values[k], op.input, {});
        if (lost) {
            op.return_time.reset();
            op.output.reset();
        }
        history.push_back(op);
    }
    return history;
}

/// Index of a random read (or get) with a known outcome.
template <typename Op, typename IsRead>
std::size_t pick_read(prng& random, const std::vector<Op>& history, IsRead is_read) {
    std::vector<std::size_t> reads;
    for (std::size_t i = 0; i < history.size(); ++i)
        if (is_read(history[i]) && history[i].outcome_known()) reads.push_back(i);
    REQUIRE_FALSE(reads.empty());
    return random.pick(reads);
}

}  // namespace

TEST_CASE("random register histories from a sequential execution pass; one corrupt read fails",
          "[linearizability]") {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        INFO("seed " << seed);
        prng random{seed};
        const std::uint64_t spread = 100 + random.below(400);  // concurrency up to ~10
        auto history = random_register_history(random, 200 + random.below(200), spread);
        const auto report = check(history);
        REQUIRE(report.ok());
        CHECK(report.operations == history.size());
        CHECK(report.max_concurrency >= 2);

        // A value no operation ever wrote is admissible nowhere.
        const std::size_t victim =
            pick_read(random, history, [](const reg_op& op) { return op.input.what == reg::kind::read; });
        history[victim].output = reg::read_returned(-1);
        const auto corrupted = check(history);
        CHECK(corrupted.verdict == not_linearizable);
        CHECK_THAT(corrupted.explanation, Catch::Contains("read() -> -1"));
    }
}

TEST_CASE("random key-value histories from a sequential execution pass; one corrupt get fails",
          "[linearizability]") {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        INFO("seed " << seed);
        prng random{seed};
        auto history = random_kv_history(random, 600, 1 + random.below(5), 500);
        const auto report = check(history);
        REQUIRE(report.ok());
        CHECK(report.partitions_checked == report.partitions);

        const std::size_t victim = pick_read(
            random, history, [](const kv_op& op) { return op.input.what == kv_model::kind::get; });
        history[victim].output = kv_model::get_returned("never written");
        const auto corrupted = check(history);
        CHECK(corrupted.verdict == not_linearizable);
        CHECK_THAT(corrupted.explanation,
                   Catch::StartsWith("key " + history[victim].input.key + " "));
    }
}

namespace {

/// The naive second implementation: tries every order of every subset of the operations
/// that keeps the real-time order (a before b when a returned before b was called) and
/// contains every known outcome.
bool naive_linearizable(const std::vector<reg_op>& history, std::vector<bool>& used,
                        std::int64_t value) {
    bool all_known_used = true;
    for (std::size_t i = 0; i < history.size(); ++i)
        if (!used[i] && history[i].outcome_known()) all_known_used = false;
    if (all_known_used) return true;
    for (std::size_t i = 0; i < history.size(); ++i) {
        if (used[i]) continue;
        bool minimal = true;
        for (std::size_t j = 0; j < history.size(); ++j) {
            if (!used[j] && j != i && history[j].return_time &&
                *history[j].return_time < history[i].call_time)
                minimal = false;
        }
        if (!minimal) continue;
        const auto after = reg::step(value, history[i].input, history[i].output);
        if (!after) continue;
        used[i] = true;
        const bool found = naive_linearizable(history, used, *after);
        used[i] = false;
        if (found) return true;
    }
    return false;
}

/// A small history with random times, inputs and outputs, so about half of them are not
/// linearizable; some outcomes unknown.
std::vector<reg_op> random_small_history(prng& random) {
    std::vector<reg_op> history(1 + random.below(7));
    for (auto& op : history) {
        op.client = random.below(3);
        op.call_time = static_cast<history_time>(random.below(20));
        const auto v = static_cast<std::int64_t>(random.below(3));
        switch (random.below(3)) {
            case 0:
                op.input = reg::read();
                op.output = reg::read_returned(static_cast<std::int64_t>(random.below(3)));
                break;
            case 1:
                op.input = reg::write(v);
                op.output = reg::write_returned();
                break;
            default:
                op.input = reg::cas(static_cast<std::int64_t>(random.below(3)), v);
                op.output = reg::cas_returned(random.chance(0.5));
        }
        if (random.chance(0.2)) {
            op.output.reset();
        } else {
            op.return_time = op.call_time + static_cast<history_time>(random.below(10));
        }
    }
    return history;
}

}  // namespace

TEST_CASE("small random histories: the checker agrees with a naive search", "[linearizability]") {
    std::size_t linearizable_count = 0, unknown_count = 0;
    for (std::uint64_t seed = 1; seed <= 3000; ++seed) {
        prng random{seed};
        const auto history = random_small_history(random);
        std::vector<bool> used(history.size(), false);
        const bool expected = naive_linearizable(history, used, reg::init());
        const auto report = check_linearizability(history);
        REQUIRE(report.has_value());
        INFO("seed " << seed << "\n" << report.value().explanation);
        REQUIRE(report.value().verdict != gave_up);
        REQUIRE(report.value().ok() == expected);
        linearizable_count += expected ? 1 : 0;
        unknown_count += report.value().unknown_outcomes;
    }
    // Both verdicts and unknown outcomes are well represented.
    CHECK(linearizable_count > 600);
    CHECK(linearizable_count < 2400);
    CHECK(unknown_count > 1000);
}

TEST_CASE("giving up is a failure, never a pass", "[linearizability]") {
    prng random{7};
    const auto history = random_register_history(random, 300, 400);
    REQUIRE(check(history).ok());

    SECTION("out of steps") {
        linearizability_options options;
        options.max_steps = 10;
        const auto report = check(history, options);
        CHECK(report.verdict == gave_up);
        CHECK_FALSE(report.ok());
        CHECK(report.partitions_checked == 0);
        CHECK(report.steps == 10);
        CHECK_THAT(report.explanation, Catch::Contains("the limit of 10 search steps"));
    }
    SECTION("out of memoised configurations") {
        linearizability_options options;
        options.max_configurations = 5;
        const auto report = check(history, options);
        CHECK(report.verdict == gave_up);
        CHECK_FALSE(report.ok());
        CHECK_THAT(report.explanation, Catch::Contains("the limit of 5 memoised configurations"));
    }
    SECTION("out of memo bytes (the bound a long history reaches first)") {
        linearizability_options options;
        options.max_memo_bytes = 4096;
        const auto report = check(history, options);
        CHECK(report.verdict == gave_up);
        CHECK_FALSE(report.ok());
        CHECK_THAT(report.explanation, Catch::Contains("MiB of memoised configurations"));
        // The same search within a larger budget completes.
        options.max_memo_bytes = std::size_t{64} << 20;
        CHECK(check(history, options).ok());
    }
    SECTION("a key proven wrong stays wrong when another key gives up") {
        std::vector<kv_op> kv_history{
            done<kv_model>(1, 0, 5, kv_model::get("a"), kv_model::get_returned("never"))};
        for (int i = 0; i < 50; ++i)
            kv_history.push_back(done<kv_model>(1, 10 * i, 10 * i + 5,
                                                kv_model::put("b", std::to_string(i)),
                                                kv_model::put_returned()));
        linearizability_options options;
        options.max_configurations = 5;
        const auto report = check(kv_history, options);
        CHECK(report.verdict == not_linearizable);
        CHECK(report.partitions_checked == 1);
        CHECK_THAT(report.explanation, Catch::StartsWith("key a"));
    }
}
