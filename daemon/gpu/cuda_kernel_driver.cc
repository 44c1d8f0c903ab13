#include "daemon/gpu/cuda_kernel_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "shm/cuda_driver.h"

namespace plexus::daemon::gpu {
namespace {

struct Loaded {
  CudaKernelDriver driver;
  std::string why;
};

Loaded load() {
  Loaded out;
  // RTLD_NOLOAD: the driver shm::CudaDriver loaded (and initialised), never a second copy.
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) {
    out.why = "the CUDA driver is not loaded";
    return out;
  }
  const common::Result<shm::CudaGetProcAddress> found = shm::cuda_get_proc_address(library);
  if (!found) {
    out.why = found.error();
    return out;
  }
  const shm::CudaGetProcAddress get_proc = *found;
  CudaKernelDriver& d = out.driver;
  PLEXUS_CUDA_KERNEL_ENTRY_POINTS(PLEXUS_CUDA_LOAD_ROW)
  return out;
}

}  // namespace

common::Result<const CudaKernelDriver*> CudaKernelDriver::get() {
  static std::once_flag once;
  static Loaded* loaded = nullptr;  // leaked: used until exit
  std::call_once(once, [] { loaded = new Loaded(load()); });
  if (!loaded->why.empty()) return common::fail(loaded->why);
  return &loaded->driver;
}

}  // namespace plexus::daemon::gpu
