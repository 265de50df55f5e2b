// zab/storage/log_image.hpp — a log's contents in memory: an optional snapshot and the
// records after it. The in-memory log (memory_log.hpp) keeps one; the simulator's disk
// (testing/sim_log.hpp) keeps two, the visible and the durable image.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/core/zxid.hpp"

namespace zab {

struct log_image {
    std::optional<log_snapshot> snapshot;
    std::vector<log_record> records;  ///< strictly increasing zxids, all after the snapshot

    /// The last record's zxid, else the snapshot's, else zxid{}.
    zxid last_zxid() const {
        if (!records.empty()) return records.back().id;
        return snapshot ? snapshot->last_included : zxid{};
    }

    /// Appends `added`, whose zxids must increase past `last_zxid()` (the peer's contract:
    /// asserted).
    void append(std::span<const log_record> added) {
        zxid previous = last_zxid();
        for (const auto& record : added) {
            ZAB_ASSERT(record.id > previous, "append: zxids must increase past last_zxid()");
            previous = record.id;
        }
        records.insert(records.end(), added.begin(), added.end());
    }

    /// Removes the records after `last_kept`. The snapshot stays: a `last_kept` below it
    /// removes every record, and `last_zxid()` becomes the snapshot's (the peer never asks
    /// for that: a TRUNC never reaches below a committed transaction, §5.6).
    void truncate_after(zxid last_kept) {
        records.erase(std::upper_bound(records.begin(), records.end(), last_kept,
                                       [](zxid z, const log_record& r) { return z < r.id; }),
                      records.end());
    }

    /// The image of a snapshot at `last_included` followed by `following` (§5.3 SNAP).
    static log_image installed(zxid last_included, const shared_bytes& state,
                               std::span<const log_record> following) {
        zxid previous = last_included;
        for (const auto& record : following) {
            ZAB_ASSERT(record.id > previous, "install_snapshot: records must follow the snapshot");
            previous = record.id;
        }
        return log_image{log_snapshot{last_included, state}, {following.begin(), following.end()}};
    }

    /// Compaction: `state` stands in for every record up to `last_included`, which must be
    /// a record above the snapshot; those records go. False (nothing changed) otherwise.
    bool compact(zxid last_included, const shared_bytes& state) {
        const auto at = std::lower_bound(records.begin(), records.end(), last_included,
                                         [](const log_record& r, zxid z) { return r.id < z; });
        if (at == records.end() || at->id != last_included) return false;
        records.erase(records.begin(), at + 1);
        snapshot = log_snapshot{last_included, state};
        return true;
    }

    /// Up to `max` records after `after`, ascending; `errc::compacted` below the snapshot.
    result<std::vector<log_record>> read(zxid after, std::size_t max) const {
        if (snapshot && after < snapshot->last_included) return make_error_code(errc::compacted);
        auto first = std::upper_bound(records.begin(), records.end(), after,
                                      [](zxid z, const log_record& r) { return z < r.id; });
        std::vector<log_record> out;
        for (; first != records.end() && out.size() < max; ++first) out.push_back(*first);
        return out;
    }

    /// The last `max` records (zab::tail_readable_log's `read_last`).
    result<std::vector<log_record>> read_last(std::size_t max) const {
        return std::vector<log_record>(records.end() - static_cast<std::ptrdiff_t>(
                                                           std::min(max, records.size())),
                                       records.end());
    }

    /// The zxids of the records that are system transactions, ascending (what
    /// zab::system_txn_indexed_log's `system_txns` answers), found by looking at every record.
    std::vector<zxid> system_txns() const {
        std::vector<zxid> found;
        for (const auto& record : records)
            if (is_system_txn(record.txn.view())) found.push_back(record.id);
        return found;
    }
};

}  // namespace zab
