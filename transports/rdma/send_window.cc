#include "transports/rdma/send_window.h"

namespace plexus::transports::rdma {

void SendWindow::posted(uint64_t token, size_t payload_bytes, uint64_t bounce_end) {
  outstanding_.push_back(Done{token, payload_bytes, bounce_end});
  ++frames_posted_;
}

bool SendWindow::completed(Done* done, std::string* error) {
  if (outstanding_.empty()) {
    *error = "a send completion with no frame outstanding";
    return false;
  }
  *done = outstanding_.front();
  outstanding_.pop_front();
  return true;
}

std::string SendWindow::peer_consumed(uint64_t frames) {
  if (frames < frames_consumed_) {
    return "the peer's frame credit went back (" + std::to_string(frames) + " after " +
           std::to_string(frames_consumed_) + ")";
  }
  if (frames > frames_posted_) {
    return "the peer reports " + std::to_string(frames) + " frames consumed but only " +
           std::to_string(frames_posted_) + " were sent";
  }
  frames_consumed_ = frames;
  return {};
}

}  // namespace plexus::transports::rdma
