#include "daemon/gpu/gpu_regions.h"

namespace plexus::daemon::gpu {

uint32_t GpuRegions::add(DeviceMemory& device, const shm::GpuExport& exported, std::string* error) {
  if (exported.bytes == 0) {
    *error = "a GPU allocation of 0 bytes";
    return 0;
  }
  std::shared_ptr<DeviceMapping> mapping = device.open(exported, error);
  if (!mapping) return 0;
  return add_mapped(std::move(mapping), error);
}

uint32_t GpuRegions::add_mapped(std::shared_ptr<DeviceMapping> mapping, std::string* error) {
  if (regions_.size() >= shm::kMaxGpuRegionsPerSession) {
    *error = "the process already has " + std::to_string(regions_.size()) +
             " GPU allocations registered (the most a process may have)";
    return 0;
  }
  if (next_ == 0) {
    *error = "the process has used up its GPU region ids";
    return 0;
  }
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
