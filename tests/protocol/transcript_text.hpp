// tests/protocol/transcript_text.hpp — the text form of a wire message in transcripts
// (tests/protocol/transcripts/): what transcript_test.cpp writes and reads back, and what the
// explorer (tests/explorer/explorer_main.cpp) writes for a counterexample.
#pragma once

#include <string>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "zab/core/codec.hpp"
#include "zab/core/messages.hpp"

namespace zab::test::transcript {

using namespace zab;

inline std::string text(zxid z) { return fmt::format("<{}, {}>", z.epoch(), z.counter()); }
inline std::string text(byte_view b) { return fmt::format("\"{}\"", as_string_view(b)); }

inline std::string text(const wire::message& m) {
    const std::string name{to_string(type_of(m))};
    const auto fields = std::visit(
        [](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, wire::notification>)
                return fmt::format("state {}, leader {}, zxid {}, round {}, epoch {}", v.state,
                                   v.leader, text(v.leader_zxid), v.round, v.leader_epoch);
            else if constexpr (std::is_same_v<T, wire::follower_info> || std::is_same_v<T, wire::observer_info>)
                return fmt::format("accepted {}", v.accepted_epoch);
            else if constexpr (std::is_same_v<T, wire::leader_info>)
                return fmt::format("epoch {}", v.new_epoch);
            else if constexpr (std::is_same_v<T, wire::ack_epoch>)
                return v.current_epoch ? fmt::format("last {}, current {}", text(v.last_logged),
                                                     *v.current_epoch)
                                       : fmt::format("last {}", text(v.last_logged));
            else if constexpr (std::is_same_v<T, wire::diff>)
                return fmt::format("last {}", text(v.last));
            else if constexpr (std::is_same_v<T, zab::wire::trunc>)
                return fmt::format("to {}", text(v.truncate_to));
            else if constexpr (std::is_same_v<T, wire::snap>)
                return fmt::format("at {}, size {}, offset {}, bytes {}", text(v.last_included),
                                   v.total_size, v.offset, v.chunk.size());
            else if constexpr (std::is_same_v<T, wire::snap_ack>)
                return fmt::format("received {}", v.received);
            else if constexpr (std::is_same_v<T, wire::sync_ack>)
                return fmt::format("received {}", text(v.received));
            else if constexpr (std::is_same_v<T, wire::new_leader>)
                return fmt::format("epoch {}", text(v.epoch_zxid));
            else if constexpr (std::is_same_v<T, wire::ack>)
                return fmt::format("zxid {}", text(v.acked));
            else if constexpr (std::is_same_v<T, wire::up_to_date>)
                return "";
            else if constexpr (std::is_same_v<T, wire::proposal> || std::is_same_v<T, wire::inform>)
                return fmt::format("zxid {}, txn {}", text(v.id), text(v.txn));
            else if constexpr (std::is_same_v<T, wire::commit>)
                return fmt::format("zxid {}", text(v.id));
            else if constexpr (std::is_same_v<T, wire::forwarded_request>)
                return fmt::format("id {}, {}, txn {}", v.request_id,
                                   v.kind == wire::request_kind::sync         ? "sync"
                                   : v.kind == wire::request_kind::lease_sync ? "lease sync"
                                                                              : "write",
                                   text(v.txn));
            else if constexpr (std::is_same_v<T, wire::ping>)
                return fmt::format("last {}, round {}", text(v.last_proposed), v.round);
            else if constexpr (std::is_same_v<T, zab::wire::sync_answer>)
                return fmt::format("id {}", v.request_id);
            else if constexpr (std::is_same_v<T, wire::forwarded_reply>)
                return fmt::format("id {}, outcome {}, zxid {}", v.request_id,
                                   static_cast<int>(v.outcome), text(v.id));
            else if constexpr (std::is_same_v<T, wire::forwarded_batch>)
                return fmt::format("first id {}, count {}", v.first_request_id, v.count);
            else if constexpr (std::is_same_v<T, wire::reply_batch>)
                return fmt::format("first id {}, count {}, outcome {}, first {}", v.first_request_id,
                                   v.count, static_cast<int>(v.outcome), text(v.first));
            else
                return "?";
        },
        m);
    return fields.empty() ? name : fmt::format("{}({})", name, fields);
}

}  // namespace zab::test::transcript
