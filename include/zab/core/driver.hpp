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
//
// With lease reads on (options::read_lease_ticks > 0), the driver also **catches the clock
// up before every event**: before it delivers a frame, a connection change, a durability
// report or a client call, it calls `tick()` until the peer's tick count equals its clock's
// (docs/protocol.md §7.1). A follower stamps its promise with the tick at which a frame is
// handled, and a leader checks its lease against the tick at which a read is asked: a tick
// count that lags behind the clock makes the follower promise from too early and the leader
// hold its lease too long, and a lease read can then be stale. (zab::asio::node does this;
// the simulator's clock is the ticks themselves.) Lease reads off, a late tick only delays
// timeouts.
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
