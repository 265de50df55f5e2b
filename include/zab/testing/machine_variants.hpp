// zab/testing/machine_variants.hpp — state machines for every combination of zab's optional
// concepts, and a recording layer that lets the checkers watch any machine.
//
// The simulator's default machine (recording_state_machine) models every optional concept:
// it sees system transactions and hands over deferred snapshots. A machine that models none
// (the kv example's kv_store, and so session_machine<kv_store>) takes other paths through
// the core — the ones issue 34's defects 1 and 2 were in. So the sweeps run with:
//   - concept_machine<System, Result, Deferred>: a real state machine (a count and a running
//     hash of what it applied) that models exactly the optional concepts asked for
//     (zab::system_txn_machine, zab::result_machine, zab::deferred_snapshot_machine). Its
//     image names its own last_applied, and `restore` refuses an image not taken at the
//     zxid it is asked to restore at, as session_machine and the kv example do;
//   - zab::session_machine around each of them;
//   - the example's own machine (examples/kv), from the tests that include it.
// And around each, `recorded<M>`: what the checkers need (the applied sequence, restores:
// protocol_observer.hpp, client_checker.hpp) without changing which concepts the machine
// models — it has `apply_system` only if M has, `snapshot_later` only if M has, and `apply`
// returns what M's returns. Transactions a machine does not see (system transactions, for
// one without apply_system) are not in its recorded sequence; protocol_observer accounts
// for them from what the core applied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/codec.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/crc32c.hpp"
#include "zab/core/error.hpp"
#include "zab/core/sealed_image.hpp"
#include "zab/core/zxid.hpp"
#include "zab/session/session_machine.hpp"
#include "zab/testing/recording_state_machine.hpp"

namespace zab::testing {

/// A state machine modelling zab::state_machine and exactly the optional concepts chosen.
/// State: how many transactions it applied, a hash over them, and its last_applied.
/// Image: sealed (magic "ZCM1", version 1, CRC32C) u64 last_applied, u64 count, u64 hash.
template <bool System, bool Result, bool Deferred>
class concept_machine {
public:
    static constexpr std::uint32_t image_magic = 0x314D435Au;  // "ZCM1"
    static constexpr std::uint8_t image_version = 1;

    void apply(zxid z, byte_view txn)
        requires(!Result)
    {
        step(z, txn);
    }
    /// zab::result_machine: the result is the number of transactions applied so far and
    /// the hash, as every replica computes them.
    shared_bytes apply(zxid z, byte_view txn)
        requires Result
    {
        step(z, txn);
        return shared_bytes::make(16, [&](std::span<std::byte> out) {
            zab::detail::wire_writer w{out};
            w.put(count_);
            w.put(hash_);
        });
    }

    /// zab::system_txn_machine: a system transaction counts like any other.
    void apply_system(zxid z, byte_view txn)
        requires System
    {
        step(z, txn);
    }

    zxid last_applied() const noexcept { return last_applied_; }
    shared_bytes snapshot() const { return image(last_applied_, count_, hash_); }

    /// zab::deferred_snapshot_machine: the three numbers, encoded later.
    deferred_snapshot snapshot_later() const
        requires Deferred
    {
        return [at = last_applied_, count = count_, hash = hash_] { return image(at, count, hash); };
    }

    /// `errc::corrupt` (state unchanged) for an image that does not decode or was not taken
    /// at `z`: an image says which state it holds, and a label that disagrees is a bug.
    result<void> restore(zxid z, byte_view bytes) {
        const auto body = unseal_image(bytes, image_magic, image_version, 24);
        if (!body) return body.error();
        zab::detail::wire_reader in{body.value()};
        std::uint64_t at = 0, count = 0, hash = 0;
        if (!in.get(at) || !in.get(count) || !in.get(hash) || in.remaining() != 0)
            return make_error_code(errc::corrupt);
        if (at != z.value()) return make_error_code(errc::corrupt);
        last_applied_ = z;
        count_ = count;
        hash_ = hash;
        return success();
    }

    std::uint64_t count() const noexcept { return count_; }
    std::uint64_t hash() const noexcept { return hash_; }

private:
    void step(zxid z, byte_view txn) {
        ZAB_ASSERT(last_applied_ < z, "concept_machine: transactions applied out of zxid order");
        last_applied_ = z;
        ++count_;
        std::uint64_t h = hash_ ^ z.value();
        for (const std::byte b : txn) h = (h ^ std::to_integer<std::uint8_t>(b)) * 0x100000001b3ull;
        hash_ = h;
    }

    static shared_bytes image(zxid at, std::uint64_t count, std::uint64_t hash) {
        constexpr std::size_t size = 4 + 1 + 24 + 4;
        return shared_bytes::make(size, [&](std::span<std::byte> out) {
            zab::detail::wire_writer w{out};
            w.put(image_magic);
            w.put(image_version);
            w.put(at.value());
            w.put(count);
            w.put(hash);
            w.put(crc32c(byte_view{out.data(), size - 4}));
        });
    }

    zxid last_applied_;
    std::uint64_t count_ = 0;
    std::uint64_t hash_ = 0xcbf29ce484222325ull;
};

/// `Inner` with what it applied recorded for the checkers (the interface of
/// recording_state_machine: `applied`, `restores`, `restored_at`, `restored_count`, and
/// `decode_snapshot` for an image). Models exactly the optional concepts `Inner` models.
/// Image: u32 "ZRL1", u32 count, per transaction (u64 zxid, u32 length, bytes), then the
/// inner machine's image; `restore` hands the inner machine its image and `z` unchanged.
template <state_machine Inner>
class recorded {
public:
    using applied_txn = recording_state_machine::applied_txn;
    using inner_type = Inner;
    static constexpr std::uint32_t magic = 0x314C525Au;  // "ZRL1"

    auto apply(zxid z, byte_view txn) {
        record(z, txn);
        return inner_.apply(z, txn);
    }

    void apply_system(zxid z, byte_view txn)
        requires system_txn_machine<Inner>
    {
        record(z, txn);
        inner_.apply_system(z, txn);
    }

    zxid last_applied() const { return inner_.last_applied(); }

    shared_bytes snapshot() const { return encode(applied_, inner_.snapshot().view()); }

    deferred_snapshot snapshot_later() const
        requires deferred_snapshot_machine<Inner>
    {
        return [view = applied_, inner = inner_.snapshot_later()] {
            return encode(view, inner().view());
        };
    }

    result<void> restore(zxid z, byte_view bytes) {
        auto decoded = split(bytes);
        if (!decoded) return decoded.error();
        if (auto restored = inner_.restore(z, decoded.value().second); !restored) return restored;
        applied_ = std::move(decoded.value().first);
        restored_count_ = applied_.size();
        restored_at_ = z;
        ++restores_;
        return success();
    }

    /// The transactions an image of this layer records, in order.
    static result<std::vector<applied_txn>> decode_snapshot(byte_view bytes) {
        auto decoded = split(bytes);
        if (!decoded) return decoded.error();
        return std::move(decoded.value().first);
    }

    const std::vector<applied_txn>& applied() const noexcept { return applied_; }
    std::uint64_t restores() const noexcept { return restores_; }
    zxid restored_at() const noexcept { return restored_at_; }
    std::size_t restored_count() const noexcept { return restored_count_; }
    const Inner& inner() const noexcept { return inner_; }

private:
    void record(zxid z, byte_view txn) {
        ZAB_ASSERT(applied_.empty() || applied_.back().id < z,
                   "transactions applied out of zxid order");
        applied_.push_back({z, shared_bytes::copy_of(txn)});
    }

    static shared_bytes encode(const std::vector<applied_txn>& applied, byte_view inner) {
        std::size_t size = 8 + inner.size();
        for (const auto& a : applied) size += 12 + a.txn.size();
        return shared_bytes::make(size, [&](std::span<std::byte> out) {
            zab::detail::wire_writer w{out};
            w.put(magic);
            w.put(static_cast<std::uint32_t>(applied.size()));
            for (const auto& a : applied) {
                w.put(a.id.value());
                w.put(static_cast<std::uint32_t>(a.txn.size()));
                w.put_raw(a.txn.view());
            }
            w.put_raw(inner);
        });
    }

    static result<std::pair<std::vector<applied_txn>, byte_view>> split(byte_view bytes) {
        zab::detail::wire_reader in{bytes};
        std::uint32_t m = 0, count = 0;
        if (!in.get(m) || m != magic || !in.get(count)) return make_error_code(errc::corrupt);
        std::vector<applied_txn> out;
        for (std::uint32_t i = 0; i < count; ++i) {
            std::uint64_t id = 0;
            std::uint32_t length = 0;
            byte_view txn;
            if (!in.get(id) || !in.get(length) || !in.get_raw(length, txn))
                return make_error_code(errc::corrupt);
            out.push_back({zxid::from_value(id), shared_bytes::copy_of(txn)});
        }
        byte_view rest;
        if (!in.get_raw(in.remaining(), rest)) return make_error_code(errc::corrupt);
        return std::pair{std::move(out), rest};
    }

    Inner inner_;
    std::vector<applied_txn> applied_;
    zxid restored_at_;
    std::size_t restored_count_ = 0;
    std::uint64_t restores_ = 0;
};

/// The concepts a machine models, as a name: "plain" (none), else the ones it has among
/// "system", "result", "deferred", joined by '+'.
template <typename M>
constexpr std::string_view concepts_name() {
    constexpr bool s = system_txn_machine<M>, r = result_machine<M>, d = deferred_snapshot_machine<M>;
    if constexpr (s && r && d) return "system+result+deferred";
    else if constexpr (s && r) return "system+result";
    else if constexpr (s && d) return "system+deferred";
    else if constexpr (r && d) return "result+deferred";
    else if constexpr (s) return "system";
    else if constexpr (r) return "result";
    else if constexpr (d) return "deferred";
    else return "plain";
}

// The layer hides nothing and adds nothing.
static_assert(!system_txn_machine<recorded<concept_machine<false, false, false>>>);
static_assert(!result_machine<recorded<concept_machine<false, false, false>>>);
static_assert(!deferred_snapshot_machine<recorded<concept_machine<false, false, false>>>);
static_assert(system_txn_machine<recorded<concept_machine<true, false, false>>>);
static_assert(result_machine<recorded<concept_machine<false, true, false>>>);
static_assert(deferred_snapshot_machine<recorded<concept_machine<false, false, true>>>);
static_assert(concepts_name<concept_machine<true, true, true>>() == "system+result+deferred");
static_assert(concepts_name<session_machine<concept_machine<false, false, false>>>() == "result");

}  // namespace zab::testing
