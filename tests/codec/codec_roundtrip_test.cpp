// Round trips: every message type, random field values, random frame contexts, random byte
// field sizes (0 included). decode(encode(m)) == m, byte fields are views into the frame,
// and re-encoding gives the same bytes.
#include <cstddef>
#include <cstdint>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "zab/core/codec.hpp"

namespace {

using namespace zab;
using zab::test::status;

/// Checks one message through encode, encode_into and decode.
void check_round_trip(const frame_context& context, const wire::message& m) {
    const shared_bytes frame = encode(context, m);
    REQUIRE(frame.size() == encoded_size(m));

    // encode_into writes the same bytes into a caller's buffer.
    std::vector<std::byte> buffer(encoded_size(m));
    encode_into(buffer, context, m);
    CHECK(test::to_vector(frame.view()) == buffer);

    const auto header = decode_header(frame.view());
    REQUIRE(status(header) == "ok");
    CHECK(header.value().type == type_of(m));
    CHECK(header.value().group_id == context.group_id);
    CHECK(header.value().config_version == context.config_version);
    CHECK(header.value().payload_length == frame.size() - frame_header_size);
    CHECK(header.value().frame_size() == frame.size());
    CHECK(header.value().payload_crc32c == crc32c(frame.view().subspan(frame_header_size)));

    const auto decoded = decode(frame.view());
    REQUIRE(status(decoded) == "ok");
    CHECK(decoded.value().header == header.value());
    CHECK(decoded.value().msg == m);

    // Byte fields are views into the frame, not copies.
    const std::byte* const begin = frame.data();
    const std::byte* const end = frame.data() + frame.size();
    const auto original_fields = test::byte_fields(m);
    const auto decoded_fields = test::byte_fields(decoded.value().msg);
    REQUIRE(decoded_fields.size() == original_fields.size());
    for (std::size_t i = 0; i < decoded_fields.size(); ++i) {
        const byte_view field = decoded_fields[i];
        CHECK(field.size() == original_fields[i].size());
        CHECK(field.data() >= begin + frame_header_size);
        CHECK(field.data() + field.size() <= end);
    }

    // decode∘encode is the identity: one encoding per message.
    CHECK(encode(context, decoded.value().msg) == frame);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("codec: every message type round-trips with random fields", "[codec]",
                        zab::wire::message) {
    test::message_factory factory{0x5eed0000u + test::type_byte(wire::message_type_v<TestType>)};
    for (int i = 0; i < 300; ++i) {
        const wire::message m = factory.make<TestType>();
        const frame_context context = factory.context();
        INFO("iteration " << i << ", group " << context.group_id << ", config "
                          << context.config_version);
        check_round_trip(context, m);
    }
}

TEST_CASE("codec: a random stream of messages of all types round-trips", "[codec]") {
    test::message_factory factory{42};
    std::vector<int> seen(256, 0);
    for (int i = 0; i < 3000; ++i) {
        const wire::message m = factory.any();
        ++seen[test::type_byte(type_of(m))];
        INFO("iteration " << i << ", type " << to_string(type_of(m)));
        check_round_trip(factory.context(), m);
    }
    // The generator does reach every type (a generator bug would otherwise hide them).
    for (const wire::message_type type : test::all_message_types()) {
        INFO(to_string(type));
        CHECK(seen[test::type_byte(type)] > 0);
    }
}

TEST_CASE("codec: edge values of every field survive", "[codec]") {
    const std::vector<std::byte> empty;
    const std::vector<std::byte> one{std::byte{0xab}};
    const frame_context max_context{~0ull, ~0ull};
    const std::vector<wire::message> messages{
        wire::notification{peer_state::observing, ~0ull, zxid::from_value(~0ull), ~0ull, ~0u},
        wire::notification{peer_state::looking, 0, zxid{}, 0, 0},
        wire::ack_epoch{zxid{}, std::nullopt},
        wire::ack_epoch{zxid::from_value(~0ull), 0u},
        wire::ack_epoch{zxid{7, 1}, ~0u},
        wire::proposal{zxid{1, 1}, empty},
        wire::proposal{zxid{1, 1}, one},
        wire::forwarded_request{~0ull, wire::request_kind::sync, empty},
        wire::forwarded_request{0, wire::request_kind::write, one},
        wire::forwarded_request{1, wire::request_kind::lease_sync, empty},
        wire::snap{zxid{}, 0, 0, empty},
        wire::snap{zxid{3, 9}, ~0ull, ~0ull - 1, one},
        wire::snap_ack{~0ull},
        wire::snap_ack{0},
        wire::sync_ack{zxid{~0u, ~0u}},
        wire::sync_ack{zxid{}},
        wire::inform{zxid{2, 0xfffffffe}, one},
        wire::up_to_date{},
        wire::ping{zxid{}, ~0ull},
        zab::wire::sync_answer{~0ull},
        wire::forwarded_reply{~0ull, wire::reply_outcome::zxid_exhausted, zxid{}},
        wire::forwarded_reply{0, wire::reply_outcome::accepted, zxid{~0u, ~0u}},
        wire::forwarded_reply{1, wire::reply_outcome::transferring, zxid{}},
        wire::forwarded_reply{2, wire::reply_outcome::new_config_no_quorum, zxid{}},
        wire::handover{~0ull, zxid{~0u, ~0u}, ~0u, ~0ull},
        wire::handover{0, zxid{}, 0, 0},
    };
    for (const auto& m : messages) {
        INFO(to_string(type_of(m)));
        check_round_trip({}, m);
        check_round_trip(max_context, m);
    }
}

TEST_CASE("codec: UPTODATE is a header with an empty payload", "[codec]") {
    const shared_bytes frame = encode({}, wire::up_to_date{});
    CHECK(frame.size() == frame_header_size);
    const auto header = decode_header(frame.view());
    REQUIRE(status(header) == "ok");
    CHECK(header.value().payload_length == 0);
    CHECK(header.value().payload_crc32c == 0);  // the CRC32C of nothing
}

TEST_CASE("codec: decode_header reads only the first 32 bytes", "[codec]") {
    const shared_bytes frame = encode({5, 6}, wire::proposal{zxid{1, 2}, as_bytes("payload")});
    for (std::size_t size = frame_header_size; size <= frame.size(); ++size) {
        const auto header = decode_header(frame.view().first(size));
        REQUIRE(status(header) == "ok");
        CHECK(header.value().type == wire::message_type::proposal);
        CHECK(header.value().payload_length == frame.size() - frame_header_size);
    }
}
