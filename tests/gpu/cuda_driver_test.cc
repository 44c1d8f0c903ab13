// The driver's entry points are loaded at the ABI their prototypes in cuda.h have (checked
// at compile time against cudaTypedefs.h, shm/cuda_driver.cc): one loaded at a newer ABI
// than its prototype is called with the wrong arguments (CUDA 13's cuCtxGetDevice took a
// stray register for a context and crashed inside the driver). Here, on a GPU, the one
// that did.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "shm/cuda_driver.h"
#include "tests/gpu/gpu_rank.h"

namespace plexus::test {
namespace {

// In a child, so that this process never initialises CUDA (the rank processes of the
// other tests fork from it): the primary context of device 0 made current, then the
// device asked of it. "" or what went wrong.
std::string device_of_current_context() {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::string why;
    const shm::CudaDriver* d = shm::CudaDriver::get(&why);
    CUdevice device = 0;
    CUcontext context = nullptr;
    if (d != nullptr) why = d->check(d->device_get(&device, 0), "cuDeviceGet");
    if (why.empty())
      why = d->check(d->primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
    if (why.empty()) why = d->check(d->ctx_set_current(context), "cuCtxSetCurrent");
    CUdevice asked = -1;
    if (why.empty()) why = d->check(d->ctx_get_device(&asked), "cuCtxGetDevice");
    if (why.empty() && asked != device) why = "cuCtxGetDevice gave device " + std::to_string(asked);
    (void)!::write(fds[1], why.data(), why.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string answer;
  char chunk[256];
  for (ssize_t n; (n = ::read(fds[0], chunk, sizeof(chunk))) > 0;) answer.append(chunk, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status)) return "the child died of signal " + std::to_string(WTERMSIG(status));
  return answer;
}

TEST(CudaDriverAbiTest, TheCurrentContextsDeviceIsReadWithoutCrashingTheDriver) {
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "needs a GPU with a CUDA driver: " << why;
  EXPECT_EQ(device_of_current_context(), "");
}

}  // namespace
}  // namespace plexus::test
