// Host memory an op's GPU spans are copied through (a staged op's host copy, or a direct
// send's copy aside), and its charge to the staging budgets: its bytes count against its
// process's and its job's totals for as long as it is held. Owns the buffer and the charge.
// Engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/gpu/device_memory.h"

namespace plexus::daemon::gpu {

// The totals an op's host copies are charged to while it lives: its process's and its
// job's staging budgets (either may be null).
struct StagingBudget {
  std::shared_ptr<uint64_t> process;
  std::shared_ptr<uint64_t> job;
};

class HostCopy {
 public:
  HostCopy() = default;
  HostCopy(const HostCopy&) = delete;
  HostCopy& operator=(const HostCopy&) = delete;
  ~HostCopy() { release(); }

  // Takes `bytes` of host memory (holding none before): "" or why it cannot be had.
  [[nodiscard]] std::string allocate(DeviceMemory& device, uint64_t bytes);
  // Adds bytes() to the budget's totals until released or charged elsewhere.
  void charge_to(StagingBudget budget);
  // Frees the memory and gives its charge back.
  void release();
  std::byte* data() const { return buffer_.get(); }
  uint64_t bytes() const { return bytes_; }

 private:
  HostBuffer buffer_;
  uint64_t bytes_ = 0;
  StagingBudget charged_to_;
};

}  // namespace plexus::daemon::gpu
