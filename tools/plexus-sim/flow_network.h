// Flows of bytes between nodes sharing the nodes' NICs. Flows between the same two nodes run
// one after another in the order they started (the daemon's messages to a peer share its
// paths in order: a later one does not take bandwidth from an earlier one). A running flow
// runs at the smaller of its
// sender's equal share (the sender's capacity over its flows out) and its receiver's (the
// receiver's capacity over its flows in), and every flow of a node is re-rated when one
// starts or ends there. Equal sharing, not max-min: where flows with different bottlenecks
// share a NIC, the share one of them cannot use stays idle, so such schedules (offload)
// come out pessimistic. Owns the flows; posts each flow's completion to the EventQueue
// (kind given at construction) and re-posts it when the rate changes, bumping its version.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "tools/plexus-sim/event_queue.h"

namespace plexus::sim {

class FlowNetwork {
 public:
  // `capacity[i]`: node i's bytes/s, each way.
  FlowNetwork(std::vector<double> capacity, EventQueue& events, uint32_t done_kind);

  // A flow of `bytes` (> 0) from `src` to `dst` posted at `now`, running once the pair's
  // earlier flows are done; returns its id (reused once it finished).
  uint32_t start(int src, int dst, uint64_t bytes, double now);
  // A completion event: true when it is the flow's current one (its bytes are all out), and
  // the flow then ends; false for a stale one.
  bool finish(uint32_t flow, uint32_t version, double now);

 private:
  struct Flow {
    int src = 0;
    int dst = 0;
    double remaining = 0;
    double rate = 0;
    double since = 0;  // when `remaining` was last brought up to date
    uint32_t version = 0;
    bool live = false;  // running (queued flows are not)
  };
  void run(uint32_t id, double now);
  // Re-rates every flow out of `src` and into `dst`.
  void reshare(int src, int dst, double now);
  void rerate(uint32_t id, double now);
  static void drop(std::vector<uint32_t>& list, uint32_t id);

  std::vector<double> capacity_;
  EventQueue& events_;
  uint32_t done_kind_;
  std::vector<Flow> flows_;
  std::vector<uint32_t> free_;
  std::vector<std::vector<uint32_t>> out_;                    // by node: its live flows out
  std::vector<std::vector<uint32_t>> in_;                     // by node: its live flows in
  std::unordered_map<uint64_t, std::deque<uint32_t>> pairs_;  // src << 32 | dst: in order
};

}  // namespace plexus::sim
