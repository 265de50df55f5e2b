// zab/core/error.hpp — zab::errc, its std::error_category, and zab::result<T>.
#pragma once

#include <string>
#include <system_error>

#include <boost/outcome/std_result.hpp>

namespace zab {

/// Every error zab reports. Grouped by where it comes from; values are stable.
enum class errc {
    // Decoding input from the network or disk (docs/design.md rule 9).
    truncated = 1,          ///< fewer bytes than the frame or field needs
    oversized,              ///< a length field exceeds the configured bound
    bad_magic,              ///< not a zab frame at all
    unsupported_version,    ///< a frame or file version this build does not speak
    unknown_message_type,   ///< a frame type byte that names no message
    bad_checksum,           ///< CRC32C of the payload does not match
    malformed,              ///< fields decode but are inconsistent (bad enum, trailing bytes, …)
    // Configuration and API misuse.
    invalid_options = 100,  ///< an options struct is inconsistent; the message says which field
    invalid_argument,       ///< an API call's argument is out of range
    // Protocol outcomes reported to callers.
    not_leader = 200,       ///< this peer does not lead; retry at the leader
    backpressure,           ///< a configured bound is reached; retry later
    shutting_down,          ///< the peer is stopping; the operation never took effect
    outcome_unknown,        ///< the operation may or may not commit
    zxid_exhausted,         ///< the epoch's counter is used up (§1); a new election follows
    too_large,              ///< a transaction above options::max_txn_bytes: never proposed
    transferring,           ///< the leader is handing over its leadership: never proposed; retry at the new leader
    timed_out,              ///< not done within its deadline; nothing changed
    reconfig_in_progress,   ///< another reconfiguration is not committed yet: never proposed (§9)
    version_mismatch,       ///< a reconfiguration's expected version is not the committed one (§9)
    new_config_no_quorum,   ///< the new configuration's voters synced with the leader are no quorum of it (§9)
    not_a_member,           ///< this replica was removed from the group by a reconfiguration (§9)
    // Storage.
    storage_failed = 300,   ///< fsync/truncate failed: the replica is in its terminal failed state
    corrupt,                ///< persistent data fails its checks
    compacted,              ///< the requested log range was replaced by a snapshot
};

namespace detail {
class error_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "zab"; }
    std::string message(int value) const override {
        switch (static_cast<errc>(value)) {
            case errc::truncated: return "input truncated";
            case errc::oversized: return "length exceeds the configured maximum";
            case errc::bad_magic: return "bad magic: not a zab frame";
            case errc::unsupported_version: return "unsupported version";
            case errc::unknown_message_type: return "unknown message type";
            case errc::bad_checksum: return "checksum mismatch";
            case errc::malformed: return "malformed input";
            case errc::invalid_options: return "invalid options";
            case errc::invalid_argument: return "invalid argument";
            case errc::not_leader: return "not the leader";
            case errc::backpressure: return "too many operations outstanding";
            case errc::shutting_down: return "shutting down";
            case errc::outcome_unknown: return "outcome unknown";
            case errc::zxid_exhausted: return "zxid counter exhausted in this epoch";
            case errc::too_large: return "transaction larger than the configured maximum";
            case errc::transferring: return "the leader is handing over leadership";
            case errc::timed_out: return "not done within its deadline";
            case errc::reconfig_in_progress: return "another reconfiguration is in progress";
            case errc::version_mismatch: return "the configuration version is not the one expected";
            case errc::new_config_no_quorum:
                return "the new configuration's voters synced with the leader are no quorum of it";
            case errc::not_a_member: return "this replica is no longer a member of the group";
            case errc::storage_failed: return "storage failed; replica stopped";
            case errc::corrupt: return "persistent data is corrupt";
            case errc::compacted: return "log range compacted into a snapshot";
        }
        return "unknown zab error";
    }
};
}  // namespace detail

/// The category of every `zab::errc`. Never destroyed (an error_code's message may be asked
/// for by a destructor of an object with static storage, after this function's statics go).
inline const std::error_category& error_category() noexcept {
    static const std::error_category* const category = new detail::error_category_impl;
    return *category;
}

inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), error_category()};
}

/// The return type of everything in zab that can fail (docs/design.md rule 9).
template <typename T>
using result = BOOST_OUTCOME_V2_NAMESPACE::std_result<T>;

/// `return zab::success();` from a function returning `zab::result<void>`.
using BOOST_OUTCOME_V2_NAMESPACE::success;

}  // namespace zab

template <>
struct std::is_error_code_enum<zab::errc> : std::true_type {};
