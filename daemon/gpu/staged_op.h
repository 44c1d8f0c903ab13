// Host copies of one op's GPU buffers. Clients launch no kernel. The daemon's algorithms
// and reductions run on host memory, so a staged op on GPU buffers has its input copied from
// the device before it runs and its result copied back before it completes, by the copy
// engines, which the engine thread polls rather than waits for. A direct op (direct()) has no
// host copy: the copy engines move it where it lies, or, for an allreduce within the node on
// GPU buffers of at least --gpu-reduce-kernel-bytes, the daemon's own reduction kernel
// (reduce_kernels.cu) reduces it on the device (GpuStaging::moves_directly decides). Spans of
// one allocation that overlap (the in-place forms) share one host copy, so the op sees the
// same layout it would on the device.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/gpu/device_memory.h"
#include "daemon/gpu/gpu_regions.h"
#include "shm/entry_validation.h"

namespace plexus::daemon::gpu {

// The totals an op's host copies are charged to while it lives: its process's and its
// job's staging budgets (either may be null).
struct StagingBudget {
  std::shared_ptr<uint64_t> process;
  std::shared_ptr<uint64_t> job;
};

class StagedOp {
 public:
  // Prepares host copies of the spans of `entry` that name GPU regions of `regions`
  // (checked by validation to lie within them) and points *send / *recv at them; spans in
  // the host pool are left alone. Null with *error when the host memory cannot be had.
  // The input is copied in by start_input, once no earlier op still has a result to
  // write where it reads (reads_result_of).
  static std::unique_ptr<StagedOp> stage(DeviceMemory& device, const GpuRegions& regions,
                                         const shm::ValidatedEntry& entry, const std::byte** send,
                                         std::byte** recv, std::string* error);
  // An op moved by one copy straight from where its data is to where it goes, with no
  // host copy of its own (a send or receive whose peer is on this node): it holds its
  // GPU spans' mappings and keeps its place in the session's order, and copy_between
  // moves the data once it is matched. Null with *error as stage().
  static std::unique_ptr<StagedOp> direct(const GpuRegions& regions,
                                          const shm::ValidatedEntry& entry, std::string* error);
  bool is_direct() const { return direct_; }
  // Starts the one copy of a matched send and receive: `from` / `to` are their direct ops,
  // or null where that side is in a host pool (at from_host / to_host). D2D, D2H or H2D.
  // A send whose input was snapshotted goes from its host copy (waited for, if still
  // running). Marks both ops matched.
  static std::unique_ptr<CopyInFlight> copy_between(DeviceMemory& device, StagedOp* from,
                                                    const std::byte* from_host, StagedOp* to,
                                                    std::byte* to_host, uint64_t bytes) {
    return copy_part(device, from, from_host, 0, to, to_host, 0, bytes);
  }
  // The same for a part of the spans: `bytes` from `from_at` into the input to `to_at`
  // into the result (a block of a collective moved by the copy engines). A copy onto the
  // very bytes it reads (an in-place rank's own block) is none.
  static std::unique_ptr<CopyInFlight> copy_part(DeviceMemory& device, StagedOp* from,
                                                 const std::byte* from_host, uint64_t from_at,
                                                 StagedOp* to, std::byte* to_host, uint64_t to_at,
                                                 uint64_t bytes);
  // A direct send not yet matched that a later op of its process will overwrite: its input
  // is copied to the host now, and the send goes from there once matched, so the later op
  // waits only for that copy, never for the peer (a send to itself, or an in-place exchange,
  // would otherwise wait forever). Charged to `budget` (the caller checked the room for
  // snapshot_needs()). "" or why not.
  std::string snapshot_input(DeviceMemory& device, StagingBudget budget);
  // The host bytes snapshot_input would take now (0 when it would take none).
  uint64_t snapshot_needs() const {
    return !direct_ || matched_ || snapshot_ != nullptr ? 0 : read_bytes_;
  }
  // True the first time it is called: a refused copy aside (asked again as the op waits)
  // is logged once.
  bool first_refusal() { return !std::exchange(snapshot_refused_, true); }
  bool matched() const { return matched_; }
  bool has_snapshot() const { return snapshot_ != nullptr; }
  // Whether a later op may now write where this op reads: not a direct op, or a direct
  // send not matched whose snapshot is in.
  bool input_safe_to_overwrite();
  // A direct op turned into a staged one at once, its input copied in before this returns
  // (from its copy aside, if it has one): for a collective whose ranks' buffers cannot all
  // be reached by the device's kernel. *send / *recv as stage(); the host copies are
  // charged to `budget` (the caller checked the room). "" or why not.
  std::string stage_now(DeviceMemory& device, const shm::ValidatedEntry& entry,
                        const std::byte** send, std::byte** recv, StagingBudget budget);
  // Host bytes a copy aside holds now (released when stage_now lays the op out afresh).
  uint64_t snapshot_bytes() const { return snapshot_ != nullptr ? staged_bytes_ : 0; }
  // A direct op's GPU spans (null mapping where that side is not on a GPU).
  DeviceSpan device_input() const;
  DeviceSpan device_output() const;
  // A direct op handed to the device whole (a reduction kernel): its input is read from
  // now on, so later ops writing there wait for its end.
  void mark_matched() { matched_ = true; }
  // The host bytes stage() takes for `entry`.
  static uint64_t host_bytes_for(const shm::ValidatedEntry& entry);
  // Adds staged_bytes() to the budget's totals until this op is destroyed or charged
  // elsewhere (the op may outlive its bookkeeping while a link still sends from it).
  void charge_to(StagingBudget budget);
  ~StagedOp();
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
  // Starts copying the input in, in pieces of kInputPieceBytes in order, so that an op
  // between nodes can start on its first slices while the rest comes in (send_in_through).
  void start_input(DeviceMemory& device);
  static constexpr uint64_t kInputPieceBytes = 4u << 20;
  bool input_started() const { return input_started_; }
  // False while the input is not yet in; true once it is (or failed: *error, each time
  // it is asked).
  bool input_ready(std::string* error);
  // Whether the first `bytes` of the send span are in host memory; false with *error set
  // once a piece's copy failed.
  bool send_in_through(uint64_t bytes, std::string* error);
  // Whether the result (the receive span) goes back to a GPU by a copy of its own (a
  // direct op's result is written by copy_between).
  bool has_device_result() const { return recv_mapping_ != nullptr && !direct_; }
  // Copies [offset, offset + bytes) of the result (the receive span) back now: a slice of
  // an op between nodes, as soon as it is written. Ranges must not overlap; once they
  // cover the span, start_copy_back copies nothing more.
  void start_copy_back_part(DeviceMemory& device, uint64_t offset, uint64_t bytes);
  // Starts copying the result back (what start_copy_back_part has not); copied_back polls
  // it as input_ready does.
  void start_copy_back(DeviceMemory& device);
  bool copied_back(std::string* error);
  // Both at once, waiting: "" or why not.
  std::string copy_back(DeviceMemory& device);
  uint64_t staged_bytes() const { return staged_bytes_; }
  // Its place among its session's staged ops (later ops have larger ones).
  uint64_t order = 0;

 private:
  StagedOp() = default;
  // Takes the input pieces that have ended, in order (input_in_, copy_error_).
  void poll_input_pieces();
  // Host copies of the entry's GPU spans (mappings already held): the buffer and fields.
  bool lay_out(DeviceMemory& device, const shm::ValidatedEntry& entry, const std::byte** send,
               std::byte** recv, std::string* error);
  StagingBudget charged_to_;
  HostBuffer buffer_;
  uint64_t staged_bytes_ = 0;
  std::shared_ptr<DeviceMapping> recv_mapping_;  // null: the result is not on a GPU
  uint64_t recv_offset_ = 0;
  uint64_t recv_bytes_ = 0;
  const std::byte* recv_host_ = nullptr;
  std::shared_ptr<DeviceMapping> send_mapping_;  // kept mapped while the op runs
  // What is read from the device: [read_offset_, + read_bytes_) of read_region_.
  uint32_t read_region_ = 0;
  uint64_t read_offset_ = 0;
  uint64_t read_bytes_ = 0;
  std::byte* read_host_ = nullptr;
  uint64_t send_in_read_ = 0;  // where the send span starts in the read span
  uint32_t recv_region_ = 0;
  bool input_started_ = false;
  bool direct_ = false;
  bool matched_ = false;            // a direct op whose copy_between has started
  bool snapshot_refused_ = false;   // a copy aside was refused (logged once)
  std::byte* snapshot_ = nullptr;   // a direct send's input, copied to host (in buffer_)
  bool result_written_ = false;     // copied back (or never will be)
  std::string copy_error_;          // of the last copy that ended
  uint64_t input_in_ = 0;           // bytes of the read span in host memory (a prefix)
  uint64_t copied_back_early_ = 0;  // bytes of the result start_copy_back_part took
  // The copies running, if any. Last: destroyed first, they wait before the buffer is freed.
  struct Piece {
    uint64_t end;  // of the read span, once this piece is in
    std::unique_ptr<CopyInFlight> copy;
  };
  std::deque<Piece> input_pieces_;                          // in order
  std::vector<std::unique_ptr<CopyInFlight>> copies_back_;  // start_copy_back_part's
  std::unique_ptr<CopyInFlight> copy_;
};

}  // namespace plexus::daemon::gpu
