// examples/kv/resp_session.hpp — one client connection of kv_server, without the socket: it
// parses what the client sent, starts each command, and releases the replies in request
// order, however the commands complete.
//
// Ordering, as a Redis client that pipelines expects it:
// - replies go out in request order (a queue of slots, flushed from the front as far as the
//   slots are complete);
// - writes are started as soon as they are read, several in flight at once: a pipeline of
//   SETs costs one round of consensus, not one per command (redis-benchmark -P 16);
// - a read executes only once every earlier command on the connection completed
//   (read-your-writes on a connection), and a write read after a waiting read is started
//   only once that read executed (otherwise the read could see a later write);
// - in READMODE linearizable a GET/MGET/EXISTS asks for a sync as soon as it is read, and
//   executes once both its sync and every earlier command completed;
// - at most `max_outstanding` commands (and `max_queued_bytes` of them) are queued: beyond
//   it the session takes no more commands from the parser and `wants_input()` turns false,
//   so the server stops reading the socket until replies drain (TCP then pushes back on the
//   client);
// - at most `max_writes_in_flight` writes are proposed at once: the next waits (and so does
//   everything after it) until one completes. Below zab's options::max_forwarded_per_learner,
//   so that one pipeline through a follower waits instead of being refused -BUSY;
// - a Backend with `acquire_write()` (kv_server: write_pool.hpp, the replica's writes shared
//   by its connections) grants each write a slot before it is proposed: without one the
//   write waits (and everything after it) until the Backend calls `resume()`;
// - while a write waits for room (either bound) the session takes input no further
//   (`wants_input()` false): the connection stops reading, TCP pushes back on the client;
// - TAGGED: one request per client id outstanding on the connection (from when it is read
//   until its reply is flushed). Another TAGGED of that client meanwhile is refused before it
//   is proposed: the session table's answer to an older sequence, "applied earlier", holds
//   only for clients that wait for each reply (docs/protocol.md §6.7);
// - replies not yet written to the socket (`unsent_bytes()`: the output buffer, and what was
//   taken but not yet reported by `output_written`) pause the session at
//   `output_soft_bytes`: no read executes and no command is taken until the client reads
//   (Redis's client-output-buffer-limit). A reply is bounded when built (execute_read), so
//   the output stays below soft + one reply; `output_overflow()` past `output_hard_bytes`
//   tells the server to disconnect;
// - MULTI queues the commands up to EXEC (+QUEUED, or the error of one that cannot run,
//   which makes EXEC answer -EXECABORT); EXEC sends them as one transaction (a CALLS block,
//   kv_command.hpp) and answers the array of their replies. WATCH executes as a read does
//   (after every earlier command, so it sees the connection's own writes) and records each
//   key's version on this replica; EXEC, started only after the WATCH before it executed,
//   carries them, and the replicas apply the block only if none changed by then (else EXEC
//   answers a null array). EXEC, DISCARD, UNWATCH and RESET forget the watches;
// - after HELLO 3, nulls are sent in RESP3's form (`_`); every other reply kv_server
//   sends is the same in RESP2 and RESP3 (it has no maps, sets or doubles but HELLO's);
// - CLIENT REDIRECT on: a write (or EXEC) on a replica that is not the leader is answered
//   `-REDIRECT host:port` (the leader's client address, when known) instead of forwarded;
// - authentication (kv_auth.hpp, `session_options::users`): while a password is required
//   and none was given, every command but AUTH, HELLO, QUIT and RESET is answered -NOAUTH
//   and does nothing; AUTH [user] pass and HELLO <proto> AUTH user pass authenticate (in
//   order: the commands pipelined after a successful AUTH run); RESET de-authenticates; an
//   admin command (command_info::admin) from a user without admin rights gets -NOPERM. A
//   failed attempt is counted (`auth_failures()`) and reported to the Backend's
//   `auth_failed()` if it has one.
//
// The Backend does the work (kv_server: the zab node; tests: a fake). It must never complete
// from inside a call — completions arrive later through `write_done` / `sync_done`:
//
//     void propose(std::uint64_t ticket, std::vector<std::byte> txn);  // then write_done
//     void sync(std::uint64_t ticket);                                  // then sync_done
//     void transfer(std::uint64_t ticket, std::uint64_t target);        // then sync_done
//     std::string read(const resp::command& args);   // the reply of GET/MGET/EXISTS/INFO now
//                                                     // (or read(args, resp3): HELLO 3 was
//                                                     // in force, for replies with maps)
//     std::uint64_t now_ms();                         // the wall clock, stamped into writes
//                                                     // (their relative expiries' base)
//     std::uint64_t version_of(std::string_view key); // WATCH: kv_state_machine::version_of
//     std::optional<std::string> redirect();          // the leader's client address if this
//                                                     // replica is not the leader, else nullopt
//     void auth_failed();                             // optional: an AUTH was refused
//     bool acquire_write();                           // optional: a slot for the next write
//                                                     // (false: later `resume()`; the slot
//                                                     // is returned when it completes)
//     void reconfigure(std::uint64_t ticket, reconfig_spec spec);   // optional (ZRECONFIG,
//                                                     // kv_reconfig.hpp), then reconfig_done;
//                                                     // without it ZRECONFIG is refused
//
// A ticket names a slot for the connection's lifetime (tickets increase; the server may get
// a completion for a slot of a session that closed meanwhile: it simply drops it).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kv_auth.hpp"
#include "kv_calls.hpp"
#include "kv_clients.hpp"
#include "kv_command.hpp"
#include "kv_requests.hpp"
#include "resp3.hpp"
#include "resp_parser.hpp"
#include "resp_writer.hpp"

namespace zab::kv {

struct session_options {
    /// Commands queued on one connection (waiting, in flight, or complete but not flushed).
    std::size_t max_outstanding = 10'000;
    /// Bytes held by the queued commands (their arguments, or replies not yet flushed)
    /// beyond which no more commands are taken from the parser.
    std::size_t max_queued_bytes = std::size_t{32} << 20;
    /// Writes proposed and not yet completed; kept below zab's max_forwarded_per_learner
    /// (1,000) so that a pipeline through a follower waits rather than getting -BUSY.
    std::size_t max_writes_in_flight = 256;
    /// Unsent replies at which the session pauses (no read executes, nothing is taken).
    std::size_t output_soft_bytes = std::size_t{8} << 20;
    /// Unsent replies beyond which `output_overflow()`: the server closes the connection.
    std::size_t output_hard_bytes = std::size_t{256} << 20;
    /// The largest encoded write (see kv_requests.hpp, make_write).
    std::size_t max_txn_bytes = 16u << 20;
    resp::limits parser_limits{};
    /// CLIENT ID / HELLO's id: the connection's number in the server.
    std::uint64_t client_id = 0;
    /// The users (kv_auth.hpp); null: no password, the default user may run everything.
    std::shared_ptr<const user_table> users;
};

template <typename Backend>
class resp_session {
public:
    resp_session(Backend& backend, session_options options = {})
        : backend_{backend}, options_{std::move(options)}, parser_{options_.parser_limits} {
        log_out();
    }

    resp_session(const resp_session&) = delete;
    resp_session& operator=(const resp_session&) = delete;

    /// Bytes received from the client.
    void feed(std::string_view bytes) {
        if (closing_) return;
        parser_.feed(bytes);
        progress();
    }

    /// A write completed: `reply` is its RESP reply (outcome or error).
    void write_done(std::uint64_t ticket, std::string reply) {
        slot* s = find(ticket);
        if (s == nullptr || s->done) return;
        --writes_in_flight_;
        hold(*s, reply.size());
        s->reply = std::move(reply);
        s->done = true;
        progress();
    }

    /// A sync completed: nullopt on success, else the RESP error to answer. For a SYNC
    /// command the reply is +OK; for a linearizable read, the read may now execute.
    void sync_done(std::uint64_t ticket, std::optional<std::string> error_reply) {
        slot* s = find(ticket);
        if (s == nullptr || s->done || !s->sync_pending) return;
        s->sync_pending = false;
        --syncs_in_flight_;
        if (error_reply) {
            s->reply = std::move(*error_reply);
            s->done = true;
        } else if (s->what == kind::sync) {
            resp::write_simple_string(s->reply, "OK");
            s->done = true;
        }
        progress();
    }

    /// A ZRECONFIG completed: `reply` is its RESP reply (`+OK <version>` or the error).
    void reconfig_done(std::uint64_t ticket, std::string reply) {
        slot* s = find(ticket);
        if (s == nullptr || s->done || !s->sync_pending) return;
        s->sync_pending = false;
        --syncs_in_flight_;
        hold(*s, reply.size());
        s->reply = std::move(reply);
        s->done = true;
        progress();
    }

    /// The Backend has room again (a write slot granted): start what waited.
    void resume() { progress(); }

    /// Replies ready to be written, in request order (moved out: the caller writes them,
    /// and reports each part written with `output_written`).
    std::string take_output() {
        taken_unwritten_ += output_.size();
        return std::exchange(output_, {});
    }
    bool has_output() const noexcept { return !output_.empty(); }
    /// `n` bytes of what `take_output` returned reached the socket.
    void output_written(std::size_t n) {
        taken_unwritten_ -= std::min(n, taken_unwritten_);
        progress();  // below the soft bound again: waiting reads run, commands are taken
    }
    /// Replies built and not yet written.
    std::size_t unsent_bytes() const noexcept { return output_.size() + taken_unwritten_; }
    /// True past `output_hard_bytes` of unsent replies: disconnect the client.
    bool output_overflow() const noexcept { return unsent_bytes() > options_.output_hard_bytes; }

    /// False while the queue is full or the output paused (or after QUIT / a protocol
    /// error): stop reading.
    bool wants_input() const noexcept {
        return room() && parser_.ready() == 0 && !write_waiting_;
    }
    /// A write waits for room (this connection's bound, or the Backend's slot).
    bool write_waiting() const noexcept { return write_waiting_; }
    /// Inside MULTI (commands are being queued).
    bool in_multi() const noexcept { return multi_open_; }
    /// CLIENT SETNAME's name (HELLO SETNAME too), empty if none.
    const std::string& client_name() const noexcept { return name_; }
    /// Client input this session holds: the parser's and that of queued commands. What the
    /// server adds up over its connections to bound them all (kv_server --max-input-bytes).
    std::size_t buffered_input_bytes() const noexcept {
        return parser_.buffered_bytes() + queued_bytes_ + multi_bytes_;
    }
    /// True while a write or a sync is at the cluster: the client waits for us, not we for
    /// it (an idle timeout does not apply).
    bool awaiting_cluster() const noexcept { return writes_in_flight_ + syncs_in_flight_ > 0; }
    /// True after QUIT or a protocol error: once `take_output()` is written, close.
    bool closing() const noexcept { return closing_; }
    /// True once every command taken has been answered (and its reply taken into output).
    bool idle() const noexcept { return slots_.empty(); }
    /// Commands queued (not yet flushed).
    std::size_t outstanding() const noexcept { return slots_.size(); }
    read_mode mode() const noexcept { return mode_; }
    /// Authenticated (always, when no password is required).
    bool authenticated() const noexcept { return authenticated_; }
    /// The user the connection runs as ("default" until AUTH says otherwise).
    const std::string& user() const noexcept { return user_; }
    /// AUTH / HELLO AUTH attempts refused on this connection.
    std::uint64_t auth_failures() const noexcept { return auth_failures_; }
    /// Subscribed to a channel or a pattern (SUBSCRIBE / PSUBSCRIBE).
    bool subscribed() const noexcept { return !channels_.empty() || !patterns_.empty(); }

    /// What the session keeps of CLIENT LIST's fields (kv_clients.hpp); the server adds the
    /// socket's (addr, laddr, fd, age, idle).
    void describe(client_description& c) const {
        c.id = options_.client_id;
        c.name = name_;
        c.pubsub = subscribed();
        c.multi = multi_open_;
        c.closing = closing_;
        c.subscriptions = channels_.size();
        c.pattern_subscriptions = patterns_.size();
        c.multi_commands = multi_open_ ? static_cast<std::int64_t>(multi_calls_.size()) : -1;
        c.query_buffer = buffered_input_bytes();
        c.output_bytes = unsent_bytes();
        c.last_command = last_command_;
        c.user = user_;
        c.resp = proto_;
        c.lib_name = lib_name_;
        c.lib_ver = lib_ver_;
    }

    /// A message published on `channel` (kv_server: the Sentinel events, kv_sentinel.hpp):
    /// sent to this client if it subscribed to the channel or to a pattern matching it, as
    /// Redis sends them (`message channel text`, `pmessage pattern channel text`), after the
    /// replies queued before it.
    void publish(std::string_view channel, std::string_view message) {
        if (closing_) return;
        const auto deliver = [&](std::string reply) {
            slot s;
            s.done = true;
            s.reply = std::move(reply);
            push_slot(std::move(s));
        };
        if (channels_.contains(std::string{channel}))
            deliver(pubsub_reply({"message", channel, message}));
        for (const auto& pattern : patterns_)
            if (glob_match(pattern, channel))
                deliver(pubsub_reply({"pmessage", pattern, channel, message}));
        progress();
    }

private:
    enum class kind : std::uint8_t { immediate, write, read, sync, close, local };
    /// What a `local` slot does when it executes (in order, at the front like a read).
    enum class local_op : std::uint8_t { watch, unwatch };

    struct slot {
        kind what = kind::immediate;
        bool started = false;       ///< write proposed / read executed (or answered)
        bool done = false;          ///< `reply` is final
        bool sync_pending = false;  ///< a sync asked for it has not completed yet
        std::size_t held = 0;       ///< its share of queued_bytes_
        std::string reply;
        std::vector<std::byte> txn;  ///< write: until proposed
        resp::command args;          ///< read; local watch: the command
        std::vector<resp::command> calls;  ///< EXEC: the queued calls (encoded when started)
        bool exec = false;           ///< an EXEC: `txn` is built from `calls` when it starts
        bool redirect = false;       ///< CLIENT REDIRECT was on when it was read
        bool resp3 = false;          ///< HELLO 3 was in force when it was read
        /// In RESP3: its reply's shape (resp3.hpp), or with `per_call`, each queued call's.
        std::vector<resp::resp3_shape> shapes;
        bool per_call = false;       ///< an EXEC: `shapes` are its reply's elements
        local_op local = local_op::watch;
        std::optional<std::uint64_t> transfer_to;  ///< ZTRANSFER: its target (0: any)
        std::optional<reconfig_spec> reconfig;     ///< ZRECONFIG: the change, until asked
        std::optional<std::uint64_t> tagged_client;  ///< TAGGED: outstanding until flushed
    };

    slot* find(std::uint64_t ticket) {
        if (ticket < front_ticket_ || ticket - front_ticket_ >= slots_.size()) return nullptr;
        return &slots_[static_cast<std::size_t>(ticket - front_ticket_)];
    }
    std::uint64_t ticket_of(std::size_t index) const { return front_ticket_ + index; }

    /// Room for one more command: the queue, its bytes and the unsent output are below
    /// their bounds.
    bool room() const noexcept {
        return !closing_ && slots_.size() < options_.max_outstanding &&
               queued_bytes_ < options_.max_queued_bytes &&
               unsent_bytes() < options_.output_soft_bytes;
    }

    /// Sets what slot `s` holds of queued_bytes_.
    void hold(slot& s, std::size_t bytes) {
        queued_bytes_ = queued_bytes_ - s.held + bytes;
        s.held = bytes;
    }

    /// Moves commands from the parser into slots while there is room; true if any moved.
    bool pull() {
        bool pulled = false;
        while (room()) {
            auto args = parser_.next();
            if (!args) break;
            take(std::move(*args));
            pulled = true;
        }
        // Commands parsed before a protocol error run first (as in Redis); then the error
        // is answered and the connection closes.
        if (!closing_ && parser_.failed() && parser_.ready() == 0) {
            slot s;
            s.what = kind::close;
            s.done = true;
            resp::write_error(s.reply, parser_.error());
            slots_.push_back(std::move(s));
            closing_ = true;
            pulled = true;
        }
        return pulled;
    }

    static request::immediate error_of(std::string_view text) { return detail::error(text); }
    static request::immediate simple_of(std::string_view text) { return detail::simple(text); }

    /// One command from the parser: the connection's own commands here, the rest classified.
    void take(resp::command args) {
        const std::string name = detail::upper(args[0]);
        last_command_ = detail::lower(name);
        if (args.size() > 1 && (name == "CLIENT" || name == "CONFIG" || name == "SENTINEL" ||
                                name == "COMMAND"))
            last_command_ += "|" + detail::lower(args[1].substr(0, 32));
        if (name == "QUIT") return push(request::quit{});
        if (name == "RESET") return reset();
        if (!authenticated_ && name != "AUTH" && name != "HELLO")
            return push(error_of(text::noauth));
        if (const command_info* info = find_command(name);
            info != nullptr && info->admin && rights_ != user_rights::admin) {
            multi_dirty_ = multi_dirty_ || multi_open_;  // as a refused queued command
            return push(error_of(text::noperm(user_, info->name)));
        }
        if (!selected_.empty()) {
            const command_info* info = find_command(name);
            const bool data = info == nullptr || info->kind != call_kind::connection ||
                              name == "MULTI" || name == "EXEC" || name == "WATCH" ||
                              name == "TAGGED" || name == "SYNC" || name == "ZSYNC" ||
                              name == "ZTRANSFER" || name == "ZRECONFIG";
            if (data && name != "PING" && name != "ECHO")
                return push(error_of("ERR this connection selected database " +
                                     selected_.substr(0, 32) +
                                     ", which kv_server does not have (only database 0): "
                                     "SELECT 0 first"));
        }
        if (multi_open_) return queue(std::move(args), name);
        if (name == "SUBSCRIBE" || name == "PSUBSCRIBE" || name == "UNSUBSCRIBE" ||
            name == "PUNSUBSCRIBE")
            return push(subscription(args, name));
        if (subscribed() && proto_ == 2) {
            // Redis's subscribed mode (RESP2): only these commands, and PING's other reply.
            if (name == "PING") {
                request::immediate r;
                r.reply = pubsub_reply({"pong", args.size() > 1 ? std::string_view{args[1]} : ""});
                return push(std::move(r));
            }
            return push(error_of("ERR Can't execute '" + detail::lower(name).substr(0, 64) +
                                 "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
                                 "RESET are allowed in this context"));
        }
        if (name == "AUTH") return push(auth(args));
        if (name == "SELECT" && args.size() == 2) {
            // Another database does not exist: refused, and so is every data command after
            // it until SELECT 0 (or RESET), so that a client that carries on after the error
            // (ioredis with {db: 1} does) never writes into database 0 unawares.
            request_variant r = classify(args, options_.max_txn_bytes);
            const bool ok = std::get<request::immediate>(r).reply.front() == '+';
            selected_.clear();
            if (!ok) selected_ = args[1];
            return push(std::move(r));
        }
        if (name == "MULTI") {
            if (args.size() != 1) return push(detail::wrong_arity(args[0]));
            multi_open_ = true;
            return push(simple_of("OK"));
        }
        if (name == "EXEC" || name == "DISCARD")
            return push(error_of("ERR " + name + " without MULTI"));
        if (name == "WATCH" || name == "UNWATCH") {
            if ((name == "WATCH" && args.size() < 2) || (name == "UNWATCH" && args.size() != 1))
                return push(detail::wrong_arity(args[0]));
            slot s;
            s.what = kind::local;
            s.local = name == "WATCH" ? local_op::watch : local_op::unwatch;
            s.args = std::move(args);
            return push_slot(std::move(s));
        }
        if (name == "CLIENT" && args.size() >= 2 &&
            (detail::iequals(args[1], "LIST") || detail::iequals(args[1], "KILL")))
            return push(request::read{std::move(args), false});  // every connection: the server
        if (name == "CLIENT") return push(client(args));
        if (name == "HELLO") return push(hello(args));
        next_shapes_.assign(1, resp::resp3_shape_of(args));
        push(classify(args, options_.max_txn_bytes, backend_.now_ms()));
    }

    /// A command inside MULTI: queued (+QUEUED), or refused, which aborts the EXEC.
    void queue(resp::command args, const std::string& name) {
        if (name == "EXEC" || name == "DISCARD") {
            multi_open_ = false;
            const bool aborted = multi_dirty_;
            multi_dirty_ = false;
            multi_bytes_ = 0;
            std::vector<resp::command> calls = std::move(multi_calls_);
            multi_calls_.clear();
            if (name == "DISCARD") {
                slot s;  // forgets the watches in order, like UNWATCH
                s.what = kind::local;
                s.local = local_op::unwatch;
                return push_slot(std::move(s));
            }
            if (aborted) {
                slot s;
                s.what = kind::local;
                s.local = local_op::unwatch;
                s.reply = error_of("EXECABORT Transaction discarded because of previous errors.")
                              .reply;
                return push_slot(std::move(s));
            }
            slot s;
            s.what = kind::write;
            s.exec = true;
            s.per_call = true;
            s.calls = std::move(calls);
            next_shapes_.clear();
            for (const auto& call : s.calls) next_shapes_.push_back(resp::resp3_shape_of(call));
            return push_slot(std::move(s));
        }
        if (name == "MULTI") return push(error_of("ERR MULTI calls can not be nested"));
        if (name == "WATCH") return push(error_of("ERR WATCH inside MULTI is not allowed"));
        const command_info* info = find_command(name);
        std::optional<std::string> problem;
        if (info == nullptr) {
            problem = text::unknown_command(args);
        } else if (info->kind == call_kind::connection) {
            problem = "ERR " + name + " is not allowed inside MULTI here";
        } else {
            problem = check_call(args);
        }
        std::size_t bytes = 0;
        for (const auto& arg : args) bytes += arg.size() + 16;
        if (!problem && multi_bytes_ + bytes > options_.max_txn_bytes)
            problem = "ERR MULTI block too large (limit " + std::to_string(options_.max_txn_bytes) +
                      " bytes)";
        if (problem) {
            multi_dirty_ = true;
            return push(error_of(*problem));
        }
        multi_bytes_ += bytes;
        multi_calls_.push_back(std::move(args));
        push(simple_of("QUEUED"));
    }

    /// RESET: out of MULTI, no watches (in order), READMODE local, no name, no redirects.
    void reset() {
        multi_open_ = false;
        multi_dirty_ = false;
        multi_calls_.clear();
        multi_bytes_ = 0;
        mode_ = read_mode::local;
        name_.clear();
        redirect_ = false;
        proto_ = 2;
        selected_.clear();
        channels_.clear();
        patterns_.clear();
        log_out();
        slot s;
        s.what = kind::local;
        s.local = local_op::unwatch;
        s.reply = simple_of("RESET").reply;
        push_slot(std::move(s));
    }

    const user_table& users() const {
        static const user_table none;
        return options_.users ? *options_.users : none;
    }

    /// The state of a new connection (and after RESET): the default user, authenticated only
    /// if it needs no password.
    void log_out() {
        authenticated_ = !users().auth_required();
        user_ = user_table::default_name;
        rights_ = users().default_rights();
    }

    /// Checks `user`/`password`: on success the connection runs as `user` from the next
    /// command on; on failure nothing changes (an authenticated connection stays so).
    bool log_in(std::string_view user, std::string_view password) {
        const auto rights = users().check(user, password);
        if (!rights) {
            ++auth_failures_;
            if constexpr (requires(Backend& b) { b.auth_failed(); }) backend_.auth_failed();
            return false;
        }
        authenticated_ = true;
        user_ = user;
        rights_ = *rights;
        return true;
    }

    /// AUTH password (the default user) | AUTH user password.
    request::immediate auth(const resp::command& args) {
        if (args.size() < 2) return detail::wrong_arity(args[0]);
        if (args.size() > 3) return error_of("ERR syntax error");
        if (args.size() == 2 && !users().auth_required())
            return error_of(text::auth_without_password);
        const bool ok = args.size() == 2 ? log_in(user_table::default_name, args[1])
                                         : log_in(args[1], args[2]);
        return ok ? simple_of("OK") : error_of(text::wrongpass);
    }

    /// CLIENT ID | SETNAME n | GETNAME | SETINFO LIB-NAME|LIB-VER v | INFO | REDIRECT ON|OFF
    /// (LIST and KILL are the server's: they see every connection).
    request::immediate client(const resp::command& args) {
        if (args.size() < 2) return detail::wrong_arity(args[0]);
        const std::string sub = detail::upper(args[1]);
        request::immediate r;
        if (sub == "ID" && args.size() == 2) {
            resp::write_integer(r.reply, static_cast<std::int64_t>(options_.client_id));
        } else if (sub == "SETNAME" && args.size() == 3) {
            for (const char c : args[2])
                if (c < '!' || c > '~')
                    return error_of("ERR Client names cannot contain spaces, newlines or "
                                    "special characters.");
            name_ = args[2];
            return simple_of("OK");
        } else if (sub == "GETNAME" && args.size() == 2) {
            if (name_.empty()) {
                resp::write_null_bulk(r.reply);
            } else {
                resp::write_bulk_string(r.reply, name_);
            }
        } else if (sub == "SETINFO" && args.size() == 4) {
            const std::string attribute = detail::upper(args[2]);
            if (attribute != "LIB-NAME" && attribute != "LIB-VER")
                return error_of("ERR Unrecognized option '" + args[2].substr(0, 128) + "'");
            for (const char c : args[3])
                if (c < '!' || c > '~')
                    return error_of("ERR " + detail::lower(attribute) +
                                    " cannot contain spaces, newlines or special characters.");
            (attribute == "LIB-NAME" ? lib_name_ : lib_ver_) = args[3].substr(0, 128);
            return simple_of("OK");
        } else if (sub == "INFO" && args.size() == 2) {
            // Redis's line (kv_clients.hpp); the socket's fields from the Backend if it has them.
            client_description c;
            describe(c);
            if constexpr (requires(Backend& b) { b.describe_connection(c); })
                backend_.describe_connection(c);
            resp::write_bulk_string(r.reply, client_line(c) + "\n");
        } else if (sub == "REDIRECT" && args.size() == 3) {
            const std::string on = detail::upper(args[2]);
            if (on != "ON" && on != "OFF") return error_of("ERR CLIENT REDIRECT takes ON or OFF");
            redirect_ = on == "ON";
            return simple_of("OK");
        } else {
            return error_of("ERR unknown subcommand or wrong number of arguments for 'CLIENT " +
                            args[1].substr(0, 128) + "'");
        }
        return r;
    }

    /// A pub/sub reply or message: an array of bulk strings (RESP3: a push), the last
    /// element of a subscription's confirmation the count, an integer.
    std::string pubsub_reply(std::initializer_list<std::string_view> parts,
                             std::optional<std::size_t> count = std::nullopt) const {
        std::string out = proto_ == 3 ? ">" + std::to_string(parts.size() + (count ? 1 : 0)) + "\r\n"
                                      : std::string{};
        if (proto_ != 3) resp::write_array_header(out, parts.size() + (count ? 1 : 0));
        for (const auto part : parts) resp::write_bulk_string(out, part);
        if (count) resp::write_integer(out, static_cast<std::int64_t>(*count));
        return out;
    }

    /// SUBSCRIBE / PSUBSCRIBE / UNSUBSCRIBE / PUNSUBSCRIBE: one confirmation per channel or
    /// pattern, each with the connection's subscription count after it (Redis's replies).
    request::immediate subscription(const resp::command& args, const std::string& name) {
        const bool pattern = name.front() == 'P';
        const bool add = name.find("UNSUBSCRIBE") == std::string::npos;
        if (add && args.size() < 2) return detail::wrong_arity(args[0]);
        auto& set = pattern ? patterns_ : channels_;
        const std::string kind = detail::lower(name);
        request::immediate r;
        const auto total = [&] { return channels_.size() + patterns_.size(); };
        if (!add && args.size() == 1) {  // all of them
            if (set.empty()) {  // Redis: one confirmation naming nothing (a null)
                if (proto_ == 3) r.reply += ">3\r\n"; else resp::write_array_header(r.reply, 3);
                resp::write_bulk_string(r.reply, kind);
                resp::write_null_bulk(r.reply);
                resp::write_integer(r.reply, static_cast<std::int64_t>(total()));
            }
            const std::vector<std::string> all(set.begin(), set.end());
            for (const auto& each : all) {
                set.erase(each);
                r.reply += pubsub_reply({kind, each}, total());
            }
            return r;
        }
        for (std::size_t i = 1; i < args.size(); ++i) {
            if (add) {
                if (set.size() >= max_subscriptions)
                    return error_of("ERR too many subscriptions on this connection (at most " +
                                    std::to_string(max_subscriptions) + ")");
                set.insert(args[i].substr(0, 1024));
            } else {
                set.erase(args[i]);
            }
            r.reply += pubsub_reply({kind, args[i].substr(0, 1024)}, total());
        }
        return r;
    }

    /// HELLO [protover [AUTH user pass] [SETNAME name]]: protocol 2 or 3 (see hello_reply).
    request::immediate hello(const resp::command& args) {
        int proto = proto_;
        std::optional<std::string> name;
        std::optional<std::pair<std::string, std::string>> credentials;
        if (args.size() >= 2) {
            if (args[1] != "2" && args[1] != "3") {
                if (!parse_int64(args[1]))
                    return error_of("ERR Protocol version is not an integer or out of range");
                return error_of("NOPROTO unsupported protocol version");
            }
            proto = args[1] == "3" ? 3 : 2;
            for (std::size_t i = 2; i < args.size(); ++i) {
                const std::string opt = detail::upper(args[i]);
                if (opt == "AUTH" && i + 2 < args.size()) {
                    credentials.emplace(args[i + 1], args[i + 2]);
                    i += 2;
                } else if (opt == "SETNAME" && i + 1 < args.size()) {
                    name = args[++i];
                } else {
                    return error_of("ERR Syntax error in HELLO option '" + args[i].substr(0, 128) +
                                    "'");
                }
            }
        }
        // As Redis: the credentials first (a refusal changes nothing), then the protocol.
        if (credentials && !log_in(credentials->first, credentials->second))
            return error_of(text::wrongpass);
        if (!authenticated_) return error_of(text::hello_noauth);
        if (name) {
            auto set = client({"CLIENT", "SETNAME", *name});
            if (set.reply.front() == '-') return set;
        }
        proto_ = proto;  // from this reply on (a RESP3 HELLO reply is a map already)
        request::immediate r;
        r.reply = hello_reply(proto_, options_.client_id);
        return r;
    }

    void push_slot(slot&& s) {
        s.redirect = redirect_;
        s.resp3 = proto_ == 3;
        if (s.resp3) s.shapes = std::move(next_shapes_);
        next_shapes_.clear();
        std::size_t bytes = s.reply.size() + s.txn.size();
        for (const auto& arg : s.args) bytes += arg.size();
        for (const auto& call : s.calls)
            for (const auto& arg : call) bytes += arg.size();
        slots_.push_back(std::move(s));
        hold(slots_.back(), bytes);
    }

    void push(request_variant r) {
        if (const auto* w = std::get_if<request::write>(&r); w != nullptr && w->tagged_client) {
            if (!tagged_outstanding_.insert(*w->tagged_client).second)
                return push(error_of(
                    "ERR TAGGED: client " + std::to_string(*w->tagged_client) +
                    " already has a request outstanding on this connection; send its next "
                    "request once that one is answered (one tagged request per client at a "
                    "time)"));
        }
        slot s;
        std::visit([&](auto& request) { fill(s, request); }, r);
        push_slot(std::move(s));
        slot& pushed = slots_.back();
        if (pushed.sync_pending) {
            ++syncs_in_flight_;
            const std::uint64_t ticket = ticket_of(slots_.size() - 1);
            if (pushed.reconfig) {
                reconfig_spec spec = std::move(*pushed.reconfig);
                pushed.reconfig.reset();
                if constexpr (requires(Backend& b) { b.reconfigure(ticket, std::move(spec)); }) {
                    backend_.reconfigure(ticket, std::move(spec));
                } else {
                    pushed.sync_pending = false;
                    --syncs_in_flight_;
                    pushed.done = true;
                    pushed.reply = error_of("ERR ZRECONFIG is not available here").reply;
                    hold(pushed, pushed.reply.size());
                }
            } else if (pushed.transfer_to) {
                backend_.transfer(ticket, *pushed.transfer_to);
            } else {
                backend_.sync(ticket);
            }
        }
    }

    void fill(slot& s, request::immediate& r) {
        s.done = true;
        s.reply = std::move(r.reply);
    }
    void fill(slot& s, request::write& r) {
        s.what = kind::write;
        s.txn = std::move(r.txn);
        s.tagged_client = r.tagged_client;
    }
    void fill(slot& s, request::read& r) {
        s.what = kind::read;
        s.args = std::move(r.args);
        // The mode in force when the command was read applies (READMODE is ordered too).
        s.sync_pending = r.syncable && mode_ == read_mode::linearizable;
    }
    void fill(slot& s, request::sync& r) {
        s.what = kind::sync;
        s.sync_pending = true;
        s.transfer_to = r.transfer_to;
    }
    void fill(slot& s, request::reconfig& r) {
        s.what = kind::sync;
        s.sync_pending = true;
        s.reconfig = std::move(r.spec);
    }
    void fill(slot& s, request::set_read_mode& r) {
        mode_ = r.mode;
        s.done = true;
        resp::write_simple_string(s.reply, "OK");
    }
    void fill(slot& s, request::quit&) {
        s.what = kind::close;
        s.done = true;
        resp::write_simple_string(s.reply, "OK");
        closing_ = true;
    }

    /// Starts what may start, flushes the complete prefix, and takes more commands while
    /// either changes anything. Not re-entrant (a backend never calls back from inside a
    /// call, but the guard makes that harmless too).
    void progress() {
        if (in_progress_) return;
        in_progress_ = true;
        bool changed = true;
        while (changed) {
            start_ready();
            changed = flush_front();
            changed = pull() || changed;
        }
        in_progress_ = false;
    }

    /// Walks from the first slot not yet started: proposes writes, executes the read at the
    /// front; stops at a read that must wait (everything after it waits too).
    void start_ready() {
        write_waiting_ = false;
        while (scan_ < slots_.size()) {
            slot& s = slots_[scan_];
            if (s.what == kind::write && !s.started) {
                // In order: a write waiting for room holds back everything after it.
                if (writes_in_flight_ >= options_.max_writes_in_flight) {
                    write_waiting_ = true;
                    return;
                }
                if (s.exec) {
                    // The watches recorded by the WATCHes before it (executed: a write after
                    // a waiting WATCH waits for it), then forgotten, as EXEC does.
                    // Built once (a write waiting for a slot keeps its encoding).
                    s.exec = false;
                    command c{calls_op{std::move(s.calls), std::move(watches_), true}, {},
                              backend_.now_ms()};
                    watches_.clear();
                    s.calls = {};
                    auto made = detail::make_write(c, options_.max_txn_bytes);
                    if (auto* refused = std::get_if<request::immediate>(&made)) {
                        s.started = true;
                        s.reply = std::move(refused->reply);
                        s.done = true;
                        hold(s, s.reply.size());
                        ++scan_;
                        continue;
                    }
                    s.txn = std::move(std::get<request::write>(made).txn);
                }
                if (s.redirect) {
                    if (auto leader = backend_.redirect()) {
                        s.started = true;
                        s.reply = error_of("REDIRECT " + *leader).reply;
                        s.done = true;
                        s.txn = {};
                        hold(s, s.reply.size());
                        ++scan_;
                        continue;
                    }
                }
                if constexpr (requires(Backend& b) {
                                  { b.acquire_write() } -> std::same_as<bool>;
                              }) {
                    if (!backend_.acquire_write()) {
                        write_waiting_ = true;
                        return;
                    }
                }
                s.started = true;
                ++writes_in_flight_;
                hold(s, 0);
                backend_.propose(ticket_of(scan_), std::move(s.txn));
                s.txn = {};
            } else if (s.what == kind::local && !s.started) {
                if (scan_ != 0) return;  // in order, after everything before it completed
                s.started = true;
                if (s.local == local_op::watch) {
                    for (std::size_t i = 1; i < s.args.size(); ++i)
                        watches_.push_back({s.args[i], backend_.version_of(s.args[i])});
                } else {
                    watches_.clear();
                }
                if (s.reply.empty()) resp::write_simple_string(s.reply, "OK");
                s.args = {};
                hold(s, s.reply.size());
                s.done = true;
            } else if (s.what == kind::read && !s.started) {
                if (s.done) {  // its sync failed: answered already
                    s.started = true;
                } else if (scan_ == 0 && !s.sync_pending &&
                           unsent_bytes() < options_.output_soft_bytes) {
                    // Every earlier command completed and was flushed: read-your-writes.
                    // Not while the client leaves its replies unread: each could be large.
                    s.started = true;
                    // In the protocol in force when it was read (a map in RESP3, for the
                    // replies that have one), if the Backend builds both.
                    if constexpr (requires(Backend& b) { b.read(s.args, true); }) {
                        s.reply = backend_.read(s.args, s.resp3);
                    } else {
                        s.reply = backend_.read(s.args);
                    }
                    s.args = {};
                    hold(s, s.reply.size());
                    s.done = true;
                } else {
                    return;
                }
            }
            ++scan_;
        }
    }

    /// Moves the replies of the complete prefix into the output buffer; true if any moved.
    bool flush_front() {
        bool flushed = false;
        while (!slots_.empty() && slots_.front().done) {
            slot& s = slots_.front();
            if (!s.resp3)
                output_ += s.reply;
            else if (s.per_call)
                output_ += resp::exec_to_resp3(s.reply, s.shapes);
            else
                output_ += resp::to_resp3(
                    s.reply, s.shapes.empty() ? resp::resp3_shape::same : s.shapes.front());
            hold(s, 0);
            if (s.tagged_client) tagged_outstanding_.erase(*s.tagged_client);
            flushed = true;
            const bool close = s.what == kind::close;
            slots_.pop_front();
            ++front_ticket_;
            if (scan_ > 0) --scan_;
            if (close) {
                // Nothing after QUIT / a protocol error is answered.
                front_ticket_ += slots_.size();
                slots_.clear();
                tagged_outstanding_.clear();
                queued_bytes_ = 0;
                scan_ = 0;
                return true;
            }
        }
        return flushed;
    }

    Backend& backend_;
    session_options options_;
    resp::parser parser_;
    std::deque<slot> slots_;
    std::uint64_t front_ticket_ = 0;  ///< ticket of slots_.front()
    std::size_t scan_ = 0;            ///< slots before it are started (or wait on nothing)
    std::string output_;
    std::size_t taken_unwritten_ = 0;  ///< taken by take_output, not yet output_written
    std::size_t queued_bytes_ = 0;     ///< sum of the slots' `held`
    std::size_t writes_in_flight_ = 0;
    std::size_t syncs_in_flight_ = 0;
    bool write_waiting_ = false;  ///< start_ready stopped at a write without room
    std::set<std::uint64_t> tagged_outstanding_;  ///< TAGGED clients with a request queued
    read_mode mode_ = read_mode::local;
    // MULTI: the calls queued so far, whether one was refused, their bytes.
    bool multi_open_ = false;
    bool multi_dirty_ = false;
    std::vector<resp::command> multi_calls_;
    std::size_t multi_bytes_ = 0;
    std::vector<watched_key> watches_;  ///< recorded by WATCH, carried by the next EXEC
    /// The RESP3 shapes of the slot push_slot adds next (resp3.hpp); empty: `same`.
    std::vector<resp::resp3_shape> next_shapes_;
    std::string name_;                  ///< CLIENT SETNAME
    bool redirect_ = false;             ///< CLIENT REDIRECT
    int proto_ = 2;                     ///< HELLO's protocol
    bool authenticated_ = true;         ///< log_out() sets it from the users
    std::string user_;                  ///< AUTH's user ("default" until then)
    user_rights rights_ = user_rights::admin;
    std::uint64_t auth_failures_ = 0;
    std::string selected_;              ///< a refused SELECT's database; empty: database 0
    /// SUBSCRIBE's channels and PSUBSCRIBE's patterns (each at most 1 KiB).
    std::set<std::string> channels_, patterns_;
    static constexpr std::size_t max_subscriptions = 1024;
    std::string last_command_;          ///< CLIENT LIST's cmd=
    std::string lib_name_, lib_ver_;    ///< CLIENT SETINFO
    bool closing_ = false;
    bool in_progress_ = false;
};

}  // namespace zab::kv
