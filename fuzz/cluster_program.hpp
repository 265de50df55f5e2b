// The byte code of the cluster fuzzer (fuzz/cluster_fuzzer.cpp): what its inputs mean, in one
// place, for the harness that runs them and for the seeds make_corpus.cpp writes.
//
// An input is a program. Every byte is read through `program_reader`: a value is taken modulo
// its range, and a program that ends early reads zeros, so every byte string is a valid
// program and a mutation changes one choice, not the meaning of everything after it.
//
//   header   8 bytes  the simulator's seed (little-endian)
//            1 byte   shape: joiners = shape % 3 (replicas 4 and 5, outside the configuration);
//                     m = shape / 3: the state machine m % 4 (`machine`: 0 the recording machine,
//                     which models every optional concept; 1 one that models none; 2 a
//                     session machine around a result machine; 3 the kv example's, writes as
//                     SET commands), compaction every 4 applied when (m / 8) % 2 is 1. Shapes
//                     0, 1 and 2 are what every input meant before machines were chosen.
//   then ops, each an opcode byte (% op_count) and its operands:
//     run            d                  run the cluster for (1 + d) × 20 ms of virtual time
//     submit         k, txn             a client write at replica k
//     sync           k                  a client sync at replica k (§7)
//     propose        txn                a proposal at the established leader, if there is one
//     crash / restart / pause / resume  k
//     partition      mask               replicas whose bit (1 << (id - 1)) is set against the rest
//     heal                              every partition and one-way block removed
//     break_link     a, b               the connection a–b breaks (a reset)
//     block_one_way  a, b               a → b stalls (until heal, or the stall timeout)
//     reconfigure    k, voters, observers, cas
//                                       §9: a member list from the two masks (voters win), asked
//                                       at k; cas 0: no compare-and-set, 1: the committed
//                                       version, else that version + cas - 1 (stale)
//     transfer       k, target          §6.4, target an id byte (0: the best voter)
//     crash_at       k, point           crash_point (point % crash_point_count) at k (0: any)
//     stranger_frame k, frame           a forged frame to k from stranger_id, not a member
//     member_frame   k, j, frame        a forged frame to k on member j's connection: j lies
//     stranger_reset k                  the stranger's connection to k breaks (a fresh one follows)
//   Replica operands are id bytes: 1 + byte % replicas.
//
//   frame    1 byte   form: f < 189: message variant index f % 24 (wire::message's size;
//                     22 before REQUESTS and REPLIES), encoded as is;
//                     189..209: the same, then one byte of it flipped (position, xor: 2 bytes);
//                     210..230: the same, cut short (length: 1 byte); 231..255: raw bytes
//                     (length: 1 byte, then that many bytes)
//            1 byte   header: bit 0 a group id (8 bytes follow), bit 1 a configuration version
//                     (8 bytes follow); else the receiver's own
//            fields   in the codec's order (include/zab/core/codec.hpp), each read as below
//   A field is chosen near the state the cluster is in, so that forged frames pass the
//   codec and the cheap checks and reach the protocol's own:
//     zxid     mode % 8: 0 zero, 1 the receiver's last logged, 2 the sender's, 3 that + delta,
//              4 (epoch, small counter), 5 (epoch, 0), 6 raw 8 bytes, 7 the receiver's + 1
//     epoch    b < 240: the receiver's accepted epoch + b % 8 - 3 (at least 0); else raw 4 bytes
//     peer id  b % 8: 0, 1 … 5, stranger_id, or raw 8 bytes
//     counter  (rounds, request ids, sizes, offsets) b < 240: b % 16 + the receiver's round for
//              rounds; else raw 8 bytes
//     bytes    mode % 5: 0 empty, 1 up to 31 raw bytes, 2 a reconfiguration (two masks, cas),
//              3 a short txn, 4 a snapshot of the recording state machine (entries: 1 byte)
//     enums and the protocol version: one raw byte (an invalid one makes the frame malformed)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zab::fuzz {

/// The state machine a program runs on (the header's shape byte).
enum class machine : std::uint8_t { recording = 0, plain, session, kv };
constexpr machine machine_of(std::uint8_t shape) noexcept {
    return static_cast<machine>((shape / 3) % 4);
}
/// Whether the replicas compact (snapshot_every 4).
constexpr bool compacts(std::uint8_t shape) noexcept { return (shape / 3 / 8) % 2 == 1; }
/// The shape byte for `joiners`, `m` and compaction.
constexpr std::uint8_t shape_of(std::uint8_t joiners, machine m, bool compaction) noexcept {
    return static_cast<std::uint8_t>(3 * (static_cast<unsigned>(m) + (compaction ? 8 : 0)) + joiners);
}

/// The member id no configuration names: its frames come from outside the group.
inline constexpr std::uint64_t stranger_id = 9;

enum class op : std::uint8_t {
    run = 0,
    submit,
    sync,
    propose,
    crash,
    restart,
    pause,
    resume,
    partition,
    heal,
    break_link,
    block_one_way,
    reconfigure,
    transfer,
    crash_at,
    stranger_frame,
    member_frame,
    stranger_reset,
};
inline constexpr std::size_t op_count = 18;

/// The message forms of a frame byte (see the file comment).
inline constexpr std::uint8_t frame_flipped = 189;
inline constexpr std::uint8_t frame_truncated = 210;
inline constexpr std::uint8_t frame_raw = 231;

/// Reads a program: bytes in order, zeros once it ends.
class program_reader {
public:
    program_reader(const std::uint8_t* data, std::size_t size) : data_{data}, size_{size} {}

    bool done() const noexcept { return at_ >= size_; }
    std::uint8_t byte() noexcept { return at_ < size_ ? data_[at_++] : 0; }
    /// `width` bytes, little-endian.
    std::uint64_t little_endian(int width) noexcept {
        std::uint64_t value = 0;
        for (int i = 0; i < width; ++i) value |= std::uint64_t{byte()} << (8 * i);
        return value;
    }
    std::size_t below(std::size_t n) noexcept { return n == 0 ? 0 : byte() % n; }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t at_ = 0;
};

/// Writes a program (the seeds of make_corpus.cpp).
class program_writer {
public:
    explicit program_writer(std::uint64_t seed, std::uint8_t shape = 0) {
        for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<std::uint8_t>(seed >> (8 * i)));
        bytes_.push_back(shape);
    }
    program_writer& operator()(op o, std::vector<std::uint8_t> operands = {}) {
        bytes_.push_back(static_cast<std::uint8_t>(o));
        bytes_.insert(bytes_.end(), operands.begin(), operands.end());
        return *this;
    }
    /// Replica ids as operands: the byte that reads as replica `id` (1-based).
    static std::uint8_t replica(std::uint64_t id) { return static_cast<std::uint8_t>(id - 1); }
    const std::vector<std::uint8_t>& bytes() const noexcept { return bytes_; }

private:
    std::vector<std::uint8_t> bytes_;
};

}  // namespace zab::fuzz
