// Which GPU allocations this process has registered with the daemon, by base address.
// The driver's buffer id tells a live allocation from a freed one whose addresses were
// handed out again: a registration is only reused for the very allocation it was made
// for, and one that overlaps a new allocation is stale (its memory was freed) and is
// returned to be released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace plexus::client {

struct GpuAllocation {
  uint64_t buffer_id = 0;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: unique per allocation
  uint64_t base = 0;
  uint64_t bytes = 0;
};

class GpuRegistrationCache {
 public:
  // The region registered for `allocation`, or 0.
  uint32_t find(const GpuAllocation& allocation) const;
  // Records `region` for `allocation`; returns the regions of registrations it replaces
  // (ranges overlapping it: allocations freed since), which the caller releases.
  std::vector<uint32_t> insert(const GpuAllocation& allocation, uint32_t region);
  // Forgets the registration containing `address`; returns its region, or 0.
  uint32_t erase_containing(uint64_t address);
  size_t size() const { return by_base_.size(); }

 private:
  struct Entry {
    uint64_t buffer_id;
    uint64_t bytes;
    uint32_t region;
  };
  std::map<uint64_t, Entry> by_base_;
};

}  // namespace plexus::client
