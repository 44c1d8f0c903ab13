// The local side of a multi-node collective: this node's ranks' parts and how a slice moves
// between their buffers and the slice's work buffer. Before the rounds, the parts' inputs
// for the slice are gathered or reduced into scratch (or, for an allreduce whose node has
// one rank and an owner for its memory, the rounds run in that rank's receive buffer);
// after them, the result is copied out to every part (an average divided here). Parts on
// GPUs come through host memory (DeviceStaging): a slice may start only once their input
// for it is in, and each part's result is handed back as a slice writes it. Owns the parts,
// the collective's arguments, the rank memory's owner and the staging hooks; the topology
// is the communicator's. Engine thread, called by InternodeOp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/internode/node_topology.h"
#include "daemon/internode/scratch_pool.h"
#include "daemon/local/local_collectives.h"

namespace plexus::daemon {

class LocalPhases {
 public:
  // Local parts on GPUs, staged through host memory (engine/gpu_staging.cc): a slice starts
  // only once every part's input for it is in, and each part's result is handed back as each
  // slice writes it, so that the copies overlap the network rounds.
  struct DeviceStaging {
    // Whether part `index`'s first `bytes` of input are in host memory; why not when its
    // copy failed (the op then fails with that sentence, which names the rank).
    std::function<common::Result<bool>(size_t index, uint64_t bytes)> input_in;
    // Part `index`'s result [offset, offset + bytes) of its receive span is written.
    std::function<void(size_t index, uint64_t offset, uint64_t bytes)> written;
  };
  // Where a slice's rounds run, and what a send or placement holds while the transport may
  // touch that memory: the slice's scratch, and with it the rank memory's owner when the
  // rounds run there.
  struct SliceMemory {
    std::span<std::byte> work;
    std::shared_ptr<void> keep_alive;
  };

  // `parts[i]` is the part of topology.local_ranks()[i]; all agree on args.
  // `rank_memory_owner`, when given, keeps the parts' buffers mapped: an allreduce whose
  // node has one rank then runs its rounds in that rank's receive buffer.
  LocalPhases(const NodeTopology& topology, const CollectiveArgs& args,
              std::vector<Contribution> parts, std::shared_ptr<void> rank_memory_owner);

  void stage_through(DeviceStaging staging) { staging_ = std::move(staging); }
  // Whether every part's input for elements [first, first + count) of its blocks is in
  // (DeviceStaging::input_in); why not when a copy failed.
  common::Result<bool> input_in(uint64_t first, uint64_t count) const;
  // Gathers or reduces the parts' elements [first, first + count) of every block into
  // `scratch` (count 0: the parts have no buffers at all, and the slice's work is empty).
  SliceMemory phase_in(uint64_t first, uint64_t count, std::shared_ptr<OpScratch> scratch);
  // Copies a slice's result out of `work` to the parts; returns the bytes written.
  uint64_t phase_out(uint64_t first, uint64_t count, std::span<std::byte> work);
  // Folds `in` into `inout`, as the rounds reduce (an average travels as a sum).
  void reduce(std::byte* inout, const std::byte* in, size_t bytes) const;

  // Whether the rounds run in the local rank's receive buffer instead of scratch.
  bool borrows_rank_memory() const { return rank_memory_owner_ != nullptr; }
  const std::vector<Contribution>& parts() const { return parts_; }
  uint32_t elem_bytes() const { return elem_; }

 private:
  void reduce_into(std::byte* out, std::span<const std::byte* const> inputs, uint64_t count);
  void copy_out(std::byte* dst, const std::byte* src, uint64_t count);
  // Where rank r's piece sits in a slice's node-ordered work buffer (elements).
  uint64_t node_order_offset(int rank, uint64_t piece) const;

  const NodeTopology& topology_;
  CollectiveArgs args_;
  std::vector<Contribution> parts_;
  std::shared_ptr<void> rank_memory_owner_;  // null unless the rounds borrow rank memory
  uint32_t elem_ = 1;
  plexus_redop_t network_op_ = PLEXUS_SUM;  // AVG travels as SUM, divided at the end
  DeviceStaging staging_;
};

}  // namespace plexus::daemon
