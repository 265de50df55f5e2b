// tests/run_until.hpp — runs an io_context's handlers until a condition holds, for the tests
// of real sockets and timers (runtime, transports): false if it did not within `limit`, which
// a test reports as a hang.
#pragma once

#include <chrono>

#include <boost/asio/io_context.hpp>

namespace zab::test {

template <typename Condition>
bool run_until(boost::asio::io_context& io, Condition condition,
               std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        if (io.stopped()) io.restart();
        io.run_one_for(std::chrono::milliseconds(20));
    }
    return true;
}

}  // namespace zab::test
