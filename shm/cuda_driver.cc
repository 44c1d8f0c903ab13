// Loading the driver: dlopen, then cuGetProcAddress for each entry point at the ABI version
// its prototype in cuda.h has (the driver keeps older versions of changed functions under
// the same name).
#include "shm/cuda_driver.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace plexus::shm {
namespace {

struct Loaded {
  CudaDriver driver;
  std::string why;  // non-empty: no driver
};

Loaded load() {
  Loaded out;
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = ::dlerror();
    out.why = std::string("no CUDA driver: ") + (error != nullptr ? error : "libcuda.so.1");
    return out;
  }
  // Never dlclosed: the driver stays for the life of the process.
  const common::Result<CudaGetProcAddress> found = cuda_get_proc_address(library);
  if (!found) {
    out.why = found.error();
    return out;
  }
  const CudaGetProcAddress get_proc = *found;
  CudaDriver& d = out.driver;
  PLEXUS_CUDA_DRIVER_ENTRY_POINTS(PLEXUS_CUDA_LOAD_ROW)
  out.why = d.check(d.init(0), "cuInit");
  if (out.why.empty()) {
    int devices = 0;
    out.why = d.check(d.device_get_count(&devices), "cuDeviceGetCount");
    if (out.why.empty() && devices == 0) out.why = "the CUDA driver sees no device";
  }
  return out;
}

}  // namespace

common::Result<CudaGetProcAddress> cuda_get_proc_address(void* library) {
  auto get_proc = reinterpret_cast<CudaGetProcAddress>(::dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr)
    return common::fail("the CUDA driver is older than CUDA 12 (no cuGetProcAddress_v2)");
  return get_proc;
}

common::Result<void*> cuda_entry_point(CudaGetProcAddress get_proc, const char* symbol,
                                       int version) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found{};
  if (get_proc(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
      fn == nullptr) {
    return common::fail(std::string("the CUDA driver has no ") + symbol + " for CUDA " +
                        std::to_string(version));
  }
  return fn;
}

common::Result<const CudaDriver*> CudaDriver::get() {
  static std::once_flag once;
  static Loaded* loaded = nullptr;  // leaked: used until exit, from any thread
  std::call_once(once, [] { loaded = new Loaded(load()); });
  if (!loaded->why.empty()) return common::fail(loaded->why);
  return &loaded->driver;
}

namespace {

// Whether libcuda.so.1 is among the loaded objects. Walks the loader's list in memory:
// dlopen("libcuda.so.1", RTLD_NOLOAD), asked on every call with a host buffer, searched the
// library path on disk each time it was absent (five failed openat and a map of ld.so.cache
// per call, a quarter of a 1 MiB allreduce's time).
bool cuda_driver_in_process() {
  return ::dl_iterate_phdr(
             [](dl_phdr_info* info, size_t, void*) -> int {
               const char* name = info->dlpi_name;
               if (name == nullptr) return 0;
               const char* base = std::strrchr(name, '/');
               base = base != nullptr ? base + 1 : name;
               return std::strncmp(base, "libcuda.so", 10) == 0 ? 1 : 0;
             },
             nullptr) != 0;
}

}  // namespace

const CudaDriver* CudaDriver::get_if_loaded() {
  static std::atomic<bool> loaded{false};
  if (!loaded.load(std::memory_order_acquire)) {
    if (!cuda_driver_in_process()) return nullptr;
    loaded.store(true, std::memory_order_release);
  }
  const common::Result<const CudaDriver*> driver = get();
  return driver ? *driver : nullptr;
}

std::string CudaDriver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (get_error_name == nullptr || get_error_name(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (get_error_string == nullptr || get_error_string(result, &text) != CUDA_SUCCESS)
    text = nullptr;
  std::string out = name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(result));
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

std::string CudaDriver::check(CUresult result, const char* what) const {
  if (result == CUDA_SUCCESS) return {};
  return std::string(what) + ": " + describe(result);
}

}  // namespace plexus::shm
