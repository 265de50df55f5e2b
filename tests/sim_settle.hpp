// tests/sim_settle.hpp — what the simulator tests ask of a cluster: its established leader,
// and a run until every live replica is established under one (REQUIREd within 40 s of
// virtual time).
#pragma once

#include <catch2/catch.hpp>

#include "zab/core/types.hpp"

namespace zab::test {

template <typename Sim>
peer_id leader_of(Sim& sim) {
    for (const auto& n : sim.nodes())
        if (n.peer && n.peer->state() == peer_state::leading && n.peer->established()) return n.id;
    return 0;
}

template <typename Sim>
void settle(Sim& sim) {
    REQUIRE(sim.run_until(
        [&] {
            if (leader_of(sim) == 0) return false;
            for (const auto& n : sim.nodes())
                if (n.peer && !n.peer->established()) return false;
            return true;
        },
        sim.now() + 40'000'000));
}

}  // namespace zab::test
