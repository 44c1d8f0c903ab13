// What an RDMA path has posted and not yet heard back about, on the send side: frames whose
// RDMA write has not completed (they still hold bounce-buffer space and their channel token:
// a reliable connection completes one queue pair's sends in the order they were posted, so
// these are a FIFO), and frames the peer has not yet consumed (each took one of the receive
// work requests the peer posted; more in flight than it has posted would stall the queue pair
// on receiver-not-ready retries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "common/result.h"

namespace plexus::transports::rdma {

class SendWindow {
 public:
  // `peer_receives`: receive work requests the peer keeps posted for frames; `send_depth`:
  // this queue pair's send queue.
  SendWindow(uint32_t peer_receives, uint32_t send_depth)
      : peer_receives_(peer_receives), send_depth_(send_depth) {}

  // Whether one more frame may be posted now.
  bool can_post() const {
    return frames_posted_ - frames_consumed_ < peer_receives_ && outstanding_.size() < send_depth_;
  }
  // A frame was posted: `token` goes back to the channel when its write completes, and
  // `bounce_end` (the send bounce ring's total after it) is released then.
  void posted(uint64_t token, size_t payload_bytes, uint64_t bounce_end);

  struct Done {
    uint64_t token;
    size_t payload_bytes;
    uint64_t bounce_end;
  };
  // The oldest posted frame's write completed: that frame, or why not when none is
  // outstanding (a completion the path never asked for).
  common::Result<Done> completed();
  // The peer's credit report: frames it has consumed in all. Empty, or why it cannot be.
  std::string peer_consumed(uint64_t frames);

  size_t outstanding() const { return outstanding_.size(); }
  uint64_t frames_unconsumed() const { return frames_posted_ - frames_consumed_; }

 private:
  uint32_t peer_receives_;
  uint32_t send_depth_;
  std::deque<Done> outstanding_;
  uint64_t frames_posted_ = 0;
  uint64_t frames_consumed_ = 0;
};

}  // namespace plexus::transports::rdma
