// zab/testing/peer_internals.hpp — tests' read-only access to a peer's core state.
//
// `peer::status()` and `peer::learners()` are the public view of a replica. The simulator's
// observers, the invariant checkers and directed protocol tests need more — a learner's
// buffered proposals, a leader's outstanding acknowledgements, a connection id — and read it
// here, knowing it is the core's own and changes with it. Nothing outside tests uses this.
#pragma once

#include "zab/core/peer.hpp"

namespace zab::testing {

struct peer_internals {
    template <typename Peer>
    static const peer_context& of(const Peer& p) noexcept {
        return p.ctx_;
    }
};

/// `p`'s peer_context (the state its phase policies share).
template <typename Peer>
const peer_context& internals(const Peer& p) noexcept {
    return peer_internals::of(p);
}

}  // namespace zab::testing
