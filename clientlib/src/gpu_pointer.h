// What the CUDA driver says about a user pointer: device memory (and which allocation),
// or not. Implemented over the driver loaded at run time (gpu_pointer_cuda.cc), or, when
// built without CUDA, every pointer is host memory (gpu_pointer_none.cc).
#pragma once

#include <optional>
#include <string>

#include "clientlib/src/gpu_registration_cache.h"
#include "shm/gpu_export.h"

namespace plexus::client {

struct GpuPointer {
  GpuAllocation allocation;
};

// The allocation `ptr` is in when it is device memory; nullopt when it is host memory
// (or the process has not loaded the CUDA driver: it then has no device memory, and the
// driver is not loaded for the question). *error is set for device memory Plexus cannot take
// (managed memory).
std::optional<GpuPointer> query_gpu_pointer(const void* ptr, std::string* error);

// Exports `allocation` for the daemon: "" or why not.
std::string export_gpu_allocation(const GpuAllocation& allocation, shm::GpuExport* out);

}  // namespace plexus::client
