// Every decoding error class, each with its own test, and random garbage. Frames that must
// fail are built by hand (test::raw_frame) so that their CRC can be right while their
// payload is wrong.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test_support.hpp"
#include "zab/core/codec.hpp"

namespace {

using namespace zab;
using zab::test::bytes_of;
using test::raw_frame;
using test::status;
using test::type_byte;

/// A few valid frames of every type, with byte fields of several sizes.
template <typename M>
shared_bytes sample_frame(test::message_factory& factory) {
    // Two statements: the order of function arguments is unspecified (g++ and clang differ),
    // and the same seed must give the same frames with every compiler.
    const wire::message m = factory.make<M>();
    return encode(factory.context(), m);
}

template <std::size_t... I>
void add_sample_frames(test::message_factory& factory, std::vector<shared_bytes>& frames,
                       std::index_sequence<I...>) {
    (frames.push_back(sample_frame<std::variant_alternative_t<I, wire::message>>(factory)), ...);
}

std::vector<shared_bytes> sample_frames() {
    test::message_factory factory{7};
    std::vector<shared_bytes> frames;
    for (int round = 0; round < 3; ++round) {
        add_sample_frames(factory, frames,
                          std::make_index_sequence<std::variant_size_v<wire::message>>{});
    }
    return frames;
}

/// Frames small enough to try at every byte position.
std::vector<shared_bytes> small_sample_frames() {
    std::vector<shared_bytes> small;
    for (auto& frame : sample_frames()) {
        if (frame.size() <= 200) small.push_back(frame);
    }
    return small;
}

std::vector<std::byte> concat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

/// A well-formed u64 zxid field (little-endian).
const std::vector<std::byte> zxid_bytes = bytes_of({1, 0, 0, 0, 2, 0, 0, 0});

}  // namespace

TEST_CASE("errors: truncated at every prefix length of a valid frame", "[codec][errors]") {
    for (const auto& frame : small_sample_frames()) {
        INFO(to_string(decode_header(frame.view()).value().type)
             << ", " << frame.size() << " bytes");
        for (std::size_t size = 0; size < frame.size(); ++size) {
            INFO("prefix of " << size << " bytes");
            CHECK(status(decode(frame.view().first(size))) == status(errc::truncated));
            if (size < frame_header_size) {
                CHECK(status(decode_header(frame.view().first(size))) == status(errc::truncated));
            }
        }
        CHECK(status(decode(frame.view())) == "ok");
    }
}

TEST_CASE("errors: oversized payload length is refused from the header alone", "[codec][errors]") {
    const std::vector<std::byte> txn(100, std::byte{1});
    const shared_bytes frame = encode({}, wire::proposal{zxid{1, 1}, txn});
    const std::uint32_t payload = static_cast<std::uint32_t>(frame.size() - frame_header_size);

    CHECK(status(decode(frame.view(), codec_limits{payload - 1})) == status(errc::oversized));
    CHECK(status(decode_header(frame.view(), codec_limits{16})) == status(errc::oversized));
    CHECK(status(decode(frame.view(), codec_limits{payload})) == "ok");  // the limit is inclusive

    // A header announcing 4 GiB with nothing behind it: refused before anyone allocates.
    const auto huge = raw_frame(type_byte(wire::message_type::snap), {},
                                {.payload_length = 0xffffffffu, .payload_crc32c = 0});
    CHECK(status(decode_header(huge)) == status(errc::oversized));
    CHECK(status(decode(huge)) == status(errc::oversized));
}

TEST_CASE("errors: bad magic", "[codec][errors]") {
    const shared_bytes frame = encode({}, wire::commit{zxid{1, 1}});
    for (std::size_t byte = 0; byte < 4; ++byte) {
        for (int bit = 0; bit < 8; ++bit) {
            auto bad = test::to_vector(frame.view());
            bad[byte] ^= static_cast<std::byte>(1 << bit);
            INFO("byte " << byte << ", bit " << bit);
            CHECK(status(decode(bad)) == status(errc::bad_magic));
            CHECK(status(decode_header(bad)) == status(errc::bad_magic));
        }
    }
    // Someone speaking another protocol to our port.
    const auto http = as_bytes("GET / HTTP/1.1\r\nHost: zab\r\n\r\n....");
    CHECK(status(decode(http)) == status(errc::bad_magic));
}

TEST_CASE("errors: unsupported version", "[codec][errors]") {
    const auto payload = zxid_bytes;
    for (int version = 0; version < 256; ++version) {
        const auto frame = raw_frame(type_byte(wire::message_type::commit), payload,
                                     {.version = static_cast<std::uint8_t>(version)});
        INFO("version " << version);
        if (version == 5) {
            CHECK(status(decode(frame)) == "ok");
        } else if (version == 6) {
            // COMMIT is a type of version 5: one encoding per message (docs/protocol.md §0.2).
            CHECK(status(decode(frame)) == status(errc::malformed));
        } else {
            CHECK(status(decode(frame)) == status(errc::unsupported_version));
        }
        // A replica that reads as the previous release did (frame version 5 only).
        const codec_limits previous{.newest_frame_version = 5};
        CHECK(status(decode(frame, previous)) ==
              (version == 5 ? "ok" : status(errc::unsupported_version)));
    }
}

TEST_CASE("errors: REQUESTS and REPLIES in a frame of version 5 are unknown types",
          "[codec][errors][versions]") {
    // docs/protocol.md §0.2: they appeared in version 6; version 5 has no such types.
    const std::vector<std::byte> requests =
        test::payload_of(encode({}, wire::forwarded_batch{1, 1, test::bytes_of({0, 0, 0, 0})}));
    const std::vector<std::byte> replies =
        test::payload_of(encode({}, wire::reply_batch{1, 1, wire::reply_outcome::backpressure, zxid{}}));
    for (const auto& [type, payload] : {std::pair{wire::message_type::forwarded_batch, requests},
                                        std::pair{wire::message_type::reply_batch, replies}}) {
        INFO(to_string(type));
        CHECK(status(decode(raw_frame(type_byte(type), payload, {.version = 6}))) == "ok");
        CHECK(status(decode(raw_frame(type_byte(type), payload, {.version = 5}))) ==
              status(errc::unknown_message_type));
        CHECK(status(decode(raw_frame(type_byte(type), payload, {.version = 6}),
                            codec_limits{.newest_frame_version = 5})) ==
              status(errc::unsupported_version));
    }
}

TEST_CASE("errors: a REQUESTS frame that is empty, wraps its request ids or miscounts its "
          "entries is malformed", "[codec][errors][versions]") {
    const std::string malformed = status(errc::malformed);
    auto decode_requests = [](std::uint64_t first, std::uint32_t count, std::vector<std::byte> entries) {
        std::vector<std::byte> payload;
        for (int i = 0; i < 8; ++i) payload.push_back(static_cast<std::byte>(first >> (8 * i)));
        for (int i = 0; i < 4; ++i) payload.push_back(static_cast<std::byte>(count >> (8 * i)));
        const auto size = static_cast<std::uint32_t>(entries.size());
        for (int i = 0; i < 4; ++i) payload.push_back(static_cast<std::byte>(size >> (8 * i)));
        payload.insert(payload.end(), entries.begin(), entries.end());
        return status(decode(raw_frame(type_byte(wire::message_type::forwarded_batch), payload)));
    };
    const std::vector<std::byte> two = test::bytes_of({1, 0, 0, 0, 7, 0, 0, 0, 0});
    CHECK(decode_requests(5, 2, two) == "ok");
    CHECK(decode_requests(UINT64_MAX - 1, 2, two) == "ok");
    CHECK(decode_requests(UINT64_MAX, 2, two) == malformed);  // ids past 2^64 - 1
    CHECK(decode_requests(5, 3, two) == malformed);
    CHECK(decode_requests(5, 1, two) == malformed);
    CHECK(decode_requests(5, 0, {}) == malformed);
}

TEST_CASE("errors: a REPLIES frame that is empty, refuses with a zxid or accepts a run "
          "outside one epoch is malformed", "[codec][errors][versions]") {
    const std::string malformed = status(errc::malformed);
    auto decode_replies = [](const wire::reply_batch& m) {
        // Encoded field by field (the encoder asserts nothing about a reply's contents).
        return status(decode(raw_frame(type_byte(wire::message_type::reply_batch),
                                       test::payload_of(encode({}, m)))));
    };
    using wire::reply_outcome;
    CHECK(decode_replies({1, 2, reply_outcome::accepted, zxid{3, 1}}) == "ok");
    CHECK(decode_replies({1, 2, reply_outcome::accepted, zxid{3, zxid::counter_max - 1}}) == "ok");
    CHECK(decode_replies({1, 2, reply_outcome::accepted, zxid{3, zxid::counter_max}}) == malformed);
    CHECK(decode_replies({1, 2, reply_outcome::accepted, zxid{3, 0}}) == malformed);
    CHECK(decode_replies({1, 2, reply_outcome::backpressure, zxid{}}) == "ok");
    CHECK(decode_replies({1, 2, reply_outcome::backpressure, zxid{3, 1}}) == malformed);
    CHECK(decode_replies({1, 0, reply_outcome::backpressure, zxid{}}) == malformed);
    CHECK(decode_replies({UINT64_MAX, 2, reply_outcome::not_leader, zxid{}}) == malformed);
}

TEST_CASE("codec: encode_forwarded_batch writes what encode writes", "[codec][versions]") {
    test::message_factory factory{39};
    for (int round = 0; round < 50; ++round) {
        const auto count = static_cast<std::uint32_t>(1 + factory.rng().below(20));
        std::vector<byte_view> txns;
        for (std::uint32_t i = 0; i < count; ++i) txns.push_back(factory.bytes());
        const std::uint64_t first = factory.rng().u64() % (UINT64_MAX - count);
        const frame_context context = factory.context();
        const shared_bytes frame = encode_forwarded_batch(context, first, txns);
        const auto decoded = decode(frame.view());
        REQUIRE(status(decoded) == "ok");
        const auto& batch = std::get<wire::forwarded_batch>(decoded.value().msg);
        CHECK(batch.first_request_id == first);
        CHECK(batch.count == count);
        CHECK(test::to_vector(encode(context, batch).view()) == test::to_vector(frame.view()));
        std::uint32_t seen = 0;
        for_each_forwarded_txn(batch, [&](std::uint64_t request, byte_view txn) {
            CHECK(request == first + seen);
            CHECK(test::to_vector(txn) == test::to_vector(txns[seen]));
            ++seen;
            return true;
        });
        CHECK(seen == count);
    }
}

TEST_CASE("errors: unknown message type, for every type byte", "[codec][errors]") {
    std::set<int> known;
    for (const wire::message_type t : test::all_message_types()) known.insert(type_byte(t));
    REQUIRE(known.size() == std::variant_size_v<wire::message>);  // wire types are distinct

    for (int type = 0; type < 256; ++type) {
        const auto frame = raw_frame(static_cast<std::uint8_t>(type), {});
        INFO("type " << type);
        const auto header = decode_header(frame);
        if (known.count(type) != 0) {
            REQUIRE(status(header) == "ok");
            CHECK(type_byte(header.value().type) == type);
        } else {
            CHECK(status(header) == status(errc::unknown_message_type));
            CHECK(status(decode(frame)) == status(errc::unknown_message_type));
        }
    }
}

TEST_CASE("errors: bad checksum after flipping any payload or CRC byte", "[codec][errors]") {
    for (const auto& frame : small_sample_frames()) {
        INFO(to_string(decode_header(frame.view()).value().type));
        // Every payload byte, and the four CRC bytes of the header.
        for (std::size_t at = 28; at < frame.size(); ++at) {
            for (int bit : {0, 7}) {
                auto bad = test::to_vector(frame.view());
                bad[at] ^= static_cast<std::byte>(1 << bit);
                INFO("byte " << at << ", bit " << bit);
                CHECK(status(decode(bad)) == status(errc::bad_checksum));
            }
        }
    }
}

TEST_CASE("errors: nonzero flags are malformed", "[codec][errors]") {
    for (int bit = 0; bit < 16; ++bit) {
        const auto frame = raw_frame(type_byte(wire::message_type::commit), zxid_bytes,
                                     {.flags = static_cast<std::uint16_t>(1u << bit)});
        INFO("flag bit " << bit);
        CHECK(status(decode_header(frame)) == status(errc::malformed));
        CHECK(status(decode(frame)) == status(errc::malformed));
    }
}

TEST_CASE("errors: a byte after the frame is malformed (exactly one frame)", "[codec][errors]") {
    for (const auto& frame : small_sample_frames()) {
        auto longer = test::to_vector(frame.view());
        longer.push_back(std::byte{0});
        INFO(to_string(decode_header(frame.view()).value().type));
        CHECK(status(decode(longer)) == status(errc::malformed));
        // The header alone is still fine: a stream transport reads frame_size() and stops.
        CHECK(status(decode_header(longer)) == "ok");
    }
}

TEST_CASE("errors: trailing bytes inside the payload, with a correct CRC", "[codec][errors]") {
    for (const auto& frame : small_sample_frames()) {
        const auto type = decode_header(frame.view()).value().type;
        for (std::size_t extra = 1; extra <= 5; ++extra) {
            auto payload = test::payload_of(frame);
            payload.resize(payload.size() + extra, std::byte{0});
            INFO(to_string(type) << ", " << extra << " trailing bytes");
            CHECK(status(decode(raw_frame(type_byte(type), payload))) == status(errc::malformed));
        }
    }
}

TEST_CASE("errors: every short payload, with a correct CRC, is malformed", "[codec][errors]") {
    for (const auto& frame : small_sample_frames()) {
        const auto type = decode_header(frame.view()).value().type;
        const auto payload = test::payload_of(frame);
        for (std::size_t size = 0; size < payload.size(); ++size) {
            INFO(to_string(type) << ", payload cut to " << size << " bytes");
            const auto cut = raw_frame(type_byte(type), byte_view{payload}.first(size));
            CHECK(status(decode(cut)) == status(errc::malformed));
        }
    }
}

TEST_CASE("errors: a discovery message in its frame-version-4 layout (no agreed options) is "
          "malformed, and a version-4 header is refused first", "[codec][errors]") {
    // Version 4's FOLLOWERINFO, OBSERVERINFO and LEADERINFO were an epoch and a protocol
    // version: 8 bytes. Version 5 reads 24, so the old payload is short, whatever the header.
    const std::vector<std::byte> old_payload = test::bytes_of({2, 0, 0, 0, 0, 0, 1, 0});
    for (const auto type : {wire::message_type::follower_info, wire::message_type::observer_info,
                            wire::message_type::leader_info}) {
        INFO(to_string(type));
        CHECK(status(decode(raw_frame(type_byte(type), old_payload))) == status(errc::malformed));
        CHECK(status(decode(raw_frame(type_byte(type), old_payload, {.version = 4}))) ==
              status(errc::unsupported_version));
        // And agreed options with a byte too many, or cut inside the fingerprint.
        auto longer = test::payload_of(encode({}, wire::follower_info{}));
        longer.push_back(std::byte{0});
        CHECK(status(decode(raw_frame(type_byte(type), longer))) == status(errc::malformed));
        longer.resize(longer.size() - 5);
        CHECK(status(decode(raw_frame(type_byte(type), longer))) == status(errc::malformed));
    }
}

TEST_CASE("errors: enum values out of range are malformed", "[codec][errors]") {
    SECTION("notification state above OBSERVING") {
        for (int state = 0; state < 256; ++state) {
            const auto payload =
                concat(concat(concat(bytes_of({state}), bytes_of({1, 0, 0, 0, 0, 0, 0, 0})),
                              concat(zxid_bytes, bytes_of({3, 0, 0, 0, 0, 0, 0, 0}))),
                       bytes_of({1, 0, 0, 0}));
            const auto decoded = decode(raw_frame(type_byte(wire::message_type::notification), payload));
            INFO("state " << state);
            if (state <= 3) {
                REQUIRE(status(decoded) == "ok");
                CHECK(std::get<wire::notification>(decoded.value().msg).state ==
                      static_cast<peer_state>(state));
            } else {
                CHECK(status(decoded) == status(errc::malformed));
            }
        }
    }
    SECTION("request kind above LEASE_SYNC") {
        for (int kind = 0; kind < 256; ++kind) {
            const auto payload =
                concat(concat(bytes_of({9, 0, 0, 0, 0, 0, 0, 0}), bytes_of({kind})),
                       bytes_of({0, 0, 0, 0}));
            const auto frame = raw_frame(type_byte(wire::message_type::forwarded_request), payload);
            const auto decoded = decode(frame);  // its txn is a view into `frame`
            INFO("kind " << kind);
            if (kind <= 2) {
                REQUIRE(status(decoded) == "ok");
                CHECK(std::get<wire::forwarded_request>(decoded.value().msg).kind ==
                      static_cast<wire::request_kind>(kind));
            } else {
                CHECK(status(decoded) == status(errc::malformed));
            }
        }
    }
    SECTION("reply outcome above NEW_CONFIG_NO_QUORUM") {
        for (int outcome = 0; outcome < 256; ++outcome) {
            const auto payload = concat(
                concat(bytes_of({9, 0, 0, 0, 0, 0, 0, 0}), bytes_of({outcome})), zxid_bytes);
            const auto decoded = decode(raw_frame(type_byte(wire::message_type::forwarded_reply), payload));
            INFO("outcome " << outcome);
            if (outcome <= 9) {
                REQUIRE(status(decoded) == "ok");
                CHECK(std::get<wire::forwarded_reply>(decoded.value().msg).outcome ==
                      static_cast<wire::reply_outcome>(outcome));
            } else {
                CHECK(status(decoded) == status(errc::malformed));
            }
        }
    }
}

TEST_CASE("errors: an optional's presence flag other than 0 or 1 is malformed", "[codec][errors]") {
    const auto ack_epoch_type = type_byte(wire::message_type::ack_epoch);
    for (int flag = 0; flag < 256; ++flag) {
        INFO("flag " << flag);
        const auto absent = decode(raw_frame(ack_epoch_type, concat(zxid_bytes, bytes_of({flag}))));
        const auto present =
            decode(raw_frame(ack_epoch_type, concat(zxid_bytes, bytes_of({flag, 4, 0, 0, 0}))));
        if (flag == 0) {
            REQUIRE(status(absent) == "ok");
            CHECK(std::get<wire::ack_epoch>(absent.value().msg).current_epoch == std::nullopt);
            CHECK(status(present) == status(errc::malformed));  // 4 bytes after an absent value
        } else if (flag == 1) {
            CHECK(status(absent) == status(errc::malformed));  // the epoch is missing
            REQUIRE(status(present) == "ok");
            CHECK(std::get<wire::ack_epoch>(present.value().msg).current_epoch == std::optional{4u});
        } else {
            CHECK(status(absent) == status(errc::malformed));
            CHECK(status(present) == status(errc::malformed));
        }
    }
}

TEST_CASE("errors: a byte field's length running past the payload is malformed",
          "[codec][errors]") {
    for (const wire::message_type type :
         {wire::message_type::proposal, wire::message_type::inform, wire::message_type::snap}) {
        INFO(to_string(type));
        const auto body = bytes_of({'a', 'b', 'c'});
        for (std::uint32_t length : {3u, 4u, 5u, 1000u, 0x7fffffffu, 0xffffffffu}) {
            std::vector<std::byte> payload = zxid_bytes;
            if (type == wire::message_type::snap)  // total size and offset come before the chunk
                payload.insert(payload.end(), 16, std::byte{0});
            for (int i = 0; i < 4; ++i)
                payload.push_back(static_cast<std::byte>(length >> (8 * i)));
            payload.insert(payload.end(), body.begin(), body.end());
            INFO("length " << length);
            const auto decoded = decode(raw_frame(type_byte(type), payload));
            if (length == 3) {
                CHECK(status(decoded) == "ok");
            } else {
                CHECK(status(decoded) == status(errc::malformed));
            }
        }
    }
}

TEST_CASE("errors: checks run in the documented order", "[codec][errors]") {
    // Several faults at once: the first in decode_header's list wins, and nothing after the
    // header is inspected before the header is known good.
    const auto bad_everything = raw_frame(
        200, bytes_of({1, 2, 3}),
        {.magic = 0, .version = 9, .flags = 1, .payload_length = 0xffffffffu, .payload_crc32c = 0});
    CHECK(status(decode(bad_everything)) == status(errc::bad_magic));
    auto frame = raw_frame(200, bytes_of({1, 2, 3}),
                           {.version = 9, .flags = 1, .payload_length = 0xffffffffu});
    CHECK(status(decode(frame)) == status(errc::unsupported_version));
    frame = raw_frame(200, bytes_of({1, 2, 3}), {.flags = 1, .payload_length = 0xffffffffu});
    CHECK(status(decode(frame)) == status(errc::unknown_message_type));
    frame = raw_frame(type_byte(wire::message_type::commit), bytes_of({1, 2, 3}),
                      {.flags = 1, .payload_length = 0xffffffffu});
    CHECK(status(decode(frame)) == status(errc::malformed));
    frame = raw_frame(type_byte(wire::message_type::commit), bytes_of({1, 2, 3}),
                      {.payload_length = 0xffffffffu});
    CHECK(status(decode(frame)) == status(errc::oversized));
    frame = raw_frame(type_byte(wire::message_type::commit), bytes_of({1, 2, 3}), {.payload_crc32c = 0});
    CHECK(status(decode(frame)) == status(errc::bad_checksum));
    frame = raw_frame(type_byte(wire::message_type::commit), bytes_of({1, 2, 3}));
    CHECK(status(decode(frame)) == status(errc::malformed));
}

namespace {

/// The oracle for arbitrary input: an error of the codec's own, or a message whose encoding
/// is exactly the input.
void check_garbage(byte_view input) {
    const auto decoded = decode(input);
    if (!decoded) {
        const auto code = decoded.error();
        CHECK(code.category() == zab::error_category());
        CHECK(code.value() >= static_cast<int>(errc::truncated));
        CHECK(code.value() <= static_cast<int>(errc::malformed));
        return;
    }
    const auto& header = decoded.value().header;
    const shared_bytes again =
        encode({header.group_id, header.config_version}, decoded.value().msg);
    CHECK(test::to_vector(again.view()) == test::to_vector(input));
}

}  // namespace

TEST_CASE("errors: random garbage never crashes", "[codec][errors]") {
    test::splitmix64 rng{0x9a4ba9e};
    std::vector<std::byte> input;
    for (int i = 0; i < 20000; ++i) {
        input.resize(rng.below(i % 10 == 0 ? 400 : 48));
        for (auto& b : input) b = static_cast<std::byte>(rng.next());
        INFO("case " << i);
        check_garbage(input);
    }
}

TEST_CASE("errors: random payloads behind a valid header never crash", "[codec][errors]") {
    // Pure garbage almost never gets past the magic; this reaches the payload decoders.
    test::splitmix64 rng{0x9a4ba9f};
    const auto types = test::all_message_types();
    int decoded_ok = 0;
    for (int i = 0; i < 20000; ++i) {
        std::vector<std::byte> payload(rng.below(40));
        for (auto& b : payload) {
            // Small bytes make plausible lengths, flags and enums.
            b = static_cast<std::byte>(rng.one_in(2) ? rng.below(4) : rng.next());
        }
        const auto type = types[rng.below(types.size())];
        const auto frame = raw_frame(type_byte(type), payload, {.group_id = rng.next()});
        INFO("case " << i << ", " << to_string(type));
        check_garbage(frame);
        decoded_ok += decode(frame) ? 1 : 0;
    }
    CHECK(decoded_ok > 100);  // the oracle's success branch was exercised
}

TEST_CASE("errors: random mutations of valid frames never crash", "[codec][errors]") {
    test::splitmix64 rng{0x3a7a7e};
    const auto frames = sample_frames();
    for (int i = 0; i < 20000; ++i) {
        auto input = test::to_vector(frames[rng.below(frames.size())].view());
        const auto mutations = 1 + rng.below(4);
        for (std::uint64_t m = 0; m < mutations && !input.empty(); ++m) {
            switch (rng.below(3)) {
                case 0: {
                    const std::size_t at = rng.below(input.size());  // drawn in a fixed order
                    input[at] = static_cast<std::byte>(rng.next());
                    break;
                }
                case 1: input.resize(rng.below(input.size() + 1)); break;
                default: input.push_back(static_cast<std::byte>(rng.next())); break;
            }
        }
        INFO("case " << i);
        check_garbage(input);
    }
}

namespace {

/// A PROPOSALS payload: first, count, then the entries' byte field holding `entries` as
/// given (each a u32 length and its bytes, or anything else a test wants there).
std::vector<std::byte> batch_payload(zxid first, std::uint32_t count, const std::vector<std::byte>& entries) {
    std::vector<std::byte> out;
    auto put = [&out](std::uint64_t value, int size) {
        for (int i = 0; i < size; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
    };
    put(first.value(), 8);
    put(count, 4);
    put(entries.size(), 4);
    out.insert(out.end(), entries.begin(), entries.end());
    return out;
}

/// Entries of the given sizes, each filled with its index.
std::vector<std::byte> batch_entries(std::initializer_list<std::uint32_t> sizes) {
    std::vector<std::byte> out;
    std::uint8_t index = 0;
    for (const std::uint32_t size : sizes) {
        for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(size >> (8 * i)));
        out.insert(out.end(), size, std::byte{index++});
    }
    return out;
}

std::string decode_batch(zxid first, std::uint32_t count, const std::vector<std::byte>& entries) {
    return status(decode(raw_frame(type_byte(wire::message_type::proposal_batch),
                                   batch_payload(first, count, entries))));
}

}  // namespace

TEST_CASE("errors: a PROPOSALS batch whose entries do not match its count is malformed",
          "[codec][errors][batch]") {
    const std::string malformed = status(errc::malformed);
    const auto three = batch_entries({3, 0, 5});
    CHECK(decode_batch(zxid{2, 1}, 3, three) == "ok");
    // Claims more transactions than it holds, or fewer.
    CHECK(decode_batch(zxid{2, 1}, 4, three) == malformed);
    CHECK(decode_batch(zxid{2, 1}, 0xffffffffu, three) == malformed);
    CHECK(decode_batch(zxid{2, 1}, 2, three) == malformed);
    // An entry's length runs past the entries (at every cut of the last entry).
    for (std::size_t cut = 1; cut <= 5 + 4; ++cut) {
        auto shorter = three;
        shorter.resize(three.size() - cut);
        INFO("cut " << cut);
        CHECK(decode_batch(zxid{2, 1}, 3, shorter) == malformed);
    }
    // Bytes after the last entry.
    auto longer = three;
    longer.push_back(std::byte{0});
    CHECK(decode_batch(zxid{2, 1}, 3, longer) == malformed);
    // An empty batch.
    CHECK(decode_batch(zxid{2, 1}, 0, {}) == malformed);
}

TEST_CASE("errors: a PROPOSALS batch outside one epoch, or from counter 0, is malformed",
          "[codec][errors][batch]") {
    const std::string malformed = status(errc::malformed);
    const auto two = batch_entries({1, 1});
    // zxids are first, first + 1, …: consecutive by construction. The run must not reach
    // past the epoch's last counter (it would wrap into the next epoch) …
    CHECK(decode_batch(zxid{5, zxid::counter_max - 1}, 2, two) == "ok");
    CHECK(decode_batch(zxid{5, zxid::counter_max}, 2, two) == malformed);
    CHECK(decode_batch(zxid{0xffffffffu, zxid::counter_max}, 2, two) == malformed);
    // … and counter 0 is an epoch's marker, never a proposal (§1).
    CHECK(decode_batch(zxid{5, 0}, 2, two) == malformed);
    CHECK(decode_batch(zxid{5, 1}, 2, two) == "ok");
}

TEST_CASE("codec: encode_proposal_batch writes what encode writes, and places each txn",
          "[codec][batch]") {
    test::message_factory factory{38};
    for (int round = 0; round < 50; ++round) {
        const auto count = static_cast<std::uint32_t>(1 + factory.rng().below(20));
        std::vector<byte_view> txns;
        for (std::uint32_t i = 0; i < count; ++i) txns.push_back(factory.bytes());
        const zxid first{3, static_cast<std::uint32_t>(1 + factory.rng().below(1000))};
        const frame_context context = factory.context();
        std::vector<byte_view> placed(count);
        const shared_bytes frame = encode_proposal_batch(context, first, txns, placed);

        const auto decoded = decode(frame.view());
        REQUIRE(status(decoded) == "ok");
        const auto& batch = std::get<wire::proposal_batch>(decoded.value().msg);
        CHECK(batch.first == first);
        CHECK(batch.count == count);
        CHECK(test::to_vector(encode(context, batch).view()) == test::to_vector(frame.view()));
        std::uint32_t seen = 0;
        for_each_batch_txn(batch, [&](zxid id, byte_view txn) {
            CHECK(id == zxid{3, first.counter() + seen});
            CHECK(test::to_vector(txn) == test::to_vector(txns[seen]));
            // The placed view is the txn inside the frame (what log records share).
            CHECK(placed[seen].data() == txn.data());
            CHECK(placed[seen].size() == txn.size());
            ++seen;
            return true;
        });
        CHECK(seen == count);
    }
}
