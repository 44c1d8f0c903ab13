#include "python/plexus_torch/plexus_work.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <stdexcept>
#include <utility>

namespace plexus::torch_backend {

PlexusWork::PlexusWork(int rank, c10d::OpType type, std::string what,
                       std::vector<at::Tensor> outputs, Clock::time_point deadline)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      deadline_(deadline),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void PlexusWork::complete(const std::string& error) {
  std::string failure = error;
  if (failure.empty()) {
    try {
      for (auto& fn : on_success) fn();
    } catch (const std::exception& e) {
      failure = std::string("copying the result out failed: ") + e.what();
    }
  }
  keep.clear();
  on_success.clear();
  if (failure.empty()) {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
    return;
  }
  auto exception =
      std::make_exception_ptr(std::runtime_error("ProcessGroupPlexus: " + what_ + ": " + failure));
  finish(exception);
  future_->setError(exception);
}

int PlexusWork::sourceRank() const {
  TORCH_CHECK(source_rank >= 0, "ProcessGroupPlexus: ", what_,
              ": the source rank is known only for a recv that completed");
  return source_rank;
}

bool PlexusWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  // Without a timeout of its own the call waits for the process group's: the watchdog
  // fails it then (and aborts the communicator, as NCCL's does).
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    TORCH_CHECK(false, "ProcessGroupPlexus: ", what_, " did not complete within ", timeout.count(),
                " ms (the wait's timeout)");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

}  // namespace plexus::torch_backend
