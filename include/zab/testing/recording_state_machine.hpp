// zab/testing/recording_state_machine.hpp — a state machine that remembers what it applied.
//
// Its state is the sequence of applied transactions itself, which is exactly what the
// invariant checkers compare between replicas (docs/protocol.md §10: delivered sequences D_s).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"

namespace zab::testing {

class recording_state_machine {
public:
    struct applied_txn {
        zxid id;
        shared_bytes txn;
    };

    /// Applies a committed transaction. zab guarantees zxid order (docs/design.md rule 5); a
    /// violation here is a bug in zab, so it is asserted.
    void apply(zxid id, byte_view txn) {
        ZAB_ASSERT(applied_.empty() || applied_.back().id < id,
                   "transactions applied out of zxid order");
        applied_.push_back({id, shared_bytes::copy_of(txn)});
    }

    /// zab::system_txn_machine: zab's own transactions (reconfigurations) are recorded like
    /// any other, so the delivered sequences the checkers compare hold them too.
    void apply_system(zxid id, byte_view txn) { apply(id, txn); }

    zxid last_applied() const { return applied_.empty() ? snapshot_base_ : applied_.back().id; }

    /// Serialized as a sequence of (u64 zxid, u32 length, bytes), little-endian.
    shared_bytes snapshot() const { return encode(applied_); }

    /// zab::deferred_snapshot_machine: the view is a copy of the list of applied
    /// transactions (their bytes shared, not copied); the serialization happens when it is
    /// called. Enough for a test double; a large state wants a persistent structure.
    deferred_snapshot snapshot_later() const {
        return [view = applied_] { return encode(view); };
    }

    /// The transactions a snapshot holds, in order; `errc::malformed` if it does not decode.
    static result<std::vector<applied_txn>> decode_snapshot(byte_view bytes) {
        std::vector<applied_txn> out;
        std::size_t at = 0;
        while (at < bytes.size()) {
            if (bytes.size() - at < 12) return make_error_code(errc::malformed);
            const zxid id = zxid::from_value(get(bytes, at, 8));
            const std::size_t length = get(bytes, at + 8, 4);
            at += 12;
            if (bytes.size() - at < length) return make_error_code(errc::malformed);
            if (!out.empty() && !(out.back().id < id)) return make_error_code(errc::malformed);
            out.push_back({id, shared_bytes::copy_of(bytes.subspan(at, length))});
            at += length;
        }
        return out;
    }

    /// Replaces the state by a snapshot; `errc::malformed` (state unchanged) if it does not
    /// decode or does not end at `last_included`.
    result<void> restore(zxid last_included, byte_view bytes) {
        auto decoded = decode_snapshot(bytes);
        if (!decoded) return decoded.error();
        std::vector<applied_txn> restored = std::move(decoded).value();
        if (!restored.empty() && restored.back().id != last_included)
            return make_error_code(errc::malformed);
        applied_ = std::move(restored);
        restored_count_ = applied_.size();
        snapshot_base_ = last_included;
        ++restores_;
        return success();
    }

    const std::vector<applied_txn>& applied() const noexcept { return applied_; }
    /// How many times the state was replaced by a snapshot.
    std::uint64_t restores() const noexcept { return restores_; }
    /// The last restore: its snapshot's zxid, and how many entries of `applied()` it put
    /// there (the ones after were applied since).
    zxid restored_at() const noexcept { return snapshot_base_; }
    std::size_t restored_count() const noexcept { return restored_count_; }

private:
    static shared_bytes encode(const std::vector<applied_txn>& applied) {
        std::vector<std::byte> out;
        for (const auto& a : applied) {
            put(out, a.id.value(), 8);
            put(out, a.txn.size(), 4);
            out.insert(out.end(), a.txn.data(), a.txn.data() + a.txn.size());
        }
        return shared_bytes{std::move(out)};
    }
    static void put(std::vector<std::byte>& out, std::uint64_t value, int width) {
        for (int i = 0; i < width; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
    }
    static std::uint64_t get(byte_view in, std::size_t at, int width) {
        std::uint64_t value = 0;
        for (int i = 0; i < width; ++i)
            value |= std::uint64_t(std::to_integer<std::uint8_t>(in[at + i])) << (8 * i);
        return value;
    }

    std::vector<applied_txn> applied_;
    zxid snapshot_base_;
    std::size_t restored_count_ = 0;
    std::uint64_t restores_ = 0;
};

static_assert(deferred_snapshot_machine<recording_state_machine>);
static_assert(system_txn_machine<recording_state_machine>);

}  // namespace zab::testing
