// Device buffers through the driver libplexus loads: the first GPU's primary context,
// cuMemAlloc, synchronous copies for the mirrors (outside the timed loop).
#include "shm/cuda_driver.h"
#include "tools/plexus-bench/device_buffers.h"
#include "tools/plexus-bench/plexus_call.h"

namespace plexus::bench {
namespace {

class CudaBuffers final : public DeviceBuffers {
 public:
  CudaBuffers() {
    const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
    if (!loaded) fail(loaded.error());
    driver_ = *loaded;
    check(driver_->device_get(&device_, 0), "cuDeviceGet");
    check(driver_->primary_ctx_retain(&context_, device_), "cuDevicePrimaryCtxRetain");
    check(driver_->ctx_set_current(context_), "cuCtxSetCurrent");
  }
  ~CudaBuffers() override {
    for (CUdeviceptr p : {send_, recv_}) {
      if (p != 0) driver_->mem_free(p);
    }
    driver_->primary_ctx_release(device_);
  }

  void attach(RankBuffers* buffers) override {
    check(driver_->mem_alloc(&send_, buffers->bytes), "cuMemAlloc");
    check(driver_->mem_alloc(&recv_, buffers->bytes), "cuMemAlloc");
    buffers->device_send = reinterpret_cast<void*>(send_);
    buffers->device_recv = reinterpret_cast<void*>(recv_);
    buffers->copy = [this](void* dst, const void* src, size_t bytes, bool to_device) {
      if (to_device) {
        check(driver_->memcpy_htod_async(reinterpret_cast<CUdeviceptr>(dst), src, bytes, nullptr),
              "cuMemcpyHtoDAsync");
      } else {
        check(driver_->memcpy_dtoh_async(dst, reinterpret_cast<CUdeviceptr>(src), bytes, nullptr),
              "cuMemcpyDtoHAsync");
      }
      check(driver_->stream_synchronize(nullptr), "cuStreamSynchronize");
    };
  }

 private:
  [[noreturn]] static void fail(const std::string& why) {
    throw PlexusCallError("--device cuda", PLEXUS_ERR_SYSTEM, why);
  }
  void check(CUresult result, const char* what) const {
    if (result != CUDA_SUCCESS) fail(driver_->check(result, what));
  }

  const shm::CudaDriver* driver_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUdeviceptr send_ = 0;
  CUdeviceptr recv_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBuffers> make_cuda_buffers() { return std::make_unique<CudaBuffers>(); }

}  // namespace plexus::bench
