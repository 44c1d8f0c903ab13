#include "daemon/gpu/host_copy.h"

#include <utility>

namespace plexus::daemon::gpu {

bool HostCopy::allocate(DeviceMemory& device, uint64_t bytes, std::string* error) {
  bytes_ = bytes;
  buffer_ = device.allocate_host(bytes, error);
  return buffer_ != nullptr;
}

void HostCopy::charge_to(StagingBudget budget) {
  for (const auto& total : {charged_to_.process, charged_to_.job}) {
    if (total) *total -= bytes_;
  }
  charged_to_ = std::move(budget);
  for (const auto& total : {charged_to_.process, charged_to_.job}) {
    if (total) *total += bytes_;
  }
}

void HostCopy::release() {
  charge_to({});
  buffer_.reset();
  bytes_ = 0;
}

}  // namespace plexus::daemon::gpu
