// Each numbered frame delivered once, fenced frames after their predecessors.
#include "transports/channel/channel_delivery.h"

#include "transports/channel/channel_sender.h"

namespace plexus::transports {

ChannelDelivery::ChannelDelivery(Hooks hooks, ChannelCounters& counters)
    : hooks_(std::move(hooks)), counters_(counters) {}

bool ChannelDelivery::fenced(const wire::DataFrameHeader& header) {
  return header.type == wire::FrameType::kAbort || header.type == wire::FrameType::kDeparted ||
         (header.type == wire::FrameType::kData && header.length == 0);
}

std::string ChannelDelivery::receive(const wire::DataFrameHeader& header,
                                     std::span<const std::byte> payload, bool latency_path) {
  const uint64_t seq = header.channel_seq;
  if (seq == 0) return hooks_.on_frame(header, payload);  // a peer without reliability
  switch (receiver_.classify(seq)) {
    case ChannelReceiver::Verdict::kOutOfWindow:
      return "frame " + std::to_string(seq) + " is outside the channel window (every frame up to " +
             std::to_string(receiver_.cumulative()) + " has arrived)";
    case ChannelReceiver::Verdict::kDuplicate:
      ++counters_.duplicates_dropped;
      return {};
    case ChannelReceiver::Verdict::kNew:
      break;
  }
  if (fenced(header) && seq != receiver_.cumulative() + 1) {
    if (!fenced_.count(seq)) {
      HeldFrame& held = fenced_[seq];
      held.header = header;
      held.payload.assign(payload.begin(), payload.end());
    } else {
      ++counters_.duplicates_dropped;
    }
    return {};
  }
  std::string error = deliver(header, payload);
  // A latency path's frame is acknowledged on its own: its sender's op must not wait for
  // bulk frames numbered before it, which travel on other connections.
  if (error.empty() && latency_path) receiver_.acknowledge_selectively(seq);
  return error;
}

Placement ChannelDelivery::place(const wire::DataFrameHeader& header) {
  if (!hooks_.place) return {};
  const uint64_t seq = header.channel_seq;
  // A duplicate or a bad frame goes through receive(), which drops or refuses it.
  if (seq != 0 && (receiver_.classify(seq) != ChannelReceiver::Verdict::kNew || fenced(header))) {
    return {};
  }
  return hooks_.place(header);
}

std::string ChannelDelivery::placed(const wire::DataFrameHeader& header, uint32_t path,
                                    bool latency_path) {
  const uint64_t seq = header.channel_seq;
  if (seq != 0 && receiver_.classify(seq) != ChannelReceiver::Verdict::kNew) {
    ++counters_.duplicates_dropped;  // its other copy finished first
    return {};
  }
  std::string error = hooks_.on_placed(header);
  if (!error.empty() || seq == 0) return error;
  return received_in_place(seq, path, latency_path);
}

std::string ChannelDelivery::discarded(const wire::DataFrameHeader& header, uint32_t path,
                                       bool latency_path) {
  const uint64_t seq = header.channel_seq;
  if (seq == 0 || receiver_.classify(seq) != ChannelReceiver::Verdict::kNew) return {};
  return received_in_place(seq, path, latency_path);
}

std::string ChannelDelivery::received_in_place(uint64_t seq, uint32_t path, bool latency_path) {
  receiver_.record(seq);
  if (latency_path) receiver_.acknowledge_selectively(seq);
  hooks_.abandon_other_copies(seq, path);
  return deliver_fenced();
}

std::string ChannelDelivery::deliver(const wire::DataFrameHeader& header,
                                     std::span<const std::byte> payload) {
  std::string error = hooks_.on_frame(header, payload);
  if (!error.empty()) return error;
  if (header.channel_seq == 0) return {};
  receiver_.record(header.channel_seq);
  hooks_.abandon_other_copies(header.channel_seq, kNoPath);
  return deliver_fenced();
}

std::string ChannelDelivery::deliver_fenced() {
  while (!fenced_.empty() && fenced_.begin()->first == receiver_.cumulative() + 1) {
    HeldFrame held = std::move(fenced_.begin()->second);
    fenced_.erase(fenced_.begin());
    std::string error = hooks_.on_frame(held.header, held.payload);
    if (!error.empty()) return error;
    receiver_.record(held.header.channel_seq);
  }
  return {};
}

}  // namespace plexus::transports
