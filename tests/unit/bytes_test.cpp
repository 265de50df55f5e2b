// Unit tests of zab::shared_bytes and the byte_view helpers (docs/design.md rule 10), and of
// zab::ring, the FIFO queue of the write path.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "zab/core/bytes.hpp"
#include "zab/core/ring.hpp"

namespace {
std::string text_of(const zab::shared_bytes& b) {
    return std::string{zab::as_string_view(b.view())};
}
}  // namespace

TEST_CASE("as_bytes and as_string_view view the same memory") {
    const std::string_view text = "zab";
    const auto bytes = zab::as_bytes(text);
    CHECK(bytes.size() == 3);
    CHECK(static_cast<const void*>(bytes.data()) == static_cast<const void*>(text.data()));
    CHECK(bytes[1] == std::byte{'a'});
    CHECK(zab::as_string_view(bytes) == "zab");
}

TEST_CASE("copy_of copies: the buffer does not depend on its source") {
    std::string source = "proposal";
    const auto copy = zab::shared_bytes::copy_of(zab::as_bytes(source));
    CHECK(copy.size() == source.size());
    CHECK_FALSE(copy.empty());
    CHECK(static_cast<const void*>(copy.data()) != static_cast<const void*>(source.data()));
    source.assign(source.size(), 'x');
    CHECK(text_of(copy) == "proposal");
}

TEST_CASE("the vector constructor takes the bytes without copying them") {
    std::vector<std::byte> bytes{std::byte{1}, std::byte{2}, std::byte{3}};
    const auto* storage = bytes.data();
    const zab::shared_bytes b{std::move(bytes)};
    CHECK(b.data() == storage);
    CHECK(b.size() == 3);
}

TEST_CASE("copies of a shared_bytes share the same bytes") {
    const auto original = zab::shared_bytes::copy_of(zab::as_bytes("frame"));
    const auto copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(copy.data() == original.data());
    CHECK(copy.size() == original.size());
}

TEST_CASE("slice views part of the buffer and shares its ownership") {
    auto frame = zab::shared_bytes::copy_of(zab::as_bytes("header|payload"));
    const auto whole = frame.view();
    const auto payload = frame.slice(whole.subspan(7));
    CHECK(payload.data() == frame.data() + 7);
    CHECK(payload.size() == 7);
    CHECK(text_of(payload) == "payload");

    const auto header = frame.slice(whole.first(6));
    CHECK(text_of(header) == "header");
    const auto nothing = frame.slice(whole.subspan(whole.size()));
    CHECK(nothing.empty());

    // The slice keeps the bytes alive after the last other handle is gone. If it did not,
    // ASan reports a use after free; without ASan the allocations below would likely reuse
    // the freed block and change what the slice reads.
    frame = zab::shared_bytes{};
    CHECK(frame.empty());
    std::vector<zab::shared_bytes> churn;
    for (int i = 0; i < 16; ++i)
        churn.push_back(zab::shared_bytes::copy_of(zab::as_bytes("XXXXXXXXXXXXXX")));
    CHECK(text_of(payload) == "payload");
    CHECK(text_of(header) == "header");

    // A slice of a slice still shares the one buffer.
    const auto load = payload.slice(payload.view().subspan(3));
    CHECK(text_of(load) == "load");
    CHECK(load.data() == payload.data() + 3);
}

TEST_CASE("shared_bytes compare equal by content, not by identity") {
    const auto a = zab::shared_bytes::copy_of(zab::as_bytes("abc"));
    const auto b = zab::shared_bytes::copy_of(zab::as_bytes("abc"));
    const auto c = zab::shared_bytes::copy_of(zab::as_bytes("abd"));
    const auto d = zab::shared_bytes::copy_of(zab::as_bytes("ab"));
    REQUIRE(a.data() != b.data());
    CHECK(a == b);
    CHECK_FALSE(a == c);
    CHECK(a != c);
    CHECK(a != d);
    CHECK(d != a);

    const auto long_one = zab::shared_bytes::copy_of(zab::as_bytes("xxabcxx"));
    CHECK(long_one.slice(long_one.view().subspan(2, 3)) == a);
    CHECK(long_one != a);
}

TEST_CASE("empty shared_bytes: default, copied from nothing, or an empty slice") {
    const zab::shared_bytes none;
    CHECK(none.empty());
    CHECK(none.size() == 0);
    CHECK(none.view().empty());

    const auto copied = zab::shared_bytes::copy_of(zab::byte_view{});
    CHECK(copied.empty());
    CHECK(copied == none);

    const auto full = zab::shared_bytes::copy_of(zab::as_bytes("x"));
    CHECK(full != none);
    CHECK(none != full);
    const auto empty_slice = full.slice(zab::byte_view{});
    CHECK(empty_slice.empty());
    CHECK(empty_slice == none);
}

// --- zab::ring (core/ring.hpp): the write path's FIFO queues -------------------------------

TEST_CASE("ring: a FIFO across wrap-around and growth, slots released as they leave") {
    zab::ring<zab::shared_bytes> q;
    std::vector<std::string> model;  // what a std::deque would hold
    auto bytes = [](int i) { return zab::shared_bytes::copy_of(zab::as_bytes(std::to_string(i))); };
    int next = 0;
    // Interleaved pushes and pops wrap the head around the buffer many times and grow it
    // (16 → 32 → 64) with the head in the middle.
    for (int round = 0; round < 200; ++round) {
        const int pushes = round % 7 == 0 ? 40 : 3;
        for (int i = 0; i < pushes; ++i) {
            q.push_back(bytes(next));
            model.push_back(std::to_string(next++));
        }
        const int pops = round % 5 == 0 ? 30 : 2;
        for (int i = 0; i < pops && !q.empty(); ++i) {
            CHECK(zab::as_string_view(q.front().view()) == model.front());
            q.pop_front();
            model.erase(model.begin());
        }
        REQUIRE(q.size() == model.size());
        std::size_t k = 0;
        for (const auto& b : q) CHECK(zab::as_string_view(b.view()) == model[k++]);
        for (std::size_t j = 0; j < q.size(); ++j) CHECK(zab::as_string_view(q[j].view()) == model[j]);
        if (!q.empty()) CHECK(zab::as_string_view(q.back().view()) == model.back());
    }
    q.clear();
    CHECK(q.empty());
    q.push_back(bytes(7));
    CHECK(zab::as_string_view(q.front().view()) == "7");

    // What leaves, from either end, is released at once (its slot is reset).
    zab::ring<std::shared_ptr<int>> owners;
    const auto held = std::make_shared<int>(1);
    for (int i = 0; i < 20; ++i) owners.push_back(held);  // through a growth
    CHECK(held.use_count() == 21);
    owners.pop_front();
    owners.pop_back();
    CHECK(held.use_count() == 19);
    owners.clear();
    CHECK(held.use_count() == 1);
}
