#include "tests/gpu/gpu_rank.h"

#include <sys/wait.h>
#include <unistd.h>

#include "shm/cuda_driver.h"

namespace plexus::test {

std::string in_child(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    const std::string answer = body();
    (void)!::write(fds[1], answer.data(), answer.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string answer;
  char chunk[256];
  for (ssize_t n; (n = ::read(fds[0], chunk, sizeof(chunk))) > 0;) answer.append(chunk, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status)) {
    return "the child process died of signal " + std::to_string(WTERMSIG(status));
  }
  return answer;
}

std::string gpu_unavailable_reason() {
  return in_child([] { return shm::CudaDriver::get().error(); });
}

RankGpu::RankGpu() {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  error_ = loaded.error();
  if (!loaded) return;
  const shm::CudaDriver* d = *loaded;
  CUdevice device = 0;
  CUcontext context = nullptr;
  error_ = d->check(d->device_get(&device, 0), "cuDeviceGet");
  if (error_.empty())
    error_ = d->check(d->primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
  if (error_.empty()) error_ = d->check(d->ctx_set_current(context), "cuCtxSetCurrent");
  device_ = device;
  context_ = context;
}

RankGpu::~RankGpu() {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded || context_ == nullptr) return;
  const shm::CudaDriver* d = *loaded;
  free(device_a_);
  free(device_b_);
  for (const Vmm& v : vmm_) {
    d->mem_unmap(v.address, v.bytes);
    d->mem_address_free(v.address, v.bytes);
    d->mem_release(v.handle);
  }
  d->primary_ctx_release(device_);
}

std::byte* RankGpu::allocate(size_t bytes) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  error_ = loaded.error();
  if (!loaded) return nullptr;
  const shm::CudaDriver* d = *loaded;
  CUdeviceptr p = 0;
  error_ = d->check(d->mem_alloc(&p, bytes), "cuMemAlloc");
  return error_.empty() ? reinterpret_cast<std::byte*>(p) : nullptr;
}

std::byte* RankGpu::allocate_vmm(size_t bytes, bool posix_fd) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  error_ = loaded.error();
  if (!loaded) return nullptr;
  const shm::CudaDriver* d = *loaded;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  prop.requestedHandleTypes =
      posix_fd ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  size_t granularity = 0;
  error_ = d->check(
      d->mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "cuMemGetAllocationGranularity");
  if (!error_.empty()) return nullptr;
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  error_ = d->check(d->mem_create(&handle, size, &prop, 0), "cuMemCreate");
  if (!error_.empty()) return nullptr;
  CUdeviceptr address = 0;
  error_ = d->check(d->mem_address_reserve(&address, size, 0, 0, 0), "cuMemAddressReserve");
  if (error_.empty()) error_ = d->check(d->mem_map(address, size, 0, handle, 0), "cuMemMap");
  if (error_.empty()) {
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    error_ = d->check(d->mem_set_access(address, size, &access, 1), "cuMemSetAccess");
  }
  if (!error_.empty()) {
    d->mem_unmap(address, size);  // each refuses harmlessly what was not done
    if (address != 0) d->mem_address_free(address, size);
    d->mem_release(handle);
    return nullptr;
  }
  vmm_.push_back(Vmm{address, size, handle});
  return reinterpret_cast<std::byte*>(address);
}

void RankGpu::free(std::byte* device) {
  const common::Result<const shm::CudaDriver*> d = shm::CudaDriver::get();
  if (d && device != nullptr) (*d)->mem_free(reinterpret_cast<CUdeviceptr>(device));
}

std::string RankGpu::copy(std::byte* dst, const std::byte* src, size_t bytes, bool to_device) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded) return loaded.error();
  const shm::CudaDriver* d = *loaded;
  std::string error =
      to_device
          ? d->check(d->memcpy_htod_async(reinterpret_cast<CUdeviceptr>(dst), src, bytes, nullptr),
                     "cuMemcpyHtoDAsync")
          : d->check(d->memcpy_dtoh_async(dst, reinterpret_cast<CUdeviceptr>(src), bytes, nullptr),
                     "cuMemcpyDtoHAsync");
  if (error.empty()) error = d->check(d->stream_synchronize(nullptr), "cuStreamSynchronize");
  return error;
}

Buffers RankGpu::buffers(std::byte* host_a, std::byte* host_b, size_t bytes) {
  if (device_a_ == nullptr) device_a_ = allocate(bytes);
  if (device_b_ == nullptr) device_b_ = allocate(bytes);
  Buffers b;
  b.a = host_a;
  b.b = host_b;
  b.device_a = device_a_;
  b.device_b = device_b_;
  b.copy = [this](std::byte* dst, const std::byte* src, size_t n, bool to_device) {
    return copy(dst, src, n, to_device);
  };
  return b;
}

}  // namespace plexus::test
