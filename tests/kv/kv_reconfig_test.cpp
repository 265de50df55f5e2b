// ZRECONFIG without a cluster (examples/kv/kv_reconfig.hpp): the command parsed, planned
// against a configuration in force into the whole new member list, the INFO text of a
// configuration, and the replies to each error a membership change can end with.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kv/kv_reconfig.hpp"
#include "kv/kv_requests.hpp"

namespace {

using zab::learner_type;
using zab::member;
using zab::kv::reconfig_spec;

zab::kv::resp::command args(std::initializer_list<std::string> words) { return {words}; }

/// The spec, or the test fails with the error text.
reconfig_spec parsed(std::initializer_list<std::string> words) {
    auto result = zab::kv::parse_reconfig(args(words));
    if (auto* problem = std::get_if<std::string>(&result)) FAIL(*problem);
    return std::get<reconfig_spec>(result);
}

std::string refusal(std::initializer_list<std::string> words) {
    auto result = zab::kv::parse_reconfig(args(words));
    REQUIRE(std::holds_alternative<std::string>(result));
    return std::get<std::string>(result);
}

/// Voters 1, 2, 3 as kv_server starts them (no addresses), at `version`.
zab::configuration three(std::uint64_t version = 0) {
    return zab::configuration::make({{1}, {2}, {3}}, version).value();
}

const std::map<zab::peer_id, std::string> peers{
    {1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};

}  // namespace

TEST_CASE("ZRECONFIG parses the whole list, ADD and REMOVE, with types, weights, groups and a "
          "version") {
    const reconfig_spec whole = parsed({"ZRECONFIG", "MEMBER", "1", "10.0.0.1:2888", "MEMBER",
                                        "2", "[::1]:2888", "observer", "MEMBER", "3",
                                        "host-c:2888", "LEARNER", "member", "4", "h:1", "VOTER",
                                        "WEIGHT", "2", "GROUP", "0"});
    CHECK(whole.what == reconfig_spec::kind::members);
    CHECK_FALSE(whole.expected_version.has_value());
    REQUIRE(whole.members.size() == 4);
    CHECK(whole.members[0] == member{1, learner_type::participant, 0, 1, false, "10.0.0.1:2888"});
    CHECK(whole.members[1] == member{2, learner_type::observer, 0, 1, false, "[::1]:2888"});
    CHECK(whole.members[2] == member{3, learner_type::observer, 0, 1, true, "host-c:2888"});
    CHECK(whole.members[3] == member{4, learner_type::participant, 0, 2, false, "h:1"});

    const reconfig_spec add = parsed({"zreconfig", "version", "77", "add", "5", "h5:7005"});
    CHECK(add.what == reconfig_spec::kind::add);
    CHECK(add.expected_version == 77u);
    CHECK(add.members == std::vector<member>{{5, learner_type::participant, 0, 1, false, "h5:7005"}});

    // CLIENT: the member's client address, carried in the configuration.
    const reconfig_spec with_client =
        parsed({"ZRECONFIG", "ADD", "6", "h6:7006", "CLIENT", "h6:6386", "OBSERVER"});
    REQUIRE(with_client.members.size() == 1);
    CHECK(with_client.members[0] ==
          member{6, learner_type::observer, 0, 1, false, "h6:7006", "h6:6386"});

    const reconfig_spec remove = parsed({"ZRECONFIG", "REMOVE", "3"});
    CHECK(remove.what == reconfig_spec::kind::remove);
    CHECK(remove.removed == 3);
}

TEST_CASE("ZRECONFIG refuses what is no member list, saying what is wrong") {
    CHECK(refusal({"ZRECONFIG"}).starts_with("ERR ZRECONFIG takes MEMBER"));
    CHECK(refusal({"ZRECONFIG", "VERSION"}).find("VERSION takes") != std::string::npos);
    CHECK(refusal({"ZRECONFIG", "VERSION", "x", "REMOVE", "1"}).find("VERSION takes") !=
          std::string::npos);
    CHECK(refusal({"ZRECONFIG", "SWAP", "1"}) == "ERR ZRECONFIG: unknown 'SWAP' (MEMBER, ADD or REMOVE)");
    CHECK(refusal({"ZRECONFIG", "REMOVE"}) == "ERR ZRECONFIG REMOVE takes one replica id");
    CHECK(refusal({"ZRECONFIG", "REMOVE", "0"}) == "ERR ZRECONFIG REMOVE takes one replica id");
    CHECK(refusal({"ZRECONFIG", "REMOVE", "1", "2"}) == "ERR ZRECONFIG REMOVE takes one replica id");
    CHECK(refusal({"ZRECONFIG", "ADD", "4"}) == "ERR ZRECONFIG: a member needs an id and host:port");
    CHECK(refusal({"ZRECONFIG", "ADD", "0", "h:1"}).find("is not a replica id") != std::string::npos);
    for (const std::string bad : {"h", "h:", ":1", "h:0", "h:65536", "h:12x", "::1:7001",
                                  "[::1]", "a b:1", "[]:1"}) {
        INFO(bad);
        CHECK(refusal({"ZRECONFIG", "ADD", "4", bad}).find("is not host:port") != std::string::npos);
    }
    CHECK(refusal({"ZRECONFIG", "ADD", "4", "h:1", "MEMBER", "5", "h:2"}).starts_with(
        "ERR ZRECONFIG ADD takes one member"));
    CHECK(refusal({"ZRECONFIG", "ADD", "4", "h:1", "VOTER", "OBSERVER"}).find("one of VOTER") !=
          std::string::npos);
    CHECK(refusal({"ZRECONFIG", "ADD", "4", "h:1", "WEIGHT"}).find("WEIGHT takes a number") !=
          std::string::npos);
    CHECK(refusal({"ZRECONFIG", "ADD", "4", "h:1", "WEIGHT", "70000"}).find("WEIGHT takes") !=
          std::string::npos);
    CHECK(refusal({"ZRECONFIG", "ADD", "4", "h:1", "FAST"}).find("unexpected 'FAST'") !=
          std::string::npos);
    for (const std::string& bad : std::vector<std::string>{"h", "h:0", "a b:1", std::string(300, 'h') + ":1"}) {
        INFO(bad);
        CHECK(refusal({"ZRECONFIG", "ADD", "4", "h:1", "CLIENT", bad}).find("CLIENT takes") !=
              std::string::npos);
    }
    CHECK(refusal({"ZRECONFIG", "ADD", "4", "h:1", "CLIENT"}).find("CLIENT takes") !=
          std::string::npos);
    CHECK(refusal({"ZRECONFIG", "MEMBER", "1", "h:1", "MEMBER", "1", "h:2"}) ==
          "ERR ZRECONFIG: member 1 is listed twice");
    CHECK(refusal({"ZRECONFIG", "MEMBER", "1", "h:1", "OBSERVER"}).find("no voter") !=
          std::string::npos);
    CHECK(refusal({"ZRECONFIG", "MEMBER", "1", "h:1", "WEIGHT", "0"}).find("no voter") !=
          std::string::npos);
    CHECK(refusal({"ZRECONFIG", "MEMBER", "1", "h:1", "GROUP", "1", "MEMBER", "2", "h:2"})
              .find("name one for every voter") != std::string::npos);
    CHECK(refusal({"ZRECONFIG", "MEMBER", "1", "h:1", "junk"}).find("unexpected 'junk'") !=
          std::string::npos);
    // Through classify: an error reply, nothing proposed.
    const auto classified = zab::kv::classify(args({"ZRECONFIG", "REMOVE"}), 1 << 20);
    REQUIRE(std::holds_alternative<zab::kv::request::immediate>(classified));
    CHECK(std::get<zab::kv::request::immediate>(classified).reply ==
          "-ERR ZRECONFIG REMOVE takes one replica id\r\n");
    CHECK(std::holds_alternative<zab::kv::request::reconfig>(
        zab::kv::classify(args({"ZRECONFIG", "REMOVE", "2"}), 1 << 20)));
}

TEST_CASE("ZRECONFIG ADD and REMOVE are planned against the configuration in force, every "
          "member with its address, compare-and-set on its version") {
    using zab::kv::planned_reconfig;
    const auto plan = [](const zab::configuration& in_force, reconfig_spec spec,
                         const std::map<zab::peer_id, std::string>& known = peers) {
        return zab::kv::plan_reconfig(in_force, known, std::move(spec));
    };
    // ADD at version 0: the three members take their --peers addresses.
    auto grown = plan(three(), parsed({"ZRECONFIG", "ADD", "4", "127.0.0.1:7004"}));
    REQUIRE(std::holds_alternative<planned_reconfig>(grown));
    const auto& four = std::get<planned_reconfig>(grown);
    CHECK(four.expected_version == 0u);
    CHECK(four.members == std::vector<member>{{1, learner_type::participant, 0, 1, false, "127.0.0.1:7001"},
                                              {2, learner_type::participant, 0, 1, false, "127.0.0.1:7002"},
                                              {3, learner_type::participant, 0, 1, false, "127.0.0.1:7003"},
                                              {4, learner_type::participant, 0, 1, false, "127.0.0.1:7004"}});

    // REMOVE from a configuration that carries addresses (what ADD committed): they are kept,
    // and it need not be in --peers.
    const auto committed = zab::configuration::make(four.members, 4294967298u).value();
    auto shrunk = plan(committed, parsed({"ZRECONFIG", "REMOVE", "1"}), {});
    REQUIRE(std::holds_alternative<planned_reconfig>(shrunk));
    const auto& without = std::get<planned_reconfig>(shrunk);
    CHECK(without.expected_version == 4294967298u);
    REQUIRE(without.members.size() == 3);
    CHECK(without.members[0].id == 2);
    CHECK(without.members[2].address == "127.0.0.1:7004");

    // VERSION given: it is the compare-and-set, whatever is in force here.
    auto versioned = plan(three(), parsed({"ZRECONFIG", "VERSION", "5", "REMOVE", "3"}));
    CHECK(std::get<planned_reconfig>(versioned).expected_version == 5u);
    // The whole list: as given, unconditional without VERSION.
    auto whole = plan(three(), parsed({"ZRECONFIG", "MEMBER", "9", "h:9"}));
    CHECK_FALSE(std::get<planned_reconfig>(whole).expected_version.has_value());
    CHECK(std::get<planned_reconfig>(whole).members.size() == 1);

    // Refusals.
    const auto text = [](const std::variant<planned_reconfig, std::string>& v) {
        REQUIRE(std::holds_alternative<std::string>(v));
        return std::get<std::string>(v);
    };
    CHECK(text(plan(three(), parsed({"ZRECONFIG", "ADD", "2", "h:1"}))).find("is a member already") !=
          std::string::npos);
    CHECK(text(plan(three(), parsed({"ZRECONFIG", "REMOVE", "7"}))) ==
          "ERR ZRECONFIG REMOVE: 7 is not a member");
    CHECK(text(plan(three(), parsed({"ZRECONFIG", "REMOVE", "1"}), {{2, "h:2"}}))
              .find("member 3's peer address is unknown here") != std::string::npos);
    const auto alone = zab::configuration::make({{1, learner_type::participant, 0, 1, false, "h:1"}}).value();
    CHECK(text(plan(alone, parsed({"ZRECONFIG", "REMOVE", "1"}))).find("no voter") != std::string::npos);
}

TEST_CASE("INFO's members line and ZRECONFIG's replies") {
    const auto config =
        zab::configuration::make({{1},
                                  {2, learner_type::observer, 0, 1, false, "[::1]:7002"},
                                  {3, learner_type::observer, 0, 1, true, "h3:7003"}})
            .value();
    CHECK(zab::kv::describe_members(config, [](zab::peer_id id) {
              return id == 1 ? std::string{"127.0.0.1:7001"} : std::string{"unused"};
          }) == "1:voter:127.0.0.1:7001,2:observer:[::1]:7002,3:learner:h3:7003");

    using zab::errc;
    CHECK(zab::kv::reconfig_reply({}, 4294967298u, 0, "") == "+OK 4294967298\r\n");
    CHECK(zab::kv::reconfig_reply(zab::make_error_code(errc::reconfig_in_progress), 0, 0, "")
              .starts_with("-BUSY another reconfiguration is not committed yet"));
    CHECK(zab::kv::reconfig_reply(zab::make_error_code(errc::version_mismatch), 0, 0, "")
              .find("read INFO config_version and retry") != std::string::npos);
    CHECK(zab::kv::reconfig_reply(zab::make_error_code(errc::new_config_no_quorum), 0, 0, "")
              .find("start each new replica first (kv_server --new-member") != std::string::npos);
    CHECK(zab::kv::reconfig_reply(zab::make_error_code(errc::not_leader), 0, 3, "h3:7003") ==
          "-NOQUORUM no leader is established (last known leader: 3 at h3:7003)\r\n");
    CHECK(zab::kv::reconfig_reply(zab::make_error_code(errc::not_a_member), 0, 0, "")
              .starts_with("-REMOVED this replica was removed from the group"));
    CHECK(zab::kv::reconfig_reply(zab::make_error_code(errc::invalid_argument), 0, 0, "")
              .starts_with("-ERR ZRECONFIG: not a valid configuration"));
    CHECK(zab::kv::reconfig_reply(zab::make_error_code(errc::transferring), 0, 0, "")
              .starts_with("-TRYAGAIN"));
}
