// A program that breaks one of zab's own invariants on purpose, chosen by its argument, and
// must be stopped by the core's production checks (ZAB_ASSERT, on in every build) — not by
// the test checkers, which this program does not attach. expect_abort_case.cmake runs it and
// checks that it aborted with the expected message.
//
//   link_transition     a learner link moved to a stage the protocol has no edge to
//   learner_transition  a learner moved to a stage the protocol has no edge to
//   leader_transition   a leader established before its currentEpoch was durable
//   broken_leader       a broadcast policy whose leader counts its own acknowledgements past
//                       its outstanding proposals: caught by peer_context::check_invariants
//                       at the end of the step, in a simulated group
#include <cstdio>
#include <string_view>

#include "zab/core/peer.hpp"
#include "zab/testing/simulator.hpp"

namespace {

struct overcounting_broadcast : zab::zab_broadcast {
    using zab::zab_broadcast::zab_broadcast;
    void leader_advance() {
        zab::zab_broadcast::leader_advance();
        auto& l = *ctx_.leading;
        if (l.established()) l.self_acked_count = l.outstanding.size() + 1;
    }
};

int broken_leader() {
    using broken = zab::policies<zab::fast_leader_election, zab::zab_discovery,
                                 zab::zab_synchronization, overcounting_broadcast>;
    zab::testing::cluster_options options;
    options.seed = 7;
    zab::testing::simulator<zab::testing::recording_state_machine, broken> sim{options};
    sim.start();
    sim.run_for(60'000'000);  // a minute of virtual time: the group establishes well before
    std::printf("the broken leader was never stopped\n");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string_view what = argc > 1 ? argv[1] : "";
    if (what == "link_transition") {
        zab::learner_link link;
        link.move_to(zab::learner_link::stage::awaiting_ack_epoch);  // a transition it has
        std::printf("a valid transition passed\n");
        std::fflush(stdout);
        link.move_to(zab::learner_link::stage::broadcasting);  // skips the sync
    } else if (what == "learner_transition") {
        zab::learner_state learner;
        learner.move_to(zab::learner_state::stage::awaiting_sync);
        std::printf("a valid transition passed\n");
        std::fflush(stdout);
        learner.move_to(zab::learner_state::stage::broadcasting);  // UPTODATE before the sync
    } else if (what == "leader_transition") {
        zab::leader_state leader;
        leader.move_to(zab::leader_state::stage::writing_epoch);
        std::printf("a valid transition passed\n");
        std::fflush(stdout);
        leader.move_to(zab::leader_state::stage::established);  // skips the epoch's quorums
    } else if (what == "broken_leader") {
        return broken_leader();
    } else {
        std::fprintf(stderr, "usage: invariant_abort_helper link_transition|learner_transition|"
                             "leader_transition|broken_leader\n");
        return 2;
    }
    std::printf("the invalid transition returned\n");
    return 0;
}
