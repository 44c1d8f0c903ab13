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
  waiting_[latency ? 1 : 0].push_back(header.channel_seq);
  return header.channel_seq;
}

ChannelSender::Frame* ChannelSender::at(uint64_t seq) {
  if (seq <= acked_ || seq >= next_seq_) return nullptr;
  return &frames_[seq - acked_ - 1];
}

ChannelSender::Frame* ChannelSender::next_waiting(bool latency) {
  std::deque<uint64_t>& waiting = waiting_[latency ? 1 : 0];
  while (!waiting.empty()) {
    Frame* frame = at(waiting.front());
    // Acked meanwhile, or already placed.
    if (frame == nullptr || frame->path != kNoPath || frame->released) {
      waiting.pop_front();
      continue;
    }
    if (waiting.front() > acked_ + kChannelWindowFrames) return nullptr;
    return frame;
  }
  return nullptr;
}

ChannelSender::Frame* ChannelSender::next_waiting() {
  Frame* other = next_waiting(false);
  Frame* latency = next_waiting(true);
  if (other == nullptr) return latency;
  if (latency == nullptr) return other;
  return latency->header.channel_seq < other->header.channel_seq ? latency : other;
}

bool ChannelSender::window_full() const { return next_seq_ > acked_ + kChannelWindowFrames; }

void ChannelSender::assigned(Frame& frame, uint32_t path) {
  frame.path = path;
  ++frame.sends;
  std::deque<uint64_t>& waiting = waiting_[frame.latency ? 1 : 0];
  if (!waiting.empty() && waiting.front() == frame.header.channel_seq) waiting.pop_front();
}

std::string ChannelSender::acknowledge(uint64_t cumulative, std::vector<Released>* released) {
  if (cumulative >= next_seq_) {
    return "acknowledgement of frame " + std::to_string(cumulative) + " but only " +
           std::to_string(next_seq_ - 1) + " were sent";
  }
  while (acked_ < cumulative) {
    if (!frames_.front().released) {
      released->push_back({frames_.front().token, frames_.front().path});
    }
    frames_.pop_front();
    ++acked_;
  }
  return {};
}

std::string ChannelSender::acknowledge_selectively(uint64_t first, uint64_t last,
                                                   std::vector<Released>* released) {
  if (first == 0 || first > last || last >= next_seq_ ||
      last - first > 2 * ChannelReceiver::kMaxSelectiveRun) {
    return "selective acknowledgement of frames " + std::to_string(first) + ".." +
           std::to_string(last) + " (" + std::to_string(next_seq_ - 1) +
           " sent; a run is at most " + std::to_string(2 * ChannelReceiver::kMaxSelectiveRun + 1) +
           " frames)";
  }
  const uint64_t from = std::max(first, acked_ + 1);
  for (uint64_t seq = from; seq <= last; ++seq) {  // checked whole before anything changes
    if (at(seq)->sends == 0) {
      return "selective acknowledgement of frame " + std::to_string(seq) + ", never sent";
    }
  }
  for (uint64_t seq = from; seq <= last; ++seq) {
    Frame* frame = at(seq);
    if (frame->released) continue;
    frame->released = true;
    released->push_back({frame->token, frame->path});
  }
  return {};
}

uint64_t ChannelSender::path_failed(uint32_t path) {
  uint64_t bytes = 0;
  std::array<std::vector<uint64_t>, 2> again;
  for (Frame& frame : frames_) {
    if (frame.path != path || frame.released) continue;
    frame.path = kNoPath;
    bytes += frame.payload.size();
    again[frame.latency ? 1 : 0].push_back(frame.header.channel_seq);
  }
  for (size_t c = 0; c < 2; ++c) {
    if (again[c].empty()) continue;
    // Both lists are ascending; the merge keeps the oldest frames first.
    std::deque<uint64_t> merged;
    std::merge(again[c].begin(), again[c].end(), waiting_[c].begin(), waiting_[c].end(),
               std::back_inserter(merged));
    waiting_[c] = std::move(merged);
  }
  return bytes;
}

}  // namespace plexus::transports
