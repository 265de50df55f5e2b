// The protocol sweep's concept machines: one per combination of zab's optional concepts
// (protocol_sweep_machines.hpp).
#include "protocol_sweep_machines.hpp"
#include "sweep_log.hpp"
#include "zab/testing/machine_variants.hpp"

namespace zab::test {

std::vector<machine_runner> concept_machine_runners() {
    using testing::concept_machine;
    auto entry = []<typename M>(M*) {
        return machine_runner{std::string{testing::concepts_name<M>()},
                              &run_recorded<M, sweep_log>};
    };
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
