// The Work object of one torch.distributed call: the libplexus requests it waits for, the
// copies that put results where torch wants them, and a future that completes with the
// output tensors (what DDP's communication hooks chain on).
#pragma once

#include <ATen/core/ivalue.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "plexus/plexus.h"
#include "python/plexus_torch/torch_compat.h"

namespace plexus::torch_backend {

class PlexusWork : public c10d::Work {
 public:
  using Clock = std::chrono::steady_clock;

  // `what` names the call and this rank ("allreduce on rank 2 of 4") in every error.
  PlexusWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
             Clock::time_point deadline);

  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  // The rank a completed recv received from (torch's recvAnysource).
  int sourceRank() const override;

  // Built by the process group before the work is queued:
  std::vector<plexus_request_t> requests;         // all must complete
  std::vector<std::function<void()>> on_success;  // results into the caller's tensors
  std::vector<at::Tensor> keep;                   // buffers the daemon reads or writes
  std::string submit_error;                       // a call libplexus refused at submission
  int source_rank = -1;  // a recv's sender, written by libplexus when it completes

  const std::string& what() const { return what_; }
  Clock::time_point deadline() const { return deadline_; }
  // Called once, by the progress thread: runs on_success (when `error` is empty) and
  // completes the work and its future.
  void complete(const std::string& error);

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  Clock::time_point deadline_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace plexus::torch_backend
