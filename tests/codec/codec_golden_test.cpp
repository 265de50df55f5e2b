// Golden bytes: the wire format written out by hand. Any change to the encoding of any
// message fails here; if the change is intended, bump `frame_version` and update the bytes.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "zab/core/codec.hpp"

namespace {

using namespace zab;
using test::status;

std::vector<std::byte> from_hex(std::string hex) {
    std::vector<std::byte> out;
    std::string digits;
    for (char c : hex) {
        if (c != ' ') digits += c;
    }
    for (std::size_t i = 0; i + 1 < digits.size(); i += 2) {
        out.push_back(static_cast<std::byte>(std::stoi(digits.substr(i, 2), nullptr, 16)));
    }
    return out;
}

}  // namespace

TEST_CASE("golden: a COMMIT frame, byte for byte", "[codec][golden]") {
    // CRC computed independently (a bitwise CRC32C in Python) over the 8 payload bytes.
    const std::vector<std::byte> expected = from_hex(
        "5a 41 42 31"                // magic "ZAB1"
        "03"                         // version
        "1f"                         // type 31 = COMMIT
        "00 00"                      // flags
        "01 02 03 04 05 06 07 08"    // group_id 0x0807060504030201
        "11 12 13 14 15 16 17 18"    // config_version 0x1817161514131211
        "08 00 00 00"                // payload_length 8
        "c5 2c 16 d0"                // payload_crc32c 0xd0162cc5
        "07 00 00 00 05 00 00 00");  // zxid <5, 7>
    REQUIRE(expected.size() == 40);

    const frame_context context{0x0807060504030201ull, 0x1817161514131211ull};
    const shared_bytes frame = encode(context, commit{zxid{5, 7}});
    CHECK(test::to_vector(frame.view()) == expected);

    const auto decoded = decode(expected);
    REQUIRE(status(decoded) == "ok");
    CHECK(decoded.value().msg == message{commit{zxid{5, 7}}});
    CHECK(decoded.value().header.group_id == context.group_id);
    CHECK(decoded.value().header.config_version == context.config_version);
    CHECK(decoded.value().header.payload_crc32c == 0xd0162cc5u);
}

TEST_CASE("golden: the payload of every message type", "[codec][golden]") {
    struct golden {
        message msg;
        message_type type;
        std::string payload_hex;
    };
    const std::vector<golden> cases{
        {notification{peer_state::leading, 0x0102030405060708ull, zxid{3, 4}, 9, 3},
         message_type::notification,
         "02 0807060504030201 0400000003000000 0900000000000000 03000000"},
        {follower_info{2, 0x10000}, message_type::follower_info, "02000000 00000100"},
        {observer_info{7, 0x10000}, message_type::observer_info, "07000000 00000100"},
        {leader_info{3, 0x10000}, message_type::leader_info, "03000000 00000100"},
        {ack_epoch{zxid{2, 5}, 2u}, message_type::ack_epoch, "0500000002000000 01 02000000"},
        {ack_epoch{zxid{2, 5}, std::nullopt}, message_type::ack_epoch, "0500000002000000 00"},
        {diff{zxid{1, 2}}, message_type::diff, "0200000001000000"},
        {zab::trunc{zxid{1, 1}}, message_type::trunc, "0100000001000000"},
        {snap{zxid{1, 3}, 5, 3, as_bytes("ab")}, message_type::snap,
         "0300000001000000 0500000000000000 0300000000000000 02000000 6162"},
        {snap_ack{0x0102}, message_type::snap_ack, "0201000000000000"},
        {sync_ack{zxid{2, 0x0304}}, message_type::sync_ack, "0403000002000000"},
        {new_leader{zxid{2, 0}}, message_type::new_leader, "0000000002000000"},
        {ack{zxid{2, 1}}, message_type::ack, "0100000002000000"},
        {up_to_date{}, message_type::up_to_date, ""},
        {proposal{zxid{2, 1}, as_bytes("x")}, message_type::proposal,
         "0100000002000000 01000000 78"},
        {commit{zxid{2, 1}}, message_type::commit, "0100000002000000"},
        {inform{zxid{2, 2}, {}}, message_type::inform, "0200000002000000 00000000"},
        {forwarded_request{0x1122, request_kind::sync, as_bytes("hi")}, message_type::forwarded_request,
         "2211000000000000 01 02000000 6869"},
        {ping{zxid{2, 3}, 5}, message_type::ping, "0300000002000000 0500000000000000"},
        {zab::sync_answer{6}, message_type::sync_answer, "0600000000000000"},
        {forwarded_reply{7, reply_outcome::accepted, zxid{2, 4}}, message_type::forwarded_reply,
         "0700000000000000 00 0400000002000000"},
    };

    // Every type has a golden payload (a new message must add one here).
    std::set<message_type> covered;
    for (const auto& c : cases) covered.insert(c.type);
    CHECK(covered.size() == std::variant_size_v<message>);

    for (const auto& c : cases) {
        INFO(to_string(c.type) << ": " << c.payload_hex);
        REQUIRE(type_of(c.msg) == c.type);
        const auto expected = from_hex(c.payload_hex);
        const shared_bytes frame = encode({}, c.msg);
        CHECK(test::payload_of(frame) == expected);

        // Named: the decoded byte fields are views into it.
        const auto golden_frame = test::raw_frame(test::type_byte(c.type), expected);
        const auto decoded = decode(golden_frame);
        REQUIRE(status(decoded) == "ok");
        CHECK(decoded.value().msg == c.msg);
    }
}

TEST_CASE("golden: wire type numbers are stable", "[codec][golden]") {
    // messages.hpp promises never to renumber; the frames above depend on it.
    CHECK(test::type_byte(message_type::notification) == 1);
    CHECK(test::type_byte(message_type::ack_epoch) == 13);
    CHECK(test::type_byte(message_type::snap) == 22);
    CHECK(test::type_byte(message_type::up_to_date) == 25);
    CHECK(test::type_byte(message_type::snap_ack) == 26);
    CHECK(test::type_byte(message_type::sync_ack) == 27);
    CHECK(test::type_byte(message_type::proposal) == 30);
    CHECK(test::type_byte(message_type::commit) == 31);
    CHECK(test::type_byte(message_type::sync_answer) == 35);
    CHECK(test::type_byte(message_type::forwarded_reply) == 36);
}
