// The weight relay between nodes: a version goes from the publisher's daemon down a chain of
// the subscribed nodes' daemons over the data links (one more data family: frame_views.h).
// Each daemon writes what arrives into buffers of the store's memory and passes each 2 MiB
// range on to the next as soon as it has it whole, so every link carries the bytes once and
// the whole takes about W/B plus a range per hop. A version whole here goes to the control
// thread's store (Hooks::arrived). A next hop lost is skipped: the chain goes on to the one
// after it, from this daemon's own copy.
//
// Engine thread only (InternodeRunner owns it and feeds it frames and lost peers).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/links/node_links.h"
#include "daemon/weights/weight_memory.h"
#include "daemon/weights/weight_store.h"
#include "transports/wire/data_frame.h"

namespace plexus::daemon {

class WeightRelay {
 public:
  struct NodeRef {
    uint64_t instance = 0;
    std::string name;
    std::vector<std::string> addresses;
  };
  struct Hooks {
    // Version `version` of relay `relay_id` is whole on this node.
    std::function<void(uint64_t relay_id, std::shared_ptr<const weights::Version> version)> arrived;
    // A link to `node` is wanted now (opened on first use).
    std::function<void(const NodeRef& node)> reach;
  };

  WeightRelay(NodeLinks& links, Hooks hooks) : links_(links), hooks_(std::move(hooks)) {}

  // Where received versions' buffers come from (the store's memory, under its cap); none:
  // versions from other nodes are refused.
  void set_memory(std::shared_ptr<weights::WeightMemory> memory) { memory_ = std::move(memory); }
  // Sends `version` of relay `relay_id` down `chain` (this node's own copy: every range is here).
  void push(uint64_t relay_id, std::shared_ptr<const weights::Version> version,
            std::vector<NodeRef> chain);
  // A frame of the weights family from `peer`: "" or why it is refused (the path fails).
  [[nodiscard]] std::string on_frame(uint64_t peer, const transports::wire::DataFrameHeader& h,
                                     std::span<const std::byte> payload);
  // The link to `peer` is gone: chains that went to it go on to the node after it.
  void peer_lost(uint64_t peer);
  // Whether a transfer to or from `peer` is under way (its link stays open while idle).
  bool busy_with(uint64_t peer) const;

 private:
  using Key = std::pair<uint64_t, uint64_t>;  // relay id, version
  // Bytes of one range received, as intervals: a range sent again (a chain repaired) or
  // chunked otherwise is counted once.
  struct Received {
    std::map<uint64_t, uint64_t> spans;  // start -> end
    uint64_t bytes = 0;
    uint64_t add(uint64_t start, uint64_t end);
  };
  struct Forward {
    uint64_t relay_id = 0;
    std::shared_ptr<const weights::Version> version;
    std::vector<NodeRef> chain;  // the nodes after this one, in order
    size_t next = 0;             // index in chain of the node sent to now
    bool header_acked = false;
    std::vector<bool> have;   // ranges whole here (all of them at the publisher)
    std::vector<bool> sent;   // ranges sent to chain[next]
    uint64_t generation = 0;  // a new next hop makes the old one's acknowledgements stale
    size_t unacked = 0;
    bool sending = false;  // in send_ranges: a release it sees at once does not end it there
  };
  struct Arrival {
    uint64_t from = 0;
    std::vector<std::byte> header;
    uint64_t header_size = 0;  // 0 until its end marker came
    Received header_bytes;
    std::shared_ptr<weights::Version> version;  // made once the header is whole
    std::vector<Received> ranges;
    size_t ranges_whole = 0;
    uint64_t forward = 0;  // its Forward to the next node (0: this node ends the chain)
  };

  // The ranges of a version's shards, flattened: (shard, range) -> index, and each's bytes.
  static std::vector<std::pair<uint32_t, uint64_t>> ranges_of(const weights::Version& v);
  std::string on_header(const Key& key, Arrival& in, const transports::wire::DataFrameHeader& h,
                        std::span<const std::byte> payload);
  std::string take_header(const Key& key, Arrival& in);
  std::string on_range(const Key& key, Arrival& in, const transports::wire::DataFrameHeader& h,
                       std::span<const std::byte> payload);
  // Sends the header to chain[next] (and on past nodes it cannot reach); the forward ends
  // when the chain does.
  void start_forward(uint64_t id, Forward& f);
  // The ranges whole here and not yet sent, once the next node has the header.
  void send_ranges(uint64_t id, Forward& f);
  // A range's release (`generation` 0: none, a look after sending): ends the forward once
  // every range is sent and released.
  void forward_done(uint64_t id, uint64_t generation);

  NodeLinks& links_;
  Hooks hooks_;
  std::shared_ptr<weights::WeightMemory> memory_;
  std::map<Key, Arrival> arrivals_;
  std::map<uint64_t, Forward> forwards_;  // by a number of their own: a version may go two ways
  uint64_t next_forward_ = 1;
  std::vector<Key> done_;  // versions whole here lately: frames of them sent again are dropped
};

}  // namespace plexus::daemon
