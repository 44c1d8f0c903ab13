// The driver entry points only plexusd uses, to load and launch its own reduction kernel
// (reduce_kernels.cu) and let one GPU read another's memory. Apart from shm/cuda_driver.h
// on purpose: libplexus loads that table, and must never be able to launch a kernel
// (tests/libplexus_no_kernels_test.sh checks its entry points).
#pragma once

#include <cuda.h>

#include <string>

#include "common/result.h"

namespace plexus::daemon::gpu {

// X(member, driver symbol, ABI version), as in shm/cuda_driver.h.
#define PLEXUS_CUDA_KERNEL_ENTRY_POINTS(X)               \
  X(module_load_data, cuModuleLoadData, 2000)            \
  X(module_get_function, cuModuleGetFunction, 2000)      \
  X(module_unload, cuModuleUnload, 2000)                 \
  X(launch_kernel, cuLaunchKernel, 4000)                 \
  X(device_get_attribute, cuDeviceGetAttribute, 2000)    \
  X(device_can_access_peer, cuDeviceCanAccessPeer, 4000) \
  X(ctx_enable_peer_access, cuCtxEnablePeerAccess, 4000)

struct CudaKernelDriver {
#define PLEXUS_CUDA_KERNEL_MEMBER(member, symbol, version) decltype(&::symbol) member = nullptr;
  PLEXUS_CUDA_KERNEL_ENTRY_POINTS(PLEXUS_CUDA_KERNEL_MEMBER)
#undef PLEXUS_CUDA_KERNEL_MEMBER

  // Looked up in the driver shm::CudaDriver::get() has loaded (call that first), or why not
  // when it is not loaded or lacks one of them.
  static common::Result<const CudaKernelDriver*> get();
};

}  // namespace plexus::daemon::gpu
