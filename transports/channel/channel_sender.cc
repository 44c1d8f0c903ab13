// Unacknowledged frames in sequence order, and the queue of those waiting for a path.
#include "transports/channel/channel_sender.h"

#include <algorithm>

#include "transports/channel/channel_receiver.h"

namespace plexus::transports {

uint64_t ChannelSender::add(wire::DataFrameHeader header, std::span<const std::byte> payload,
                            uint64_t token, bool latency) {
  header.channel_seq = next_seq_++;
  Frame frame;
  frame.header = header;
  frame.payload = payload;
  frame.token = token;
  frame.latency = latency;
  frames_.push_back(frame);
  waiting_.push_back(header.channel_seq);
  return header.channel_seq;
}

ChannelSender::Frame* ChannelSender::at(uint64_t seq) {
  if (seq <= acked_ || seq >= next_seq_) return nullptr;
  return &frames_[seq - acked_ - 1];
}

ChannelSender::Frame* ChannelSender::next_waiting() {
  while (!waiting_.empty()) {
    Frame* frame = at(waiting_.front());
    if (frame == nullptr || frame->path != kNoPath) {  // acked meanwhile, or already placed
      waiting_.pop_front();
      continue;
    }
    if (waiting_.front() > acked_ + kChannelWindowFrames) return nullptr;
    return frame;
  }
  return nullptr;
}

void ChannelSender::assigned(Frame& frame, uint32_t path) {
  frame.path = path;
  ++frame.sends;
  if (!waiting_.empty() && waiting_.front() == frame.header.channel_seq) waiting_.pop_front();
}

std::string ChannelSender::acknowledge(uint64_t cumulative, std::vector<Released>* released) {
  if (cumulative >= next_seq_) {
    return "acknowledgement of frame " + std::to_string(cumulative) + " but only " +
           std::to_string(next_seq_ - 1) + " were sent";
  }
  while (acked_ < cumulative) {
    released->push_back({frames_.front().token, frames_.front().path});
    frames_.pop_front();
    ++acked_;
  }
  return {};
}

uint64_t ChannelSender::path_failed(uint32_t path) {
  uint64_t bytes = 0;
  std::vector<uint64_t> again;
  for (Frame& frame : frames_) {
    if (frame.path != path) continue;
    frame.path = kNoPath;
    bytes += frame.payload.size();
    again.push_back(frame.header.channel_seq);
  }
  if (!again.empty()) {
    // Both lists are ascending; the merge keeps the oldest frames first.
    std::deque<uint64_t> merged;
    std::merge(again.begin(), again.end(), waiting_.begin(), waiting_.end(),
               std::back_inserter(merged));
    waiting_ = std::move(merged);
  }
  return bytes;
}

}  // namespace plexus::transports
