// The one source of the firewall consumer that compiles the node (see firewall_app.cpp).
#include <zab/runtime/replica_impl.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>

int firewall_start(boost::asio::io_context& io, const char* directory);

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: firewall DIRECTORY\n");
        return 2;
    }
    boost::asio::io_context io;
    if (firewall_start(io, argv[1]) != 0) return 1;
    io.run_for(std::chrono::seconds(20));
    return 0;
}
