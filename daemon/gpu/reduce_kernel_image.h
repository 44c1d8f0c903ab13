// The daemon's reduction kernels (reduce_kernels.cu) as nvcc built them, for
// cuModuleLoadData. Only in builds where nvcc was found (PLEXUS_HAVE_REDUCE_KERNEL).
#pragma once

#include <span>

namespace plexus::daemon::gpu {

std::span<const unsigned char> reduce_kernel_image();

}  // namespace plexus::daemon::gpu
