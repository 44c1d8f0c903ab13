// Built without CUDA: no pointer is device memory.
#include "clientlib/src/gpu_pointer.h"

namespace plexus::client {

std::optional<GpuPointer> query_gpu_pointer(const void*, std::string*) { return std::nullopt; }

std::string export_gpu_allocation(const GpuAllocation&, shm::GpuExport*) {
  return "libplexus was built without CUDA";
}

}  // namespace plexus::client
