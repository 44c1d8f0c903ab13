// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1): libplexus and plexusd
// start and serve host buffers on machines with no GPU or driver, and the same binaries
// use a GPU where there is one. Only the entry points listed here are loaded, and none of
// them launches a kernel: a client's GPU costs no SM time through libplexus. plexusd's own
// reduction kernel (off by default) loads its entry points apart (daemon/gpu/cuda_kernel_driver.h).
// Compiled only when the CUDA toolkit's headers are present (PLEXUS_HAVE_CUDA).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>
#include <type_traits>

#include "common/result.h"

namespace plexus::shm {

// X(member, driver symbol, ABI version): every entry point Plexus uses, each asked of the
// driver at the CUDA version whose ABI its prototype in cuda.h has (the driver keeps the
// older versions of changed functions under the same name). cuda.h usually points a
// changed function's name at its newest version, but not always: CUDA 13's cuCtxGetDevice
// gained a context parameter as cuCtxGetDevice_v2, the plain name keeping the old
// prototype, and one asked for at CUDA_VERSION was called with a stray register for a
// context (a segfault inside the driver, seen on an H100). Loading checks each version
// against cudaTypedefs.h's PFN_<symbol>_v<version> at compile time.
#define PLEXUS_CUDA_DRIVER_ENTRY_POINTS(X)                                        \
  X(init, cuInit, 2000)                                                           \
  X(get_error_name, cuGetErrorName, 6000)                                         \
  X(get_error_string, cuGetErrorString, 6000)                                     \
  X(driver_get_version, cuDriverGetVersion, 2020)                                 \
  X(device_get_count, cuDeviceGetCount, 2000)                                     \
  X(device_get, cuDeviceGet, 2000)                                                \
  X(device_get_uuid, cuDeviceGetUuid, 11040)                                      \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain, 7000)                           \
  X(primary_ctx_release, cuDevicePrimaryCtxRelease, 11000)                        \
  X(ctx_set_current, cuCtxSetCurrent, 4000)                                       \
  X(ctx_get_current, cuCtxGetCurrent, 4000)                                       \
  X(ctx_get_device, cuCtxGetDevice, 2000)                                         \
  X(pointer_get_attributes, cuPointerGetAttributes, 7000)                         \
  X(mem_get_address_range, cuMemGetAddressRange, 3020)                            \
  X(ipc_get_mem_handle, cuIpcGetMemHandle, 4010)                                  \
  X(ipc_open_mem_handle, cuIpcOpenMemHandle, 11000)                               \
  X(ipc_close_mem_handle, cuIpcCloseMemHandle, 4010)                              \
  X(stream_create, cuStreamCreate, 2000)                                          \
  X(stream_create_with_priority, cuStreamCreateWithPriority, 5050)                \
  X(ctx_get_stream_priority_range, cuCtxGetStreamPriorityRange, 5050)             \
  X(stream_destroy, cuStreamDestroy, 4000)                                        \
  X(stream_synchronize, cuStreamSynchronize, 2000)                                \
  X(stream_is_capturing, cuStreamIsCapturing, 10000)                              \
  X(stream_write_value32, cuStreamWriteValue32, 11070)                            \
  X(stream_wait_value32, cuStreamWaitValue32, 11070)                              \
  X(event_create, cuEventCreate, 2000)                                            \
  X(event_record, cuEventRecord, 2000)                                            \
  X(event_query, cuEventQuery, 2000)                                              \
  X(event_synchronize, cuEventSynchronize, 2000)                                  \
  X(event_destroy, cuEventDestroy, 4000)                                          \
  X(memcpy_dtoh_async, cuMemcpyDtoHAsync, 3020)                                   \
  X(memcpy_htod_async, cuMemcpyHtoDAsync, 3020)                                   \
  X(memcpy_dtod_async, cuMemcpyDtoDAsync, 3020)                                   \
  X(mem_host_register, cuMemHostRegister, 6050)                                   \
  X(mem_host_unregister, cuMemHostUnregister, 4000)                               \
  X(mem_host_get_device_pointer, cuMemHostGetDevicePointer, 3020)                 \
  X(mem_alloc, cuMemAlloc, 3020)                                                  \
  X(mem_free, cuMemFree, 3020)                                                    \
  X(mem_retain_allocation_handle, cuMemRetainAllocationHandle, 11000)             \
  X(mem_get_allocation_properties, cuMemGetAllocationPropertiesFromHandle, 10020) \
  X(mem_export_to_shareable_handle, cuMemExportToShareableHandle, 10020)          \
  X(mem_import_from_shareable_handle, cuMemImportFromShareableHandle, 10020)      \
  X(mem_address_reserve, cuMemAddressReserve, 10020)                              \
  X(mem_address_free, cuMemAddressFree, 10020)                                    \
  X(mem_map, cuMemMap, 10020)                                                     \
  X(mem_unmap, cuMemUnmap, 10020)                                                 \
  X(mem_set_access, cuMemSetAccess, 10020)                                        \
  X(mem_release, cuMemRelease, 10020)                                             \
  X(mem_create, cuMemCreate, 10020)                                               \
  X(mem_get_allocation_granularity, cuMemGetAllocationGranularity, 10020)

// The driver's cuGetProcAddress_v2 from `library` (a dlopen handle of libcuda.so.1), or why
// not: the driver is older than CUDA 12.
using CudaGetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult*);
common::Result<CudaGetProcAddress> cuda_get_proc_address(void* library);
// Entry point `symbol` at the ABI of CUDA `version` (the X lists' third column), or a
// sentence naming it.
common::Result<void*> cuda_entry_point(CudaGetProcAddress get_proc, const char* symbol,
                                       int version);

// Loads one X(member, symbol, version) row into `d.member`, its version checked against
// cudaTypedefs.h's PFN_<symbol>_v<version> at compile time; on failure returns `out`, its
// `why` set. For the loaders of both tables (this one, plexusd's kernel table), whose load()
// holds `d`, `get_proc` and `out`. Used directly as the X argument: `symbol` must reach #
// and ## unexpanded (cuda.h defines cuDeviceGetUuid as cuDeviceGetUuid_v2, ...).
#define PLEXUS_CUDA_LOAD_ROW(member, symbol, version)                                \
  static_assert(std::is_same_v<decltype(&::symbol), PFN_##symbol##_v##version>,      \
                #symbol "'s prototype is not CUDA " #version "'s: fix its version"); \
  {                                                                                  \
    auto entry = ::plexus::shm::cuda_entry_point(get_proc, #symbol, version);        \
    if (!entry) {                                                                    \
      out.why = entry.error();                                                       \
      return out;                                                                    \
    }                                                                                \
    d.member = reinterpret_cast<decltype(d.member)>(*entry);                         \
  }

struct CudaDriver {
#define PLEXUS_CUDA_MEMBER(member, symbol, version) decltype(&::symbol) member = nullptr;
  PLEXUS_CUDA_DRIVER_ENTRY_POINTS(PLEXUS_CUDA_MEMBER)
#undef PLEXUS_CUDA_MEMBER

  // The process's driver, loaded and initialised on first use, or why there is none ("no
  // CUDA driver: libcuda.so.1: cannot open shared object file", "cuInit:
  // CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", ...).
  static common::Result<const CudaDriver*> get();
  // The driver only if this process has loaded it already (the application uses CUDA):
  // null otherwise, without loading or initialising it. What libplexus asks before
  // looking at a pointer: no device memory can exist in a process without the driver, and
  // initialising CUDA behind an application's back would break its later forks.
  static const CudaDriver* get_if_loaded();

  // "CUDA_ERROR_INVALID_VALUE (invalid argument)".
  std::string describe(CUresult result) const;
  // "" on success, else "<what>: <describe(result)>".
  std::string check(CUresult result, const char* what) const;
};

}  // namespace plexus::shm
