// tests/protocol/sweep_log.hpp — the log the protocol sweep runs on: sim_log (a model of a
// log on a disk), or, with ZAB_SWEEP_FILE_LOG, sim_file_log: zab::file_log itself —
// segments, CRCs, flush jobs, recovery — on a simulated file system that loses power with
// un-synced writes kept, dropped or torn (issue #6).
#pragma once

#ifdef ZAB_SWEEP_FILE_LOG
#include "zab/testing/sim_file_log.hpp"
namespace zab::test {
using sweep_log = testing::sim_file_log;
}
#else
#include "zab/testing/sim_log.hpp"
namespace zab::test {
using sweep_log = testing::sim_log;
}
#endif
