// examples/kv/kv_deferred_snapshot.hpp — the map's snapshot image (kv_snapshot.hpp) as of
// one instant, handed over in O(1) on the replica's thread and written on another thread
// while the map goes on changing: what makes kv_store a zab::deferred_snapshot_machine, so
// that compaction (kv_server's --snapshot-every) does not stop the replica for as long as
// encoding the whole map takes (tens of milliseconds for 100,000 keys).
//
// How. The image lists the keys in order. The writer walks the live map a chunk of keys at
// a time under a mutex that the store holds while it applies a transaction: the tree never
// changes under a walk, and a transaction waits for one chunk at most. Before the store
// changes a key the writer has not reached yet, it records that key's entry as of the
// snapshot (or that the key was absent then), once; the writer writes the recorded entry in
// place of the live one. Keys the writer has passed change freely. A store about to drop
// its whole map (a restore, FLUSHDB, its destruction or a move) detaches the view first:
// the entries not reached yet are copied into it, and the writer finishes from those.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "binary_io.hpp"
#include "kv_snapshot.hpp"
#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/zxid.hpp"

namespace zab::kv::detail {

/// One deferred snapshot of a kv_state, shared by the store (its thread) and the writer
/// (any one thread). The store calls `before_change` and `detach` with the lock of
/// `lock_for_store` held; `write` takes that lock itself.
class deferred_image {
public:
    /// The view of `state` now: the header's fields and the clients copied, the map
    /// referenced (it must outlive the view, or be detached from it first).
    explicit deferred_image(const kv_state& state)
        : live_{&state.data},
          last_applied_{state.last_applied},
          now_ms_{state.now_ms},
          key_count_{state.data.size()},
          clients_{state.clients} {}

    /// The store's side of the mutex. The writer steps aside for a waiting store between
    /// chunks: std::mutex is not fair, and a writer that locked again at once could keep the
    /// store waiting for the whole walk.
    std::unique_lock<std::mutex> lock_for_store() {
        store_waiting_.store(true, std::memory_order_relaxed);
        std::unique_lock lock{mutex_};
        store_waiting_.store(false, std::memory_order_relaxed);
        return lock;
    }

    /// Lock held: whether the image is written (the store need not report changes any more).
    bool done() const noexcept { return done_; }

    /// Lock held: `key`, now `current` (nullptr: absent), is about to change or appear.
    void before_change(std::string_view key, const kv_entry* current) {
        if (done_ || !live_ || (passed_ && key <= *passed_)) return;
        if (before_.find(key) != before_.end()) return;  // the first change keeps the old entry
        before_.emplace(std::string{key},
                        current ? std::optional<kv_entry>{*current} : std::nullopt);
    }

    /// Lock held: the map goes away or is replaced; the entries the writer has not reached
    /// are copied here first.
    void detach() {
        if (done_ || !live_) return;
        auto it = passed_ ? live_->upper_bound(*passed_) : live_->begin();
        for (; it != live_->end(); ++it) before_.try_emplace(it->first, it->second);
        live_ = nullptr;
    }

    /// The image, exactly what encode_snapshot gave for the state when the view was taken.
    /// Once, on any thread.
    shared_bytes write() {
        ZAB_ASSERT(!started_, "kv: a deferred snapshot is written once");
        started_ = true;
        std::vector<std::byte> out;
        byte_writer w{out};
        write_snapshot_header(w, last_applied_, now_ms_, key_count_);
        // A chunk is written, under the lock, into a small buffer that stays in memory; it is
        // appended to the image outside the lock: growing the image (a copy, and fresh pages
        // to fault in) must not hold up the store.
        std::vector<std::byte> chunk;
        for (bool more = true; more;) {
            chunk.clear();
            byte_writer cw{chunk};
            more = write_chunk(cw);
            out.insert(out.end(), chunk.begin(), chunk.end());
            if (store_waiting_.load(std::memory_order_relaxed))
                std::this_thread::sleep_for(std::chrono::microseconds{50});
        }
        return finish_snapshot(std::move(out), clients_);
    }

private:
    static constexpr std::size_t chunk_keys = 128;

    /// The next keys in order, the recorded entries before the live ones; false once every
    /// key is written.
    bool write_chunk(byte_writer& w) {
        const std::lock_guard lock{mutex_};
        const bool has_live = live_ != nullptr;
        auto live = has_live ? (passed_ ? live_->upper_bound(*passed_) : live_->begin())
                             : kv_map::const_iterator{};
        auto saved = passed_ ? before_.upper_bound(*passed_) : before_.begin();
        before_.erase(before_.begin(), saved);  // written already
        const auto live_left = [&] { return has_live && live != live_->end(); };
        const std::string* last = nullptr;
        for (std::size_t n = 0; n < chunk_keys; ++n) {
            const bool saved_left = saved != before_.end();
            if (!saved_left && !live_left()) break;
            if (saved_left && (!live_left() || saved->first <= live->first)) {
                if (live_left() && live->first == saved->first) ++live;
                if (saved->second) write_snapshot_entry(w, saved->first, *saved->second);
                last = &saved->first;
                ++saved;
            } else {
                write_snapshot_entry(w, live->first, live->second);
                last = &live->first;
                ++live;
            }
        }
        if (last) passed_ = *last;
        if (saved == before_.end() && !live_left()) {
            done_ = true;
            before_.clear();
            return false;
        }
        return true;
    }

    std::mutex mutex_;
    std::atomic<bool> store_waiting_{false};
    const kv_map* live_;  ///< the store's map; nullptr once detached
    /// Keys the writer has not reached that changed since the view was taken: their entry
    /// then (nullopt: absent then).
    std::map<std::string, std::optional<kv_entry>, std::less<>> before_;
    std::optional<std::string> passed_;  ///< the last key written
    bool done_ = false;
    bool started_ = false;
    zxid last_applied_;
    std::uint64_t now_ms_;
    std::uint64_t key_count_;
    client_map clients_;
};

}  // namespace zab::kv::detail
