// Properties of the election's building blocks, checked against deliberately naive second
// implementations over many random cases (STYLE.md: etcd's quorum/ tests).
#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "zab/core/election.hpp"
#include "zab/core/quorum.hpp"
#include "zab/core/vote.hpp"
#include "zab/testing/random.hpp"

using namespace zab;

namespace {
// The naive order: compare as a string of digits "epoch.zxid.sid".
bool naive_beats(const vote& a, const vote& b) {
    if (a.leader_epoch != b.leader_epoch) return a.leader_epoch > b.leader_epoch;
    if (a.leader_zxid.epoch() != b.leader_zxid.epoch())
        return a.leader_zxid.epoch() > b.leader_zxid.epoch();
    if (a.leader_zxid.counter() != b.leader_zxid.counter())
        return a.leader_zxid.counter() > b.leader_zxid.counter();
    return a.leader > b.leader;
}

vote random_vote(testing::prng& r) {
    // Small ranges so that ties on epoch and on zxid happen often.
    return vote{1 + r.below(5), zxid{static_cast<epoch_t>(r.below(3)),
                                     static_cast<std::uint32_t>(r.below(3))},
                static_cast<epoch_t>(r.below(3)), r.below(4), peer_state::looking};
}
}  // namespace

TEST_CASE("the vote order is a strict total order and matches a naive implementation") {
    testing::prng r{20261130};
    for (int i = 0; i < 20000; ++i) {
        const vote a = random_vote(r), b = random_vote(r), c = random_vote(r);
        INFO(fmt::format("a={} b={} c={}", a, b, c));
        REQUIRE(vote_beats(a, true, b) == naive_beats(a, b));
        REQUIRE_FALSE(vote_beats(a, true, a));  // irreflexive
        REQUIRE_FALSE((vote_beats(a, true, b) && vote_beats(b, true, a)));  // asymmetric
        if (vote_beats(a, true, b) && vote_beats(b, true, c)) REQUIRE(vote_beats(a, true, c));
        const bool same = a.leader == b.leader && a.leader_zxid == b.leader_zxid &&
                          a.leader_epoch == b.leader_epoch;
        REQUIRE((same || vote_beats(a, true, b) || vote_beats(b, true, a)));  // total
    }
}

TEST_CASE("ZOOKEEPER-1419: the sid breaks ties only when epoch and zxid are equal") {
    // The buggy order compared the sid when the zxids were equal, whatever the epochs.
    const vote high_epoch_low_sid{1, zxid{1, 5}, 3, 0, peer_state::looking};
    const vote low_epoch_high_sid{5, zxid{1, 5}, 2, 0, peer_state::looking};
    CHECK(vote_beats(high_epoch_low_sid, true, low_epoch_high_sid));
    CHECK_FALSE(vote_beats(low_epoch_high_sid, true, high_epoch_low_sid));
}

TEST_CASE("a non-voter's vote never wins") {
    const vote any{1, zxid{}, 0, 0, peer_state::looking};
    CHECK_FALSE(vote_beats(vote{7, zxid{9, 9}, 9, 0, peer_state::looking}, false, any));
    CHECK_FALSE(vote_beats(vote{0, zxid{9, 9}, 9, 0, peer_state::looking}, true, any));
}

TEST_CASE("settled votes agree on leader and epoch only; looking votes on everything") {
    const vote a{3, zxid{2, 7}, 2, 4, peer_state::following};
    vote b{3, zxid{2, 9}, 2, 6, peer_state::leading};
    CHECK(votes_agree(a, b));  // ZOOKEEPER-1805/1818: zxid and round differ
    b.leader_epoch = 3;
    CHECK_FALSE(votes_agree(a, b));
    vote c = a;
    c.state = peer_state::looking;
    CHECK_FALSE(votes_agree(c, vote{3, zxid{2, 9}, 2, 4, peer_state::following}));
    CHECK(votes_agree(c, a));
}

TEST_CASE("majority quorums match a naive count over random configurations and ack sets") {
    testing::prng r{7};
    for (int i = 0; i < 5000; ++i) {
        const std::size_t voters = 1 + r.below(9);
        const std::size_t observers = r.below(3);
        auto config = configuration::numbered(voters, observers);
        REQUIRE(config.has_value());
        const auto system = quorum_system::majority(config.value());
        peer_set acks;
        std::set<peer_id> naive;
        const std::size_t n = r.below(voters + observers + 3);
        for (std::size_t k = 0; k < n; ++k) {
            const peer_id id = 1 + r.below(voters + observers + 2);  // strangers too
            acks.insert(id);
            naive.insert(id);
        }
        std::size_t voting = 0;
        for (peer_id id : naive)
            if (id <= voters) ++voting;
        INFO("voters " << voters << " observers " << observers << " acks " << n);
        REQUIRE(system.contains_quorum(acks) == (voting > voters / 2));
        for (peer_id id = 1; id <= voters + observers + 2; ++id)
            REQUIRE(system.is_voter(id) == (id <= voters));
    }
}

TEST_CASE("observers never make a quorum") {
    auto config = configuration::numbered(3, 4);
    REQUIRE(config.has_value());
    const auto system = quorum_system::majority(config.value());
    peer_set acks;
    for (peer_id id : {1, 4, 5, 6, 7}) acks.insert(id);
    CHECK_FALSE(system.contains_quorum(acks));
    acks.insert(3);
    CHECK(system.contains_quorum(acks));
}

TEST_CASE("options are validated with a reason for each inconsistency") {
    CHECK(options{}.problem().empty());
    CHECK(options{}.validate().has_value());
    auto bad = [](auto change) {
        options o;
        change(o);
        return o;
    };
    const options cases[] = {
        bad([](options& o) { o.finalize_wait_ticks = 0; }),
        bad([](options& o) { o.notification_timeout_min_ticks = 0; }),
        bad([](options& o) { o.notification_timeout_max_ticks = 1; }),
        bad([](options& o) { o.finalize_wait_ticks = 1000; }),
        bad([](options& o) { o.sync_limit_ticks = 1; }),
        bad([](options& o) { o.init_limit_ticks = 10; }),
    };
    std::set<std::string> reasons;
    for (const auto& o : cases) {
        CHECK_FALSE(o.problem().empty());
        CHECK(o.validate().error() == make_error_code(errc::invalid_options));
        reasons.insert(o.problem());
    }
    CHECK(reasons.size() == std::size(cases));  // each case names its own field
}

TEST_CASE("configurations reject duplicate ids, id 0 and voter-less groups") {
    CHECK(configuration::make({{1, learner_type::participant}, {1, learner_type::observer}})
              .error() == make_error_code(errc::invalid_options));
    CHECK(configuration::make({{0, learner_type::participant}}).error() ==
          make_error_code(errc::invalid_options));
    CHECK(configuration::make({{1, learner_type::observer}}).error() ==
          make_error_code(errc::invalid_options));
    CHECK(configuration::make({}).error() == make_error_code(errc::invalid_options));
    auto ok = configuration::make({{3, learner_type::participant}, {1, learner_type::observer}});
    REQUIRE(ok.has_value());
    CHECK(ok.value().members().front().id == 1);  // sorted
    CHECK(ok.value().voters() == std::vector<peer_id>{3});
}
