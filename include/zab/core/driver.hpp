// zab/core/driver.hpp — the contract between a peer and whatever drives it.
//
// A driver (zab::asio::node, the simulator, the protocol-ceiling benchmark, or an
// application's own loop) owns the clock, the transport's events and the log's disk work, and
// delivers them to the peer one at a time, on one thread or strand. After every call into
// the peer — an event, a client call, a tick — it takes the peer's `ready()` and does what it
// says, in this order:
//
//   1. completions  complete these client requests, in order (each exactly once);
//   2. flush_due    the log (a flushable log: file_log, memory_log) has disk work: unless a
//                   flush job is already running, start one (`log.begin_flush()`, `job.run()`
//                   anywhere, then on the peer's thread `peer.on_flushed(log.finish_flush(job))`,
//                   which is itself an event);
//   3. snapshot     compaction's work, from a state machine that models
//                   zab::deferred_snapshot_machine: run `serialize` anywhere, then
//                   `peer.on_snapshot_ready(work.at, bytes)` (an event). A driver that never
//                   does leaves the log uncompacted;
//   4. next_deadline  the tick at which `tick()` next has work: sleep until then, or until
//                   the next event.
//
// Frames go out inside the peer's own step, to the transport, only once what they promise is
// durable (docs/design.md rule 2). Nothing here calls back into the driver.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "zab/core/client.hpp"
#include "zab/core/peer_context.hpp"

namespace zab {

/// What a driver owes the peer after a call into it: `peer::ready()`.
struct peer_ready {
    std::vector<client_completion> completions;  ///< oldest first
    bool flush_due = false;                      ///< the log has work for a flush job
    std::optional<snapshot_work> snapshot;       ///< at most one out at a time
    std::optional<std::uint64_t> next_deadline;  ///< none: only an event wakes the peer
};

}  // namespace zab
