// The protocol sweep's session machines: zab::session_machine around each concept machine
// (protocol_sweep_machines.hpp). Untagged transactions pass through the session table to
// the inner machine; the session image (and its label check) wraps the inner one.
#include "protocol_sweep_machines.hpp"
#include "sweep_log.hpp"
#include "zab/session/session_machine.hpp"
#include "zab/testing/machine_variants.hpp"

namespace zab::test {

std::vector<machine_runner> session_machine_runners() {
    return for_each_concept_combination([]<typename M>(M*) {
        return machine_runner{fmt::format("session({})", testing::concepts_name<M>()),
                              &run_recorded<session_machine<M>, sweep_log>};
    });
}

}  // namespace zab::test
