// zab/net/send_queue.hpp — one connection's bounded queue of frames waiting to be written.
//
// Frames are `shared_bytes` (encoded once, shared with every follower and the log; docs/design.md
// rule 10): the queue keeps a reference until the bytes are written, never a copy. Writes
// gather several queued frames into one vector of buffers (one `writev`), at most one write
// in flight, so frames leave in the order they were queued.
//
// The queue is bounded in bytes, counting the frames being written. A push that would exceed
// the bound is refused: the transport then closes the connection and the peer resynchronises
// after reconnecting, rather than the leader blocking or growing without bound on a follower
// that stopped reading.
#pragma once

#include <cstddef>
#include <deque>
#include <span>
#include <vector>

#include <boost/asio/buffer.hpp>

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"

namespace zab::asio {

class send_queue {
public:
    /// `max_queued_bytes`: bound on the bytes queued, in flight included.
    /// `max_gather_bytes`: a write gathers frames up to this many bytes (at least one frame).
    send_queue(std::size_t max_queued_bytes, std::size_t max_gather_bytes) noexcept
        : max_queued_bytes_{max_queued_bytes}, max_gather_bytes_{max_gather_bytes} {}

    /// Queues `frame` unless that would exceed the bound; false (nothing queued) if it would.
    bool push(const shared_bytes& frame) {
        if (frame.size() > max_queued_bytes_ - queued_bytes_) {
            return false;
        }
        frames_.push_back(frame);
        queued_bytes_ += frame.size();
        return true;
    }

    /// True if frames wait and no write is in flight: `begin_write` has something to write.
    bool ready_to_write() const noexcept { return !writing_ && !frames_.empty(); }

    /// Marks the oldest frames, up to `max_gather_bytes`, as in flight and returns their
    /// buffers. They stay valid (the queue holds the frames) until `finish_write`.
    /// Precondition: `ready_to_write()`.
    std::span<const boost::asio::const_buffer> begin_write() {
        ZAB_ASSERT(ready_to_write(), "send_queue: begin_write with a write in flight or nothing");
        buffers_.clear();
        std::size_t bytes = 0;
        for (const shared_bytes& frame : frames_) {
            if (!buffers_.empty() && frame.size() > max_gather_bytes_ - bytes) {
                break;
            }
            buffers_.emplace_back(frame.data(), frame.size());
            bytes += frame.size();
            if (bytes >= max_gather_bytes_) {
                break;
            }
        }
        writing_ = true;
        in_flight_bytes_ = bytes;
        return buffers_;
    }

    /// The write started by `begin_write` completed: drops its frames.
    struct written {
        std::size_t frames = 0;
        std::size_t bytes = 0;
    };
    written finish_write() noexcept {
        ZAB_ASSERT(writing_, "send_queue: finish_write without a write in flight");
        const written done{buffers_.size(), in_flight_bytes_};
        frames_.erase(frames_.begin(),
                      frames_.begin() + static_cast<std::ptrdiff_t>(buffers_.size()));
        queued_bytes_ -= in_flight_bytes_;
        in_flight_bytes_ = 0;
        buffers_.clear();
        writing_ = false;
        return done;
    }

    bool writing() const noexcept { return writing_; }
    std::size_t queued_frames() const noexcept { return frames_.size(); }
    std::size_t queued_bytes() const noexcept { return queued_bytes_; }

private:
    std::size_t max_queued_bytes_;
    std::size_t max_gather_bytes_;
    std::deque<shared_bytes> frames_;  // the in-flight ones first
    std::size_t queued_bytes_ = 0;
    std::vector<boost::asio::const_buffer> buffers_;
    std::size_t in_flight_bytes_ = 0;
    bool writing_ = false;
};

static_assert(boost::asio::is_const_buffer_sequence<
              std::span<const boost::asio::const_buffer>>::value);

}  // namespace zab::asio
