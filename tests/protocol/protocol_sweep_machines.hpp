// tests/protocol/protocol_sweep_machines.hpp — the state machines the protocol sweep can
// run (`--machine NAME`), each compiled in a translation unit of its group so that the
// peer instantiations build in parallel.
//
//   recording                  recording_state_machine (system + deferred; the default)
//   plain, system, result, deferred, system+result, system+deferred, result+deferred,
//   system+result+deferred     concept_machine with exactly those optional concepts
//   session(<one of those>)    zab::session_machine around it
//   kv                         the kv example's kv_state_machine (transactions: SET commands)
// Each behind testing::recorded (machine_variants.hpp), which records for the checkers and
// models what the machine models, nothing more.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol_sweep_run.hpp"
#include "zab/testing/machine_variants.hpp"

namespace zab::test {

using seed_runner = protocol_seed_result (*)(std::uint64_t seed, protocol_totals& totals,
                                             bool trace, const sweep_variant& variant);

struct machine_runner {
    std::string name;
    seed_runner run;
};

/// The runners of each group (protocol_sweep_concepts.cpp, protocol_sweep_sessions.cpp,
/// protocol_sweep_kv.cpp; the recording machine in protocol_sweep.cpp).
std::vector<machine_runner> concept_machine_runners();
std::vector<machine_runner> session_machine_runners();
std::vector<machine_runner> example_machine_runners();

/// One seed of the sweep on `Machine` behind the recording layer, on the sweep's log.
template <typename Machine, typename Log>
protocol_seed_result run_recorded(std::uint64_t seed, protocol_totals& totals, bool trace,
                                  const sweep_variant& variant) {
    return run_protocol_seed<testing::recorded<Machine>, default_policies, Log>(seed, totals,
                                                                                trace, variant);
}

/// `entry(static_cast<M*>(nullptr))` for each combination of the optional concepts, M the
/// concept_machine with exactly those (plain first, then one, two and all three concepts).
template <typename Entry>
std::vector<machine_runner> for_each_concept_combination(Entry entry) {
    using testing::concept_machine;
    return {entry(static_cast<concept_machine<false, false, false>*>(nullptr)),
            entry(static_cast<concept_machine<true, false, false>*>(nullptr)),
            entry(static_cast<concept_machine<false, true, false>*>(nullptr)),
            entry(static_cast<concept_machine<false, false, true>*>(nullptr)),
            entry(static_cast<concept_machine<true, true, false>*>(nullptr)),
            entry(static_cast<concept_machine<true, false, true>*>(nullptr)),
            entry(static_cast<concept_machine<false, true, true>*>(nullptr)),
            entry(static_cast<concept_machine<true, true, true>*>(nullptr))};
}

}  // namespace zab::test
