// The driver entry points only plexusd uses, to load and launch its own reduction kernel
// (reduce_kernels.cu) and let one GPU read another's memory. Apart from shm/cuda_driver.h
// on purpose: libplexus loads that table, and must never be able to launch a kernel
// (tests/libplexus_no_kernels_test.sh checks its entry points).
#pragma once

#include <cuda.h>

#include <string>

namespace plexus::daemon::gpu {

#define PLEXUS_CUDA_KERNEL_ENTRY_POINTS(X)         \
  X(module_load_data, cuModuleLoadData)            \
  X(module_get_function, cuModuleGetFunction)      \
  X(module_unload, cuModuleUnload)                 \
  X(launch_kernel, cuLaunchKernel)                 \
  X(device_get_attribute, cuDeviceGetAttribute)    \
  X(device_can_access_peer, cuDeviceCanAccessPeer) \
  X(ctx_enable_peer_access, cuCtxEnablePeerAccess)

struct CudaKernelDriver {
#define PLEXUS_CUDA_KERNEL_MEMBER(member, symbol) decltype(&::symbol) member = nullptr;
  PLEXUS_CUDA_KERNEL_ENTRY_POINTS(PLEXUS_CUDA_KERNEL_MEMBER)
#undef PLEXUS_CUDA_KERNEL_MEMBER

  // Looked up in the driver shm::CudaDriver::get() has loaded (call that first); null with
  // *why when it is not loaded or lacks one of them.
  static const CudaKernelDriver* get(std::string* why);
};

}  // namespace plexus::daemon::gpu
