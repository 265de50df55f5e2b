// zab/net/tcp_connection.hpp — the state of one connection between two replicas.
//
// A plain record owned through a `shared_ptr`: every asynchronous operation on the connection
// holds a reference, so the stream and the buffers an operation reads or writes outlive it,
// even when the transport that started it has been stopped and destroyed. The logic lives in
// tcp_transport_core.hpp; a closed connection is never reused (the next one gets a new id).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "zab/core/types.hpp"
#include "zab/net/frame_reader.hpp"
#include "zab/net/handshake.hpp"
#include "zab/net/send_queue.hpp"
#include "zab/net/tcp_transport_options.hpp"

namespace zab::asio::detail {

/// handshaking → established → closed, or handshaking → closed. Only an established
/// connection is reported (`on_connected` / `on_disconnected`) and carries frames.
enum class connection_state : std::uint8_t { handshaking, established, closed };

/// One connection over a `Stream` (the security policy's stream_type, transport_security.hpp).
template <typename Stream>
struct basic_connection {
    basic_connection(Stream stream_, connection_id id_, bool inbound_, peer_id peer_,
                     const tcp_transport_options& options)
        : id{id_},
          inbound{inbound_},
          peer{peer_},
          stream{std::move(stream_)},
          handshake_timer{stream.get_executor()},
          reader{options.max_frame_size},
          queue{options.max_queued_bytes_per_peer, options.max_gather_bytes} {}

    const connection_id id;
    const bool inbound;        ///< accepted by us (we are the lower id) rather than dialed
    peer_id peer;              ///< dialed: from the start; accepted: once its hello passed
    connection_state state = connection_state::handshaking;
    bool tcp_connected = false;  ///< dialed: the TCP connect completed (for timeout reasons)
    /// A write of the queue is posted to run after the current handler (send() gathers the
    /// frames of every step that runs before it into one system call).
    bool write_posted = false;
    std::string remote;        ///< the other end's address, for log lines
    /// Accepted: its address without the port (the per-address cap, quarantines); dialed: empty.
    std::string remote_host;
    std::uint64_t remote_instance = 0;  ///< the other end's process (its handshake's instance)

    Stream stream;             ///< the TCP socket is `stream.lowest_layer()`
    boost::asio::steady_timer handshake_timer;  ///< covers the connect and every handshake
    std::array<std::byte, hello_size> hello_in{};
    std::array<std::byte, hello_size> hello_out{};
    frame_reader reader;
    send_queue queue;
};

/// A plaintext connection.
using tcp_connection = basic_connection<boost::asio::ip::tcp::socket>;

}  // namespace zab::asio::detail
