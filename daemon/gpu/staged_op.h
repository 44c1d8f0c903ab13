// Host copies of one op's GPU buffers. Clients launch no kernel. The daemon's algorithms
// and reductions run on host memory, so a staged op on GPU buffers has its input copied from
// the device before it runs and its result copied back before it completes, by the copy
// engines, which the engine thread polls rather than waits for. A direct op (direct()) has no
// host copy: the copy engines move it where it lies, or, for an allreduce within the node on
// GPU buffers of at least --gpu-reduce-kernel-bytes, the daemon's own reduction kernel
// (reduce_kernels.cu) reduces it on the device (GpuStaging::moves_directly decides). Spans of
// one allocation that overlap (the in-place forms) share one host copy, so the op sees the
// same layout it would on the device.
//
// StagedOp owns where the op lies on the device (its spans' mappings, kept mapped while it
// runs), its host copy (HostCopy) and the copies through it: the input in pieces
// (StagedInput), the result back (CopyBack), a direct send's copy aside (InputSnapshot).
// It answers for its place in its session's order (reads_result_of and the like); a
// matched direct op is moved by direct_copy.h. Engine thread (GpuStaging).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/gpu/copy_back.h"
#include "daemon/gpu/device_memory.h"
#include "daemon/gpu/gpu_regions.h"
#include "daemon/gpu/host_copy.h"
#include "daemon/gpu/input_snapshot.h"
#include "daemon/gpu/staged_input.h"
#include "shm/entry_validation.h"

namespace plexus::daemon::gpu {

class StagedOp {
 public:
  // Prepares host copies of the spans of `entry` that name GPU regions of `regions`
  // (checked by validation to lie within them) and points *send / *recv at them; spans in
  // the host pool are left alone. Why not when the host memory cannot be had.
  // The input is copied in by start_input, once no earlier op still has a result to
  // write where it reads (reads_result_of).
  static common::Result<std::unique_ptr<StagedOp>> stage(DeviceMemory& device,
                                                         const GpuRegions& regions,
                                                         const shm::ValidatedEntry& entry,
                                                         const std::byte** send, std::byte** recv);
  // An op moved by one copy straight from where its data is to where it goes, with no
  // host copy of its own (a send or receive whose peer is on this node): it holds its
  // GPU spans' mappings and keeps its place in the session's order, and copy_between
  // (direct_copy.h) moves the data once it is matched. Why not as stage().
  static common::Result<std::unique_ptr<StagedOp>> direct(const GpuRegions& regions,
                                                          const shm::ValidatedEntry& entry);
  bool is_direct() const { return direct_; }
  // A direct send not yet matched that a later op of its process will overwrite: its input
  // is copied to the host now, and the send goes from there once matched, so the later op
  // waits only for that copy, never for the peer (a send to itself, or an in-place exchange,
  // would otherwise wait forever). Charged to `budget` (the caller checked the room for
  // snapshot_needs()). "" or why not.
  std::string snapshot_input(DeviceMemory& device, StagingBudget budget);
  // The host bytes snapshot_input would take now (0 when it would take none).
  uint64_t snapshot_needs() const {
    return !direct_ || matched_ || snapshot_.taken() ? 0 : read_bytes_;
  }
  // The copy aside (its host bytes, whether it is taken, a refusal logged once).
  InputSnapshot& snapshot() { return snapshot_; }
  const InputSnapshot& snapshot() const { return snapshot_; }
  bool matched() const { return matched_; }
  // Whether a later op may now write where this op reads: not a direct op, or a direct
  // send not matched whose snapshot is in.
  bool input_safe_to_overwrite();
  // A direct op turned into a staged one at once, its input copied in before this returns
  // (from its copy aside, if it has one, which is then given back): for a collective whose
  // ranks' buffers cannot all be reached by the device's kernel. *send / *recv as stage();
  // the host copies are charged to `budget` (the caller checked the room). "" or why not.
  std::string stage_now(DeviceMemory& device, const shm::ValidatedEntry& entry,
                        const std::byte** send, std::byte** recv, StagingBudget budget);
  // A direct op's GPU spans (null mapping where that side is not on a GPU).
  DeviceSpan device_input() const { return {send_mapping_.get(), read_offset_}; }
  DeviceSpan device_output() const { return {recv_mapping_.get(), recv_offset_}; }
  // A direct op handed to the device whole (a reduction kernel) or matched (direct_copy.h):
  // its input is read from now on, so later ops writing there wait for its end.
  void mark_matched() { matched_ = true; }
  // The host bytes stage() takes for `entry`.
  static uint64_t host_bytes_for(const shm::ValidatedEntry& entry);
  // Adds staged_bytes() to the budget's totals until this op is destroyed or charged
  // elsewhere (the op may outlive its bookkeeping while a link still sends from it).
  void charge_to(StagingBudget budget) { host_.charge_to(std::move(budget)); }
  uint64_t staged_bytes() const { return host_.bytes(); }
  // Whether this op reads device memory that `earlier` has yet to write its result to:
  // its input must wait for that result (as on one CUDA stream, later reads see it).
  bool reads_result_of(const StagedOp& earlier) const;
  // Whether this op writes where `earlier` has yet to write its result: it waits, so that
  // the later result is the one left (as on one stream).
  bool overwrites_result_of(const StagedOp& earlier) const;
  // Whether this op writes where `earlier`, a direct op not yet matched, will read: it
  // must wait for that op (which reads the device when it is matched, not when submitted).
  bool overwrites_input_of(const StagedOp& earlier) const;
  // Whether this op writes where `earlier` is still copying its input in (an op between
  // nodes runs while its input comes in): it waits until that input is all in.
  bool overwrites_arriving_input_of(StagedOp& earlier) const;
  // Starts copying the input in, in pieces of StagedInput::kPieceBytes in order, so that an
  // op between nodes can start on its first slices while the rest comes in (send_in_through).
  void start_input(DeviceMemory& device);
  bool input_started() const { return input_.started(); }
  // False while the input is not yet in; true once it is; why not once it failed (each
  // time it is asked).
  common::Result<bool> input_ready();
  // Whether the first `bytes` of the send span are in host memory; why not once a piece's
  // copy failed.
  common::Result<bool> send_in_through(uint64_t bytes) {
    return input_.in_through(send_in_read_ + bytes);
  }
  // Whether the result (the receive span) goes back to a GPU by a copy of its own (a
  // direct op's result is written by copy_between).
  bool has_device_result() const { return recv_mapping_ != nullptr && !direct_; }
  // The result's way back to the GPU: in parts as an op between nodes writes its slices,
  // then the rest (CopyBack::start), polled (done) as input_ready is.
  CopyBack& copy_back() { return copy_back_; }
  // Its place among its session's staged ops (later ops have larger ones).
  uint64_t order = 0;

 private:
  StagedOp() = default;
  // Host copies of the entry's GPU spans (mappings already held): the buffer and fields.
  // "" or why not.
  std::string lay_out(DeviceMemory& device, const shm::ValidatedEntry& entry,
                      const std::byte** send, std::byte** recv);
  std::shared_ptr<DeviceMapping> recv_mapping_;  // null: the result is not on a GPU
  uint32_t recv_region_ = 0;
  uint64_t recv_offset_ = 0;
  uint64_t recv_bytes_ = 0;
  std::shared_ptr<DeviceMapping> send_mapping_;  // kept mapped while the op runs
  // What is read from the device: [read_offset_, + read_bytes_) of read_region_.
  uint32_t read_region_ = 0;
  uint64_t read_offset_ = 0;
  uint64_t read_bytes_ = 0;
  std::byte* read_host_ = nullptr;
  uint64_t send_in_read_ = 0;  // where the send span starts in the read span
  bool direct_ = false;
  bool matched_ = false;  // a direct op whose copy has started (or the kernel has it)
  // The host copy, then the copies through it: destroyed first, they wait for themselves
  // before the memory they read and write is freed.
  HostCopy host_;
  InputSnapshot snapshot_;  // a direct send's input, copied to host
  StagedInput input_;
  CopyBack copy_back_;
};

}  // namespace plexus::daemon::gpu
