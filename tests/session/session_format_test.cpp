// The session layer's formats (docs/protocol.md §6.7): session_reply's encoding with and
// without applied_at, session_machine's image of version 2 and of version 1, and the zxid a
// duplicate's reply names (the first application's, not the retry's).
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/codec.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/session/session_machine.hpp"
#include "zab/testing/recording_state_machine.hpp"

using namespace zab;
using zab::testing::recording_state_machine;

namespace {

/// A recording machine whose `apply` returns "<txn>#<how many it applied>".
struct echo_machine : recording_state_machine {
    shared_bytes apply(zxid id, byte_view txn) {
        recording_state_machine::apply(id, txn);
        const std::string out =
            std::string{as_string_view(txn)} + "#" + std::to_string(applied().size());
        return shared_bytes::copy_of(as_bytes(out));
    }
};
using machine = session_machine<echo_machine>;

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
    std::vector<std::byte> out;
    for (const int v : values) out.push_back(static_cast<std::byte>(v));
    return out;
}

std::vector<std::byte> tagged(std::string_view payload, std::uint64_t client, std::uint64_t seq) {
    return session_envelope::wrap(as_bytes(payload), session_tag{client, seq});
}

/// A decoded reply with the bytes its `result` points into.
struct held_reply : session_reply {
    shared_bytes bytes;
};

held_reply reply(shared_bytes bytes) {
    auto r = session_reply::decode(bytes.view());
    REQUIRE(r);
    return held_reply{r.value(), std::move(bytes)};
}

/// One session as an image writes it, in either table version.
struct image_session {
    std::uint64_t id = 0, sequence = 0, last_active = 0, applied_at = 0;
    std::string result;
};

/// session_machine's image at `at` (inner machine at `inner_at` with `inner`), written
/// field by field as the header comments specify, in `version` (1: no applied_at).
std::vector<std::byte> handmade_image(std::uint8_t version, zxid at, zxid inner_at,
                                      const std::vector<image_session>& sessions, byte_view inner) {
    std::size_t size = 4 + 1 + 8 + 8 + 16 + 8 + inner.size() + 4;
    for (const auto& s : sessions) size += 8 * (version >= 2 ? 5 : 4) + 1 + 4 + s.result.size();
    std::vector<std::byte> out(size);
    detail::wire_writer w{out};
    w.put(machine::image_magic);
    w.put(version);
    w.put(at.value());
    w.put(inner_at.value());
    w.put(std::uint64_t{0});  // clock_ms
    w.put(std::uint64_t{sessions.size()});
    for (const auto& s : sessions) {
        w.put(s.id);
        w.put(s.sequence);
        w.put(s.last_active);
        if (version >= 2) w.put(s.applied_at);
        w.put(std::uint64_t{0});  // last_seen_ms (expiry off)
        w.put(std::uint8_t{1});
        w.put(static_cast<std::uint32_t>(s.result.size()));
        w.put_raw(as_bytes(s.result));
    }
    w.put(std::uint64_t{inner.size()});
    w.put_raw(inner);
    w.put(crc32c(byte_view{out.data(), out.size() - 4}));
    return out;
}

}  // namespace

TEST_CASE(
    "session_reply (§6.7): applied_at round-trips for applied and duplicate, never for "
    "applied_earlier",
    "[session]") {
    const auto result = as_bytes("r");
    const session_reply applied{session_status::applied, true, result, zxid{3, 7}};
    const auto a = reply(applied.encode());
    CHECK(a.status == session_status::applied);
    CHECK(a.result_kept);
    CHECK(as_string_view(a.result) == "r");
    CHECK(a.applied_at == zxid{3, 7});
    // The exact bytes: status, flags (kept | applied_at), u64 little-endian, the result.
    const auto encoded = applied.encode();
    const auto expected = bytes_of({1, 3, 7, 0, 0, 0, 3, 0, 0, 0, 'r'});
    CHECK(std::vector<std::byte>(encoded.view().begin(), encoded.view().end()) == expected);

    const auto d = reply(session_reply{session_status::duplicate, false, {}, zxid{2, 1}}.encode());
    CHECK(d.status == session_status::duplicate);
    CHECK_FALSE(d.result_kept);
    CHECK(d.applied_at == zxid{2, 1});

    const auto unknown = reply(session_reply{session_status::duplicate, true, result}.encode());
    CHECK_FALSE(unknown.applied_at);
    CHECK(unknown.encode().size() == 3);  // no applied_at: the former layout

    const auto earlier =
        reply(session_reply{session_status::applied_earlier, false, {}, zxid{1, 1}}.encode());
    CHECK(earlier.status == session_status::applied_earlier);
    CHECK_FALSE(earlier.applied_at);
}

TEST_CASE("session_reply (§6.7): the former 2-byte header still decodes, without applied_at",
          "[session]") {
    const auto applied = bytes_of({1, 1, 'o', 'k'});
    const auto a = session_reply::decode(applied);
    REQUIRE(a);
    CHECK(a.value().status == session_status::applied);
    CHECK(as_string_view(a.value().result) == "ok");
    CHECK_FALSE(a.value().applied_at);
    const auto duplicate_unkept = bytes_of({2, 0});
    const auto d = session_reply::decode(duplicate_unkept);
    REQUIRE(d);
    CHECK(d.value().status == session_status::duplicate);
    CHECK_FALSE(d.value().result_kept);
    CHECK_FALSE(d.value().applied_at);
    const auto earlier_former = bytes_of({3, 1});
    const auto e = session_reply::decode(earlier_former);
    REQUIRE(e);
    CHECK_FALSE(e.value().result_kept);
}

TEST_CASE("session_reply (§6.7): bytes encode would not write are malformed", "[session]") {
    const std::vector<std::vector<std::byte>> bad = {
        {},                                        // no header
        bytes_of({1}),                             // half a header
        bytes_of({0, 1}),                          // status 0
        bytes_of({4, 1}),                          // status 4
        bytes_of({1, 4}),                          // an unknown flag
        bytes_of({1, 0x83}),                       // an unknown flag beside known ones
        bytes_of({1, 3, 1, 0, 0}),                 // applied_at cut short
        bytes_of({1, 3, 0, 0, 0, 0, 0, 0, 0, 0}),  // applied_at zero
        bytes_of({3, 2, 1, 0, 0, 0, 1, 0, 0, 0}),  // applied_earlier with applied_at
        bytes_of({3, 0, 'x'}),                     // applied_earlier with a result
        bytes_of({1, 0}),                          // applied, result not kept
        bytes_of({1, 2, 1, 0, 0, 0, 1, 0, 0, 0}),  // the same with applied_at
        bytes_of({2, 0, 'x'}),                     // a result beside result_kept 0
    };
    for (const auto& b : bad) {
        INFO("bytes " << b.size());
        const auto r = session_reply::decode(b);
        REQUIRE_FALSE(r);
        CHECK(r.error() == make_error_code(errc::malformed));
    }
}

TEST_CASE(
    "session_machine (§6.7): a duplicate's reply names the first application's zxid, "
    "also after a version-2 snapshot round trip",
    "[session]") {
    machine m;
    const auto first = reply(m.apply(zxid{1, 1}, tagged("acquire", 9, 1)));
    CHECK(first.status == session_status::applied);
    CHECK(first.applied_at == zxid{1, 1});
    m.apply(zxid{1, 2}, tagged("other", 10, 1));
    const auto retry = reply(m.apply(zxid{1, 3}, tagged("acquire", 9, 1)));
    CHECK(retry.status == session_status::duplicate);
    CHECK(retry.applied_at == zxid{1, 1});  // not (1,3), the retry's
    CHECK(as_string_view(retry.result) == as_string_view(first.result));
    CHECK(m.sessions().find(9)->last_active == zxid{1, 3});
    CHECK(m.sessions().find(9)->applied_at == zxid{1, 1});
    const auto untagged = reply(m.apply(zxid{1, 4}, as_bytes("plain")));
    CHECK(untagged.applied_at == zxid{1, 4});

    const shared_bytes image = m.snapshot();
    CHECK(std::to_integer<int>(image.view()[4]) == 2);
    machine restored;
    REQUIRE(restored.restore(zxid{1, 4}, image.view()));
    CHECK(restored.snapshot() == image);
    CHECK(restored.sessions() == m.sessions());
    const auto again = reply(restored.apply(zxid{2, 1}, tagged("acquire", 9, 1)));
    CHECK(again.status == session_status::duplicate);
    CHECK(again.applied_at == zxid{1, 1});
}

TEST_CASE(
    "session_machine (§6.7): a version-1 image restores with applied_at unknown; corrupt "
    "and unknown versions are refused and change nothing",
    "[session]") {
    echo_machine inner;
    inner.apply(zxid{1, 1}, as_bytes("acquire"));
    const shared_bytes inner_image = inner.snapshot();
    const std::vector<image_session> one = {{9, 1, 0x100000002, 0, "acquire#1"}};

    SECTION("version 1 restores; its duplicates answer without applied_at") {
        const auto v1 = handmade_image(1, zxid{1, 2}, zxid{1, 1}, one, inner_image.view());
        machine m;
        REQUIRE(m.restore(zxid{1, 2}, v1));
        CHECK(m.last_sequence(9) == 1u);
        CHECK(m.sessions().find(9)->applied_at == zxid{});
        const auto retry = reply(m.apply(zxid{1, 3}, tagged("acquire", 9, 1)));
        CHECK(retry.status == session_status::duplicate);
        CHECK(as_string_view(retry.result) == "acquire#1");
        CHECK_FALSE(retry.applied_at);
        // Written again as version 2, with the unknown applied_at as 0: it restores as such.
        const shared_bytes v2 = m.snapshot();
        CHECK(std::to_integer<int>(v2.view()[4]) == 2);
        machine again;
        REQUIRE(again.restore(zxid{1, 3}, v2.view()));
        CHECK(again.sessions() == m.sessions());
        // A new request of that client records where it was applied.
        CHECK(reply(m.apply(zxid{1, 4}, tagged("release", 9, 2))).applied_at == zxid{1, 4});
        CHECK(m.sessions().find(9)->applied_at == zxid{1, 4});
    }

    SECTION("version 2 written by hand restores as written") {
        const std::vector<image_session> known = {{9, 1, 0x100000002, 0x100000001, "acquire#1"}};
        const auto v2 = handmade_image(2, zxid{1, 2}, zxid{1, 1}, known, inner_image.view());
        machine m;
        REQUIRE(m.restore(zxid{1, 2}, v2));
        CHECK(m.sessions().find(9)->applied_at == zxid{1, 1});
        CHECK(m.snapshot().view().size() == v2.size());
        CHECK(std::equal(v2.begin(), v2.end(), m.snapshot().view().begin()));
    }

    SECTION("refused, with the existing codes, and nothing changed") {
        machine m;
        m.apply(zxid{1, 1}, tagged("x", 5, 1));
        const shared_bytes before = m.snapshot();
        const auto refused = [&](const std::vector<std::byte>& image, errc code) {
            const auto r = m.restore(zxid{1, 2}, image);
            REQUIRE_FALSE(r);
            CHECK(r.error() == make_error_code(code));
            CHECK(m.snapshot() == before);
        };
        auto unknown = handmade_image(2, zxid{1, 2}, zxid{1, 1}, one, inner_image.view());
        unknown[4] = std::byte{3};
        refused(unknown, errc::unsupported_version);
        unknown[4] = std::byte{0};
        refused(unknown, errc::unsupported_version);
        auto flipped = handmade_image(1, zxid{1, 2}, zxid{1, 1}, one, inner_image.view());
        flipped[20] ^= std::byte{1};
        refused(flipped, errc::bad_checksum);
        // A version-1 body read as version 2 (its CRC recomputed) does not parse.
        auto relabelled = handmade_image(1, zxid{1, 2}, zxid{1, 1}, one, inner_image.view());
        relabelled[4] = std::byte{2};
        detail::wire_writer{std::span{relabelled}.last(4)}.put(
            crc32c(byte_view{relabelled.data(), relabelled.size() - 4}));
        refused(relabelled, errc::corrupt);
        // applied after its last activity; two sessions applied at one zxid.
        refused(handmade_image(2, zxid{1, 2}, zxid{1, 1}, {{9, 1, 0x100000001, 0x100000002, ""}},
                               inner_image.view()),
                errc::corrupt);
        refused(handmade_image(
                    2, zxid{1, 2}, zxid{1, 1},
                    {{8, 1, 0x100000001, 0x100000001, ""}, {9, 1, 0x100000002, 0x100000001, ""}},
                    inner_image.view()),
                errc::corrupt);
    }
}
