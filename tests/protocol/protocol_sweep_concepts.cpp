// The protocol sweep's concept machines: one per combination of zab's optional concepts
// (protocol_sweep_machines.hpp).
#include "protocol_sweep_machines.hpp"
#include "sweep_log.hpp"
#include "zab/testing/machine_variants.hpp"

namespace zab::test {

std::vector<machine_runner> concept_machine_runners() {
    return for_each_concept_combination([]<typename M>(M*) {
        return machine_runner{std::string{testing::concepts_name<M>()},
                              &run_recorded<M, sweep_log>};
    });
}

}  // namespace zab::test
