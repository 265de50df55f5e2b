// zab::file_log under kill -9 of a real process (issue #6).
//
// A child process (fork, no exec) opens the log, then appends batches of records, and now
// and then truncates or compacts (a checkpoint), flushing after each step and reporting on a
// pipe what it is about to make durable ("intent") and, once the flush returned, what is
// durable. The parent SIGKILLs it at a random moment — inside an append, an fdatasync, a
// segment roll, a truncation, a checkpoint, an epoch-file rename, or its start-up recovery —
// then opens the log itself and checks it against what the child reported:
//   - every record the child reported durable is there, with its bytes;
//   - the log is exactly one of the states a crash may leave: the last durable one, or,
//     if a flush was under way, a state between it and the flush's target (a prefix of the
//     old log down to the truncation point, or a prefix of the new one from there; the old
//     snapshot, or the checkpoint in flight with the records after it);
//   - a second open finds the same log and changes nothing on disk (recovery idempotent).
// The next round starts a child on the same directory, which continues after the recovered
// tail. Every few rounds the parent checks a copy and leaves the original as the kill left
// it, so that the child's own recovery does the repairs (and may be killed doing them).
//
// A kill loses nothing the kernel accepted (the page cache survives the process), so the
// recovered log must hold *everything* before the flush in flight, not merely what was
// synced. Power loss, where un-synced bytes vanish, is the simulator's job
// (include/zab/testing/sim_log.hpp) and the torn-tail tests' (file_log_recovery_test.cpp).
//
// The choices (records, sizes, truncations, kill delays) come from one seed: ZAB_KILL_SEED
// and ZAB_KILL_ROUNDS in the environment override the defaults for a longer hunt, and
// ZAB_KILL_TRACE=1 prints each round's messages. Timing is the operating system's, so a
// failing round names its seed and round but may need a few runs to recur.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "storage_test_support.hpp"
#include "zab/testing/random.hpp"

using namespace storage_test;

namespace {

// --- what the child writes ---------------------------------------------------------------

/// Small segments and windows, so that most batches roll a segment or sync in several steps.
file_log_options kill_options(const std::string& directory) {
    file_log_options o;
    o.directory = directory;
    o.cluster_id = 11;
    o.replica_id = 2;
    o.max_record_bytes = 1000;
    o.group_commit_window_bytes = 1536;
    o.segment_bytes = 4096;
    return o;
}

/// The payload of record `id`: its size and bytes follow from the zxid alone, so the parent
/// checks every byte without being told. Mostly small, some empty, a few near the maximum.
shared_bytes payload_of(zxid id) {
    const std::uint64_t h = mix(id.value());
    const std::uint64_t kind = h % 100, spread = h >> 8;
    const std::size_t size = kind < 2    ? 0
                             : kind < 85 ? 1 + spread % 200
                             : kind < 97 ? 200 + spread % 400
                                         : 600 + spread % 401;
    std::vector<std::byte> bytes(size);
    std::uint64_t state = h;
    for (std::size_t i = 0; i < size; ++i) {
        if (i % 8 == 0) state = mix(state);
        bytes[i] = static_cast<std::byte>((state >> (8 * (i % 8))) & 0xffu);
    }
    return shared_bytes{std::move(bytes)};
}

/// The state a checkpoint at `id` saves (as the state machine's would, it follows from it).
shared_bytes state_of(zxid id) {
    return shared_bytes::copy_of(zab::as_bytes(fmt::format("state as of {}", id)));
}

// --- the pipe ----------------------------------------------------------------------------

enum class message_kind : std::uint64_t {
    ready = 1,           ///< opened: a = last zxid, b = records after the snapshot, c = it
    intent = 2,          ///< flushing: a = truncated after (or no_cut), b..c = appended zxids
    durable = 3,         ///< that flush returned: a = last zxid
    epochs_intent = 4,   ///< flushing an epoch write: a = the new accepted (= current) epoch
    epochs_durable = 5,  ///< that flush returned
    failed = 6,          ///< the child gave up (its reason is on stderr)
    compact_intent = 7,  ///< flushing a checkpoint at a
};

/// One message, 32 bytes: written with one write(2), below PIPE_BUF, so never interleaved.
struct message {
    message_kind kind{};
    std::uint64_t a = 0, b = 0, c = 0;
};

constexpr std::uint64_t no_cut = ~std::uint64_t{0};

// --- the child ---------------------------------------------------------------------------

/// Everything the child does. It never returns into Catch2: it runs until killed, or
/// reports a failure and `_exit`s (no destructors, no atexit, no stdio flush of the parent's
/// buffers).
class child {
public:
    child(int pipe, std::uint64_t seed) : pipe_{pipe}, random_{seed} {}

    [[noreturn]] void run(const file_log_options& options) {
        std::string why;
        auto opened = file_log::open(options, &why);
        if (!opened) fail("open: " + why);
        file_log log = std::move(opened).value();
        if (log.snapshot()) snapshot_ = log.snapshot()->last_included;
        auto all = log.read(snapshot_, ~std::size_t{0});
        if (!all) fail("read of the whole log failed");
        for (const log_record& r : all.value()) ids_.push_back(r.id);
        send({message_kind::ready, log.last_zxid().value(), ids_.size(), snapshot_.value()});

        epoch_ = log.stored_epochs().accepted;
        // A new epoch when none was promised yet, or the log ends in an older one (a
        // truncation crossed it), and sometimes anyway (a new leader). Never reuse one.
        if (epoch_ == 0 || log.last_zxid().epoch() < epoch_ || random_.chance(0.1)) bump_epoch(log);
        for (;;) step(log);
    }

private:
    /// Truncates or compacts now and then (one of them once the log is long, to bound the
    /// test's work), otherwise appends a batch; one flush either way.
    void step(file_log& log) {
        const bool long_log = ids_.size() > log_records_max;
        if (ids_.size() > 8 && random_.chance(long_log ? 0.5 : 0.04)) {
            compact(log, ids_[random_.below(ids_.size())]);
        } else if (long_log || (ids_.size() > 8 && random_.chance(0.06))) {
            // Long: keep at most half. Else cut up to 40 records off the end.
            const std::size_t size = ids_.size();
            truncate(log, long_log ? random_.below(size / 2)
                                   : size - 1 - random_.below(std::min<std::size_t>(size - 1, 40)));
        } else {
            flush_records(log, no_cut, random_.between(1, 24));
        }
    }

    /// A checkpoint at `at`, alone in its flush: the records up to it go.
    void compact(file_log& log, zxid at) {
        if (!log.compact(at, state_of(at))) fail(fmt::format("compact({}) refused", at));
        send({message_kind::compact_intent, at.value(), 0, 0});
        flush(log);
        send({message_kind::durable, log.last_zxid().value(), 0, 0});
        snapshot_ = at;
        ids_.erase(ids_.begin(), std::upper_bound(ids_.begin(), ids_.end(), at));
    }

    /// Keeps the first `keep` records after the snapshot (none: truncates to it). When the
    /// cut lies in the current epoch, the same flush appends after it (a truncation and
    /// appends in one job); else the epoch moves on.
    void truncate(file_log& log, std::size_t keep) {
        const zxid last_kept = keep == 0 ? snapshot_ : ids_[keep - 1];
        log.truncate_after(++op_, last_kept);
        ids_.resize(keep);
        if (last_kept.epoch() == epoch_ && random_.chance(0.5)) {
            flush_records(log, last_kept.value(), random_.between(1, 12));
            return;
        }
        send({message_kind::intent, last_kept.value(), 0, 0});
        flush(log);
        send({message_kind::durable, log.last_zxid().value(), 0, 0});
        bump_epoch(log);
    }

    /// Appends `count` records after the last one and flushes them (with a pending cut).
    void flush_records(file_log& log, std::uint64_t cut, std::uint64_t count) {
        const zxid last = ids_.empty() ? snapshot_ : ids_.back();
        std::uint32_t counter = last.epoch() == epoch_ ? last.counter() : 0;
        std::vector<log_record> batch;
        for (std::uint64_t i = 0; i < count; ++i) {
            const zxid id{epoch_, ++counter};
            batch.push_back({id, payload_of(id)});
            ids_.push_back(id);
        }
        log.append(++op_, batch);
        log.make_durable(op_);
        send({message_kind::intent, cut, batch.front().id.value(), batch.back().id.value()});
        flush(log);
        send({message_kind::durable, log.last_zxid().value(), 0, 0});
    }

    /// Records of epoch e are appended only once e is durable in the epoch file: open
    /// refuses a log whose last record is of an epoch above acceptedEpoch (docs/protocol.md §2).
    void bump_epoch(file_log& log) {
        ++epoch_;
        log.write_epochs(op_, {epoch_, epoch_});
        send({message_kind::epochs_intent, epoch_, 0, 0});
        flush(log);
        send({message_kind::epochs_durable, epoch_, 0, 0});
    }

    void flush(file_log& log) {
        // Both ways of flushing: the driver's three steps, and the one call.
        const zab::flush_result result = [&] {
            if (random_.chance(0.5)) return log.flush();
            zab::flush_job job = log.begin_flush();
            job.run();
            zab::flush_result flushed = log.finish_flush(std::move(job));
            if (log.has_checkpoint_work()) {  // a compaction's checkpoint: a job of its own
                zab::checkpoint_job checkpoint = log.begin_checkpoint();
                checkpoint.run();
                log.finish_checkpoint(std::move(checkpoint));
            }
            return flushed;
        }();
        if (log.failed()) fail("checkpoint failed: " + log.failure_reason());
        if (result.failed()) fail("flush failed: " + result.reason);
    }

    void send(const message& m) {
        const char* at = reinterpret_cast<const char*>(&m);
        std::size_t left = sizeof m;
        while (left > 0) {
            const ssize_t n = ::write(pipe_, at, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) ::_exit(3);  // the parent is gone: nobody to tell
            at += n;
            left -= static_cast<std::size_t>(n);
        }
    }

    [[noreturn]] void fail(const std::string& why) {
        std::fprintf(stderr, "file_log kill test child: %s\n", why.c_str());
        send({message_kind::failed, 0, 0, 0});
        ::_exit(2);
    }

    static constexpr std::size_t log_records_max = 400;

    int pipe_;
    zab::testing::prng random_;
    zxid snapshot_;          ///< of the snapshot in effect (zxid{}: none)
    std::vector<zxid> ids_;  ///< the records after it
    zab::epoch_t epoch_ = 0;
    zab::storage_op op_ = 0;
};

// --- the parent --------------------------------------------------------------------------

/// What a round's child reported, read after its death.
struct child_report {
    std::vector<message> messages;
    int wait_status = 0;
};

void sleep_microseconds(std::uint64_t us) {
    timespec t{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
    while (::nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

/// Blocks until `fd` has a whole message or ends; false at the end (or after 30 s: a child
/// that says nothing for that long is stuck, and the round fails).
bool read_message(int fd, message& out) {
    char* at = reinterpret_cast<char*>(&out);
    std::size_t got = 0;
    while (got < sizeof out) {
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, 30'000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return false;
        const ssize_t n = ::read(fd, at + got, sizeof out - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += static_cast<std::size_t>(n);
    }
    return true;
}

/// Forks the child, kills it `delay_us` after it reported ready (or after the fork, when
/// `kill_in_startup`), and collects what it said.
child_report run_child_round(const file_log_options& options, std::uint64_t child_seed,
                             bool kill_in_startup, std::uint64_t delay_us) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        child{fds[1], child_seed}.run(options);
    }
    ::close(fds[1]);
    child_report report;
    bool reading = true;
    if (!kill_in_startup) {
        message m;
        reading = read_message(fds[0], m);
        if (reading) report.messages.push_back(m);
    }
    sleep_microseconds(delay_us);
    ::kill(pid, SIGKILL);
    REQUIRE(::waitpid(pid, &report.wait_status, 0) == pid);
    for (message m; reading && read_message(fds[0], m);) report.messages.push_back(m);
    ::close(fds[0]);
    return report;
}

/// A log as the parent sees it: the snapshot in effect (zxid{}: none) and the records after.
struct log_state {
    zxid snapshot;
    std::vector<zxid> ids;
    zxid last() const { return ids.empty() ? snapshot : ids.back(); }
    friend bool operator==(const log_state&, const log_state&) = default;
};

std::string describe(const log_state& log) {
    return fmt::format("{} records after snapshot {}, up to {}", log.ids.size(), log.snapshot,
                       log.last());
}

/// The logs a kill may leave, given the log before the round and the child's messages.
struct crash_states {
    log_state durable;                ///< after the last flush that returned
    std::optional<log_state> target;  ///< the flush in flight: what it would make
    std::size_t kept = 0;             ///< its truncation point: both keep this prefix
    zab::epoch_t epoch = 0;           ///< the durable accepted epoch
    std::optional<zab::epoch_t> epoch_target;
    bool failed = false;
    std::string problem;  ///< a report that contradicts the log (a bug in the test or zab)
};

crash_states replay(const log_state& before, zab::epoch_t epoch_before,
                    const std::vector<message>& messages) {
    crash_states s;
    s.durable = before;
    s.epoch = epoch_before;
    for (const message& m : messages) {
        switch (m.kind) {
            case message_kind::ready:
                if (m.a != before.last().value() || m.b != before.ids.size() ||
                    m.c != before.snapshot.value())
                    s.problem = fmt::format(
                        "the child recovered {} records after {}, up to {}; "
                        "the parent {}",
                        m.b, zxid::from_value(m.c), zxid::from_value(m.a), describe(before));
                break;
            case message_kind::intent: {
                log_state next = s.durable;
                if (m.a != no_cut)
                    next.ids.erase(
                        std::upper_bound(next.ids.begin(), next.ids.end(), zxid::from_value(m.a)),
                        next.ids.end());
                s.kept = next.ids.size();
                if (m.b != 0) {
                    const zxid first = zxid::from_value(m.b), last = zxid::from_value(m.c);
                    for (std::uint32_t c = first.counter(); c <= last.counter(); ++c)
                        next.ids.push_back(zxid{first.epoch(), c});
                }
                s.target = std::move(next);
                break;
            }
            case message_kind::compact_intent: {
                log_state next = s.durable;
                next.snapshot = zxid::from_value(m.a);
                next.ids.erase(next.ids.begin(),
                               std::upper_bound(next.ids.begin(), next.ids.end(), next.snapshot));
                s.kept = next.ids.size();
                s.target = std::move(next);
                break;
            }
            case message_kind::durable:
                if (!s.target || s.target->last().value() != m.a)
                    s.problem = fmt::format("durable {} does not match the flush announced",
                                            zxid::from_value(m.a));
                else
                    s.durable = std::move(*s.target);
                s.target.reset();
                break;
            case message_kind::epochs_intent:
                s.epoch_target = static_cast<zab::epoch_t>(m.a);
                break;
            case message_kind::epochs_durable:
                s.epoch = static_cast<zab::epoch_t>(m.a);
                s.epoch_target.reset();
                break;
            case message_kind::failed: s.failed = true; break;
            default:
                s.problem =
                    fmt::format("unknown message kind {}", static_cast<std::uint64_t>(m.kind));
        }
    }
    return s;
}

bool is_prefix(const std::vector<zxid>& prefix, const std::vector<zxid>& of) {
    return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

/// Empty when `found` is a log the kill may leave; else what is wrong. A checkpoint flies
/// alone: it landed whole or not at all. A truncation and appends leave a prefix of the old
/// log or of the new one, down to the truncation point and no further.
std::string judge(const log_state& found, const crash_states& s) {
    if (found == s.durable) return {};
    if (s.target && s.target->snapshot != s.durable.snapshot && found == *s.target) return {};
    if (s.target && found.snapshot == s.durable.snapshot && found.ids.size() >= s.kept &&
        (is_prefix(found.ids, s.durable.ids) || is_prefix(found.ids, s.target->ids)))
        return {};
    return fmt::format(
        "found {}: not a state the kill can leave (durable: {}; flush in "
        "flight: {})",
        describe(found), describe(s.durable), s.target ? describe(*s.target) : std::string{"none"});
}

/// Opens `directory` and reads the whole log, checking each record's bytes and the
/// snapshot's state.
struct recovered_log {
    log_state log;
    zab::epoch_t epoch = 0;
    std::string problem;
};

recovered_log open_and_read(const file_log_options& options) {
    recovered_log out;
    file_log log = open_log(options);
    if (log.snapshot()) {
        out.log.snapshot = log.snapshot()->last_included;
        if (!(log.snapshot()->state == state_of(out.log.snapshot)))
            out.problem = fmt::format("the snapshot at {} has another state", out.log.snapshot);
    }
    out.epoch = log.stored_epochs().accepted;
    REQUIRE(log.stored_epochs().current == out.epoch);
    const auto records = read_all(log, 97);
    for (const log_record& r : records) {
        if (out.problem.empty() && !(r.txn == payload_of(r.id)))
            out.problem = fmt::format("record {} has other bytes than were appended", r.id);
        out.log.ids.push_back(r.id);
    }
    if (out.problem.empty() && log.last_zxid() != out.log.last())
        out.problem = "last_zxid() is not the last record read";
    for (std::size_t i = 0; out.problem.empty() && i < out.log.ids.size(); ++i)
        if (!(out.log.ids[i] > (i == 0 ? out.log.snapshot : out.log.ids[i - 1])))
            out.problem = "read returned zxids out of order";
    return out;
}

/// ZAB_KILL_TRACE=1: one line per round, the child's messages as kind/a.
void print_round(std::uint64_t round, std::uint64_t delay_us, bool in_startup,
                 const std::vector<message>& messages) {
    std::string line = fmt::format("round {}: kill {} us after {}:", round, delay_us,
                                   in_startup ? "fork" : "ready");
    for (const message& m : messages)
        line += fmt::format(" {}/{:x}", static_cast<std::uint64_t>(m.kind), m.a);
    std::printf("%s\n", line.c_str());
}

std::uint64_t from_environment(const char* name, std::uint64_t fallback) {
    const char* text = std::getenv(name);
    return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 0) : fallback;
}

}  // namespace

TEST_CASE(
    "file_log under kill -9: every reported durable record survives, recovery is "
    "idempotent") {
    const std::uint64_t seed = from_environment("ZAB_KILL_SEED", 20261130);
    const std::uint64_t rounds = from_environment("ZAB_KILL_ROUNDS", 120);
    const bool trace = from_environment("ZAB_KILL_TRACE", 0) != 0;
    zab::testing::prng random{seed};
    temporary_directory dir;
    const auto options = kill_options(dir.data());
    const auto check_options = kill_options(dir.path() + "/check");

    log_state log;  // the log as the parent last verified it
    zab::epoch_t epoch = 0;
    std::uint64_t kills = 0, kills_in_flush = 0, kills_in_startup = 0, records_verified = 0;
    std::uint64_t undurable_kept = 0, checkpoints = 0, repaired_by_parent = 0,
                  repaired_by_child = 0;
    bool child_repairs = false;  // the original directory is as the last kill left it
    const auto started = std::chrono::steady_clock::now();

    for (std::uint64_t round = 0; round < rounds; ++round) {
        INFO("seed " << seed << " round " << round);
        const std::uint64_t child_seed = random.next();
        // Some rounds kill during start-up, where the child repairs what the last kill left
        // (when the parent checked a copy). The others kill within 40 ms of the child's
        // start: a flush costs a few fdatasyncs (1–10 ms each on this kind of disk), so the
        // kills spread over several flushes, some right at the first one.
        const bool in_startup = random.chance(child_repairs ? 0.5 : 0.05);
        const std::uint64_t delay_us = in_startup             ? random.below(1500)
                                       : random.below(5) == 0 ? random.below(500)
                                                              : random.below(40'000);
        const bool check_a_copy = random.chance(0.25) && fs::exists(options.directory);

        const child_report report = run_child_round(options, child_seed, in_startup, delay_us);
        INFO("wait status " << report.wait_status << ", " << report.messages.size() << " messages");
        REQUIRE(WIFSIGNALED(report.wait_status));
        REQUIRE(WTERMSIG(report.wait_status) == SIGKILL);
        ++kills;
        kills_in_startup += in_startup ? 1 : 0;

        const crash_states states = replay(log, epoch, report.messages);
        if (trace) print_round(round, delay_us, in_startup, report.messages);
        INFO(states.problem);
        REQUIRE_FALSE(states.failed);
        REQUIRE(states.problem.empty());
        if (!in_startup) REQUIRE_FALSE(report.messages.empty());  // it said it was ready
        kills_in_flush += states.target || states.epoch_target ? 1 : 0;
        if (child_repairs && !report.messages.empty()) ++repaired_by_child;

        // Verify on the directory itself, or on a copy, leaving the original to the child.
        const file_log_options& verify = check_a_copy ? check_options : options;
        if (check_a_copy) copy_directory(options.directory, verify.directory);
        using listing = decltype(directory_state(std::string{}));
        const listing as_killed =
            fs::exists(verify.directory) ? directory_state(verify.directory) : listing{};
        const recovered_log first = open_and_read(verify);
        INFO(first.problem);
        REQUIRE(first.problem.empty());
        const std::string verdict = judge(first.log, states);
        INFO(verdict);
        REQUIRE(verdict.empty());
        REQUIRE((first.epoch == states.epoch ||
                 (states.epoch_target && first.epoch == *states.epoch_target)));
        REQUIRE(first.log.last().epoch() <= first.epoch);
        const auto repaired = directory_state(verify.directory);
        if (repaired != as_killed && !as_killed.empty()) ++repaired_by_parent;

        const recovered_log second = open_and_read(verify);
        REQUIRE(second.problem.empty());
        REQUIRE(second.log == first.log);
        REQUIRE(second.epoch == first.epoch);
        REQUIRE(directory_state(verify.directory) == repaired);

        undurable_kept += first.log != states.durable ? 1 : 0;
        records_verified += first.log.ids.size();
        checkpoints += first.log.snapshot != log.snapshot ? 1 : 0;
        log = first.log;
        epoch = first.epoch;
        child_repairs = check_a_copy;
    }

    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started);
    const std::string summary = fmt::format(
        "file_log kill test (seed {}): {} kills ({} during a flush, {} during start-up), {} "
        "records verified, {} times the kill left more than the durable log, {} repairs by "
        "the parent's open, {} child start-ups on an unrepaired directory, {} new checkpoints "
        "found, final log {} records, {:.1f} s",
        seed, kills, kills_in_flush, kills_in_startup, records_verified, undurable_kept,
        repaired_by_parent, repaired_by_child, checkpoints, log.ids.size(), seconds.count());
    std::printf("%s\n", summary.c_str());
    std::fflush(stdout);
    REQUIRE(kills == rounds);
}
