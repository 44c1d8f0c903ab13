// NCCL's version, error strings, memory and buffer registration.
#include <nccl.h>

#include <mutex>
#include <set>
#include <string>

#include "clientlib/nccl/src/nccl_cuda.h"
#include "clientlib/nccl/src/nccl_errors.h"
#include "plexus/plexus.h"

using namespace plexus::nccl;  // NOLINT: the C entry points below

NCCL_API ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the Plexus developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclNumResults:
      break;
  }
  return "unknown result code";
}

// ncclMemAlloc: device memory for a thread that uses a GPU (as NCCL's), else the shared
// pool, which host-ordered calls use without a copy.
NCCL_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  int device = 0;
  if (current_device(&device)) {
    const plexus::common::Result<void*> allocated = device_alloc(size);
    if (!allocated) {
      return fail(ncclUnhandledCudaError,
                  "ncclMemAlloc on device " + std::to_string(device) + ": " + allocated.error());
    }
    *ptr = *allocated;
    return ncclSuccess;
  }
  if (plexus_result_t r = plexus_alloc(ptr, size); r != PLEXUS_SUCCESS) {
    return fail_plexus(r, "ncclMemAlloc of " + std::to_string(size) + " bytes");
  }
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  if (plexus_free(ptr) == PLEXUS_SUCCESS) return ncclSuccess;
  const std::string pool_error = plexus_get_last_error();
  if (driver_loaded()) {
    // plexusd lets go of its mapping first: once freed, a new allocation may take the
    // addresses (plexus.h).
    plexus_gpu_forget(ptr);
    if (std::string e = device_free(ptr); e.empty()) return ncclSuccess;
  }
  return fail(ncclInvalidArgument, "ncclMemFree: " + pool_error);
}

// Registration: Plexus maps a buffer the first time an op uses it, so registering is only
// remembered (a handle to give back) and deregistering forgets it.
namespace {
std::mutex g_registered_mutex;
std::set<void*> g_registered;
}  // namespace

NCCL_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                       void** handle) {
  if (comm == nullptr || handle == nullptr || (buff == nullptr && size > 0)) {
    return fail(ncclInvalidArgument, "ncclCommRegister: comm, buff or handle is NULL");
  }
  auto* h = new char(0);
  std::lock_guard lock(g_registered_mutex);
  g_registered.insert(h);
  *handle = h;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  std::lock_guard lock(g_registered_mutex);
  if (comm == nullptr || g_registered.erase(handle) == 0) {
    return fail(ncclInvalidArgument,
                "ncclCommDeregister: comm is NULL or the handle is not from ncclCommRegister");
  }
  delete static_cast<char*>(handle);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommWindowRegister(ncclComm_t /*comm*/, void* /*buff*/, size_t /*size*/,
                                             ncclWindow_t* win, int /*winFlags*/) {
  if (win != nullptr) *win = nullptr;
  return fail(ncclInvalidUsage,
              "ncclCommWindowRegister is not supported by Plexus: symmetric windows serve NCCL's "
              "own kernels, and Plexus runs none in this process");
}

NCCL_API ncclResult_t ncclCommWindowDeregister(ncclComm_t /*comm*/, ncclWindow_t /*win*/) {
  return fail(ncclInvalidUsage, "ncclCommWindowDeregister: Plexus registers no windows");
}

// Deprecated in NCCL, declared by its header: NCCL re-reads its debug settings. Plexus has
// none to re-read.
NCCL_API void ncclResetDebugInit(void) {}

// Exported by NVIDIA's library beside it (no header declares it): the same, for a program
// linked against NVIDIA's that names it.
NCCL_API void ncclResetDebugInitInternal(void) {}
