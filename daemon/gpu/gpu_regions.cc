#include "daemon/gpu/gpu_regions.h"

namespace plexus::daemon::gpu {

common::Result<uint32_t> GpuRegions::add(DeviceMemory& device, const shm::GpuExport& exported) {
  if (exported.bytes == 0) return common::fail("a GPU allocation of 0 bytes");
  common::Result<std::shared_ptr<DeviceMapping>> mapping = device.open(exported);
  if (!mapping.ok()) return common::fail(mapping.error());
  return add_mapped(mapping.take());
}

common::Result<uint32_t> GpuRegions::add_mapped(std::shared_ptr<DeviceMapping> mapping) {
  if (regions_.size() >= shm::kMaxGpuRegionsPerSession) {
    return common::fail("the process already has " + std::to_string(regions_.size()) +
                        " GPU allocations registered (the most a process may have)");
  }
  if (next_ == 0) return common::fail("the process has used up its GPU region ids");
  const uint32_t id = next_++;
  regions_.emplace(id, std::move(mapping));
  return id;
}

bool GpuRegions::release(uint32_t region) { return regions_.erase(region) > 0; }

uint64_t GpuRegions::bytes(uint32_t region) const {
  auto it = regions_.find(region);
  return it == regions_.end() ? 0 : it->second->bytes();
}

std::shared_ptr<DeviceMapping> GpuRegions::mapping(uint32_t region) const {
  auto it = regions_.find(region);
  return it == regions_.end() ? nullptr : it->second;
}

}  // namespace plexus::daemon::gpu
