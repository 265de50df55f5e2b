// zab/testing/client_checker.hpp — checks the promises of the client path under faults.
//
// What a client of zab is promised (docs/protocol.md §6.1, §7; client.hpp):
// 1. every request submitted gets exactly one completion;
// 2. a write that succeeds with zxid z was applied, with its bytes, on the replica that
//    reported it before the report;
// 3. a definite failure is final: that write is never applied anywhere, ever;
// 4. a sync that succeeds on a replica makes every write that had succeeded anywhere
//    before the sync was submitted visible on that replica (a linearizable read point);
// `outcome_unknown` promises nothing and is counted.
// The simulator reports submissions and completions; the checker needs each replica's
// applied sequence (recording_state_machine's `applied()`), read at completion and at the end.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "zab/core/bytes.hpp"
#include "zab/core/client.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"

namespace zab::testing {

class client_checker {
public:
    /// A client request on replica `at` (its peer object `incarnation`): a write of `txn`
    /// (unique bytes per write), or a sync.
    /// A request that fails at once completes inside the call that submits it, before its
    /// id is known here: such a completion is held until the submission is reported.
    void submitted(peer_id at, std::uint64_t incarnation, request_id id, client_op op,
                   std::string txn = {}) {
        const key k{at, incarnation, id};
        if (!requests_.emplace(k, request{op, std::move(txn), best_success_}).second)
            fail(fmt::format("replica {} request {} submitted twice", at, id));
        ++(op == client_op::write ? writes_ : syncs_);
        if (const auto early = early_.find(k); early != early_.end()) {
            const auto [c, last_applied] = early->second;
            early_.erase(early);
            const std::vector<no_txn> nothing;
            completed(at, incarnation, c, nothing, last_applied);
        }
    }

    /// Its completion; `applied` is the replica's applied sequence now, `last_applied` its
    /// last applied zxid (both as the state machine holds them).
    template <typename Applied>
    void completed(peer_id at, std::uint64_t incarnation, const client_completion& c,
                   const Applied& applied, zxid last_applied) {
        if (c.op == client_op::transfer) {
            // A leadership transfer promises no client-visible state: only counted.
            ++(c.outcome ? transfers_handed_over_ : transfers_failed_);
            return;
        }
        const key k{at, incarnation, c.id};
        const auto it = requests_.find(k);
        if (it == requests_.end()) {
            // Completed inside the submitting call: only a failure can be that quick — or a
            // sync at a leader that is a quorum on its own (a single voter, or one whose
            // weight is a majority, docs/protocol.md §9), which needs no round trip.
            if ((c.outcome && c.op != client_op::sync) ||
                !early_.emplace(k, std::pair{c, last_applied}).second)
                fail(fmt::format("replica {} completed request {}, never submitted", at, c.id));
            return;
        }
        request& r = it->second;
        if (r.completions++ > 0) {
            fail(fmt::format("replica {} completed request {} a second time", at, c.id));
            return;
        }
        if (!c.outcome) {
            if (c.outcome.error() == make_error_code(errc::outcome_unknown)) {
                ++unknown_;
            } else if (r.op == client_op::write) {
                ++definite_failures_;
                failed_txns_.insert(r.txn);
            } else {
                ++sync_failures_;
            }
            return;
        }
        const zxid z = c.outcome.value();
        if (r.op == client_op::write) {
            ++write_successes_;
            const auto found = std::find_if(applied.begin(), applied.end(),
                                            [&](const auto& a) { return a.id == z; });
            if (found == applied.end() ||
                std::string{as_string_view(found->txn.view())} != r.txn) {
                fail(fmt::format("replica {} reported write {} done as {}, but it has not "
                                 "applied that txn there",
                                 at, c.id, z));
            }
            best_success_ = std::max(best_success_, z);
            return;
        }
        ++sync_successes_;
        // §7: every write that succeeded before the sync was submitted is visible now.
        if (last_applied < r.must_see) {
            fail(fmt::format("replica {} answered sync {} at {}, before {}, which had "
                             "completed before the sync began",
                             at, c.id, last_applied, r.must_see));
        }
    }

    /// At the end: every request resolved once, and no definitely failed write applied on
    /// any replica (`applied_sequences`: each replica's applied sequence).
    template <typename AppliedSequences>
    void finish(const AppliedSequences& applied_sequences) {
        for (const auto& [k, early] : early_)
            fail(fmt::format("replica {} completed request {}, never submitted", std::get<0>(k),
                             std::get<2>(k)));
        for (const auto& [k, r] : requests_)
            if (r.completions == 0)
                fail(fmt::format("replica {} request {} never completed", std::get<0>(k),
                                 std::get<2>(k)));
        for (const auto& applied : applied_sequences)
            for (const auto& a : applied)
                if (failed_txns_.contains(std::string{as_string_view(a.txn.view())}))
                    fail(fmt::format("{} was applied as {} after its write failed definitely",
                                     as_string_view(a.txn.view()), a.id));
    }

    bool ok() const noexcept { return failures_.empty(); }
    const std::vector<std::string>& failures() const noexcept { return failures_; }

    std::uint64_t writes() const noexcept { return writes_; }
    std::uint64_t syncs() const noexcept { return syncs_; }
    std::uint64_t write_successes() const noexcept { return write_successes_; }
    std::uint64_t sync_successes() const noexcept { return sync_successes_; }
    std::uint64_t definite_failures() const noexcept { return definite_failures_; }
    std::uint64_t sync_failures() const noexcept { return sync_failures_; }
    std::uint64_t unknown() const noexcept { return unknown_; }
    std::uint64_t transfers_handed_over() const noexcept { return transfers_handed_over_; }
    std::uint64_t transfers_failed() const noexcept { return transfers_failed_; }

private:
    using key = std::tuple<peer_id, std::uint64_t, request_id>;
    struct no_txn {
        zxid id;
        shared_bytes txn;
    };
    std::map<key, std::pair<client_completion, zxid>> early_;  ///< with last_applied then
    struct request {
        client_op op;
        std::string txn;
        zxid must_see;  // the highest successful write when it was submitted (syncs)
        int completions = 0;
    };

    void fail(std::string what) {
        if (failures_.size() < 100) failures_.push_back(std::move(what));
    }

    std::map<key, request> requests_;
    std::set<std::string> failed_txns_;
    zxid best_success_;
    std::vector<std::string> failures_;
    std::uint64_t writes_ = 0, syncs_ = 0, write_successes_ = 0, sync_successes_ = 0,
                  definite_failures_ = 0, sync_failures_ = 0, unknown_ = 0,
                  transfers_handed_over_ = 0, transfers_failed_ = 0;
};

}  // namespace zab::testing
