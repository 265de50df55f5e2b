// tests/kv/nemesis/history_check.hpp — what the nemesis test checks once the run is over,
// against the committed log of a replica (the total order of every write that took effect):
//
//   - Writes. Every acknowledged write was applied exactly once, with the outcome its client
//     was told (a CAS answered :1 matched); a write refused with a definite error (-NOQUORUM,
//     -BUSY, ...) was never applied; one whose outcome stayed unknown was applied at most once.
//   - Sessions (the guarantee of local reads, examples/kv/README.md, "What a client gets"): on one
//     connection a client sees its own acknowledged writes and never goes back in time. A
//     read answered from a replica's state after its first q committed transactions must
//     find its value there; the check picks, read by read, the earliest q consistent with
//     everything the connection saw before (at least the position of each write it was
//     acknowledged, at least the q of each earlier read). Choosing the earliest never rejects
//     a history the real positions explain, so a failure is a real violation.
//   - Linearizability of writes, CAS and linearizable reads is checked separately with
//     zab::testing::check_linearizability (kv_nemesis.cpp builds that history).
//
// Values are unique per write (the client id and sequence number are in them), so a value
// read names the one write that stored it.
//
// Expiry: a key is removed only by a replicated TICK (kv_state_machine.hpp), and a replica
// answers a read from the log prefix it applied whatever its own clock says. So a nil read
// is explained only by a stretch of the log where the key is absent, as any other read; a
// replica hiding a key by its reader's clock before the TICK is a violation here.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kv/kv_command.hpp"
#include "kv/kv_state_machine.hpp"
#include "zab/core/concepts.hpp"

namespace zab::kv::nemesis {

/// A write a client issued, with what it learned.
struct write_record {
    enum class fate { acknowledged, refused, unknown };
    request_tag tag;
    std::string key;
    std::string value;
    std::optional<std::string> expected;  ///< CAS: the value it expected; nullopt for SET
    bool if_absent = false;    ///< SET ... NX (`expected` nullopt): set only if absent
    fate result = fate::unknown;
    bool cas_matched = false;  ///< acknowledged CAS: the answer (:1); SET NX: it was set
    std::string refusal;       ///< refused: the error text
    /// A collection command (RPUSH, LPOP, SADD, SREM; `value` its element or empty): its
    /// name, and once acknowledged the RESP reply the client got, which the log's outcome
    /// must repeat (the reply of the call it applies). Empty for the string writes.
    std::string verb;
    std::optional<std::string> reply;
};

/// What one client saw on its connections, in its own order.
struct session_event {
    std::uint64_t session = 0;  ///< changes with every new connection
    bool is_read = true;
    std::string key;                   ///< read
    std::optional<std::string> value;  ///< read: what it returned (nullopt: nil)
    request_tag tag;                   ///< an acknowledged write
};

/// The committed log replayed through the key-value state machine.
struct replay {
    /// For each tag applied (not as a duplicate): the position (transactions applied, this
    /// one included) and the outcome.
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<std::uint64_t, outcome>> applied;
    std::uint64_t duplicates = 0;
    /// For each key, its values in order with the position each became current; the first
    /// entry is (0, nullopt): absent before any write.
    std::map<std::string, std::vector<std::pair<std::uint64_t, std::optional<std::string>>>>
        values;
    /// For each key, parallel to `values`: the deadline of that value (ms since the epoch by
    /// the map's clock), 0 for none. For reports and tests: a read is explained by the
    /// values alone.
    std::map<std::string, std::vector<std::uint64_t>> expiries;
    /// For each key, where each value stands in `values` (the last time it was stored).
    std::map<std::string, std::unordered_map<std::string, std::size_t>> value_positions;
    std::uint64_t transactions = 0;
    std::uint32_t digest = 0;
    zxid last{};
    std::vector<std::string> problems;
};

inline std::pair<std::uint64_t, std::uint64_t> tag_key(const request_tag& t) {
    return {t.client_id, t.sequence};
}

/// Replays `records` (a whole log, from the first transaction; or, after `snapshot`, the
/// records that follow it: then positions count from the snapshot and the writes it holds
/// are not in `applied`) through a fresh machine.
inline replay replay_log(const std::vector<log_record>& records,
                         const std::optional<log_snapshot>& snapshot = std::nullopt) {
    replay r;
    kv_state_machine machine;
    if (snapshot) {
        if (auto restored = machine.restore(snapshot->last_included, snapshot->state.view());
            !restored) {
            r.problems.push_back(fmt::format("the log's snapshot at {} does not restore: {}",
                                             snapshot->last_included,
                                             restored.error().message()));
        }
        for (const auto& [key, entry] : machine.contents()) {  // current at position 0
            if (entry.items) continue;  // a collection: `values` holds strings only
            r.values[key].emplace_back(0, entry.value);
            r.expiries[key].push_back(entry.expires_ms);
            r.value_positions[key][entry.value] = 0;
        }
    }
    for (const log_record& record : records) {
        // Applied whatever it holds, as every replica did: the digests must still agree.
        const outcome last_outcome =
            outcome_of_response(machine.apply(record.id, record.txn.view()).view())
                .value_or(outcome::failure("outcome unknown"));
        const std::uint64_t position = ++r.transactions;
        auto command = kv::decode(record.txn.view());
        if (!command) {
            r.problems.push_back(fmt::format("the log's transaction {} does not decode: {}",
                                             record.id, command.error().message()));
            continue;
        }
        if (command.value().tag) {
            if (last_outcome.duplicate) {
                ++r.duplicates;
            } else if (!r.applied.emplace(tag_key(*command.value().tag),
                                          std::pair{position, last_outcome})
                            .second) {
                r.problems.push_back(fmt::format("tag {}/{} applied twice (the second at {})",
                                                 command.value().tag->client_id,
                                                 command.value().tag->sequence, record.id));
            }
        }
        // Every key that changed: a block writes several, and a TICK (or a version-2 record)
        // may remove keys that expired. A collection counts as no string (absent here).
        std::vector<std::string> changed;
        for (const auto& [key, entry] : machine.contents()) {
            const auto known = r.values.find(key);
            if (entry.items ? known != r.values.end() && known->second.back().second
                            : known == r.values.end() || known->second.back().second != entry.value)
                changed.push_back(key);
        }
        for (const auto& [key, history] : r.values)
            if (history.back().second && !machine.exists(key)) changed.push_back(key);
        for (const std::string& key : changed) {
            auto& history = r.values[key];
            auto& deadlines = r.expiries[key];
            if (history.empty()) {
                history.emplace_back(0, std::nullopt);
                deadlines.push_back(0);
            }
            auto now = machine.get(key);
            if (now) r.value_positions[key][*now] = history.size();
            deadlines.push_back(machine.expiry_of(key).value_or(0));
            history.emplace_back(position, std::move(now));
        }
    }
    r.digest = machine.digest();
    r.last = machine.last_applied();
    return r;
}

/// `text` with CR and LF shown as \\r and \\n (RESP replies in the reports).
inline std::string escaped(const std::string& text) {
    std::string out;
    for (const char c : text) out += c == '\r' ? "\\r" : c == '\n' ? "\\n" : std::string(1, c);
    return out;
}

/// The writes' fates against the log (see the file comment). Problems appended to `out`.
inline void check_writes(const std::vector<write_record>& writes, const replay& r,
                         std::vector<std::string>& out) {
    for (const write_record& w : writes) {
        const auto it = r.applied.find(tag_key(w.tag));
        const std::string name = fmt::format(
            "write {}/{} ({} {})", w.tag.client_id, w.tag.sequence,
            !w.verb.empty() ? w.verb.c_str() : w.expected ? "CAS" : w.if_absent ? "SET NX" : "SET",
            w.key);
        switch (w.result) {
            case write_record::fate::acknowledged: {
                if (it == r.applied.end()) {
                    out.push_back(name + " was acknowledged but is not in the committed log");
                    break;
                }
                const outcome& o = it->second.second;
                if (w.reply) {  // a collection command: a call, its outcome the reply
                    if (o.kind != outcome_kind::reply || o.reply != *w.reply)
                        out.push_back(fmt::format("{}: the client was answered '{}' but the log "
                                                  "applies it as outcome {} '{}'",
                                                  name, escaped(*w.reply), static_cast<int>(o.kind),
                                                  escaped(o.reply)));
                    break;
                }
                if (w.if_absent) {  // a call: its reply, +OK if it was set, nil if not
                    const std::string want = w.cas_matched ? "+OK\r\n" : "$-1\r\n";
                    if (o.kind != outcome_kind::reply || o.reply != want)
                        out.push_back(fmt::format("{}: the client was answered {} but the log "
                                                  "applies it as outcome {} '{}'",
                                                  name, w.cas_matched ? "OK" : "nil",
                                                  static_cast<int>(o.kind), o.reply));
                    break;
                }
                const outcome_kind expected_kind =
                    !w.expected ? outcome_kind::ok
                                : (w.cas_matched ? outcome_kind::cas_matched
                                                 : outcome_kind::cas_mismatched);
                // SET with options (PX) is applied as a call: its outcome is the reply +OK.
                const bool set_ok = expected_kind == outcome_kind::ok &&
                                    o.kind == outcome_kind::reply && o.reply == "+OK\r\n";
                if (o.kind != expected_kind && !set_ok)
                    out.push_back(fmt::format("{}: the client was answered {} but the log "
                                              "applies it as outcome {}",
                                              name, static_cast<int>(expected_kind),
                                              static_cast<int>(o.kind)));
                break;
            }
            case write_record::fate::refused:
                if (it != r.applied.end())
                    out.push_back(fmt::format("{} was refused ({}) but the log applies it at "
                                              "position {}",
                                              name, w.refusal, it->second.first));
                break;
            case write_record::fate::unknown: break;
        }
    }
}

/// Per-connection guarantees of every client's reads (see the file comment).
inline void check_sessions(const std::vector<std::vector<session_event>>& clients,
                           const replay& r, std::vector<std::string>& out) {
    constexpr std::uint64_t infinity = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t c = 0; c < clients.size(); ++c) {
        std::uint64_t session = 0;
        std::uint64_t floor = 0;  // the earliest state the connection may still be in
        std::string why_floor = "the start";
        for (const session_event& e : clients[c]) {
            if (e.session != session) {
                session = e.session;
                floor = 0;
                why_floor = "the start";
            }
            if (!e.is_read) {
                const auto it = r.applied.find(tag_key(e.tag));
                if (it == r.applied.end()) continue;  // check_writes reports it
                if (it->second.first > floor) {
                    floor = it->second.first;
                    why_floor = fmt::format("its write {}/{}", e.tag.client_id, e.tag.sequence);
                }
                continue;
            }
            const auto history = r.values.find(e.key);
            std::optional<std::pair<std::uint64_t, std::uint64_t>> interval;
            if (history == r.values.end()) {
                if (!e.value) interval.emplace(0, infinity);
            } else {
                const auto& h = history->second;
                std::optional<std::size_t> i;
                if (!e.value) {
                    // Absent (maybe more than once, after a DEL or an expiry): the earliest
                    // such stretch still open at the floor, or the last one (then reported
                    // below).
                    for (std::size_t j = 0; j < h.size(); ++j) {
                        if (h[j].second) continue;
                        i = j;
                        if (j + 1 == h.size() || h[j + 1].first > floor) break;
                    }
                } else if (const auto& positions = r.value_positions.at(e.key);
                           positions.contains(*e.value)) {
                    i = positions.at(*e.value);
                }
                if (i) interval.emplace(h[*i].first, *i + 1 < h.size() ? h[*i + 1].first : infinity);
            }
            const std::string shown = e.value ? fmt::format("\"{}\"", *e.value) : "nil";
            if (!interval) {
                out.push_back(fmt::format("client {} read {} = {}: no committed write stored it",
                                          c, e.key, shown));
            } else if (interval->second <= floor) {
                out.push_back(fmt::format(
                    "client {} read {} = {} on session {}: that value was replaced at "
                    "position {}, but the connection had already reached position {} ({})",
                    c, e.key, shown, session, interval->second, floor, why_floor));
            } else if (interval->first > floor) {
                floor = interval->first;
                why_floor = fmt::format("its read of {} = {}", e.key, shown);
            }
        }
    }
}

}  // namespace zab::kv::nemesis
