// A session's registered GPU allocations: region id -> mapping. Ids start at 1 (0 is the
// host pool) and are never reused within a session, so an entry naming a released
// region is refused instead of reaching whatever was registered after it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "daemon/gpu/device_memory.h"
#include "shm/gpu_export.h"

namespace plexus::daemon::gpu {

class GpuRegions {
 public:
  // Maps `exported` and returns its new region id (never 0), or why not (the device refused
  // the handle, too many regions).
  common::Result<uint32_t> add(DeviceMemory& device, const shm::GpuExport& exported);
  // The same for an allocation mapped already (plexusd maps on its control thread, so that
  // the driver's time is not the engine's).
  common::Result<uint32_t> add_mapped(std::shared_ptr<DeviceMapping> mapping);
  // False when the session has no such region. Ops in flight keep their mapping.
  bool release(uint32_t region);
  // The region's size in bytes; 0 when there is no such region.
  uint64_t bytes(uint32_t region) const;
  std::shared_ptr<DeviceMapping> mapping(uint32_t region) const;
  size_t size() const { return regions_.size(); }
  void clear() { regions_.clear(); }

 private:
  std::unordered_map<uint32_t, std::shared_ptr<DeviceMapping>> regions_;
  uint32_t next_ = 1;
};

}  // namespace plexus::daemon::gpu
