#include "daemon/gpu/cuda_kernel_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace plexus::daemon::gpu {
namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

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
  auto get_proc = reinterpret_cast<GetProcAddress>(::dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    out.why = "the CUDA driver is older than CUDA 12 (no cuGetProcAddress_v2)";
    return out;
  }
  CudaKernelDriver& d = out.driver;
#define PLEXUS_CUDA_KERNEL_LOAD(member, symbol)                                                \
  {                                                                                            \
    void* fn = nullptr;                                                                        \
    CUdriverProcAddressQueryResult found{};                                                    \
    if (get_proc(#symbol, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=           \
            CUDA_SUCCESS ||                                                                    \
        fn == nullptr) {                                                                       \
      out.why = "the CUDA driver has no " #symbol " for CUDA " + std::to_string(CUDA_VERSION); \
      return out;                                                                              \
    }                                                                                          \
    d.member = reinterpret_cast<decltype(d.member)>(fn);                                       \
  }
  PLEXUS_CUDA_KERNEL_ENTRY_POINTS(PLEXUS_CUDA_KERNEL_LOAD)
#undef PLEXUS_CUDA_KERNEL_LOAD
  return out;
}

}  // namespace

const CudaKernelDriver* CudaKernelDriver::get(std::string* why) {
  static std::once_flag once;
  static Loaded* loaded = nullptr;  // leaked: used until exit
  std::call_once(once, [] { loaded = new Loaded(load()); });
  if (!loaded->why.empty()) {
    if (why != nullptr) *why = loaded->why;
    return nullptr;
  }
  return &loaded->driver;
}

}  // namespace plexus::daemon::gpu
