#include "transports/rdma/send_window.h"

#include "transports/rdma/remote_ring.h"

namespace plexus::transports::rdma {

void SendWindow::posted(uint64_t token, size_t payload_bytes, uint64_t bounce_end) {
  outstanding_.push_back(Done{token, payload_bytes, bounce_end});
  ++frames_posted_;
}

common::Result<SendWindow::Done> SendWindow::completed() {
  if (outstanding_.empty()) return common::fail("a send completion with no frame outstanding");
  const Done done = outstanding_.front();
  outstanding_.pop_front();
  return done;
}

std::string SendWindow::peer_consumed(uint64_t frames) {
  if (std::string why = check_consumed(frames_consumed_, frames, frames_posted_, "frames");
      !why.empty()) {
    return why;
  }
  frames_consumed_ = frames;
  return {};
}

}  // namespace plexus::transports::rdma
