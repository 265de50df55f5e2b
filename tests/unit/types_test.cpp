// Unit tests of the names and wire values of peer_state, role, phase and learner_type.
#include <cstdint>
#include <string_view>

#include <catch2/catch.hpp>

#include "zab/core/types.hpp"

TEST_CASE("peer_state: names as in ZooKeeper, wire values 0..3") {
    CHECK(zab::to_string(zab::peer_state::looking) == "LOOKING");
    CHECK(zab::to_string(zab::peer_state::following) == "FOLLOWING");
    CHECK(zab::to_string(zab::peer_state::leading) == "LEADING");
    CHECK(zab::to_string(zab::peer_state::observing) == "OBSERVING");
    CHECK(fmt::format("{}", zab::peer_state::leading) == "LEADING");

    CHECK(static_cast<std::uint8_t>(zab::peer_state::looking) == 0);
    CHECK(static_cast<std::uint8_t>(zab::peer_state::following) == 1);
    CHECK(static_cast<std::uint8_t>(zab::peer_state::leading) == 2);
    CHECK(static_cast<std::uint8_t>(zab::peer_state::observing) == 3);
    // A value no enumerator names (e.g. decoded carelessly) is not given a real name.
    CHECK(zab::to_string(static_cast<zab::peer_state>(9)) == "?");
}

TEST_CASE("role names") {
    CHECK(zab::to_string(zab::role::leader) == "leader");
    CHECK(zab::to_string(zab::role::follower) == "follower");
    CHECK(zab::to_string(zab::role::observer) == "observer");
    CHECK(fmt::format("{}", zab::role::follower) == "follower");
    CHECK(zab::to_string(static_cast<zab::role>(7)) == "?");
}

TEST_CASE("phase names") {
    CHECK(zab::to_string(zab::phase::election) == "election");
    CHECK(zab::to_string(zab::phase::discovery) == "discovery");
    CHECK(zab::to_string(zab::phase::synchronization) == "synchronization");
    CHECK(zab::to_string(zab::phase::broadcast) == "broadcast");
    CHECK(fmt::format("{}", zab::phase::synchronization) == "synchronization");
    CHECK(zab::to_string(static_cast<zab::phase>(7)) == "?");
}

TEST_CASE("learner_type: names and wire values") {
    CHECK(zab::to_string(zab::learner_type::participant) == "participant");
    CHECK(zab::to_string(zab::learner_type::observer) == "observer");
    CHECK(fmt::format("{}", zab::learner_type::observer) == "observer");
    CHECK(static_cast<std::uint8_t>(zab::learner_type::participant) == 0);
    CHECK(static_cast<std::uint8_t>(zab::learner_type::observer) == 1);
}

TEST_CASE("the enum formatters accept string format specs") {
    CHECK(fmt::format("[{:>9}]", zab::peer_state::looking) == "[  LOOKING]");
    CHECK(fmt::format("[{:<8}]", zab::role::leader) == "[leader  ]");
    CHECK(fmt::format("{} in {}", zab::role::follower, zab::phase::discovery) ==
          "follower in discovery");
}

TEST_CASE("to_string is usable at compile time") {
    STATIC_REQUIRE(zab::to_string(zab::phase::broadcast) == std::string_view{"broadcast"});
    STATIC_REQUIRE(zab::to_string(zab::peer_state::observing) == std::string_view{"OBSERVING"});
}
