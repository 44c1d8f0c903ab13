// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1): libplexus and plexusd
// start and serve host buffers on machines with no GPU or driver, and the same binaries
// use a GPU where there is one. Only the entry points listed here are loaded, and none of
// them launches a kernel: a client's GPU costs no SM time through Plexus.
// Compiled only when the CUDA toolkit's headers are present (PLEXUS_HAVE_CUDA).
#pragma once

#include <cuda.h>

#include <string>

namespace plexus::shm {

// X(member, driver symbol): every entry point Plexus uses.
#define PLEXUS_CUDA_DRIVER_ENTRY_POINTS(X)                                 \
  X(init, cuInit)                                                          \
  X(get_error_name, cuGetErrorName)                                        \
  X(get_error_string, cuGetErrorString)                                    \
  X(driver_get_version, cuDriverGetVersion)                                \
  X(device_get_count, cuDeviceGetCount)                                    \
  X(device_get, cuDeviceGet)                                               \
  X(device_get_uuid, cuDeviceGetUuid)                                      \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain)                          \
  X(primary_ctx_release, cuDevicePrimaryCtxRelease)                        \
  X(ctx_set_current, cuCtxSetCurrent)                                      \
  X(ctx_get_current, cuCtxGetCurrent)                                      \
  X(ctx_get_device, cuCtxGetDevice)                                        \
  X(pointer_get_attributes, cuPointerGetAttributes)                        \
  X(mem_get_address_range, cuMemGetAddressRange)                           \
  X(ipc_get_mem_handle, cuIpcGetMemHandle)                                 \
  X(ipc_open_mem_handle, cuIpcOpenMemHandle)                               \
  X(ipc_close_mem_handle, cuIpcCloseMemHandle)                             \
  X(stream_create, cuStreamCreate)                                         \
  X(stream_create_with_priority, cuStreamCreateWithPriority)               \
  X(ctx_get_stream_priority_range, cuCtxGetStreamPriorityRange)            \
  X(stream_destroy, cuStreamDestroy)                                       \
  X(stream_synchronize, cuStreamSynchronize)                               \
  X(stream_is_capturing, cuStreamIsCapturing)                              \
  X(stream_write_value32, cuStreamWriteValue32)                            \
  X(stream_wait_value32, cuStreamWaitValue32)                              \
  X(event_create, cuEventCreate)                                           \
  X(event_record, cuEventRecord)                                           \
  X(event_query, cuEventQuery)                                             \
  X(event_synchronize, cuEventSynchronize)                                 \
  X(event_destroy, cuEventDestroy)                                         \
  X(memcpy_dtoh_async, cuMemcpyDtoHAsync)                                  \
  X(memcpy_htod_async, cuMemcpyHtoDAsync)                                  \
  X(memcpy_dtod_async, cuMemcpyDtoDAsync)                                  \
  X(mem_host_register, cuMemHostRegister)                                  \
  X(mem_host_unregister, cuMemHostUnregister)                              \
  X(mem_host_get_device_pointer, cuMemHostGetDevicePointer)                \
  X(mem_alloc, cuMemAlloc)                                                 \
  X(mem_free, cuMemFree)                                                   \
  X(mem_retain_allocation_handle, cuMemRetainAllocationHandle)             \
  X(mem_get_allocation_properties, cuMemGetAllocationPropertiesFromHandle) \
  X(mem_export_to_shareable_handle, cuMemExportToShareableHandle)          \
  X(mem_import_from_shareable_handle, cuMemImportFromShareableHandle)      \
  X(mem_address_reserve, cuMemAddressReserve)                              \
  X(mem_address_free, cuMemAddressFree)                                    \
  X(mem_map, cuMemMap)                                                     \
  X(mem_unmap, cuMemUnmap)                                                 \
  X(mem_set_access, cuMemSetAccess)                                        \
  X(mem_release, cuMemRelease)                                             \
  X(mem_create, cuMemCreate)                                               \
  X(mem_get_allocation_granularity, cuMemGetAllocationGranularity)

// The driver's cuGetProcAddress_v2 from `library` (a dlopen handle of libcuda.so.1): null
// with *why when the driver is older than CUDA 12.
using CudaGetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult*);
CudaGetProcAddress cuda_get_proc_address(void* library, std::string* why);
// Entry point `symbol` at the ABI its prototype in cuda.h has (the driver keeps older
// versions of changed functions under the same name): null with *why naming it.
void* cuda_entry_point(CudaGetProcAddress get_proc, const char* symbol, std::string* why);

// The CUDA version whose ABI `symbol`'s prototype in cuda.h has: the headers' own
// (CUDA_VERSION), but for the names below. cuda.h usually points a changed function's
// name at its newest version (cuMemAlloc is cuMemAlloc_v2), and cuGetProcAddress at
// CUDA_VERSION returns that same version. Where a newer version came in under a new name
// instead, the plain name keeps the old prototype while cuGetProcAddress at CUDA_VERSION
// still returns the new function: CUDA 13's cuCtxGetDevice_v2 takes a context as well,
// and one called through the one-parameter prototype reads a context from a stray
// register (seen on an H100: a segfault inside the driver).
#define PLEXUS_CUDA_OLDER_ABI(X) X(cuCtxGetDevice, 12000)
int cuda_abi_version(const char* symbol);

struct CudaDriver {
#define PLEXUS_CUDA_MEMBER(member, symbol) decltype(&::symbol) member = nullptr;
  PLEXUS_CUDA_DRIVER_ENTRY_POINTS(PLEXUS_CUDA_MEMBER)
#undef PLEXUS_CUDA_MEMBER

  // The process's driver, loaded and initialised on first use; null when there is none,
  // with the reason in *why ("no CUDA driver: libcuda.so.1: cannot open shared object
  // file", "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", ...).
  static const CudaDriver* get(std::string* why);
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
