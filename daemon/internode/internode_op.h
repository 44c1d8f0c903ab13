// One collective of a multi-node communicator, as this node runs it, slice by slice
// (op_slices.h): gather or reduce the local ranks' inputs for the slice into scratch, run
// the inter-node plan for the slice among the daemons (one participant per node), then
// copy the slice's result out to the local ranks; a few slices are in flight at once, so
// the three stages overlap. The daemon's own buffers carry the network traffic, except
// for an allreduce whose node has one rank: its rounds run in the rank's receive buffer
// (no staging copies), and what the transport holds keeps the rank's memory mapped, so a
// client that dies mid-op never leaves the transport pointing at unmapped memory.
//
// The op schedules the slices and routes the network to them; its parts: LocalPhases (the
// local ranks' side), SlicePlans (layout and plans), SliceRun (one slice's rounds),
// HeldPieces (pieces ahead of their slice), StageClock (OpStageTimes). Owns all of them.
// Engine thread: InternodeRunner starts it and hands it each piece, placement and send
// completion; GpuStaging resumes it as staged input comes in.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "daemon/algorithms/algorithm.h"
#include "daemon/internode/held_pieces.h"
#include "daemon/internode/local_phases.h"
#include "daemon/internode/node_topology.h"
#include "daemon/internode/op_slices.h"
#include "daemon/internode/op_stage_times.h"
#include "daemon/internode/scratch_pool.h"
#include "daemon/internode/slice_plans.h"
#include "daemon/internode/slice_run.h"
#include "daemon/internode/stage_clock.h"
#include "daemon/local/local_collectives.h"

namespace plexus::daemon {

struct SliceOptions {
  uint64_t work_bytes = kSliceWorkBytes;
  uint32_t in_flight = kSlicesInFlight;
  bool timed = false;  // measure stage_times()
  // The nodes' agreed speeds for this op (algo::Shape::speeds; empty: alike).
  std::vector<double> speeds;
};

class InternodeOp final {
 public:
  using PostSend = SliceRun::PostSend;

  // `local_parts[i]` is the part of topology.local_ranks()[i]; all agree on args.
  // `rank_memory_owner`, when given, keeps the local parts' buffers mapped: the op may then
  // run its rounds in them (see borrows_rank_memory) and hands it to the transport with
  // every send and placement.
  InternodeOp(const NodeTopology& topology, const CollectiveArgs& args,
              std::vector<Contribution> local_parts, algo::Algorithm algorithm,
              std::shared_ptr<ScratchPool> scratch, PostSend post_send, SliceOptions slices = {},
              std::shared_ptr<void> rank_memory_owner = nullptr);
  ~InternodeOp();
  InternodeOp(const InternodeOp&) = delete;
  InternodeOp& operator=(const InternodeOp&) = delete;

  // Local parts on GPUs, staged through host memory (LocalPhases::DeviceStaging).
  using DeviceStaging = LocalPhases::DeviceStaging;
  // Before start().
  void stage_through(DeviceStaging staging) { local_.stage_through(std::move(staging)); }
  // Whether a slice waits for its input (resume() once more of it is in).
  bool waiting_for_input() const { return waiting_for_input_; }
  void resume() { pump(); }

  // Starts the first slices.
  void start();
  // A piece of message `message` (slice and message within it) from `node`. Returns "" or
  // why it does not fit the op (the op must then fail).
  std::string deliver(int node, uint32_t message, uint64_t offset, std::span<const std::byte> data);
  // Where a piece of `bytes` may be written directly (PlanRunner::placement), and the
  // memory's owner to keep alive while it is written; {} when it must go through deliver.
  struct Placement {
    std::span<std::byte> destination;
    std::shared_ptr<void> keep_alive;
  };
  Placement placement(int node, uint32_t message, uint64_t offset, uint64_t bytes);
  // The placed piece is in place.
  void deliver_placed(int node, uint32_t message, uint64_t offset, uint64_t bytes);
  void send_done(int node, uint32_t message);
  // Every slice has run and been copied out to the local ranks.
  bool network_done() const { return finished_ == plans_.layout().slices; }
  uint64_t slices_finished() const { return finished_; }
  // Non-empty once the op cannot go on (a held piece that did not fit, a plan too large).
  const std::string& failure() const { return failure_; }
  // Whether the rounds run in the local rank's receive buffer instead of scratch: an
  // allreduce with one rank on this node and an owner for its memory.
  bool borrows_rank_memory() const { return local_.borrows_rank_memory(); }
  // What the running slices hand the transport as keep_alive with placements (to abandon
  // them when the op fails: NodeLinks::abandon_placements).
  std::vector<const void*> placement_owners() const;
  // Bytes written to local ranks' receive buffers so far.
  uint64_t bytes_written() const { return written_; }
  // Time per stage over the slices finished so far (SliceOptions::timed; else zeros).
  const OpStageTimes& stage_times() const { return clock_.times(); }

  const std::vector<Contribution>& local_parts() const { return local_.parts(); }
  const SliceLayout& layout() const { return plans_.layout(); }
  // Nodes the running slices still wait for.
  std::vector<int> waiting_for() const;
  // Whether data from `node` for this op is still to come.
  bool expects_from(int node) const;
  // The nodes its plans send to or receive from (algo::peers_of, worked out once).
  const std::vector<int>& peers() const { return peers_; }

 private:
  SliceRun* running_slice(uint64_t index);
  // Starts finished-slice copy-outs and new slices until nothing changes; does nothing
  // while a plan runner is on the stack (the outermost call does it).
  void pump();
  void start_slice(uint64_t index);
  void finish_slice(SliceRun& slice);
  void fail(std::string why);

  const NodeTopology& topology_;
  std::shared_ptr<ScratchPool> scratch_;
  PostSend post_send_;
  uint32_t in_flight_;
  LocalPhases local_;
  SlicePlans plans_;
  std::vector<int> peers_;  // peers()
  StageClock clock_;
  std::vector<std::unique_ptr<SliceRun>> running_;
  HeldPieces held_;  // for slices not started yet
  uint64_t next_slice_ = 0;
  uint64_t finished_ = 0;
  uint64_t written_ = 0;
  bool waiting_for_input_ = false;
  int runner_depth_ = 0;  // plan-runner calls on the stack
  bool pumping_ = false;
  std::string failure_;
};

}  // namespace plexus::daemon
