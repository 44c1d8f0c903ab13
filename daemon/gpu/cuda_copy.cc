#include "daemon/gpu/cuda_copy.h"

#include <utility>

namespace plexus::daemon::gpu {

CudaCopy::~CudaCopy() {
  if (!finished_) wait();
  driver_.ctx_set_current(context_);
  for (CUevent e : events_) driver_.event_destroy(e);
}

std::string CudaCopy::record(CUstream stream) {
  CUevent event = nullptr;
  std::string error =
      driver_.check(driver_.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  if (!error.empty()) return error;
  events_.push_back(event);
  return driver_.check(driver_.event_record(event, stream), "cuEventRecord");
}

void CudaCopy::fail(std::string error) {
  if (error_.empty()) error_ = std::move(error);
}

common::Result<bool> CudaCopy::done() {
  if (!finished_) {
    driver_.ctx_set_current(context_);
    for (; waited_ < events_.size(); ++waited_) {
      const CUresult r = driver_.event_query(events_[waited_]);
      if (r == CUDA_ERROR_NOT_READY) return false;
      fail(driver_.check(r, "copy engine (cuEventQuery)"));
    }
    finished_ = true;
  }
  if (!error_.empty()) return common::fail(error_);
  return true;
}

std::string CudaCopy::wait() {
  if (!finished_) {
    driver_.ctx_set_current(context_);
    for (; waited_ < events_.size(); ++waited_) {
      fail(driver_.check(driver_.event_synchronize(events_[waited_]),
                         "copy engine (cuEventSynchronize)"));
    }
    finished_ = true;
  }
  return error_;
}

}  // namespace plexus::daemon::gpu
