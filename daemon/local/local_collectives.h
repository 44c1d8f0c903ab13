// Single-node collectives over the ranks' mapped buffers. Each collective becomes a
// short list of copy and reduce tasks that read every input once and write every
// output once; large tasks are cut into chunks the worker pool shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "daemon/local/contribution.h"
#include "daemon/local/worker_pool.h"
#include "plexus/plexus_types.h"
#include "shm/ring_layout.h"

namespace plexus::daemon {

struct CollectiveArgs {
  shm::Opcode opcode{};
  plexus_dtype_t dtype{};
  plexus_redop_t redop{};
  uint64_t count = 0;
  int root = 0;
};

class LocalExecutor {
 public:
  LocalExecutor(WorkerPool& pool, size_t parallel_threshold_bytes);

  // `fn` is called between slices of at least `slice_bytes` of a run() that may be cut (a
  // bulk or background job's op), so that the caller can serve more urgent work meanwhile;
  // an op is cut only while `wanted()` says there may be some (cutting costs the pool's
  // threads a wake-up per slice). `fn` may call run() again: that run goes whole, on an
  // executor of its own.
  void set_between_slices(std::function<void()> fn, size_t slice_bytes,
                          std::function<bool()> wanted);
  // A config reload's new thresholds (plexusd --parallel-threshold, --local-slice-bytes),
  // for the ops run from now on.
  void set_thresholds(size_t parallel_threshold_bytes, size_t slice_bytes);

  // Runs a collective whose parts (one per rank, in rank order) are all present and
  // agree on args. Returns the bytes written to receive buffers. `may_slice`: the work may
  // be cut in slices with the between-slices call after each.
  uint64_t run(const CollectiveArgs& args, std::span<const Contribution> parts,
               bool may_slice = false);
  // A matched send/recv pair.
  uint64_t copy(std::byte* dst, const std::byte* src, size_t bytes);

 private:
  struct CopyTask {
    std::byte* dst;
    const std::byte* src;
    size_t bytes;
  };
  struct ReduceTask {
    uint32_t first_input;   // into inputs_
    uint32_t first_output;  // into outputs_
    uint32_t num_outputs;
    size_t count;
  };
  struct WorkItem {
    bool is_reduce;
    uint32_t task;
    size_t begin;  // bytes (copy) or elements (reduce)
    size_t end;
  };

  void plan(const CollectiveArgs& args, std::span<const Contribution> parts);
  void add_copy(std::byte* dst, const std::byte* src, size_t bytes);
  void execute(const CollectiveArgs& args, bool may_slice);
  size_t item_bytes(const WorkItem& item, size_t elem) const;
  void run_item(const CollectiveArgs& args, const WorkItem& item);

  WorkerPool& pool_;
  size_t parallel_threshold_bytes_;
  int k_ = 0;  // inputs per reduce task (the comm's size)
  std::vector<CopyTask> copies_;
  std::vector<ReduceTask> reduces_;
  std::vector<const std::byte*> inputs_;
  std::vector<std::byte*> outputs_;
  std::vector<WorkItem> items_;
  std::vector<std::byte> scratch_;  // in-place alltoall snapshots
  uint64_t bytes_written_ = 0;
  std::function<void()> between_slices_;
  std::function<bool()> slices_wanted_;
  size_t slice_bytes_ = 0;
  bool running_ = false;
  // Runs what the between-slices call starts while this one is mid-op (its plan is kept).
  std::unique_ptr<LocalExecutor> nested_;
};

}  // namespace plexus::daemon
