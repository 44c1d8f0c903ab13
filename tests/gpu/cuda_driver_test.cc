// The driver's entry points are loaded at the ABI their prototypes in cuda.h have (checked
// at compile time against cudaTypedefs.h, shm/cuda_driver.cc): one loaded at a newer ABI
// than its prototype is called with the wrong arguments (CUDA 13's cuCtxGetDevice took a
// stray register for a context and crashed inside the driver). Here, on a GPU, the one
// that did.
#include <gtest/gtest.h>

#include <string>

#include "shm/cuda_driver.h"
#include "tests/gpu/gpu_rank.h"

namespace plexus::test {
namespace {

// The first GPU's context made current (as a rank's), then the device asked of it: "" or
// what went wrong (in a child: this process never initialises CUDA, as the rank processes
// of the other tests fork from it).
std::string device_of_current_context() {
  RankGpu gpu;
  if (!gpu.error().empty()) return gpu.error();
  const shm::CudaDriver* d = *shm::CudaDriver::get();
  CUdevice asked = -1;
  std::string why = d->check(d->ctx_get_device(&asked), "cuCtxGetDevice");
  if (why.empty() && asked != 0) why = "cuCtxGetDevice gave device " + std::to_string(asked);
  return why;
}

TEST(CudaDriverAbiTest, TheCurrentContextsDeviceIsReadWithoutCrashingTheDriver) {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU with a CUDA driver: " << why;
  EXPECT_EQ(in_child(device_of_current_context), "");
}

}  // namespace
}  // namespace plexus::test
