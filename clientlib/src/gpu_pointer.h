// What the CUDA driver says about a user pointer: device memory (and which allocation),
// or not. Implemented over the driver loaded at run time (gpu_pointer_cuda.cc), or, when
// built without CUDA, every pointer is host memory (gpu_pointer_none.cc).
#pragma once

#include <optional>
#include <string>

#include "clientlib/src/gpu_registration_cache.h"
#include "common/result.h"
#include "shm/gpu_export.h"

namespace plexus::client {

struct GpuPointer {
  GpuAllocation allocation;
};

// The allocation `ptr` is in when it is device memory; nullopt when it is host memory
// (or the process has not loaded the CUDA driver: it then has no device memory, and the
// driver is not loaded for the question). A failure for device memory Plexus cannot take
// (managed memory).
common::Result<std::optional<GpuPointer>> query_gpu_pointer(const void* ptr);

// `allocation` exported for the daemon, or why not.
common::Result<shm::GpuExport> export_gpu_allocation(const GpuAllocation& allocation);

}  // namespace plexus::client
