#include "daemon/gpu/host_copy.h"

#include <utility>

namespace plexus::daemon::gpu {

std::string HostCopy::allocate(DeviceMemory& device, uint64_t bytes) {
  bytes_ = bytes;
  common::Result<HostBuffer> buffer = device.allocate_host(bytes);
  if (!buffer.ok()) return buffer.error();
  buffer_ = buffer.take();
  return {};
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
