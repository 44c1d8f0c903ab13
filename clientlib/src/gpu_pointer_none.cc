// Built without CUDA: no pointer is device memory.
#include "clientlib/src/gpu_pointer.h"

namespace plexus::client {

common::Result<std::optional<GpuPointer>> query_gpu_pointer(const void*) { return {std::nullopt}; }

common::Result<shm::GpuExport> export_gpu_allocation(const GpuAllocation&) {
  return common::fail("libplexus was built without CUDA");
}

}  // namespace plexus::client
