// examples/kv/kv_store.hpp — the replicated key-value map, as a zab::result_machine (the
// inner machine of kv_state_machine.hpp, which adds the client sessions of TAGGED).
//
// zab hands `apply` each committed transaction — an encoded kv::command (kv_command.hpp) — in
// zxid order on every replica; applying is deterministic, so every replica holds the same
// map. Nothing here does I/O or reads a clock.
//
// Commands. SET/DEL/INCR/CAS as typed ops; every other command (kv_calls.hpp) as CALLS, one
// call or a MULTI/EXEC block, executed here as Redis executes it. A block is one
// transaction: its calls run one after the other with nothing between them, on every
// replica alike; a call that fails at run time (INCR of a non-integer) answers its error
// and the others still apply, as in Redis. Its watched keys (WATCH) are compared with their
// versions (the zxid of each key's last write; 0 while absent) first: one differs, nothing
// applies and the block answers a null array.
//
// Time and expiry. Whether a key is present is a function of the transactions applied,
// never of a clock read here or by a reader. The map's clock (`now_ms()`) is the largest
// stamp of the TICKs applied: the leader proposes a TICK, stamped with its own wall clock,
// once a key is due by that clock (kv_server.cpp), and applying it removes every key whose
// expiry is at or before the clock. Nothing else moves the clock and nothing else removes
// an expired key: the map never holds a key expired by its clock, and every read (GET,
// EXISTS, TTL, KEYS, SCAN, DBSIZE, MGET, TYPE, inside a block or not, local or after a
// ZSYNC) sees a key until the TICK that removes it, whatever the reader's clock says. So
// a conditional write (SET NX, WATCH/EXEC, INCR) and a read agree on whether a key has
// expired: the expiry takes effect at the TICK's position in the order of transactions.
//
// Every other command's stamp (its proposer's wall clock, a follower's too) is the base of
// the relative expiries it sets: EX, PX, SETEX, EXPIRE count from the command's time, the
// later of the map's clock and its stamp, and a deadline at or before that time (a
// non-positive EXPIRE, a past EXAT) removes the key at once. The stamp is in the log, so
// every replica computes the same deadline; it never moves the clock, so a proposer whose
// clock is ahead only gives the keys it writes longer lives (one behind, at worst lives
// counted from the map's clock), and never expires anyone else's keys. The clock never goes
// back: a new leader whose clock is behind removes nothing until its clock passes the next
// deadline. A leader whose clock is ahead by D removes keys up to D early, and the map's
// clock stays ahead until the real time catches up (later relative expiries count from it,
// so keys then live up to D longer); nothing here guards against that. Version-2 records
// (kv_command.hpp `legacy_clock`) are applied as kv_server applied them before: their
// stamp advances the clock too. TTL and PTTL show the time left from the command's time in
// a block, and from the later of the map's clock and the reader's clock outside one (0
// once that has passed the deadline: the key is still there until the TICK).
//
// Outcomes. `apply` never fails (concepts.hpp): a refusal is an `outcome` (kv_outcome.hpp).
// `apply` returns it, encoded (`encode_outcome`): zab hands it to the replica that accepted
// the write with the write's completion (docs/protocol.md §6.6); nothing is kept here.
//
// Snapshots. `snapshot()` encodes the map on the calling thread; `snapshot_later()` (zab's
// deferred_snapshot_machine) hands over a view that another thread encodes while `apply`
// goes on (kv_deferred_snapshot.hpp): compaction then costs the replica's thread almost
// nothing. A view not written yet makes every change to a key it has not reached copy that
// key's entry once, and holds a mutex around each `apply` until it is written.
//
// Exactly once is not this map's business: kv_state_machine.hpp puts it behind
// zab::session_machine, which answers a TAGGED retry from its session table. A command's tag
// is ignored here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include "decimal.hpp"
#include "kv_calls.hpp"
#include "kv_collection.hpp"
#include "kv_collection_calls.hpp"
#include "kv_command.hpp"
#include "kv_deferred_snapshot.hpp"
#include "kv_outcome.hpp"
#include "kv_snapshot.hpp"
#include "resp_writer.hpp"
#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/zxid.hpp"
#include "zab/session/session_machine.hpp"

namespace zab::kv {

/// The largest reply of a read inside a MULTI block (one GET, MGET, KEYS or SCAN): as
/// kv_server's bound on a read outside one, but a constant, since every replica must answer
/// the same.
inline constexpr std::size_t max_block_read_reply_bytes = std::size_t{64} << 20;

class kv_store {
public:
    kv_store() = default;

    // The key index points into `state_.data`: a copy rebuilds it; a move carries it over
    // (std::map's nodes, and so the iterators, move with the map) and empties the source. A
    // deferred snapshot of the source being written is detached first (it keeps what it has
    // not written yet): it reads the source's map. A copy or a move starts with none.
    kv_store(const kv_store& other) : state_{other.state_} { rebuild_index(); }
    kv_store(kv_store&& other) noexcept
        : state_{(other.detach_view(), std::move(other.state_))},
          index_{std::move(other.index_)},
          expiry_{std::move(other.expiry_)},
          by_hash_{std::move(other.by_hash_)} {
        other.state_.data.clear();
        other.index_.clear();
        other.expiry_.clear();
        other.by_hash_.clear();
    }
    kv_store& operator=(const kv_store& other) {
        if (this != &other) *this = kv_store{other};
        return *this;
    }
    kv_store& operator=(kv_store&& other) noexcept {
        if (this == &other) return *this;
        detach_view();
        other.detach_view();
        state_ = std::move(other.state_);
        index_ = std::move(other.index_);
        expiry_ = std::move(other.expiry_);
        by_hash_ = std::move(other.by_hash_);
        other.state_.data.clear();
        other.index_.clear();
        other.expiry_.clear();
        other.by_hash_.clear();
        return *this;
    }
    ~kv_store() { detach_view(); }

    // --- zab::result_machine ----------------------------------------------------------------

    /// Applies committed transaction `z` and returns its outcome, encoded (`encode_outcome`).
    /// zab delivers zxids in increasing order (docs/design.md rule 5); anything else is a
    /// bug in zab, hence asserted.
    shared_bytes apply(zxid z, byte_view txn) {
        ZAB_ASSERT(state_.last_applied < z, "kv: transactions applied out of zxid order");
        const changing guard{*this};
        const outcome result = run(z, txn);
        state_.last_applied = z;
        return encode_outcome(result);
    }

    /// zab::retry_aware_machine: transaction `z`, a TAGGED retry, was answered by the
    /// sessions and is not applied. A version-2 record's stamp still moves the clock, as it
    /// did when kv_server applied it before the sessions moved into zab: old logs replay to
    /// the states they gave (and to what an old checkpoint after them holds).
    void on_retry(zxid z, byte_view txn) {
        ZAB_ASSERT(state_.last_applied < z, "kv: transactions applied out of zxid order");
        const changing guard{*this};
        if (const auto c = decode(txn); c && c.value().legacy_clock) advance_clock(c.value().stamp_ms);
        state_.last_applied = z;
    }

    zxid last_applied() const noexcept { return state_.last_applied; }

    /// The image of the replicated state (kv_snapshot.hpp): byte-identical on replicas that
    /// applied the same transactions.
    shared_bytes snapshot() const { return encode_snapshot(state_); }

    /// zab::deferred_snapshot_machine: the image `snapshot()` would return now, written when
    /// the result is called, once, on any one thread, while `apply` goes on on this one. A
    /// view taken earlier and not written yet is detached first (it copies what it has not
    /// written: O(keys), so take one at a time, as zab does).
    deferred_snapshot snapshot_later() const {
        detach_view();
        auto view = std::make_shared<detail::deferred_image>(state_);
        view_ = view;
        return [view] { return view->write(); };
    }

    /// Replaces the state by an image taken at `z`. On any error the state is unchanged:
    /// `errc::bad_checksum`, `errc::unsupported_version`, `errc::corrupt` (including an image
    /// whose zxid is not `z`, and one that holds clients: they are kv_state_machine's).
    result<void> restore(zxid z, byte_view image) {
        auto decoded = decode_snapshot(image, 0);
        if (!decoded) return decoded.error();
        return restore(z, std::move(decoded).value());
    }
    /// The same from a decoded state (kv_state_machine's conversion of an older image).
    result<void> restore(zxid z, kv_state state) {
        if (state.last_applied != z || !state.clients.empty()) return make_error_code(errc::corrupt);
        detach_view();
        state_ = std::move(state);
        rebuild_index();
        return success();
    }

    // --- reads (local: as of last_applied()) ------------------------------------------------
    //
    // Every read sees the map as the last transaction left it: a key is present until the
    // TICK that removes it is applied, whatever the reader's clock (see "Time and expiry").

    /// `key`'s string, or nullopt if it is absent or holds a collection.
    std::optional<std::string> get(std::string_view key) const {
        const auto it = find(key);
        if (it == state_.data.end() || it->second.items) return std::nullopt;
        return it->second.value;
    }
    bool exists(std::string_view key) const { return find(key) != state_.data.end(); }
    /// The string of `key` in place (no copy), or nullptr (absent or a collection); valid
    /// until the next apply.
    const std::string* value_of(std::string_view key) const {
        const auto it = find(key);
        return it == state_.data.end() || it->second.items ? nullptr : &it->second.value;
    }
    /// The collection `key` holds in place, or nullptr (absent or a string); valid until the
    /// next apply.
    const collection* collection_of(std::string_view key) const {
        const auto it = find(key);
        return it == state_.data.end() ? nullptr : it->second.items.get();
    }
    /// The expiry of `key` (ms since the epoch, by the map's clock), or nullopt if it has
    /// none or is absent.
    std::optional<std::uint64_t> expiry_of(std::string_view key) const {
        const auto it = find(key);
        if (it == state_.data.end() || it->second.expires_ms == 0) return std::nullopt;
        return it->second.expires_ms;
    }
    /// The map's clock: the largest TICK stamp applied (ms since the Unix epoch).
    std::uint64_t now_ms() const noexcept { return state_.now_ms; }
    /// The earliest expiry of any key, if one has an expiry (the leader proposes a TICK once
    /// its clock passes it).
    std::optional<std::uint64_t> next_expiry() const {
        if (expiry_.empty()) return std::nullopt;
        return expiry_.begin()->first;
    }
    /// What WATCH records: the zxid value of `key`'s last write, 0 if absent.
    std::uint64_t version_of(std::string_view key) const {
        const auto it = find(key);
        return it == state_.data.end() ? 0 : it->second.version;
    }

    /// The reply to a read command (call_kind::read in kv_calls.hpp, checked by check_call)
    /// from this state. `reader_now_ms` (the reader's clock) only changes the time left that
    /// TTL and PTTL show, never whether a key is present. A reply that would exceed
    /// `max_reply_bytes` (GET, MGET, KEYS, SCAN) is an error instead, refused before it is
    /// built.
    std::string read_call(const std::vector<std::string>& args, std::uint64_t reader_now_ms,
                          std::size_t max_reply_bytes = std::size_t{64} << 20) const {
        std::string out;
        if (auto problem = check_call(args)) {
            resp::write_error(out, *problem);
        } else if (find_command(args[0])->kind != call_kind::read) {
            resp::write_error(out, "ERR not a read command");
        } else {
            read_into(out, args, reader_now_ms, max_reply_bytes);
        }
        return out;
    }
    /// Number of keys.
    std::size_t size() const noexcept { return state_.data.size(); }
    /// Number of keys with an expiry (INFO's db0 expires=).
    std::size_t expiring_size() const noexcept { return expiry_.size(); }
    /// Every key and value, in key order.
    const kv_map& contents() const noexcept { return state_.data; }

    // --- comparing replicas ----------------------------------------------------------------

    /// The replicated state (map, clock, last_applied), e.g. to compare replicas.
    const kv_state& state() const noexcept { return state_; }
    /// The CRC32C a snapshot image carries: equal states have equal digests. A quick check
    /// for the demo; tests compare `state()` too. (Not the CRC of the whole image: a CRC over
    /// a message followed by its own CRC is the same constant for every message.)
    std::uint32_t digest() const {
        const shared_bytes image = snapshot();
        return crc32c(image.view().first(image.size() - detail::snapshot_crc_bytes));
    }

private:
    /// Decodes and executes one transaction.
    outcome run(zxid z, byte_view txn) {
        auto decoded = decode(txn);
        if (!decoded) {
            return outcome::failure(std::string{error_malformed_prefix} +
                                    decoded.error().message());
        }
        command& c = decoded.value();
        if (c.legacy_clock || std::holds_alternative<tick_op>(c.op)) advance_clock(c.stamp_ms);
        command_now_ms_ = std::max(state_.now_ms, c.stamp_ms);
        return execute(std::move(c.op), z);  // a tag was kv_state_machine's sessions' to check
    }

    outcome execute(operation&& op, zxid z) {
        return std::visit([this, z](auto&& o) { return execute_one(std::move(o), z); },
                          std::move(op));
    }

    outcome execute_one(set_op&& op, zxid z) {
        put(std::move(op.key), std::move(op.value), z, false);
        return outcome::ok();
    }

    outcome execute_one(del_op&& op, zxid) {
        // Redis answers DEL with the number of keys removed.
        return outcome::integer_value(remove(op.key) ? 1 : 0);
    }

    outcome execute_one(incr_op&& op, zxid z) {
        auto r = add_integer(op.key, 1, z);
        if (auto* error = std::get_if<std::string_view>(&r))
            return outcome::failure(std::string{*error});
        return outcome::integer_value(std::get<std::int64_t>(r));
    }

    outcome execute_one(cas_op&& op, zxid z) {
        const auto it = find(op.key);
        const bool present = it != state_.data.end();
        const bool matched = op.expected ? present && !it->second.items &&
                                               it->second.value == *op.expected
                                         : !present;
        if (!matched) return outcome::cas(false);
        put(std::move(op.key), std::move(op.desired), z, false);
        return outcome::cas(true);
    }

    outcome execute_one(tick_op&&, zxid) { return outcome::ok(); }

    outcome execute_one(calls_op&& op, zxid z) {
        std::string out;
        if (!op.multi) {
            run_call(out, op.calls.front(), z);
            return outcome::resp(std::move(out));
        }
        for (const auto& w : op.watches) {
            if (version_of(w.key) != w.version) {
                resp::write_null_array(out);
                return outcome::resp(std::move(out));
            }
        }
        resp::write_array_header(out, op.calls.size());
        for (const auto& call : op.calls) run_call(out, call, z);
        return outcome::resp(std::move(out));
    }

    /// One call's reply appended to `out`: checked as the session checked it (bytes from the
    /// log are hostile too), then run.
    void run_call(std::string& out, const std::vector<std::string>& args, zxid z) {
        if (auto problem = check_call(args)) return resp::write_error(out, *problem);
        if (find_command(args[0])->kind == call_kind::read)
            return read_into(out, args, command_now_ms_, max_block_read_reply_bytes);
        write_call(out, args, z);
    }

    /// INCR and friends: `key`'s integer plus `by`, stored (its expiry kept), or the error.
    std::variant<std::int64_t, std::string_view> add_integer(const std::string& key,
                                                             std::int64_t by, zxid z) {
        // Redis semantics: a missing key counts as 0; the value must be a strict decimal
        // int64; going past INT64_MAX or INT64_MIN is an error, not a wrap.
        const auto it = find(key);
        std::int64_t current = 0;
        if (it != state_.data.end()) {
            if (it->second.items) return collections::text::wrong_type;
            const auto parsed = parse_int64(it->second.value);
            if (!parsed) return error_not_integer;
            current = *parsed;
        }
        if ((by > 0 && current > std::numeric_limits<std::int64_t>::max() - by) ||
            (by < 0 && current < std::numeric_limits<std::int64_t>::min() - by))
            return error_overflow;
        const std::int64_t next = current + by;
        put(std::string{key}, format_int64(next), z, true);
        return next;
    }

    /// A write command (checked by check_call) executed, its reply appended to `out`.
    void write_call(std::string& out, const std::vector<std::string>& a, zxid z) {
        const std::string name = detail::lower(a[0]);
        if (const auto type = collections::family_of(name))
            return collection_write(out, name, a, *type, z);
        const std::uint64_t now = command_now_ms_;  // the base of relative expiries
        const auto integer = [&out](std::int64_t v) { resp::write_integer(out, v); };
        // A string command that reads the value answers WRONGTYPE for a collection (SET
        // without GET, MSET and DEL replace or remove any value, as in Redis).
        const auto holds_collection = [this](const std::string& key) {
            const auto it = find(key);
            return it != state_.data.end() && it->second.items;
        };
        const bool reads_value = name == "getset" || name == "getdel" || name == "append" ||
                                 name == "incrbyfloat" ||
                                 (name == "set" && std::get<set_options>(parse_set_options(a)).get);
        if (reads_value && holds_collection(a[1]))
            return resp::write_error(out, collections::text::wrong_type);
        const auto bulk_or_null = [&out](const std::string* v) {
            if (v) {
                resp::write_bulk_string(out, *v);
            } else {
                resp::write_null_bulk(out);
            }
        };
        if (name == "set" || name == "setnx" || name == "setex" || name == "psetex") {
            set_options o;
            std::size_t value_at = 2;
            if (name == "set") {
                o = std::get<set_options>(parse_set_options(a));
            } else if (name == "setnx") {
                o.nx = true;
            } else {
                o.unit = name == "setex" ? set_options::expiry::ex : set_options::expiry::px;
                o.amount = *parse_int64(a[2]);
                value_at = 3;
            }
            const auto it = find(a[1]);
            const bool present = it != state_.data.end();
            std::optional<std::string> old;
            if (present) old = it->second.value;
            const bool go = !(o.nx && present) && !(o.xx && !present);
            if (go) {
                std::uint64_t expires = 0;
                bool expiring = true;
                switch (o.unit) {
                    case set_options::expiry::none: expiring = false; break;
                    case set_options::expiry::keepttl: expiring = false; break;
                    case set_options::expiry::ex: expires = saturating_add(now, o.amount, 1000); break;
                    case set_options::expiry::px: expires = saturating_add(now, o.amount, 1); break;
                    case set_options::expiry::exat: expires = static_cast<std::uint64_t>(o.amount) * 1000; break;
                    case set_options::expiry::pxat: expires = static_cast<std::uint64_t>(o.amount); break;
                }
                put(std::string{a[1]}, std::string{a[value_at]}, z,
                    o.unit == set_options::expiry::keepttl);
                if (expiring) expire_at(a[1], expires, z);
            }
            if (name == "setnx") return integer(go ? 1 : 0);
            if (o.get) return bulk_or_null(old ? &*old : nullptr);
            if (!go) return resp::write_null_bulk(out);
            return resp::write_simple_string(out, "OK");
        }
        if (name == "getset" || name == "getdel") {
            const auto it = find(a[1]);
            std::optional<std::string> old;
            if (it != state_.data.end()) old = it->second.value;
            if (name == "getset") {
                put(std::string{a[1]}, std::string{a[2]}, z, false);
            } else {
                remove(a[1]);
            }
            return bulk_or_null(old ? &*old : nullptr);
        }
        if (name == "mset" || name == "msetnx") {
            if (name == "msetnx") {
                for (std::size_t i = 1; i < a.size(); i += 2)
                    if (find(a[i]) != state_.data.end()) return integer(0);
            }
            for (std::size_t i = 1; i < a.size(); i += 2)
                put(std::string{a[i]}, std::string{a[i + 1]}, z, false);
            if (name == "msetnx") return integer(1);
            return resp::write_simple_string(out, "OK");
        }
        if (name == "del" || name == "unlink") {
            std::int64_t removed = 0;
            for (std::size_t i = 1; i < a.size(); ++i) removed += remove(a[i]) ? 1 : 0;
            return integer(removed);
        }
        if (name == "incr" || name == "decr" || name == "incrby" || name == "decrby") {
            std::int64_t by = name == "incr" ? 1 : name == "decr" ? -1 : *parse_int64(a[2]);
            if (name == "decrby") by = -by;  // check_call refused INT64_MIN
            auto r = add_integer(a[1], by, z);
            if (auto* error = std::get_if<std::string_view>(&r)) return resp::write_error(out, *error);
            return integer(std::get<std::int64_t>(r));
        }
        if (name == "incrbyfloat") {
            const auto it = find(a[1]);
            long double current = 0;
            if (it != state_.data.end()) {
                const auto parsed = parse_long_double(it->second.value);
                if (!parsed) return resp::write_error(out, text::not_float);
                current = *parsed;
            }
            const long double next = current + *parse_long_double(a[2]);
            if (!std::isfinite(next)) return resp::write_error(out, text::nan_or_inf);
            std::string formatted = format_long_double(next);
            put(std::string{a[1]}, std::string{formatted}, z, true);
            return resp::write_bulk_string(out, formatted);
        }
        if (name == "append") {
            const auto it = find(a[1]);
            std::string value = it == state_.data.end() ? std::string{} : it->second.value;
            value += a[2];
            const auto length = static_cast<std::int64_t>(value.size());
            put(std::string{a[1]}, std::move(value), z, true);
            return integer(length);
        }
        if (name == "expire" || name == "pexpire" || name == "expireat" || name == "pexpireat") {
            const std::int64_t t = *parse_int64(a[2]);
            const auto condition = std::get<expire_condition>(parse_expire_condition(a));
            const auto it = find(a[1]);
            if (it == state_.data.end()) return integer(0);
            const bool seconds = name == "expire" || name == "expireat";
            const bool relative = name == "expire" || name == "pexpire";
            // Milliseconds since the epoch, as a signed value: a past time deletes the key.
            const std::int64_t base = relative ? static_cast<std::int64_t>(now) : 0;
            std::int64_t when = 0;
            const std::int64_t scaled = seconds ? t * 1000 : t;  // check_call bounded t
            if (__builtin_add_overflow(base, scaled, &when)) return resp::write_error(out, text::invalid_expire(name));
            const std::uint64_t current = it->second.expires_ms;  // 0: none, i.e. infinite
            const bool met = [&] {
                switch (condition) {
                    case expire_condition::always: return true;
                    case expire_condition::nx: return current == 0;
                    case expire_condition::xx: return current != 0;
                    case expire_condition::gt:
                        return current != 0 && when > static_cast<std::int64_t>(current);
                    case expire_condition::lt:
                        return current == 0 || when < static_cast<std::int64_t>(current);
                }
                return false;
            }();
            if (!met) return integer(0);
            expire_at(a[1], when <= 0 ? 1 : static_cast<std::uint64_t>(when), z);
            return integer(1);
        }
        if (name == "persist") {
            const auto it = find(a[1]);
            if (it == state_.data.end() || it->second.expires_ms == 0) return integer(0);
            set_expiry(it, 0);
            it->second.version = z.value();
            return integer(1);
        }
        if (name == "flushdb" || name == "flushall") {
            if (changing_) changing_->detach();
            state_.data.clear();
            index_.clear();
            expiry_.clear();
            by_hash_.clear();
            return resp::write_simple_string(out, "OK");
        }
        if (name == "cas" || name == "cas.absent") {
            const bool absent = name == "cas.absent";
            auto r = execute_one(cas_op{a[1], absent ? std::nullopt : std::optional{a[2]},
                                        absent ? a[2] : a[3]},
                                 z);
            return integer(r.kind == outcome_kind::cas_matched ? 1 : 0);
        }
        resp::write_error(out, "ERR not a write command");
    }

    /// A hash, list, set or sorted-set write (kv_collection_calls.hpp) on `a[1]`: WRONGTYPE
    /// for a key of another type; an absent key runs on an empty collection and is stored
    /// if the command left it non-empty; a key left empty is removed. Its expiry stays, and
    /// its version becomes `z` if the command changed it.
    void collection_write(std::string& out, const std::string& name,
                          const std::vector<std::string>& a, value_type type, zxid z) {
        const auto it = find(a[1]);
        if (it == state_.data.end()) {
            collection fresh = empty_collection(type);
            collections::write(out, name, a, fresh, z.value());
            if (size_of(fresh) != 0)
                insert(std::string{a[1]},
                       kv_entry{{}, 0, z.value(), boxed_collection{std::move(fresh)}});
            return;
        }
        if (it->second.type() != type) return resp::write_error(out, collections::text::wrong_type);
        touch(it);
        if (!collections::write(out, name, a, *it->second.items, z.value())) return;
        if (size_of(*it->second.items) == 0) return erase(it);
        it->second.version = z.value();
    }

    static std::uint64_t saturating_add(std::uint64_t now, std::int64_t amount,
                                        std::uint64_t unit) {
        const auto a = static_cast<std::uint64_t>(amount);  // > 0 (parse_set_options)
        if (a > (std::numeric_limits<std::uint64_t>::max() - now) / unit)
            return std::numeric_limits<std::uint64_t>::max();
        return now + a * unit;
    }

    /// Sets `key`'s expiry to `when` (ms since the epoch, > 0): a time at or before the
    /// command's time removes the key at once (Redis deletes a key given a past expiry).
    void expire_at(const std::string& key, std::uint64_t when, zxid z) {
        const auto it = find(key);
        if (it == state_.data.end()) return;
        if (when <= command_now_ms_) {
            erase(it);
            return;
        }
        set_expiry(it, when);
        it->second.version = z.value();
    }

    /// Stores `value` under `key` at `z` (replacing a collection); its expiry is cleared
    /// unless `keep_ttl`.
    void put(std::string&& key, std::string&& value, zxid z, bool keep_ttl) {
        if (const auto it = find(key); it != state_.data.end()) {
            touch(it);
            it->second.items.reset();
            it->second.value = std::move(value);
            it->second.version = z.value();
            if (!keep_ttl) set_expiry(it, 0);
        } else {
            insert(std::move(key), kv_entry{std::move(value), 0, z.value(), {}});
        }
    }

    /// Removes `key`; true if it was there.
    bool remove(std::string_view key) {
        const auto it = find(key);
        if (it == state_.data.end()) return false;
        erase(it);
        return true;
    }

    /// Advances the clock to `stamp` (never back: a new leader's slower clock must not
    /// revive a key) and removes every key expired by then. Only a TICK (or a version-2
    /// record) calls this: the only place keys expire.
    void advance_clock(std::uint64_t stamp) {
        state_.now_ms = std::max(state_.now_ms, stamp);
        while (!expiry_.empty() && expiry_.begin()->first <= state_.now_ms)
            erase(index_.at(expiry_.begin()->second));
    }

    // --- the key index ----------------------------------------------------------------------
    //
    // `state_.data` is an ordered map (snapshots and `contents()` list keys in order), but a
    // lookup in it walks ~17 levels of string compares for 100k keys, each a cache miss: that
    // was the largest cost of applying a SET. Writes and reads find keys through a hash index
    // of views of the map's keys (std::map nodes never move); only a new key walks the tree.
    // The index is never iterated, so nothing about it can reach a reply or a snapshot.

    kv_map::iterator find(std::string_view key) {
        const auto it = index_.find(key);
        return it == index_.end() ? state_.data.end() : it->second;
    }
    kv_map::const_iterator find(std::string_view key) const {
        const auto it = index_.find(key);
        return it == index_.end() ? state_.data.cend() : kv_map::const_iterator{it->second};
    }
    const kv_entry* find_entry(std::string_view key) const {
        const auto it = find(key);
        return it == state_.data.end() ? nullptr : &it->second;
    }
    //
    // Two more derived indexes, rebuilt on copy and restore: `expiry_` (expiry, key) for the
    // keys with one, so that removing the expired ones costs only those; `by_hash_` (hash,
    // key) for SCAN, whose cursor is a position in hash order: keys added or removed during a
    // scan move no other key, so a key present throughout is returned exactly once.

    void insert(std::string&& key, kv_entry&& entry) {
        if (changing_) changing_->before_change(key, nullptr);
        const auto [it, inserted] = state_.data.emplace(std::move(key), std::move(entry));
        ZAB_ASSERT(inserted, "kv: the key index missed a key of the map");
        const std::string_view view{it->first};
        index_.emplace(view, it);
        by_hash_.emplace(key_hash(view), view);
        if (it->second.expires_ms != 0) expiry_.emplace(it->second.expires_ms, view);
    }
    void erase(kv_map::iterator it) {
        touch(it);
        const std::string_view view{it->first};
        index_.erase(view);
        by_hash_.erase({key_hash(view), view});
        if (it->second.expires_ms != 0) expiry_.erase({it->second.expires_ms, view});
        state_.data.erase(it);
    }
    /// `it`'s expiry becomes `when` (0: none). First of a command's changes to the entry
    /// (PERSIST and expire_at change its version after it): its `touch` keeps the entry as it
    /// was for a deferred snapshot.
    void set_expiry(kv_map::iterator it, std::uint64_t when) {
        touch(it);
        const std::string_view view{it->first};
        if (it->second.expires_ms != 0) expiry_.erase({it->second.expires_ms, view});
        it->second.expires_ms = when;
        if (when != 0) expiry_.emplace(when, view);
    }
    // --- the deferred snapshot being written, if any (kv_deferred_snapshot.hpp) --------------

    /// For the length of one transaction: holds the view's lock, and points `changing_` at
    /// the view, while one is being written.
    class changing {
    public:
        explicit changing(kv_store& store) : store_{store}, view_{store.view_.lock()} {
            if (!view_) return;
            lock_ = view_->lock_for_store();
            if (view_->done()) {
                lock_.unlock();
                store.view_.reset();
                return;
            }
            store.changing_ = view_.get();
        }
        ~changing() { store_.changing_ = nullptr; }
        changing(const changing&) = delete;
        changing& operator=(const changing&) = delete;

    private:
        kv_store& store_;
        std::shared_ptr<detail::deferred_image> view_;
        std::unique_lock<std::mutex> lock_;
    };

    /// `it`'s entry is about to change: the view keeps it if it has not written it yet.
    void touch(kv_map::iterator it) {
        if (changing_) changing_->before_change(it->first, &it->second);
    }

    /// Outside a transaction, before the map goes away or is replaced.
    void detach_view() const {
        const auto view = view_.lock();
        if (!view) return;
        const auto lock = view->lock_for_store();
        view->detach();
        view_.reset();
    }

    void rebuild_index() {
        index_.clear();
        expiry_.clear();
        by_hash_.clear();
        index_.reserve(state_.data.size());
        for (auto it = state_.data.begin(); it != state_.data.end(); ++it) {
            const std::string_view view{it->first};
            index_.emplace(view, it);
            by_hash_.emplace(key_hash(view), view);
            if (it->second.expires_ms != 0) expiry_.emplace(it->second.expires_ms, view);
        }
    }

    /// FNV-1a, 64 bits: the same on every platform, so a SCAN cursor means the same on every
    /// replica.
    static std::uint64_t key_hash(std::string_view key) noexcept {
        std::uint64_t h = 0xcbf29ce484222325ull;
        for (const char c : key) {
            h ^= static_cast<unsigned char>(c);
            h *= 0x100000001b3ull;
        }
        return h;
    }

    /// A read command's reply appended to `out` (see read_call). Presence is the map's
    /// alone; `shown_now_ms` is only what TTL and PTTL count the time left from.
    void read_into(std::string& out, const std::vector<std::string>& a,
                   std::uint64_t shown_now_ms, std::size_t max_reply_bytes) const {
        const std::string name = detail::lower(a[0]);
        const std::uint64_t now = std::max(shown_now_ms, state_.now_ms);
        const auto entry = [this](std::string_view key) { return find_entry(key); };
        const auto too_large = [&out, max_reply_bytes](std::string_view advice) {
            resp::write_error(out, "ERR reply too large: more than " +
                                       std::to_string(max_reply_bytes) + " bytes; " +
                                       std::string{advice});
        };
        if (const auto type = collections::family_of(name)) {
            const kv_entry* e = entry(a[1]);
            if (e && e->type() != *type) return resp::write_error(out, collections::text::wrong_type);
            if (e) return collections::read(out, name, a, *e->items, max_reply_bytes);
            return collections::read(out, name, a, empty_collection(*type), max_reply_bytes);
        }
        if ((name == "get" || name == "strlen") && entry(a[1]) && entry(a[1])->items)
            return resp::write_error(out, collections::text::wrong_type);
        if (name == "get" || name == "mget") {
            const bool many = name == "mget";
            // MGET answers nil for a key that holds no string, as Redis does.
            const auto entry = [&](std::string_view key) -> const kv_entry* {
                const kv_entry* e = find_entry(key);
                return e && !e->items ? e : nullptr;
            };
            std::size_t total = many ? 1 + std::to_string(a.size() - 1).size() + 2 : 0;
            for (std::size_t i = 1; i < a.size() && total <= max_reply_bytes; ++i) {
                const kv_entry* e = entry(a[i]);
                total += e ? 1 + std::to_string(e->value.size()).size() + 4 + e->value.size() : 5;
            }
            if (total > max_reply_bytes)
                return too_large(many ? "ask for fewer keys" : "the value is too large");
            out.reserve(out.size() + total);
            if (many) resp::write_array_header(out, a.size() - 1);
            for (std::size_t i = 1; i < a.size(); ++i) {
                if (const kv_entry* e = entry(a[i])) {
                    resp::write_bulk_string(out, e->value);
                } else {
                    resp::write_null_bulk(out);
                }
            }
            return;
        }
        if (name == "exists") {
            std::int64_t count = 0;  // Redis counts a key named twice twice
            for (std::size_t i = 1; i < a.size(); ++i) count += entry(a[i]) ? 1 : 0;
            return resp::write_integer(out, count);
        }
        if (name == "strlen") {
            const kv_entry* e = entry(a[1]);
            return resp::write_integer(out, e ? static_cast<std::int64_t>(e->value.size()) : 0);
        }
        if (name == "ttl" || name == "pttl" || name == "expiretime" || name == "pexpiretime") {
            const kv_entry* e = entry(a[1]);
            if (!e) return resp::write_integer(out, -2);
            if (e->expires_ms == 0) return resp::write_integer(out, -1);
            // 0 once `now` passed the deadline, as Redis clamps: present until the TICK.
            const auto left =
                static_cast<std::int64_t>(e->expires_ms > now ? e->expires_ms - now : 0);
            const auto at = static_cast<std::int64_t>(e->expires_ms);
            if (name == "ttl") return resp::write_integer(out, (left + 500) / 1000);
            if (name == "pttl") return resp::write_integer(out, left);
            return resp::write_integer(out, name == "expiretime" ? (at + 500) / 1000 : at);
        }
        if (name == "type") {
            const kv_entry* e = entry(a[1]);
            return resp::write_simple_string(out, e ? type_name(e->type()) : "none");
        }
        if (name == "dbsize")
            return resp::write_integer(out, static_cast<std::int64_t>(state_.data.size()));
        if (name == "keys") {
            std::vector<std::string_view> keys;
            std::size_t total = 0;
            for (const auto& item : state_.data) {
                const std::string_view key{item.first};
                if (!glob_match(a[1], key)) continue;
                total += key.size() + 16;
                if (total > max_reply_bytes) return too_large("use SCAN with MATCH and COUNT");
                keys.push_back(key);
            }
            resp::write_array_header(out, keys.size());
            for (const auto key : keys) resp::write_bulk_string(out, key);
            return;
        }
        if (name == "scan") {
            const auto o = std::get<scan_options>(parse_scan(a));
            std::vector<std::string_view> keys;
            std::size_t total = 0, examined = 0;
            auto it = by_hash_.lower_bound({o.cursor, std::string_view{}});
            // `count` keys examined, then the rest of the same hash: a cursor never splits one.
            for (; it != by_hash_.end(); ++it) {
                if (examined >= o.count && it->first != std::prev(it)->first) break;
                ++examined;
                const kv_entry* e = entry(it->second);
                if (!e || (o.match && !glob_match(*o.match, it->second)) ||
                    (o.type && *o.type != type_name(e->type())))
                    continue;
                total += it->second.size() + 16;
                if (total > max_reply_bytes) return too_large("use a smaller COUNT");
                keys.push_back(it->second);
            }
            resp::write_array_header(out, 2);
            resp::write_bulk_string(out, it == by_hash_.end() ? "0" : std::to_string(it->first));
            resp::write_array_header(out, keys.size());
            for (const auto key : keys) resp::write_bulk_string(out, key);
            return;
        }
        if (name == "ping") {
            if (a.size() == 1) return resp::write_simple_string(out, "PONG");
            return resp::write_bulk_string(out, a[1]);
        }
        if (name == "echo") return resp::write_bulk_string(out, a[1]);
        resp::write_error(out, "ERR not a read command");
    }

    kv_state state_;
    /// Every key of `state_.data` (a view of the key in its node) → its node.
    std::unordered_map<std::string_view, kv_map::iterator> index_;
    /// (expiry, key) of every key with an expiry.
    std::set<std::pair<std::uint64_t, std::string_view>> expiry_;
    /// (key_hash, key) of every key: SCAN's order.
    std::set<std::pair<std::uint64_t, std::string_view>> by_hash_;
    /// The deferred snapshot handed out last, while it is not written (the writer owns it: a
    /// view dropped unwritten expires here). Not state: bookkeeping of `snapshot_later`.
    mutable std::weak_ptr<detail::deferred_image> view_;
    /// During `apply`, the view being written, locked; nullptr otherwise.
    detail::deferred_image* changing_ = nullptr;
    /// While a command runs: its time, the later of the map's clock and its stamp (the base
    /// of its relative expiries; see "Time and expiry"). Set by `run` before each command.
    std::uint64_t command_now_ms_ = 0;
};

static_assert(result_machine<kv_store>);
static_assert(deferred_snapshot_machine<kv_store>);
static_assert(retry_aware_machine<kv_store>);

}  // namespace zab::kv
