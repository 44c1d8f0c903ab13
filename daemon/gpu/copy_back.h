// A staged op's result copied from its host copy back to the GPU by the copy engines:
// parts of it as soon as they are written (the slices of an op between nodes), then the
// whole span unless the parts covered it. Owns the copies in flight, their first error,
// and whether the result is written (later ops on the same memory wait until then); the
// op owns the host memory. Engine thread, which polls the copies rather than waits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/gpu/device_memory.h"

namespace plexus::daemon::gpu {

class CopyBack {
 public:
  // Where the result goes: [offset, offset + bytes) of `mapping`, from `host`. Never aimed
  // (a result not on a GPU): nothing is copied.
  void aim(std::shared_ptr<DeviceMapping> mapping, uint64_t offset, const std::byte* host,
           uint64_t bytes);
  // Copies [offset, offset + bytes) of the result back now. Ranges must not overlap; once
  // they cover the span, start copies nothing more.
  void start_part(DeviceMemory& device, uint64_t offset, uint64_t bytes);
  // Starts copying the result back (what start_part has not); done polls it.
  void start(DeviceMemory& device);
  // False while a copy runs; true once all ended well; the first failure once all ended.
  common::Result<bool> done();
  // start and done at once, waiting: "" or why not.
  std::string wait(DeviceMemory& device);
  // Whether the result is on the device (or never will be).
  bool written() const { return written_; }

 private:
  std::shared_ptr<DeviceMapping> mapping_;  // null: nothing to copy
  uint64_t offset_ = 0;
  const std::byte* host_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t copied_early_ = 0;  // bytes start_part took
  bool written_ = false;
  std::string error_;
  std::vector<std::unique_ptr<CopyInFlight>> parts_;  // start_part's
  std::unique_ptr<CopyInFlight> copy_;                // start's
};

}  // namespace plexus::daemon::gpu
