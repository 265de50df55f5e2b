// Unit tests of zab::errc, its error category and zab::result (docs/design.md rule 9).
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/error.hpp"

namespace {

// Every enumerator of zab::errc. A new enumerator must be added here (and get a message).
const std::vector<zab::errc> all_errors{
    zab::errc::truncated,
    zab::errc::oversized,
    zab::errc::bad_magic,
    zab::errc::unsupported_version,
    zab::errc::unknown_message_type,
    zab::errc::bad_checksum,
    zab::errc::malformed,
    zab::errc::invalid_options,
    zab::errc::invalid_argument,
    zab::errc::not_leader,
    zab::errc::backpressure,
    zab::errc::shutting_down,
    zab::errc::outcome_unknown,
    zab::errc::zxid_exhausted,
    zab::errc::too_large,
    zab::errc::storage_failed,
    zab::errc::corrupt,
};

const std::string unknown_message = "unknown zab error";

zab::result<int> parse_digit(char c) {
    if (c < '0' || c > '9') return zab::errc::malformed;
    return c - '0';
}

}  // namespace

TEST_CASE("the error category is named \"zab\" and is a single object") {
    CHECK(std::string{zab::error_category().name()} == "zab");
    CHECK(&zab::error_category() == &zab::error_category());
    CHECK(zab::make_error_code(zab::errc::corrupt).category() == zab::error_category());
}

TEST_CASE("every errc has its own message, none of them the fallback") {
    // The fallback exists, so the check below can tell a missing case from a present one.
    CHECK(zab::error_category().message(0) == unknown_message);
    CHECK(zab::error_category().message(9999) == unknown_message);

    std::set<std::string> messages;
    std::set<int> values;
    for (const auto e : all_errors) {
        const auto message = zab::make_error_code(e).message();
        INFO("errc value " << static_cast<int>(e) << ": \"" << message << "\"");
        CHECK_FALSE(message.empty());
        CHECK(message != unknown_message);
        CHECK(message.find("unknown zab") == std::string::npos);
        CHECK(messages.insert(message).second);  // distinct
        CHECK(values.insert(static_cast<int>(e)).second);
        CHECK(static_cast<int>(e) != 0);  // 0 means success in std::error_code
    }
    CHECK(messages.size() == all_errors.size());
}

TEST_CASE("errc values are stable (they may be logged or stored)") {
    CHECK(static_cast<int>(zab::errc::truncated) == 1);
    CHECK(static_cast<int>(zab::errc::malformed) == 7);
    CHECK(static_cast<int>(zab::errc::invalid_options) == 100);
    CHECK(static_cast<int>(zab::errc::not_leader) == 200);
    CHECK(static_cast<int>(zab::errc::zxid_exhausted) == 204);
    CHECK(static_cast<int>(zab::errc::storage_failed) == 300);
    CHECK(static_cast<int>(zab::errc::corrupt) == 301);
}

TEST_CASE("an errc converts implicitly to std::error_code") {
    std::error_code ec = zab::errc::not_leader;
    CHECK(ec);
    CHECK(ec.value() == 200);
    CHECK(std::string{ec.category().name()} == "zab");
    CHECK(ec.message() == "not the leader");
    CHECK(ec == zab::errc::not_leader);
    CHECK(ec != zab::errc::backpressure);
    // Not equal to a std::errc with the same number: the category is part of the identity.
    CHECK(ec != std::error_code{200, std::generic_category()});

    ec = zab::errc::corrupt;
    CHECK(ec == zab::errc::corrupt);
    CHECK(ec.message() == "persistent data is corrupt");
}

TEST_CASE("result<T> carries either a value or a zab error") {
    const auto seven = parse_digit('7');
    REQUIRE(seven.has_value());
    CHECK_FALSE(seven.has_error());
    CHECK(seven.value() == 7);

    const auto bad = parse_digit('x');
    REQUIRE(bad.has_error());
    CHECK_FALSE(bad.has_value());
    CHECK(bad.error() == zab::errc::malformed);
    CHECK(bad.error().category() == zab::error_category());

    zab::result<std::string> text{std::string{"abc"}};
    REQUIRE(text);
    CHECK(text.value() == "abc");
    text = zab::errc::truncated;
    REQUIRE_FALSE(text);
    CHECK(text.error() == zab::errc::truncated);
}

TEST_CASE("result<void> is success or an error") {
    const zab::result<void> ok = BOOST_OUTCOME_V2_NAMESPACE::success();
    CHECK(ok);
    CHECK_FALSE(ok.has_error());

    const zab::result<void> failed = zab::errc::storage_failed;
    CHECK_FALSE(failed);
    CHECK(failed.error() == zab::errc::storage_failed);
    CHECK(failed.error().message() == "storage failed; replica stopped");
}
