// What the NCCL API needs of CUDA beyond libplexus's stream operations: the calling
// thread's device, device memory for ncclMemAlloc, and a stream synchronisation for host
// buffers passed with a stream. Over the driver loaded at run time (nccl_cuda_driver.cc),
// or with no CUDA at all (nccl_cuda_none.cc). None of it loads the driver into a process
// that has not loaded it itself.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.h"

namespace plexus::nccl {

// The device of the calling thread's current CUDA context; false when the process has not
// loaded the driver or the thread has no context (then it uses no GPU).
bool current_device(int* device);
// cuMemAlloc on the current context: the device pointer, or why not.
common::Result<void*> device_alloc(size_t bytes);
// cuMemFree of a device_alloc pointer: "" or why not.
[[nodiscard]] std::string device_free(void* ptr);
// Waits for the stream's queued work (a host buffer passed with a stream is used only
// after it): "" or why not. A process without the driver has no streams: "".
[[nodiscard]] std::string stream_synchronize(void* stream);
// True when the process has loaded the CUDA driver (device memory can exist).
bool driver_loaded();

// CU_STREAM_LEGACY: the stream a NULL cudaStream_t names for device buffers.
inline void* legacy_stream() { return reinterpret_cast<void*>(0x1); }

}  // namespace plexus::nccl
