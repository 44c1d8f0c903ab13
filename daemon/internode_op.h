// One collective of a multi-node communicator, as this node runs it: gather or reduce the
// local ranks' inputs into the node's work buffer, run the inter-node plan among the
// daemons (one participant per node), then copy the node's result out to its local ranks.
// The daemon's own buffers carry the network traffic, so a client that frees or dies
// mid-op never leaves the transport pointing into its memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "daemon/algorithms/algorithm.h"
#include "daemon/algorithms/plan_runner.h"
#include "daemon/comm.h"
#include "daemon/local_collectives.h"
#include "daemon/node_topology.h"

namespace plexus::daemon {

// Scratch memory reused across a communicator's ops; an op keeps it alive while the
// transport may still read it.
struct OpScratch {
  std::vector<std::byte> work;
  std::vector<std::byte> send;
};

class InternodeOp final : public algo::PlanTransport {
 public:
  // Sends `data` to node `node` as message `message` of this op; the op's send_done must
  // follow once the bytes may change.
  using PostSend = std::function<void(int node, uint32_t message, std::span<const std::byte> data)>;

  // `local_parts[i]` is the part of topology.local_ranks()[i]; all agree on args.
  InternodeOp(const NodeTopology& topology, const CollectiveArgs& args,
              std::vector<Contribution> local_parts, algo::Algorithm algorithm,
              std::shared_ptr<OpScratch> scratch, PostSend post_send);

  // The shape the algorithm plans for (also what the cost model needs).
  static algo::Shape shape_for(const NodeTopology& topology, const CollectiveArgs& args);
  static algo::Collective collective_of(shm::Opcode opcode);

  // Local phase in, then the first round of the plan.
  void start();
  std::string deliver(int node, uint32_t message, uint64_t offset, std::span<const std::byte> data);
  void send_done(int node, uint32_t message);
  bool network_done() const { return runner_->done(); }
  // Local phase out (call once network_done()); returns the bytes written to local ranks.
  uint64_t finish();

  const std::vector<Contribution>& local_parts() const { return parts_; }
  const algo::Plan& plan() const { return plan_; }
  // Nodes the current round still waits for.
  std::vector<int> waiting_for() const { return runner_->waiting_for(); }
  bool expects_from(int node) const { return runner_ && runner_->expects_from(node); }

 private:
  void post_send(int peer, uint32_t message, std::span<const std::byte> data) override;
  void local_phase_in();  // gather or reduce the local ranks' inputs into scratch
  void reduce_into(std::byte* out, std::span<const std::byte* const> inputs, uint64_t count);
  void copy_out(std::byte* dst, const std::byte* src, uint64_t count);
  // Where rank r's block sits in the node-ordered work buffer (elements).
  uint64_t node_order_offset(int rank, uint64_t block) const;

  const NodeTopology& topology_;
  CollectiveArgs args_;
  std::vector<Contribution> parts_;
  std::shared_ptr<OpScratch> scratch_;
  PostSend post_send_;
  uint32_t elem_ = 1;
  plexus_redop_t network_op_ = PLEXUS_SUM;  // AVG travels as SUM, divided at the end
  algo::Shape shape_;
  algo::Plan plan_;
  std::unique_ptr<algo::PlanRunner> runner_;
  std::vector<const std::byte*> inputs_;
};

}  // namespace plexus::daemon
