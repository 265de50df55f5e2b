// examples/kv/kv_auth.hpp — kv_server's users, as Redis 6's AUTH sees them without an ACL
// file: the `default` user (a password with --requirepass, else none needed) and at most one
// admin user (--admin-user / --admin-pass), the only one allowed the admin commands
// (command_info::admin: ZTRANSFER, and any Z* command that changes the cluster) once it is
// configured. Without an admin user the default user may run them, as Redis's default user
// may run every command.
//
// What resp_session does with it (resp_session.hpp): a connection starts authenticated as
// `default` unless a password is required; until AUTH (or HELLO ... AUTH) succeeds, every
// command but AUTH, HELLO, QUIT and RESET is answered `-NOAUTH Authentication required.`;
// RESET goes back to that start. The reply texts are Redis 7's.
//
// Passwords are compared in time independent of where they differ (constant_time_equal).
// Nothing here logs or prints a password.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zab::kv {

/// What a user may run: the data and connection commands, or those and the admin commands.
enum class user_rights : std::uint8_t { data, admin };

/// True iff `given` equals `expected`, in a time that depends only on their lengths (the
/// loop runs over `expected` whatever `given` holds), so timing tells nothing of where a
/// guess goes wrong.
inline bool constant_time_equal(std::string_view given, std::string_view expected) noexcept {
    unsigned difference = given.size() == expected.size() ? 0u : 1u;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
        difference |= static_cast<unsigned>(g ^ static_cast<unsigned char>(expected[i]));
    }
    return difference == 0;
}

/// The users of one kv_server.
struct user_table {
    /// --requirepass: the default user's password; nullopt: the default user needs none.
    std::optional<std::string> default_password;
    /// --admin-user / --admin-pass; an empty name: no admin user.
    std::string admin_name;
    std::string admin_password;

    static constexpr std::string_view default_name = "default";

    /// Connections start unauthenticated (only AUTH, HELLO, QUIT, RESET run).
    bool auth_required() const noexcept { return default_password.has_value(); }
    /// What the default user may run: everything while no admin user is configured.
    user_rights default_rights() const noexcept {
        return admin_name.empty() ? user_rights::admin : user_rights::data;
    }
    /// The rights `user` gets with `password`, nullopt if the pair is wrong (an unknown user
    /// too). The default user without a password accepts any (Redis's `nopass`).
    std::optional<user_rights> check(std::string_view user, std::string_view password) const {
        if (user == default_name) {
            if (default_password && !constant_time_equal(password, *default_password))
                return std::nullopt;
            return default_rights();
        }
        if (!admin_name.empty() && user == admin_name &&
            constant_time_equal(password, admin_password))
            return user_rights::admin;
        return std::nullopt;
    }
};

namespace text {

inline constexpr std::string_view noauth = "NOAUTH Authentication required.";
inline constexpr std::string_view wrongpass =
    "WRONGPASS invalid username-password pair or user is disabled.";
inline constexpr std::string_view auth_without_password =
    "ERR AUTH <password> called without any password configured for the default user. Are "
    "you sure your configuration is correct?";
inline constexpr std::string_view hello_noauth =
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
    "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the "
    "RESP protocol version at the same time";

/// Redis 7.2's refusal of a command the user has no permission for.
inline std::string noperm(std::string_view user, std::string_view command_lower) {
    return "NOPERM User " + std::string{user.substr(0, 128)} +
           " has no permissions to run the '" + std::string{command_lower} + "' command";
}

}  // namespace text

}  // namespace zab::kv
