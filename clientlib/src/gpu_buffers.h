// Device pointers handed to collectives: each allocation is exported once and registered
// with the daemon once; the entry then names its region and the offset within it.
// Thread-safe (one registration at a time).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "clientlib/control/control_channel.h"
#include "clientlib/src/gpu_registration_cache.h"
#include "common/result.h"

namespace plexus::client {

struct GpuSpan {
  uint32_t region = 0;
  uint64_t offset = 0;
};

class GpuBuffers {
 public:
  // Where [ptr, ptr + bytes) is for the daemon when it is device memory, registering its
  // allocation first if needed; nullopt when it is host memory. A failure for device
  // memory that cannot be used: a span running past its allocation, managed memory, a
  // registration the daemon refused.
  common::Result<std::optional<GpuSpan>> locate(ControlChannel& control, const void* ptr,
                                                uint64_t bytes);
  // Releases the registration of the allocation containing ptr: false if there is none.
  bool forget(ControlChannel& control, const void* ptr);

 private:
  // The region the daemon gave the allocation, or why not.
  common::Result<uint32_t> register_allocation(ControlChannel& control,
                                               const GpuAllocation& allocation);
  void release(ControlChannel& control, uint32_t region);

  std::mutex mutex_;
  GpuRegistrationCache cache_;
};

}  // namespace plexus::client
