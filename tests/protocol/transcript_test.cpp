// Transcript tests, etcd raft's datadriven style: one real zab::peer driven by a script of
// events, every frame it sends, connection it closes, completion it hands out and role it
// takes written out as text, and compared with the file. A change in behaviour shows up as
// a readable diff of the transcript; ZAB_TRANSCRIPT_REWRITE=1 writes the new output back
// into the files (then review the diff like code).
//
// A file in tests/protocol/transcripts/ is a list of blocks:
//
//   # comment
//   > <event>            what the driver does to the peer
//   <expected output>    one line per effect of that event, in order (nothing: no effect)
//
// The first event creates the peer:  peer <id> of <voters> [observers <n>] [leader <id>]
//                                     [log <epoch>:<count>] [epochs <accepted>/<current>]
// (`leader` selects zab::fixed_leader_election, else Fast Leader Election; `log` gives the
// recovered log `count` records of `epoch`, 8 bytes each.) Then:
//   connect <id>                    a connection to <id> is up (connection id = <id>)
//   disconnect <id>
//   start | tick [n] | durable      durable: every log operation and epoch write issued
//   from <id>: <MESSAGE>            a frame from <id> (the message syntax is the output's)
//   submit <text> | sync
// Output lines:  to <id>: <MESSAGE> | close <id> | done #<forwarded_request>: <outcome> |
//                role <ROLE>[ established]
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zab/core/codec.hpp"
#include "zab/core/peer.hpp"
#include "zab/testing/recording_state_machine.hpp"

#include "manual_peer.hpp"
#include "transcript_text.hpp"

#ifndef ZAB_TRANSCRIPT_DIR
#error "ZAB_TRANSCRIPT_DIR must name tests/protocol/transcripts"
#endif

using namespace zab;

namespace {

using zab::test::transcript::text;

// --- parsing the same form back (the messages a script sends) ----------------------------

/// "NAME(k v, k <e, c>, k "text")" → NAME and k → v. Strings in `strings` (they are views).
struct parsed_message {
    std::string name;
    std::map<std::string, std::string> fields;
};

parsed_message parse_fields(std::string_view s) {
    parsed_message out;
    const auto open = s.find('(');
    out.name = std::string{s.substr(0, open)};
    if (open == std::string_view::npos) return out;
    REQUIRE(s.back() == ')');
    std::string_view body = s.substr(open + 1, s.size() - open - 2);
    while (!body.empty()) {
        int depth = 0;
        bool quoted = false;
        std::size_t end = 0;
        for (; end < body.size(); ++end) {
            const char c = body[end];
            if (c == '"') quoted = !quoted;
            if (!quoted && c == '<') ++depth;
            if (!quoted && c == '>') --depth;
            if (!quoted && depth == 0 && c == ',') break;
        }
        std::string_view field = body.substr(0, end);
        while (!field.empty() && field.front() == ' ') field.remove_prefix(1);
        const auto space = field.find(' ');
        REQUIRE(space != std::string_view::npos);
        out.fields[std::string{field.substr(0, space)}] = std::string{field.substr(space + 1)};
        body = end < body.size() ? body.substr(end + 1) : std::string_view{};
    }
    return out;
}

zxid parse_zxid(const std::string& s) {
    unsigned long long e = 0, c = 0;
    REQUIRE(std::sscanf(s.c_str(), "<%llu, %llu>", &e, &c) == 2);
    return zxid{static_cast<epoch_t>(e), static_cast<std::uint32_t>(c)};
}
std::uint64_t parse_u64(const std::string& s) { return std::stoull(s); }
std::string parse_text(const std::string& s) {
    REQUIRE(s.size() >= 2);
    return s.substr(1, s.size() - 2);
}
peer_state parse_state(const std::string& s) {
    for (peer_state st : {peer_state::looking, peer_state::following, peer_state::leading,
                          peer_state::observing})
        if (fmt::format("{}", st) == s) return st;
    FAIL("unknown state " << s);
    return peer_state::looking;
}

/// Encodes the message written as `s` (its text form). Byte fields point into `storage`.
shared_bytes encode_text(std::string_view s, std::vector<std::string>& storage) {
    const parsed_message p = parse_fields(s);
    const auto& f = p.fields;
    const auto bytes = [&](const char* key) {
        storage.push_back(parse_text(f.at(key)));
        return as_bytes(storage.back());
    };
    wire::message m;
    if (p.name == "NOTIFICATION")
        m = wire::notification{parse_state(f.at("state")), parse_u64(f.at("leader")),
                         parse_zxid(f.at("zxid")), parse_u64(f.at("round")),
                         static_cast<epoch_t>(parse_u64(f.at("epoch")))};
    else if (p.name == "FOLLOWERINFO")
        m = wire::follower_info{static_cast<epoch_t>(parse_u64(f.at("accepted")))};
    else if (p.name == "OBSERVERINFO")
        m = wire::observer_info{static_cast<epoch_t>(parse_u64(f.at("accepted")))};
    else if (p.name == "LEADERINFO")
        m = wire::leader_info{static_cast<epoch_t>(parse_u64(f.at("epoch")))};
    else if (p.name == "ACKEPOCH")
        m = wire::ack_epoch{parse_zxid(f.at("last")),
                      f.contains("current") ? std::optional<epoch_t>{static_cast<epoch_t>(
                                                  parse_u64(f.at("current")))}
                                            : std::nullopt};
    else if (p.name == "DIFF")
        m = wire::diff{parse_zxid(f.at("last"))};
    else if (p.name == "TRUNC")
        m = zab::wire::trunc{parse_zxid(f.at("to"))};
    else if (p.name == "NEWLEADER")
        m = wire::new_leader{parse_zxid(f.at("epoch"))};
    else if (p.name == "ACK")
        m = wire::ack{parse_zxid(f.at("zxid"))};
    else if (p.name == "UPTODATE")
        m = wire::up_to_date{};
    else if (p.name == "PROPOSAL")
        m = wire::proposal{parse_zxid(f.at("zxid")), bytes("txn")};
    else if (p.name == "COMMIT")
        m = wire::commit{parse_zxid(f.at("zxid"))};
    else if (p.name == "PING")
        m = wire::ping{parse_zxid(f.at("last")), parse_u64(f.at("round"))};
    else
        FAIL("a transcript cannot send " << p.name);
    return encode(frame_context{}, m);
}

// --- the peer under the script ------------------------------------------------------------

/// Records the frames and closes of one event.
struct transcript_transport {
    std::vector<std::string> effects;
    void send(peer_id to, connection_id, const shared_bytes& frame) {
        auto decoded = decode(frame.view());
        REQUIRE(decoded.has_value());
        effects.push_back(fmt::format("to {}: {}", to, text(decoded.value().msg)));
    }
    void close(peer_id to, connection_id) { effects.push_back(fmt::format("close {}", to)); }
};

/// One peer of either election policy behind a common interface for the script.
struct scripted {
    virtual ~scripted() = default;
    virtual void event(const std::string& line, std::vector<std::string>& out) = 0;
};

template <typename Policies>
struct scripted_peer final : scripted {
    using peer_type = peer<transcript_transport, test::hand_log, testing::recording_state_machine,
                           Policies>;
    transcript_transport transport;
    test::hand_log log;
    testing::recording_state_machine machine;
    std::unique_ptr<peer_type> p;
    std::vector<std::string> storage;  // bytes of the messages sent to the peer
    std::string last_role;

    /// The log recovers `count` records of `epoch` and `stored` epochs, then the peer starts
    /// from it.
    scripted_peer(peer_id self, const configuration& config, options opts, epoch_t epoch,
                  std::uint32_t count, epochs stored) {
        for (std::uint32_t i = 1; i <= count; ++i)
            log.records.push_back({zxid{epoch, i}, shared_bytes::copy_of(as_bytes("recorded"))});
        log.stored = stored;
        auto created = peer_type::create(self, config, opts, transport, log, machine);
        REQUIRE(created.has_value());
        p = std::move(created).value();
        last_role = role();
    }

    std::string role() const {
        return fmt::format("{}{}", p->state(), p->established() ? " established" : "");
    }

    void event(const std::string& line, std::vector<std::string>& out) override {
        std::istringstream words{line};
        std::string verb;
        words >> verb;
        if (verb == "connect" || verb == "disconnect") {
            peer_id id = 0;
            words >> id;
            if (verb == "connect") p->on_connected(id, id);
            else p->on_disconnected(id, id);
        } else if (verb == "start") {
            p->start();
        } else if (verb == "tick") {
            std::uint64_t n = 1;
            words >> n;
            p->tick(n);
        } else if (verb == "durable") {
            if (!log.epoch_writes.empty()) p->on_epochs_durable(log.epoch_writes.back());
            if (!log.syncs.empty()) p->on_log_durable(log.syncs.back());
        } else if (verb == "from") {
            const auto colon = line.find(':');
            REQUIRE(colon != std::string::npos);
            const peer_id id = std::stoull(line.substr(5, colon - 5));
            p->on_receive(id, id, encode_text(line.substr(colon + 2), storage));
        } else if (verb == "submit") {
            storage.push_back(line.substr(7));
            p->submit(as_bytes(storage.back()));
        } else if (verb == "sync") {
            p->sync();
        } else {
            FAIL("unknown event: " << line);
        }
        out.insert(out.end(), transport.effects.begin(), transport.effects.end());
        transport.effects.clear();
        for (const auto& c : p->ready().completions)
            out.push_back(c.outcome ? fmt::format("done #{}: {}", c.id, text(c.outcome.value()))
                                    : fmt::format("done #{}: {}", c.id, c.outcome.error().message()));
        if (const std::string now = role(); now != last_role) {
            out.push_back(fmt::format("role {}", now));
            last_role = now;
        }
    }
};

/// `peer <id> of <voters> [observers n] [leader id] [log e:n] [epochs a/c]`
std::unique_ptr<scripted> make_peer(const std::string& line) {
    std::istringstream words{line};
    std::string word, of;
    peer_id self = 0;
    std::size_t voters = 0, observers = 0;
    words >> word >> self >> of >> voters;
    REQUIRE(word == "peer");
    options opts;
    bool fixed = false;
    epoch_t log_epoch = 0;
    std::uint32_t log_count = 0;
    epochs stored;
    while (words >> word) {
        if (word == "observers") {
            words >> observers;
        } else if (word == "leader") {
            words >> opts.fixed_leader;
            fixed = true;
        } else if (word == "log") {
            char colon = 0;
            words >> log_epoch >> colon >> log_count;
        } else if (word == "epochs") {
            char slash = 0;
            words >> stored.accepted >> slash >> stored.current;
        } else {
            FAIL("unknown peer option: " << word);
        }
    }
    auto config = configuration::numbered(voters, observers);
    REQUIRE(config.has_value());
    if (fixed)
        return std::make_unique<scripted_peer<policies<fixed_leader_election>>>(
            self, config.value(), opts, log_epoch, log_count, stored);
    return std::make_unique<scripted_peer<default_policies>>(self, config.value(), opts,
                                                             log_epoch, log_count, stored);
}

// --- the files ------------------------------------------------------------------------------

struct block {
    std::vector<std::string> comments;  // lines before the event
    std::string event;
    std::vector<std::string> expected;
};

std::vector<block> read_blocks(const std::filesystem::path& file) {
    std::ifstream in{file};
    REQUIRE(in.good());
    std::vector<block> blocks;
    std::vector<std::string> pending;
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("> ", 0) == 0) {
            blocks.push_back({std::move(pending), line.substr(2), {}});
            pending.clear();
        } else if (line.empty() || line.front() == '#') {
            pending.push_back(line);
        } else {
            REQUIRE_FALSE(blocks.empty());
            blocks.back().expected.push_back(line);
        }
    }
    if (!pending.empty()) blocks.push_back({std::move(pending), "", {}});
    return blocks;
}

/// Runs the script; returns the file as it should read (the actual output in place of the
/// expected), and the first mismatch if any.
std::pair<std::string, std::string> run(const std::filesystem::path& file) {
    const auto blocks = read_blocks(file);
    std::unique_ptr<scripted> peer;
    std::string rewritten, mismatch;
    for (const block& b : blocks) {
        for (const auto& c : b.comments) rewritten += c + "\n";
        if (b.event.empty()) continue;
        rewritten += "> " + b.event + "\n";
        std::vector<std::string> actual;
        if (!peer) {
            REQUIRE(b.event.rfind("peer ", 0) == 0);
            peer = make_peer(b.event);
        } else {
            peer->event(b.event, actual);
        }
        for (const auto& line : actual) rewritten += line + "\n";
        if (actual != b.expected && mismatch.empty()) {
            mismatch = fmt::format("after '> {}'\n--- expected\n{}\n--- actual\n{}", b.event,
                                   fmt::join(b.expected, "\n"), fmt::join(actual, "\n"));
        }
    }
    return {rewritten, mismatch};
}

}  // namespace

TEST_CASE("transcripts: each script's output is the peer's behaviour, line for line") {
    const std::filesystem::path dir{ZAB_TRANSCRIPT_DIR};
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator{dir})
        if (entry.path().extension() == ".txt") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    REQUIRE(files.size() >= 3);
    const bool rewrite = std::getenv("ZAB_TRANSCRIPT_REWRITE") != nullptr;
    for (const auto& file : files) {
        INFO(file.filename().string());
        auto [rewritten, mismatch] = run(file);
        if (rewrite) {
            std::ofstream{file} << rewritten;
            continue;
        }
        CHECK(mismatch == "");
    }
}
