// Golden bytes: the wire format written out by hand. Any change to the encoding of any
// message fails here; if the change is intended, bump `frame_version` and update the bytes.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
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
        "05"                         // version
        "1f"                         // type 31 = COMMIT
        "00 00"                      // flags
        "01 02 03 04 05 06 07 08"    // group_id 0x0807060504030201
        "11 12 13 14 15 16 17 18"    // config_version 0x1817161514131211
        "08 00 00 00"                // payload_length 8
        "c5 2c 16 d0"                // payload_crc32c 0xd0162cc5
        "07 00 00 00 05 00 00 00");  // zxid <5, 7>
    REQUIRE(expected.size() == 40);

    const frame_context context{0x0807060504030201ull, 0x1817161514131211ull};
    const shared_bytes frame = encode(context, wire::commit{zxid{5, 7}});
    CHECK(test::to_vector(frame.view()) == expected);

    const auto decoded = decode(expected);
    REQUIRE(status(decoded) == "ok");
    CHECK(decoded.value().msg == wire::message{wire::commit{zxid{5, 7}}});
    CHECK(decoded.value().header.group_id == context.group_id);
    CHECK(decoded.value().header.config_version == context.config_version);
    CHECK(decoded.value().header.payload_crc32c == 0xd0162cc5u);
}

TEST_CASE("golden: the payload of every message type", "[codec][golden]") {
    struct golden {
        wire::message msg;
        wire::message_type type;
        std::string payload_hex;
    };
    const std::vector<golden> cases{
        {wire::notification{peer_state::leading, 0x0102030405060708ull, zxid{3, 4}, 9, 3},
         wire::message_type::notification,
         "02 0807060504030201 0400000003000000 0900000000000000 03000000"},
        // Accepted epoch, protocol, then the agreed options: read_lease_ticks, drift, fingerprint.
        {wire::follower_info{2, 0x10000, {50, 100'000, 0x0102030405060708ull}},
         wire::message_type::follower_info,
         "02000000 00000100 32000000 a0860100 0807060504030201"},
        {wire::observer_info{7, 0x10000, {}}, wire::message_type::observer_info,
         "07000000 00000100 00000000 00000000 0000000000000000"},
        {wire::leader_info{3, 0x10000, {10, 7, 0xffull}}, wire::message_type::leader_info,
         "03000000 00000100 0a000000 07000000 ff00000000000000"},
        {wire::ack_epoch{zxid{2, 5}, 2u}, wire::message_type::ack_epoch, "0500000002000000 01 02000000"},
        {wire::ack_epoch{zxid{2, 5}, std::nullopt}, wire::message_type::ack_epoch, "0500000002000000 00"},
        {wire::diff{zxid{1, 2}}, wire::message_type::diff, "0200000001000000"},
        {zab::wire::trunc{zxid{1, 1}}, wire::message_type::trunc, "0100000001000000"},
        {wire::snap{zxid{1, 3}, 5, 3, as_bytes("ab")}, wire::message_type::snap,
         "0300000001000000 0500000000000000 0300000000000000 02000000 6162"},
        {wire::snap_ack{0x0102}, wire::message_type::snap_ack, "0201000000000000"},
        {wire::sync_ack{zxid{2, 0x0304}}, wire::message_type::sync_ack, "0403000002000000"},
        {wire::new_leader{zxid{2, 0}}, wire::message_type::new_leader, "0000000002000000"},
        {wire::ack{zxid{2, 1}}, wire::message_type::ack, "0100000002000000"},
        {wire::up_to_date{}, wire::message_type::up_to_date, ""},
        {wire::proposal{zxid{2, 1}, as_bytes("x")}, wire::message_type::proposal,
         "0100000002000000 01000000 78"},
        {wire::commit{zxid{2, 1}}, wire::message_type::commit, "0100000002000000"},
        {wire::inform{zxid{2, 2}, {}}, wire::message_type::inform, "0200000002000000 00000000"},
        {wire::forwarded_request{0x1122, wire::request_kind::sync, as_bytes("hi")}, wire::message_type::forwarded_request,
         "2211000000000000 01 02000000 6869"},
        {wire::ping{zxid{2, 3}, 5}, wire::message_type::ping, "0300000002000000 0500000000000000"},
        {zab::wire::sync_answer{6}, wire::message_type::sync_answer, "0600000000000000"},
        {wire::forwarded_reply{7, wire::reply_outcome::accepted, zxid{2, 4}}, wire::message_type::forwarded_reply,
         "0700000000000000 00 0400000002000000"},
        {wire::handover{3, zxid{2, 5}, 2, 9}, wire::message_type::handover,
         "0300000000000000 0500000002000000 02000000 0900000000000000"},
        // <2, 7> and <2, 8>: "ab", then empty. The entries' field is 4 + 2 + 4 bytes.
        {wire::proposal_batch{zxid{2, 7}, 2, as_bytes(std::string_view{"\x02\0\0\0ab\0\0\0\0", 10})},
         wire::message_type::proposal_batch,
         "0700000002000000 02000000 0a000000 02000000 6162 00000000"},
        // Requests 9 and 10: "ab", then empty (frame version 6).
        {wire::forwarded_batch{9, 2, as_bytes(std::string_view{"\x02\0\0\0ab\0\0\0\0", 10})},
         wire::message_type::forwarded_batch,
         "0900000000000000 02000000 0a000000 02000000 6162 00000000"},
        {wire::reply_batch{9, 2, wire::reply_outcome::accepted, zxid{2, 9}}, wire::message_type::reply_batch,
         "0900000000000000 02000000 00 0900000002000000"},
    };

    // Every type has a golden payload (a new message must add one here).
    std::set<wire::message_type> covered;
    for (const auto& c : cases) covered.insert(c.type);
    CHECK(covered.size() == std::variant_size_v<wire::message>);

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
    CHECK(test::type_byte(wire::message_type::notification) == 1);
    CHECK(test::type_byte(wire::message_type::ack_epoch) == 13);
    CHECK(test::type_byte(wire::message_type::snap) == 22);
    CHECK(test::type_byte(wire::message_type::up_to_date) == 25);
    CHECK(test::type_byte(wire::message_type::snap_ack) == 26);
    CHECK(test::type_byte(wire::message_type::sync_ack) == 27);
    CHECK(test::type_byte(wire::message_type::proposal) == 30);
    CHECK(test::type_byte(wire::message_type::commit) == 31);
    CHECK(test::type_byte(wire::message_type::sync_answer) == 35);
    CHECK(test::type_byte(wire::message_type::forwarded_reply) == 36);
    CHECK(test::type_byte(wire::message_type::handover) == 37);
    CHECK(test::type_byte(wire::message_type::proposal_batch) == 38);
    CHECK(test::type_byte(wire::message_type::forwarded_batch) == 39);
    CHECK(test::type_byte(wire::message_type::reply_batch) == 40);
}

TEST_CASE("golden: each frame carries the version its type appeared in", "[codec][golden][versions]") {
    // docs/protocol.md §0.2: the types of frame version 5 are written at 5, byte for byte as
    // the release before (which reads 5 only); REQUESTS and REPLIES at 6.
    test::message_factory factory{7};
    for (const auto type : test::all_message_types()) {
        INFO(to_string(type));
        const bool added_in_6 =
            type == wire::message_type::forwarded_batch || type == wire::message_type::reply_batch;
        CHECK(frame_version_of(type) == (added_in_6 ? 6 : 5));
    }
    for (int round = 0; round < 200; ++round) {
        const wire::message m = factory.any();
        const shared_bytes frame = encode({}, m);
        INFO(to_string(type_of(m)));
        CHECK(std::to_integer<int>(frame.view()[4]) == frame_version_of(type_of(m)));
        const auto decoded = decode(frame.view());
        REQUIRE(status(decoded) == "ok");
        CHECK(decoded.value().header.version == frame_version_of(type_of(m)));
    }
}
