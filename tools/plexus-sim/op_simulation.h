// Every node's part of one collective, run in simulated time over a FlowNetwork the way the
// daemon runs it: the op's slices in order, `in_flight` at once (InternodeOp::pump), each
// slice's plan round by round as algo::PlanRunner runs it: a round's sends are posted when it
// begins; a round ends once its receives are in and applied; a receive whose bytes a pending
// send still reads waits for that send; a round whose copies write such bytes does not
// begin; a slice is done when every send is. Messages match by (peer, message number), as
// Step::message numbers them, and one for a slice the node has not started is held until it
// does (HeldPieces). A message leaves overhead_s after it is posted, flows, and arrives
// latency_s after its last byte left, when its send is done. Local copies and reductions
// take no time (one rank per node: nothing to stage). Owns the nodes' run state; one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/algorithms/plan.h"
#include "tools/plexus-sim/cluster_model.h"
#include "tools/plexus-sim/event_queue.h"
#include "tools/plexus-sim/flow_network.h"

namespace plexus::sim {

// One node's plans: `full` for every slice, `last` (when not null) for the last one.
struct SlicedPlan {
  const daemon::algo::Plan* full = nullptr;
  const daemon::algo::Plan* last = nullptr;
  uint64_t slices = 1;
  const daemon::algo::Plan& of(uint64_t slice) const {
    return last != nullptr && slice + 1 == slices ? *last : *full;
  }
};

struct OpTiming {
  double seconds = 0;               // when the last node finished its last slice
  std::vector<double> slices_done;  // by slice: when its last node finished it
  uint64_t messages = 0;
  std::string failure;  // a message no plan expects (a planner bug), or plans that stall
};

class OpSimulation {
 public:
  // plans[i] is node i's; `cluster` must pass check() and outlive the simulation.
  OpSimulation(const ClusterModel& cluster, std::vector<SlicedPlan> plans, uint32_t in_flight);
  OpTiming run();

 private:
  enum Kind : uint32_t { kStart, kDone, kArrive };
  struct Message {
    int src = 0;
    int dst = 0;
    uint64_t slice = 0;
    uint32_t number = 0;  // Step::message
    uint32_t step = 0;    // the send's step in the sender's plan
    uint64_t bytes = 0;
  };
  // A plan's receives by (peer << 32 | message), sorted.
  using Receives = std::vector<std::pair<uint64_t, uint32_t>>;
  struct Running {
    uint64_t slice = 0;
    const daemon::algo::Plan* plan = nullptr;
    const Receives* receives = nullptr;
    size_t round = 0;
    bool begun = false;
    std::vector<uint8_t> state;     // by step: 0 not yet, 1 posted / arrived, 2 done / applied
    std::vector<uint32_t> pending;  // sends posted, not done
  };
  struct Node {
    SlicedPlan plans;
    Receives full_receives;
    Receives last_receives;
    std::vector<std::unique_ptr<Running>> running;
    uint64_t next = 0;
    std::map<uint64_t, std::vector<std::pair<int, uint32_t>>> early;  // by slice
  };

  static Receives receives_of(const daemon::algo::Plan* plan);
  Running* running(int node, uint64_t slice);
  void start_slice(int node, uint64_t slice);
  void pump(int node);
  void advance(int node, Running& r);
  bool read_by_pending(const Running& r, uint64_t offset, uint64_t bytes) const;
  void post(int node, Running& r, uint32_t step);
  void send_done(const Message& m);
  void arrive(const Message& m);
  // Marks (peer, number) of `r` arrived; false (and failure_) when the plan holds no such
  // receive or it came twice.
  bool mark_arrived(int node, Running& r, int peer, uint32_t number);
  void fail(std::string why);

  const ClusterModel& cluster_;
  uint32_t in_flight_;
  EventQueue events_;
  FlowNetwork network_;
  std::vector<Node> nodes_;
  std::vector<Message> messages_;
  std::vector<uint32_t> free_messages_;
  std::vector<uint32_t> flow_message_;  // by flow id
  double now_ = 0;
  OpTiming timing_;
};

}  // namespace plexus::sim
