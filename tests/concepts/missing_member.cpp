// tests/concepts/missing_member.cpp — a type that is its concept's archetype minus one member.
//
// docs/design.md rule 8: "a user's type that misses a member fails with a readable message".
// This source is never built into a program. expect_compile_failure.cmake compiles it with
// -fsyntax-only, once per (concept, member, compiler):
//   -DZAB_CHECK_<CONCEPT>                  which concept to static_assert (exactly one);
//   -DZAB_MISSING_<CONCEPT>_<MEMBER>       which member the candidate type leaves out (at most
//                                          one; none is the positive control, which must
//                                          compile, so a broken include path cannot pass for
//                                          a rejected type).
// The types below are copies of the archetypes in zab/core/concepts.hpp, member for member.
#include "zab/core/concepts.hpp"

// clang-format off
#if defined(ZAB_CHECK_TRANSPORT) + defined(ZAB_CHECK_LOG_STORE) + \
    defined(ZAB_CHECK_STATE_MACHINE) != 1
// clang-format on
#error "define exactly one of ZAB_CHECK_TRANSPORT, ZAB_CHECK_LOG_STORE, ZAB_CHECK_STATE_MACHINE"
#endif

namespace zab::test {

struct candidate_transport {
#ifndef ZAB_MISSING_TRANSPORT_SEND
    void send(peer_id, connection_id, const shared_bytes&) {}
#endif
#ifndef ZAB_MISSING_TRANSPORT_CLOSE
    void close(peer_id, connection_id) {}
#endif
};

struct candidate_log_store {
#ifndef ZAB_MISSING_LOG_STORE_APPEND
    void append(storage_op, std::span<const log_record>) {}
#endif
#ifndef ZAB_MISSING_LOG_STORE_TRUNCATE_AFTER
    void truncate_after(storage_op, zxid) {}
#endif
#ifndef ZAB_MISSING_LOG_STORE_INSTALL_SNAPSHOT
    void install_snapshot(storage_op, zxid, const shared_bytes&, std::span<const log_record>) {}
#endif
#ifndef ZAB_MISSING_LOG_STORE_MAKE_DURABLE
    void make_durable(storage_op) {}
#endif
#ifndef ZAB_MISSING_LOG_STORE_WRITE_EPOCHS
    void write_epochs(storage_op, epochs) {}
#endif
#ifndef ZAB_MISSING_LOG_STORE_LAST_ZXID
    zxid last_zxid() const { return {}; }
#endif
#ifndef ZAB_MISSING_LOG_STORE_STORED_EPOCHS
    epochs stored_epochs() const { return {}; }
#endif
#ifndef ZAB_MISSING_LOG_STORE_SNAPSHOT
    std::optional<log_snapshot> snapshot() const { return std::nullopt; }
#endif
#ifndef ZAB_MISSING_LOG_STORE_READ
    result<std::vector<log_record>> read(zxid, std::size_t) const {
        return std::vector<log_record>{};
    }
#endif
};

struct candidate_state_machine {
#ifndef ZAB_MISSING_STATE_MACHINE_APPLY
    void apply(zxid, byte_view) {}
#endif
#ifndef ZAB_MISSING_STATE_MACHINE_LAST_APPLIED
    zxid last_applied() const { return {}; }
#endif
#ifndef ZAB_MISSING_STATE_MACHINE_SNAPSHOT
    shared_bytes snapshot() const { return {}; }
#endif
#ifndef ZAB_MISSING_STATE_MACHINE_RESTORE
    result<void> restore(zxid, byte_view) { return BOOST_OUTCOME_V2_NAMESPACE::success(); }
#endif
};

#if defined(ZAB_CHECK_TRANSPORT)
static_assert(zab::transport<candidate_transport>);
#elif defined(ZAB_CHECK_LOG_STORE)
static_assert(zab::log_store<candidate_log_store>);
#elif defined(ZAB_CHECK_STATE_MACHINE)
static_assert(zab::state_machine<candidate_state_machine>);
#endif

}  // namespace zab::test
