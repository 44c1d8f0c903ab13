#include "clientlib/src/gpu_registration_cache.h"

#include <iterator>

namespace plexus::client {

uint32_t GpuRegistrationCache::find(const GpuAllocation& allocation) const {
  auto it = by_base_.find(allocation.base);
  if (it == by_base_.end()) return 0;
  const Entry& e = it->second;
  return e.buffer_id == allocation.buffer_id && e.bytes == allocation.bytes ? e.region : 0;
}

std::vector<uint32_t> GpuRegistrationCache::insert(const GpuAllocation& allocation,
                                                   uint32_t region) {
  std::vector<uint32_t> stale;
  const uint64_t end = allocation.base + allocation.bytes;
  // The first entry that may overlap starts before `end` and ends after `base`.
  auto it = by_base_.lower_bound(allocation.base);
  if (it != by_base_.begin()) {
    auto before = std::prev(it);
    if (before->first + before->second.bytes > allocation.base) it = before;
  }
  while (it != by_base_.end() && it->first < end) {
    stale.push_back(it->second.region);
    it = by_base_.erase(it);
  }
  by_base_[allocation.base] = Entry{allocation.buffer_id, allocation.bytes, region};
  return stale;
}

uint32_t GpuRegistrationCache::erase_containing(uint64_t address) {
  auto it = by_base_.upper_bound(address);
  if (it == by_base_.begin()) return 0;
  --it;
  if (address >= it->first + it->second.bytes) return 0;
  const uint32_t region = it->second.region;
  by_base_.erase(it);
  return region;
}

}  // namespace plexus::client
