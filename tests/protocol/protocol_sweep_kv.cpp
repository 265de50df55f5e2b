// The protocol sweep on the kv example's own machine (examples/kv/kv_state_machine.hpp):
// zab::session_machine around kv_store, a result and deferred-snapshot machine without
// apply_system, as kv_server runs it. Every transaction is a SET command (keys drawn from
// a small set, so values are overwritten), untagged.
#include <string>
#include <string_view>

#include "kv/kv_state_machine.hpp"
#include "protocol_sweep_machines.hpp"
#include "sweep_log.hpp"
#include "zab/testing/machine_variants.hpp"

namespace zab::test {
namespace {

std::string kv_set_command(std::string_view text) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    const kv::command c{kv::set_op{fmt::format("k{}", h % 16), std::string{text}}, std::nullopt};
    auto bytes = kv::encode(c);
    ZAB_ASSERT(bytes.has_value(), "a SET command of the sweep does not encode");
    const auto& b = bytes.value();
    return std::string{reinterpret_cast<const char*>(b.data()), b.size()};
}

protocol_seed_result run_kv(std::uint64_t seed, protocol_totals& totals, bool trace,
                            const sweep_variant& variant) {
    sweep_variant v = variant;
    v.encode_txn = &kv_set_command;
    return run_recorded<kv::kv_state_machine, sweep_log>(seed, totals, trace, v);
}

}  // namespace

std::vector<machine_runner> example_machine_runners() { return {{"kv", &run_kv}}; }

}  // namespace zab::test
