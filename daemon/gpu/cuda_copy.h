// One copy on the copy engines, seen from the engine thread: an event recorded after its
// last chunk on each stream it used, polled (never waited on) until all have completed.
// Private to daemon/gpu (cuda_device_memory.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/gpu/device_memory.h"
#include "shm/cuda_driver.h"

namespace plexus::daemon::gpu {

class CudaCopy final : public CopyInFlight {
 public:
  // `owner` keeps the context and streams alive while the copy lives.
  CudaCopy(std::shared_ptr<const DeviceMemory> owner, const shm::CudaDriver& driver,
           CUcontext context)
      : owner_(std::move(owner)), driver_(driver), context_(context) {}
  ~CudaCopy() override;
  CudaCopy(const CudaCopy&) = delete;
  CudaCopy& operator=(const CudaCopy&) = delete;

  // Records an event on `stream` after what is queued there: an error, or empty.
  std::string record(CUstream stream);
  // The copy failed (the first error wins).
  void fail(std::string error);
  common::Result<bool> done() override;
  std::string wait() override;

 private:
  std::shared_ptr<const DeviceMemory> owner_;
  const shm::CudaDriver& driver_;
  CUcontext context_;
  std::vector<CUevent> events_;
  size_t waited_ = 0;  // events before this one have completed
  bool finished_ = false;
  std::string error_;
};

}  // namespace plexus::daemon::gpu
