// The fatbinary nvcc built from reduce_kernels.cu, embedded in plexusd as it is (the
// build passes its path): loaded with cuModuleLoadData on the GPUs that use it.
#include "daemon/gpu/reduce_kernel_image.h"

#ifndef PLEXUS_REDUCE_KERNEL_FATBIN
#error "PLEXUS_REDUCE_KERNEL_FATBIN: the build names the fatbinary to embed"
#endif

extern "C" {
extern const unsigned char plexus_reduce_kernel_fatbin[];
extern const unsigned char plexus_reduce_kernel_fatbin_end[];
}

asm(".pushsection .rodata\n"
    ".balign 64\n"
    ".globl plexus_reduce_kernel_fatbin\n"
    ".globl plexus_reduce_kernel_fatbin_end\n"
    ".hidden plexus_reduce_kernel_fatbin\n"
    ".hidden plexus_reduce_kernel_fatbin_end\n"
    "plexus_reduce_kernel_fatbin:\n"
    ".incbin \"" PLEXUS_REDUCE_KERNEL_FATBIN
    "\"\n"
    "plexus_reduce_kernel_fatbin_end:\n"
    ".popsection\n");

namespace plexus::daemon::gpu {

std::span<const unsigned char> reduce_kernel_image() {
  return {plexus_reduce_kernel_fatbin,
          static_cast<size_t>(plexus_reduce_kernel_fatbin_end - plexus_reduce_kernel_fatbin)};
}

}  // namespace plexus::daemon::gpu
