// Cuts messages into chunk frames on the links (no allocation per chunk) and queues them, and
// the notices an op sends (abort, departure), in the flow of their communicator. Owns the chunk
// size limit and which flow each communicator's frames belong to; the links (PeerLinks) hold
// the frames and the chunks' memory until the peer has them. Engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "daemon/links/peer_links.h"
#include "transports/channel/reliable_channel.h"
#include "transports/wire/data_frame.h"

namespace plexus::daemon {

class MessageSender {
 public:
  // `links` outlives it; `chunk_bytes`: the largest chunk.
  MessageSender(PeerLinks& links, uint32_t chunk_bytes,
                const transports::ReliableChannel::Settings& channel);

  // Frames of communicator comm_id belong to `flow` from now on (NodeLinks::set_comm_flow);
  // frames of a communicator never named go as flow 0. forget_comm: it is gone.
  void set_comm_flow(uint64_t comm_id, uint32_t flow) { comm_flows_[comm_id] = flow; }
  void forget_comm(uint64_t comm_id) { comm_flows_.erase(comm_id); }

  // NodeLinks::send_message, send_marker: false (and nothing called) with no link to `peer`.
  bool send_message(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step,
                    std::span<const std::byte> data, std::shared_ptr<void> keep_alive,
                    std::function<void()> done);
  bool send_marker(uint64_t peer, uint64_t comm_id, uint64_t op_seq, uint32_t step, uint64_t offset,
                   uint32_t chunk, std::function<void()> done,
                   std::span<const std::byte> payload = {});
  // `header` (an abort or departed frame: transports/wire/frame_views.h) carrying `reason`
  // (cut to kMaxAbortReasonBytes), best effort.
  void send_notice(uint64_t peer, transports::wire::DataFrameHeader header,
                   const std::string& reason);

 private:
  uint32_t flow_of(uint64_t comm_id) const {
    auto it = comm_flows_.find(comm_id);
    return it == comm_flows_.end() ? 0 : it->second;
  }
  uint32_t chunk_bytes_for(const transports::ReliableChannel& channel) const;

  PeerLinks& links_;
  uint32_t chunk_bytes_;
  decltype(transports::ReliableChannel::Settings::path_queue_time) path_queue_time_;
  uint64_t min_path_queue_bytes_;
  std::unordered_map<uint64_t, uint32_t> comm_flows_;
};

}  // namespace plexus::daemon
