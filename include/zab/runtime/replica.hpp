// zab/runtime/replica.hpp — a replica behind a compile firewall: zab::asio::node with a file
// log, for sources that should not compile the node.
//
// `zab::asio::node<Log, Machine>` is a template: every source that includes node.hpp and
// names a node compiles the whole peer, transport and log for it (on two cores about a
// minute at -O2). This header declares the same replica through an abstract class and a
// virtual state machine, and includes neither Boost.Asio nor the core's protocol code; the
// node is compiled once, in the one source of the application that includes
// zab/runtime/replica_impl.hpp (which defines `open_replica`). Editing any other source then
// recompiles only that source. What it costs: one virtual call per apply, snapshot and
// client call, and the completion is a std::function (no completion tokens).
//
//   // zab_replica.cpp, compiled once:
//   #include <zab/runtime/replica_impl.hpp>
//
//   // anywhere else:
//   #include <zab/runtime/replica.hpp>
//   auto r = zab::asio::open_replica(io, options, machine);   // result<unique_ptr<replica>>
//   r.value()->start().value();
//   r.value()->propose(zab::as_bytes("SET x 1"), [](std::error_code e, zab::asio::reply r) {...});
//
// The threading contract is node.hpp's: `io` is run by one thread; `propose`, `sync` and
// `reconfigure` may be called from any thread; every other member, and every call into the
// machine, runs on `io`'s thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "zab/core/bytes.hpp"
#include "zab/core/error.hpp"
#include "zab/core/reconfig.hpp"
#include "zab/core/zxid.hpp"
#include "zab/runtime/node_types.hpp"
#include "zab/storage/file_log_options.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace zab::asio {

/// The application's state machine, as `replica` calls it (the zab::state_machine concept as
/// virtual functions; zab/core/concepts.hpp says what each must do). Called on the replica's
/// io_context thread only.
class replicated_machine {
public:
    virtual ~replicated_machine() = default;
    /// Applies committed transaction `z`; returns its result for the writer (empty: none).
    virtual shared_bytes apply(zxid z, byte_view txn) = 0;
    /// The last transaction applied (or restored).
    virtual zxid last_applied() const = 0;
    /// The whole state, as `restore` reads it.
    virtual shared_bytes snapshot() const = 0;
    /// Replaces the state with `image` (from `snapshot`), whose last transaction is `z`.
    virtual result<void> restore(zxid z, byte_view image) = 0;
};

/// How `open_replica` builds a replica: the file log's options and the node's. The cluster id
/// may be given once, in either (node_options::cluster_id says how the two combine).
struct replica_options {
    file_log_options log;
    node_options node;
    /// Threads for the log's flush and checkpoint jobs (fsyncs off the io thread); 0: they
    /// run on the io thread, which then blocks for each fsync. 2: a checkpoint never delays
    /// a flush (node.hpp's threading contract).
    unsigned disk_threads = 2;
};

/// A running replica of a zab group (zab::asio::node<file_log, …> behind a virtual interface).
/// Destroying it stops it (`stop()`).
class replica {
public:
    /// Completes a client call exactly once (also on `stop()`): the error (errc values, e.g.
    /// `not_leader`, `outcome_unknown`) and the reply (node_types.hpp).
    using callback = std::function<void(std::error_code, reply)>;

    virtual ~replica() = default;

    /// node::start: creates the peer, binds the peer port, starts the protocol.
    virtual result<void> start() = 0;
    /// node::stop: every call in flight completes; the log's pending writes are flushed.
    virtual void stop() = 0;
    /// node::async_propose: replicates `txn`; `done` gets its zxid and the machine's result.
    /// Without `how`, the call waits node_options::leader_wait for a leader.
    void propose(std::vector<std::byte> txn, callback done) {
        do_propose(std::move(txn), std::move(done), std::nullopt);
    }
    void propose(std::vector<std::byte> txn, call_options how, callback done) {
        do_propose(std::move(txn), std::move(done), how);
    }
    void propose(byte_view txn, callback done) {
        do_propose(std::vector<std::byte>(txn.begin(), txn.end()), std::move(done), std::nullopt);
    }
    /// node::async_sync: completes once this replica applied every write committed before it.
    void sync(callback done) { do_sync(std::move(done), std::nullopt); }
    void sync(call_options how, callback done) { do_sync(std::move(done), how); }
    /// node::async_reconfigure: changes the membership (docs/protocol.md §9).
    virtual void reconfigure(reconfig_request request, callback done) = 0;
    /// node::async_transfer_leadership, on the leader (`target` 0: the best synced voter).
    virtual void transfer_leadership(peer_id target, callback done) = 0;
    /// node::status: role, epoch, leader, zxids, followers' lag, configuration.
    virtual node_status status() const = 0;
    /// The port the replica listens on for its peers (0 before `start`).
    virtual std::uint16_t peer_port() const = 0;

protected:
    virtual void do_propose(std::vector<std::byte> txn, callback done,
                            std::optional<call_options> how) = 0;
    virtual void do_sync(callback done, std::optional<call_options> how) = 0;
};

/// Opens the file log (`options.log`; its recovery's diagnostic is logged and an error
/// returned, e.g. errc::corrupt) and builds a replica of `machine` on `io` — not started.
/// `machine` must outlive the replica. Defined in zab/runtime/replica_impl.hpp, which
/// exactly one source of the program includes.
result<std::unique_ptr<replica>> open_replica(boost::asio::io_context& io,
                                              replica_options options,
                                              replicated_machine& machine);

}  // namespace zab::asio
