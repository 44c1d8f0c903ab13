// The NCCL API's CUDA needs over the driver, only when the application has loaded it.
#include "clientlib/nccl/src/nccl_cuda.h"
#include "shm/cuda_driver.h"

namespace plexus::nccl {

bool driver_loaded() { return shm::CudaDriver::get_if_loaded() != nullptr; }

bool current_device(int* device) {
  const shm::CudaDriver* d = shm::CudaDriver::get_if_loaded();
  if (d == nullptr) return false;
  CUcontext context = nullptr;
  if (d->ctx_get_current(&context) != CUDA_SUCCESS || context == nullptr) return false;
  CUdevice id = 0;
  if (d->ctx_get_device(&id) != CUDA_SUCCESS) return false;
  *device = static_cast<int>(id);
  return true;
}

common::Result<void*> device_alloc(size_t bytes) {
  const shm::CudaDriver* d = shm::CudaDriver::get_if_loaded();
  if (d == nullptr) return common::fail("the CUDA driver is not loaded");
  CUdeviceptr address = 0;
  if (std::string error = d->check(d->mem_alloc(&address, bytes), "cuMemAlloc"); !error.empty())
    return common::fail(std::move(error));
  return reinterpret_cast<void*>(address);
}

std::string device_free(void* ptr) {
  const shm::CudaDriver* d = shm::CudaDriver::get_if_loaded();
  if (d == nullptr) return "the CUDA driver is not loaded";
  return d->check(d->mem_free(reinterpret_cast<CUdeviceptr>(ptr)), "cuMemFree");
}

std::string stream_synchronize(void* stream) {
  const shm::CudaDriver* d = shm::CudaDriver::get_if_loaded();
  if (d == nullptr) return {};
  return d->check(d->stream_synchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

}  // namespace plexus::nccl
