// examples/kv/kv_reconfig.hpp — ZRECONFIG, kv_server's membership change (docs/protocol.md §9),
// decided without I/O: the command parsed into a `reconfig_spec`, then planned against the
// configuration in force into the whole new member list the node proposes
// (`zab::asio::node::async_reconfigure`), and the texts INFO shows of a configuration.
//
//   ZRECONFIG [VERSION v] MEMBER id host:port [VOTER|OBSERVER|LEARNER] [WEIGHT w] [GROUP g]
//             [CLIENT host:port] [MEMBER ...]
//       the whole new member list; with VERSION, only if the configuration in force is
//       version v (INFO config_version), else unconditionally
//   ZRECONFIG [VERSION v] ADD id host:port [VOTER|OBSERVER|LEARNER] [WEIGHT w] [GROUP g]
//             [CLIENT host:port]
//   ZRECONFIG [VERSION v] REMOVE id
//       the configuration in force on this replica with one member added (start it first with
//       kv_server --new-member) or removed; compare-and-set on that configuration's version
//       (or on v), so a change that committed meanwhile makes it fail rather than be undone
//
// host:port is the member's PEER address ("[v6]:port" for IPv6), carried in the configuration
// so that every replica, and replicas added later, can reach it. VOTER (the default) votes;
// OBSERVER follows without a vote; LEARNER is an observer that the leader promotes to voter
// once it has caught up (member::promote). WEIGHT and GROUP: weighted and hierarchical
// quorums (member::weight, member::group). CLIENT: the member's client (RESP) address
// (member::client_address), which -NOQUORUM, -REDIRECT and INFO name for it. Replies: `+OK <version>` (the new configuration's
// version, once committed and applied on this replica), or an error (kv_requests.hpp,
// error_reply). An admin command (kv_auth.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "decimal.hpp"
#include "kv_calls.hpp"
#include "resp_parser.hpp"
#include "zab/core/config.hpp"
#include "zab/net/endpoint.hpp"

namespace zab::kv {

/// The most members a configuration may have (zab::max_members, core/reconfig.hpp, which this
/// header does not include: kv_server.cpp checks the two agree).
inline constexpr std::size_t max_reconfig_members = 1024;

/// A change of membership as zab::asio::node::async_reconfigure takes it
/// (zab::reconfig_request): the whole new member list, and the version it replaces.
struct planned_reconfig {
    std::vector<member> members;
    std::optional<std::uint64_t> expected_version;
};

/// A parsed ZRECONFIG.
struct reconfig_spec {
    enum class kind : std::uint8_t { members, add, remove };
    kind what = kind::members;
    std::optional<std::uint64_t> expected_version;  ///< VERSION v
    /// `members`: the whole new list; `add`: the one member added.
    std::vector<member> members;
    peer_id removed = 0;  ///< `remove`: the member removed
    friend bool operator==(const reconfig_spec&, const reconfig_spec&) = default;
};

/// What INFO calls a member's type: voter, observer, or learner (an observer to be promoted).
inline std::string_view role_of(const member& m) {
    if (m.type == learner_type::participant) return "voter";
    return m.promote ? "learner" : "observer";
}

namespace detail {

inline std::optional<std::uint64_t> reconfig_number(std::string_view text, std::uint64_t max) {
    const auto value = parse_uint64(text);
    if (!value || *value > max) return std::nullopt;
    return value;
}

/// One member from `args[at]` on: `id host:port [VOTER|OBSERVER|LEARNER] [WEIGHT w]
/// [GROUP g] [CLIENT host:port]`, up to the next MEMBER or the end; `at` is left after it.
inline std::variant<member, std::string> parse_member(const resp::command& args,
                                                      std::size_t& at) {
    if (at + 2 > args.size()) return std::string{"ERR ZRECONFIG: a member needs an id and host:port"};
    const auto id = reconfig_number(args[at], UINT32_MAX);
    if (!id || *id == 0)
        return "ERR ZRECONFIG: '" + args[at].substr(0, 64) + "' is not a replica id >= 1";
    const auto endpoint = asio::parse_endpoint(args[at + 1]);
    if (!endpoint || args[at + 1].size() > max_address_size)
        return "ERR ZRECONFIG: '" + args[at + 1].substr(0, 64) +
               "' is not host:port (the member's peer address; [v6]:port for IPv6)";
    member m;
    m.id = *id;
    m.address = asio::to_string(*endpoint);
    at += 2;
    bool typed = false;
    while (at < args.size()) {
        const std::string word = upper(args[at]);
        if (word == "MEMBER") break;
        if (word == "VOTER" || word == "OBSERVER" || word == "LEARNER") {
            if (typed) return std::string{"ERR ZRECONFIG: a member has one of VOTER, OBSERVER, LEARNER"};
            typed = true;
            m.type = word == "VOTER" ? learner_type::participant : learner_type::observer;
            m.promote = word == "LEARNER";
            ++at;
        } else if (word == "WEIGHT" || word == "GROUP") {
            const auto value = at + 1 < args.size()
                                   ? reconfig_number(args[at + 1], word == "WEIGHT"
                                                                       ? configuration::max_weight
                                                                       : UINT32_MAX)
                                   : std::nullopt;
            if (!value)
                return "ERR ZRECONFIG: " + word + " takes a number" +
                       (word == "WEIGHT" ? " 0.." + std::to_string(configuration::max_weight) : "");
            (word == "WEIGHT" ? m.weight : m.group) = static_cast<std::uint32_t>(*value);
            at += 2;
        } else if (word == "CLIENT") {
            const auto client = at + 1 < args.size() && args[at + 1].size() <= max_address_size
                                    ? asio::parse_endpoint(args[at + 1])
                                    : std::nullopt;
            if (!client)
                return std::string{"ERR ZRECONFIG: CLIENT takes host:port (the member's client "
                                   "address; [v6]:port for IPv6)"};
            m.client_address = asio::to_string(*client);
            at += 2;
        } else {
            return "ERR ZRECONFIG: unexpected '" + args[at].substr(0, 64) +
                   "' (after a member: VOTER, OBSERVER, LEARNER, WEIGHT w, GROUP g, CLIENT "
                   "host:port, MEMBER)";
        }
    }
    return m;
}

/// Why `members` is not a configuration, in words for the client; empty if it is one.
inline std::string configuration_problem(const std::vector<member>& members) {
    std::set<peer_id> ids;
    bool voter = false, grouped = false, ungrouped = false;
    for (const member& m : members) {
        if (!ids.insert(m.id).second)
            return "ERR ZRECONFIG: member " + std::to_string(m.id) + " is listed twice";
        if (m.type == learner_type::participant) {
            voter = voter || m.weight > 0;
            (m.group != 0 ? grouped : ungrouped) = true;
        }
    }
    if (!voter) return "ERR ZRECONFIG: the new configuration has no voter (with a weight above 0)";
    if (grouped && ungrouped)
        return "ERR ZRECONFIG: some voters name a GROUP and some do not: name one for every voter";
    if (members.size() > max_reconfig_members)
        return "ERR ZRECONFIG: more than " + std::to_string(max_reconfig_members) + " members";
    return {};
}

}  // namespace detail

/// ZRECONFIG's arguments (`args[0]` is the command's name), or the error reply's text.
inline std::variant<reconfig_spec, std::string> parse_reconfig(const resp::command& args) {
    reconfig_spec spec;
    std::size_t at = 1;
    if (at < args.size() && detail::upper(args[at]) == "VERSION") {
        const auto version = at + 1 < args.size()
                                 ? detail::reconfig_number(args[at + 1], UINT64_MAX)
                                 : std::nullopt;
        if (!version) return std::string{"ERR ZRECONFIG: VERSION takes a configuration version (INFO config_version)"};
        spec.expected_version = *version;
        at += 2;
    }
    if (at >= args.size())
        return std::string{"ERR ZRECONFIG takes MEMBER id host:port ... | ADD id host:port | REMOVE id"};
    const std::string verb = detail::upper(args[at]);
    if (verb == "REMOVE") {
        const auto id = at + 2 == args.size() ? detail::reconfig_number(args[at + 1], UINT32_MAX)
                                              : std::nullopt;
        if (!id || *id == 0) return std::string{"ERR ZRECONFIG REMOVE takes one replica id"};
        spec.what = reconfig_spec::kind::remove;
        spec.removed = *id;
        return spec;
    }
    if (verb == "ADD") {
        ++at;
        auto added = detail::parse_member(args, at);
        if (auto* problem = std::get_if<std::string>(&added)) return std::move(*problem);
        if (at != args.size())
            return std::string{"ERR ZRECONFIG ADD takes one member (use MEMBER ... for a whole list)"};
        spec.what = reconfig_spec::kind::add;
        spec.members.push_back(std::get<member>(std::move(added)));
        return spec;
    }
    if (verb != "MEMBER")
        return "ERR ZRECONFIG: unknown '" + args[at].substr(0, 64) + "' (MEMBER, ADD or REMOVE)";
    while (at < args.size()) {
        if (detail::upper(args[at]) != "MEMBER")
            return "ERR ZRECONFIG: expected MEMBER, got '" + args[at].substr(0, 64) + "'";
        ++at;
        auto parsed = detail::parse_member(args, at);
        if (auto* problem = std::get_if<std::string>(&parsed)) return std::move(*problem);
        spec.members.push_back(std::get<member>(std::move(parsed)));
        if (spec.members.size() > max_reconfig_members)
            return "ERR ZRECONFIG: more than " + std::to_string(max_reconfig_members) + " members";
    }
    if (auto problem = detail::configuration_problem(spec.members); !problem.empty()) return problem;
    return spec;
}

/// The change `spec` asks for, against `in_force` (this replica's committed configuration):
/// the whole new member list, every member with its peer address — the configuration's own,
/// else `known_addresses` (kv_server: --peers) — and the version it must replace (`spec`'s
/// VERSION; for ADD and REMOVE, else `in_force`'s). Or the error reply's text.
inline std::variant<planned_reconfig, std::string> plan_reconfig(
    const configuration& in_force, const std::map<peer_id, std::string>& known_addresses,
    reconfig_spec spec) {
    planned_reconfig request;
    request.expected_version = spec.expected_version;
    if (spec.what == reconfig_spec::kind::members) {
        request.members = std::move(spec.members);
        return request;
    }
    if (!request.expected_version) request.expected_version = in_force.version();
    const peer_id changed = spec.what == reconfig_spec::kind::add ? spec.members.front().id
                                                                  : spec.removed;
    const bool present = in_force.contains(changed);
    if (spec.what == reconfig_spec::kind::add && present)
        return "ERR ZRECONFIG ADD: " + std::to_string(changed) +
               " is a member already (MEMBER ... changes a member)";
    if (spec.what == reconfig_spec::kind::remove && !present)
        return "ERR ZRECONFIG REMOVE: " + std::to_string(changed) + " is not a member";
    for (member m : in_force.members()) {
        if (m.id == changed) continue;
        if (m.address.empty()) {
            const auto known = known_addresses.find(m.id);
            if (known == known_addresses.end() || known->second.empty())
                return "ERR ZRECONFIG: member " + std::to_string(m.id) +
                       "'s peer address is unknown here: give the whole list (MEMBER id "
                       "host:port ...)";
            m.address = known->second;
        }
        request.members.push_back(std::move(m));
    }
    if (spec.what == reconfig_spec::kind::add) request.members.push_back(std::move(spec.members.front()));
    if (auto problem = detail::configuration_problem(request.members); !problem.empty())
        return problem;
    return request;
}

/// INFO's `members` value: `id:role:address` for each member, comma-separated (the address
/// as the configuration carries it, else `address_of(id)`, else empty).
template <typename AddressOf>
std::string describe_members(const configuration& config, AddressOf address_of) {
    std::string out;
    for (const member& m : config.members()) {
        if (!out.empty()) out += ',';
        out += std::to_string(m.id);
        out += ':';
        out += role_of(m);
        out += ':';
        out += m.address.empty() ? std::string{address_of(m.id)} : m.address;
    }
    return out;
}

}  // namespace zab::kv
