// zab/runtime/replica_impl.hpp — the definition of zab::asio::open_replica
// (zab/runtime/replica.hpp): a zab::asio::node<file_log, …> over the virtual machine.
//
// Include it in exactly one source file of the program (it defines a non-inline function):
// that source compiles the node, once; the others include only replica.hpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "zab/runtime/node.hpp"
#include "zab/runtime/replica.hpp"
#include "zab/storage/file_log.hpp"

namespace zab::asio {

namespace detail {

/// replicated_machine as a zab::result_machine.
class machine_ref {
public:
    explicit machine_ref(replicated_machine& m) noexcept : m_{&m} {}
    shared_bytes apply(zxid z, byte_view txn) { return m_->apply(z, txn); }
    zxid last_applied() const { return m_->last_applied(); }
    shared_bytes snapshot() const { return m_->snapshot(); }
    result<void> restore(zxid z, byte_view image) { return m_->restore(z, image); }

private:
    replicated_machine* m_;
};

/// The node, its log and its disk threads, owned together (declared in the order they must
/// be destroyed in reverse: the node stops before its log and threads go).
class file_log_replica final : public replica {
    /// The node's completion (boost::system::error_code) as the replica's (std::error_code).
    static auto adapt(callback done) {
        return [done = std::move(done)](boost::system::error_code e, reply r) mutable {
            done(std::error_code{e}, std::move(r));
        };
    }

public:
    file_log_replica(boost::asio::io_context& io, replica_options options, file_log log,
                     replicated_machine& machine)
        : log_{std::move(log)},
          machine_{machine},
          disk_{options.disk_threads == 0
                    ? nullptr
                    : std::make_unique<boost::asio::thread_pool>(options.disk_threads)},
          node_{io.get_executor(), std::move(options.node), log_, machine_, disk_executor()} {}

    ~file_log_replica() override {
        node_.stop();
        if (disk_) disk_->join();
    }

    result<void> start() override { return node_.start(); }
    void stop() override { node_.stop(); }
    void reconfigure(reconfig_request request, callback done) override {
        node_.async_reconfigure(std::move(request), adapt(std::move(done)));
    }
    void transfer_leadership(peer_id target, callback done) override {
        node_.async_transfer_leadership(target, adapt(std::move(done)));
    }
    node_status status() const override { return node_.status(); }
    std::uint16_t peer_port() const override { return node_.transport().local_port(); }

protected:
    void do_propose(std::vector<std::byte> txn, callback done,
                    std::optional<call_options> how) override {
        if (how) node_.async_propose(std::move(txn), *how, adapt(std::move(done)));
        else node_.async_propose(std::move(txn), adapt(std::move(done)));
    }
    void do_sync(callback done, std::optional<call_options> how) override {
        if (how) node_.async_sync(*how, adapt(std::move(done)));
        else node_.async_sync(adapt(std::move(done)));
    }

private:
    std::optional<boost::asio::any_io_executor> disk_executor() const {
        if (!disk_) return std::nullopt;
        return boost::asio::any_io_executor{disk_->get_executor()};
    }

    file_log log_;
    machine_ref machine_;
    std::unique_ptr<boost::asio::thread_pool> disk_;
    node<file_log, machine_ref> node_;
};

}  // namespace detail

result<std::unique_ptr<replica>> open_replica(boost::asio::io_context& io,
                                              replica_options options,
                                              replicated_machine& machine) {
    std::string why;
    auto log = file_log::open(options.log, &why);
    if (!log) return log.error();  // open logged the diagnostic (the file and the check)
    // A directory moved aside as corrupt (corruption_policy::resync) lost its history: the
    // replica must not vote on what it no longer holds until a leader syncs it (§2, ZOOKEEPER-261).
    if (log.value().resynced_after_corruption()) options.node.peer.non_voter_until_synced = true;
    return std::unique_ptr<replica>{
        std::make_unique<detail::file_log_replica>(io, std::move(options), std::move(log).value(), machine)};
}

}  // namespace zab::asio
