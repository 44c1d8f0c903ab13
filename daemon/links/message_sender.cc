// Messages cut into chunk frames, markers and notices, queued on the links in their flow.
#include "daemon/links/message_sender.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "transports/wire/frame_views.h"

namespace plexus::daemon {

namespace wire = transports::wire;
using Clock = transports::ReliableChannel::Clock;

MessageSender::MessageSender(PeerLinks& links, uint32_t chunk_bytes,
                             const transports::ReliableChannel::Settings& channel)
    : links_(links),
      chunk_bytes_(chunk_bytes),
      path_queue_time_(channel.path_queue_time),
      min_path_queue_bytes_(channel.min_path_queue_bytes) {}

bool MessageSender::send_message(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step,
                                 std::span<const std::byte> data, std::shared_ptr<void> keep_alive,
                                 std::function<void()> done) {
  transports::ReliableChannel* channel = links_.channel(peer);
  if (channel == nullptr) return false;
  wire::DataFrameHeader h = wire::make_data(comm_id, op_seq, step);
  uint64_t offset = 0;
  uint32_t chunk = 0;
  const auto now = Clock::now();
  const uint32_t flow = flow_of(comm_id);
  const uint32_t chunk_bytes = chunk_bytes_for(*channel);
  // The message is sent when every chunk is released, in whatever order: a latency path's
  // chunks are acknowledged selectively, so the last may be released before the first.
  const uint64_t chunks = std::max<uint64_t>(1, (data.size() + chunk_bytes - 1) / chunk_bytes);
  std::function<void()> chunk_done;
  if (done && chunks > 1) {
    auto left =
        std::make_shared<std::pair<uint64_t, std::function<void()>>>(chunks, std::move(done));
    chunk_done = [left] {
      if (--left->first == 0) left->second();
    };
  }
  do {
    const auto bytes = static_cast<uint32_t>(std::min<uint64_t>(chunk_bytes, data.size() - offset));
    const bool last = offset + bytes == data.size();
    h.chunk = chunk++;
    h.offset = offset;
    h.length = bytes;
    const uint64_t token = links_.take_token(
        peer, keep_alive, chunks > 1 ? chunk_done : (last ? std::move(done) : nullptr), now);
    channel->send(h, data.subspan(offset, bytes), token, flow);
    offset += bytes;
  } while (offset < data.size());
  links_.flush(peer);
  return true;
}

bool MessageSender::send_marker(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step,
                                uint64_t offset, uint32_t chunk, std::function<void()> done,
                                std::span<const std::byte> payload) {
  transports::ReliableChannel* channel = links_.channel(peer);
  if (channel == nullptr) return false;
  wire::DataFrameHeader h = wire::make_data(comm_id, op_seq, step);
  h.chunk = chunk;
  h.offset = offset;
  h.length = static_cast<uint32_t>(payload.size());
  // A marker's few bytes are copied: the link holds them until the peer has the frame.
  std::shared_ptr<std::vector<std::byte>> copy;
  if (!payload.empty())
    copy = std::make_shared<std::vector<std::byte>>(payload.begin(), payload.end());
  const std::span<const std::byte> held = copy ? std::span<const std::byte>(*copy) : payload;
  channel->send(h, held, links_.take_token(peer, copy, std::move(done), Clock::now()),
                flow_of(h.comm_id));
  links_.flush(peer);
  return true;
}

void MessageSender::send_notice(uint64_t peer, wire::DataFrameHeader h, const std::string& reason) {
  transports::ReliableChannel* channel = links_.channel(peer);
  if (channel == nullptr) return;
  auto text = std::make_shared<std::string>(
      reason.substr(0, std::min<size_t>(reason.size(), wire::kMaxAbortReasonBytes)));
  h.length = static_cast<uint32_t>(text->size());
  const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(text->data()),
                                           text->size());
  // In the communicator's flow: behind its frames sent before, as the receiver expects.
  channel->send(h, payload, links_.take_token(peer, text, nullptr, Clock::now()),
                flow_of(h.comm_id));
  links_.flush(peer);
}

// About path_queue_time of the fastest path's measured rate, in whole 4 KiB pages (element
// sizes divide it); chunk_bytes_ until a rate is measured.
uint32_t MessageSender::chunk_bytes_for(const transports::ReliableChannel& channel) const {
  const double rate = channel.fastest_rate();
  if (rate <= 0) return chunk_bytes_;
  const double seconds = std::chrono::duration<double>(path_queue_time_).count();
  const uint64_t want = static_cast<uint64_t>(rate * seconds) & ~uint64_t{4095};
  return static_cast<uint32_t>(std::clamp<uint64_t>(
      want, std::min<uint64_t>(min_path_queue_bytes_, chunk_bytes_), chunk_bytes_));
}

}  // namespace plexus::daemon
