// One collective of a multi-node communicator, as this node runs it, slice by slice
// (op_slices.h): gather or reduce the local ranks' inputs for the slice into scratch, run
// the inter-node plan for the slice among the daemons (one participant per node), then
// copy the slice's result out to the local ranks; a few slices are in flight at once, so
// the three stages overlap. The daemon's own buffers carry the network traffic, except
// for an allreduce whose node has one rank: its rounds run in the rank's receive buffer
// (no staging copies), and what the transport holds keeps the rank's memory mapped, so a
// client that dies mid-op never leaves the transport pointing at unmapped memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "daemon/algorithms/algorithm.h"
#include "daemon/algorithms/plan_runner.h"
#include "daemon/internode/node_topology.h"
#include "daemon/internode/op_slices.h"
#include "daemon/internode/op_stage_times.h"
#include "daemon/local/local_collectives.h"

namespace plexus::daemon {

// Scratch memory of one slice.
struct OpScratch {
  std::vector<std::byte> work;
  std::vector<std::byte> send;
};

// The scratch buffers a communicator's slices take turns with. A buffer is free when the
// pool holds the only reference (the transport keeps one while it may still read it).
class ScratchPool {
 public:
  std::shared_ptr<OpScratch> take();
  size_t size() const { return buffers_.size(); }

 private:
  std::vector<std::shared_ptr<OpScratch>> buffers_;
};

struct SliceOptions {
  uint64_t work_bytes = kSliceWorkBytes;
  uint32_t in_flight = kSlicesInFlight;
  bool timed = false;  // measure stage_times()
  // The nodes' agreed speeds for this op (algo::Shape::speeds; empty: alike).
  std::vector<double> speeds;
};

class InternodeOp final {
 public:
  // Sends `data` to node `node` as message `message` of this op; `keep_alive` owns the
  // memory. The op's send_done must follow once the bytes may change.
  using PostSend = std::function<void(int node, uint32_t message, std::span<const std::byte> data,
                                      std::shared_ptr<void> keep_alive)>;

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

  // The shape the algorithm plans for (also what the cost model needs).
  static algo::Shape shape_for(const NodeTopology& topology, const CollectiveArgs& args);
  static algo::Collective collective_of(shm::Opcode opcode);

  // Local parts on GPUs, staged through host memory (engine/gpu_staging.cc): a slice starts only
  // once every part's input for it is in, and each part's result is handed back as each
  // slice writes it, so that the copies overlap the network rounds.
  struct DeviceStaging {
    // Whether part `index`'s first `bytes` of input are in host memory; false with *error
    // set when its copy failed (the op then fails with *error, which names the rank).
    std::function<bool(size_t index, uint64_t bytes, std::string* error)> input_in;
    // Part `index`'s result [offset, offset + bytes) of its receive span is written.
    std::function<void(size_t index, uint64_t offset, uint64_t bytes)> written;
  };
  // Before start().
  void stage_through(DeviceStaging staging) { staging_ = std::move(staging); }
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
  bool network_done() const { return finished_ == layout_.slices; }
  uint64_t slices_finished() const { return finished_; }
  // Non-empty once the op cannot go on (a held piece that did not fit, a plan too large).
  const std::string& failure() const { return failure_; }
  // Whether the rounds run in the local rank's receive buffer instead of scratch: an
  // allreduce with one rank on this node and an owner for its memory.
  bool borrows_rank_memory() const { return rank_memory_owner_ != nullptr; }
  // What the running slices hand the transport as keep_alive with placements (to abandon
  // them when the op fails: NodeLinks::abandon_placements).
  std::vector<const void*> placement_owners() const;
  // Bytes written to local ranks' receive buffers so far.
  uint64_t bytes_written() const { return written_; }
  // Time per stage over the slices finished so far (SliceOptions::timed; else zeros).
  const OpStageTimes& stage_times() const { return stage_times_; }

  const std::vector<Contribution>& local_parts() const { return parts_; }
  const SliceLayout& layout() const { return layout_; }
  // Nodes the running slices still wait for.
  std::vector<int> waiting_for() const;
  // Whether data from `node` for this op is still to come.
  bool expects_from(int node) const;

 private:
  class SliceTransport;
  struct Slice;
  struct HeldPiece {
    int node;
    uint64_t slice;
    uint32_t message;
    uint64_t offset;
    std::vector<std::byte> data;
  };

  const algo::Plan& plan_of(uint64_t slice) const;
  Slice* running_slice(uint64_t index);
  // Starts finished-slice copy-outs and new slices until nothing changes; does nothing
  // while a plan runner is on the stack (the outermost call does it).
  void pump();
  void start_slice(uint64_t index);
  void finish_slice(Slice& slice);
  void fail(std::string why);

  // Whether every local part's input for slice `index` is in (DeviceStaging::input_in).
  bool input_in_for(uint64_t index);
  void local_phase_in(Slice& slice);  // gather or reduce the local inputs into scratch
  uint64_t local_phase_out(const Slice& slice);
  void reduce_into(std::byte* out, std::span<const std::byte* const> inputs, uint64_t count);
  void copy_out(std::byte* dst, const std::byte* src, uint64_t count);
  // Where rank r's piece sits in a slice's node-ordered work buffer (elements).
  uint64_t node_order_offset(int rank, uint64_t piece) const;

  const NodeTopology& topology_;
  CollectiveArgs args_;
  std::vector<Contribution> parts_;
  std::shared_ptr<ScratchPool> scratch_;
  PostSend post_send_;
  SliceOptions options_;
  std::shared_ptr<void> rank_memory_owner_;  // null unless the rounds borrow rank memory
  uint32_t elem_ = 1;
  plexus_redop_t network_op_ = PLEXUS_SUM;  // AVG travels as SUM, divided at the end
  algo::Algorithm algorithm_;
  SliceLayout layout_;
  algo::Plan full_plan_;  // a slice of layout_.elems_per_slice
  algo::Plan last_plan_;  // the last slice, when it is shorter
  std::vector<std::unique_ptr<Slice>> running_;
  std::vector<HeldPiece> held_;  // for slices not started yet
  uint64_t held_bytes_ = 0;
  uint64_t next_slice_ = 0;
  uint64_t finished_ = 0;
  uint64_t written_ = 0;
  OpStageTimes stage_times_;
  DeviceStaging staging_;
  bool waiting_for_input_ = false;
  int runner_depth_ = 0;  // plan-runner calls on the stack
  bool pumping_ = false;
  std::string failure_;
};

// Pieces held for slices not started yet, before the op fails naming the sender (a peer
// that runs this far ahead is broken, or a broadcast root outran its receivers).
inline constexpr uint64_t kMaxHeldSliceBytes = uint64_t{1} << 30;

}  // namespace plexus::daemon
