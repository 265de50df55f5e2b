// The compile firewall (zab/runtime/replica.hpp) as an application uses it: this source holds
// the state machine and the calls and includes no Boost.Asio, so editing it recompiles only
// it; firewall_main.cpp compiles the node once (zab/runtime/replica_impl.hpp). Built by the
// find_package consumer with strict warnings; run, it starts a one-voter group in the
// directory it is given and commits one write.
#include <zab/runtime/replica.hpp>

#if defined(BOOST_ASIO_VERSION)
#error "zab/runtime/replica.hpp includes Boost.Asio: the firewall is broken"
#endif

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace {

/// Counts the bytes written; `apply` returns the total as text (the writer's result).
class byte_counter final : public zab::asio::replicated_machine {
public:
    zab::shared_bytes apply(zab::zxid z, zab::byte_view txn) override {
        last_ = z;
        total_ += txn.size();
        return total_text();
    }
    zab::zxid last_applied() const override { return last_; }
    zab::shared_bytes snapshot() const override { return total_text(); }
    zab::result<void> restore(zab::zxid z, zab::byte_view image) override {
        std::size_t total = 0;
        for (const std::byte b : image) {
            const auto c = std::to_integer<char>(b);
            if (c < '0' || c > '9') return make_error_code(zab::errc::malformed);
            total = total * 10 + static_cast<std::size_t>(c - '0');
        }
        total_ = total;
        last_ = z;
        return zab::success();
    }

private:
    zab::shared_bytes total_text() const {
        const std::string text = std::to_string(total_);
        return zab::shared_bytes{std::vector<std::byte>(
            reinterpret_cast<const std::byte*>(text.data()),
            reinterpret_cast<const std::byte*>(text.data()) + text.size())};
    }
    zab::zxid last_;
    std::size_t total_ = 0;
};

byte_counter machine;
std::unique_ptr<zab::asio::replica> replica;

}  // namespace

/// Opens and starts the replica on `io` in `directory`, and proposes one write; its
/// completion prints the zxid and the machine's result, and stops the replica.
int firewall_start(boost::asio::io_context& io, const char* directory) {
    zab::asio::replica_options o;
    o.log.directory = directory;
    o.log.cluster_id = 7;
    o.log.replica_id = 1;
    o.node.config = zab::configuration::numbered(1).value();
    o.node.transport.self = 1;
    o.node.transport.peers[1] = {"127.0.0.1", 0};
    auto opened = zab::asio::open_replica(io, std::move(o), machine);
    if (!opened) {
        std::fprintf(stderr, "open_replica: %s\n", opened.error().message().c_str());
        return 1;
    }
    replica = std::move(opened).value();
    if (auto started = replica->start(); !started) {
        std::fprintf(stderr, "start: %s\n", started.error().message().c_str());
        return 1;
    }
    replica->propose(zab::as_bytes("SET x 1"), [](std::error_code e, zab::asio::reply r) {
        if (e)
            std::printf("firewall: %s\n", e.message().c_str());
        else
            std::printf("firewall: committed %s, total %s\n", fmt::format("{}", r.id).c_str(),
                        std::string{zab::as_string_view(r.response.view())}.c_str());
        replica->stop();
    });
    return 0;
}
