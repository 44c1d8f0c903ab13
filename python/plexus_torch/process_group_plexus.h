// torch.distributed's backend "plexus": each call becomes libplexus ops on one Plexus
// communicator (made from a unique id passed through torch's Store), submitted at once and
// completed by a progress thread; the returned Work waits, tests and carries a future.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plexus/plexus.h"
#include "python/plexus_torch/plexus_work.h"
#include "python/plexus_torch/progress.h"
#include "python/plexus_torch/torch_compat.h"

namespace plexus::torch_backend {

class ProcessGroupPlexus : public BackendBase {
 public:
  ProcessGroupPlexus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  // A group over a communicator made already (a shrink's or a growth's): no Store, no
  // rendezvous; it owns `comm`.
  ProcessGroupPlexus(plexus_comm_t comm, int rank, int size, std::chrono::milliseconds timeout);
  ~ProcessGroupPlexus() override;

  // process_group_recovery.cc. plexus_comm_revoke: every rank's pending and later work on this
  // group fails, naming this rank and `reason`.
  void revoke(const std::string& reason);
  // The group of the ranks not in `exclude`, renumbered densely (plexus_comm_shrink): every
  // rank not excluded calls it alike. `abort`: this group's work in flight ends first.
  c10::intrusive_ptr<ProcessGroupPlexus> shrink_group(const std::vector<int64_t>& exclude,
                                                      bool abort);
  // Parks the group's communicator (plexus_comm_suspend): once every rank of it on this node
  // did, plexusd lets the memory it keeps for it go; returns the bytes this call released.
  // Work on the group is refused until resume_comm().
  uint64_t suspend_comm();
  void resume_comm();
  // This group grown to `size` ranks (plexus_comm_grow); the new ranks join with grow_id()'s
  // bytes through join_growth().
  c10::intrusive_ptr<ProcessGroupPlexus> grow(int size);
  std::string grow_id();
  static c10::intrusive_ptr<ProcessGroupPlexus> join_growth(const std::string& id, int rank,
                                                            int size,
                                                            std::chrono::milliseconds timeout);

  const std::string getBackendName() const override { return "plexus"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

#if PLEXUS_TORCH_TENSOR_COALESCED
  // process_group_coalesced.cc: one allgather (reduce-scatter) a pair, all in one libplexus
  // group, as torch's _coalescing_manager hands them over.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
#endif
#if PLEXUS_TORCH_SHRINK
  // torch.distributed.shrink_group: SHRINK_DEFAULT (0) or SHRINK_ABORT (1), NCCL's values;
  // the new group keeps this one's timeout (there are no other options to override).
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
      const c10::intrusive_ptr<Options>& opts_override) override;
#endif
#if PLEXUS_TORCH_SUSPEND
  // torch's memory offload API: suspend_comm() and resume_comm().
  void suspend() override;
  void resume() override;
#endif

 private:
  // Builds a work: `issue` makes the libplexus calls (through the helpers below), all in
  // one libplexus group, and the work goes to the progress thread.
  c10::intrusive_ptr<c10d::Work> run(const char* name, c10d::OpType type,
                                     std::vector<at::Tensor> outputs,
                                     const std::function<void(PlexusWork&, plexus_comm_t)>& issue);
  // One libplexus call's request into the work (its refusal becomes the work's error).
  static void add(PlexusWork& work, plexus_result_t result, const plexus_request_t& request);
  // A contiguous tensor with t's values whose result is copied back into t on success.
  static at::Tensor writable(PlexusWork& work, const at::Tensor& t);
  // A contiguous tensor with t's values for the daemon to read.
  static at::Tensor readable(PlexusWork& work, const at::Tensor& t);
  // One allgather of `input` into `output` (size times its elements) and one reduce-scatter
  // of `input` (size times the output's elements) into `output`, checked and issued into w.
  void check_gather_pair(const at::Tensor& output, const at::Tensor& input, const char* what) const;
  void check_scatter_pair(const at::Tensor& output, const at::Tensor& input,
                          const char* what) const;
  static void issue_allgather(PlexusWork& w, plexus_comm_t c, const at::Tensor& output,
                              const at::Tensor& input);
  static void issue_reduce_scatter(PlexusWork& w, plexus_comm_t c, const at::Tensor& output,
                                   const at::Tensor& input, plexus_redop_t op);
  void check_rank(int rank, const char* what) const;
  // recv and recvAnysource (src PLEXUS_ANY_SOURCE): the work's sourceRank is the sender.
  c10::intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor>& tensors, int src, int tag,
                                         const char* call);
  // The progress thread, whose watchdog aborts the communicator when a work times out.
  void start_progress();
  // The communicator while `held` (a lock of comm_mutex_) is, or an error naming `what` once
  // the watchdog aborted it.
  plexus_comm_t live_comm(const std::unique_lock<std::mutex>& held, const char* what) const;

  std::chrono::milliseconds timeout_;
  std::mutex comm_mutex_;
  plexus_comm_t comm_ = nullptr;  // null once aborted after a timeout
  std::unique_ptr<Progress> progress_;
};

}  // namespace plexus::torch_backend
