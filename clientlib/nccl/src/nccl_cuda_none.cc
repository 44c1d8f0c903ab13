// Built without CUDA: no process has device memory or streams.
#include "clientlib/nccl/src/nccl_cuda.h"

namespace plexus::nccl {

bool driver_loaded() { return false; }
bool current_device(int* /*device*/) { return false; }
common::Result<void*> device_alloc(size_t /*bytes*/) {
  return common::fail("this libnccl.so.2 was built without CUDA");
}
std::string device_free(void* /*ptr*/) { return "this libnccl.so.2 was built without CUDA"; }
std::string stream_synchronize(void* /*stream*/) { return {}; }

}  // namespace plexus::nccl
