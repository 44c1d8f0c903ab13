// Stream memory operations through the driver loaded at run time: cuStreamWriteValue32
// (ordered after the stream's earlier work, with its writes visible) and
// cuStreamWaitValue32 on flags in host memory registered for the device.
#include "clientlib/src/gpu_stream.h"
#include "shm/cuda_driver.h"

namespace plexus::client {
namespace {

CUstream as_stream(void* stream) { return static_cast<CUstream>(stream); }

}  // namespace

common::Result<uint64_t> map_for_device(void* host, size_t bytes) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded) return common::fail(loaded.error());
  const shm::CudaDriver* d = *loaded;
  std::string error = d->check(
      d->mem_host_register(host, bytes, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE),
      "cuMemHostRegister of the stream flags");
  if (!error.empty()) return common::fail(std::move(error));
  CUdeviceptr address = 0;
  error = d->check(d->mem_host_get_device_pointer(&address, host, 0), "cuMemHostGetDevicePointer");
  if (!error.empty()) {
    d->mem_host_unregister(host);
    return common::fail(std::move(error));
  }
  return static_cast<uint64_t>(address);
}

void unmap_for_device(void* host) {
  if (const common::Result<const shm::CudaDriver*> d = shm::CudaDriver::get())
    (*d)->mem_host_unregister(host);
}

std::string check_stream_not_capturing(void* stream) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded) return loaded.error();
  const shm::CudaDriver* d = *loaded;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  std::string error =
      d->check(d->stream_is_capturing(as_stream(stream), &status), "cuStreamIsCapturing");
  if (!error.empty()) return error;
  if (status != CU_STREAM_CAPTURE_STATUS_NONE) {
    return "the stream is being captured into a CUDA graph: a stream-ordered call cannot be "
           "captured (plexusd must see each launch); make the call outside the capture";
  }
  return {};
}

std::string stream_write_value(void* stream, uint64_t device, uint32_t value) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded) return loaded.error();
  const shm::CudaDriver* d = *loaded;
  return d->check(d->stream_write_value32(as_stream(stream), static_cast<CUdeviceptr>(device),
                                          value, CU_STREAM_WRITE_VALUE_DEFAULT),
                  "cuStreamWriteValue32");
}

std::string stream_wait_value(void* stream, uint64_t device, uint32_t value) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded) return loaded.error();
  const shm::CudaDriver* d = *loaded;
  // GEQ is cyclic ((int32_t)(*flag - value) >= 0): a later call's ticket in the same slot
  // also lets this wait go, should the GPU reach it only after the slot was reused.
  return d->check(d->stream_wait_value32(as_stream(stream), static_cast<CUdeviceptr>(device), value,
                                         CU_STREAM_WAIT_VALUE_GEQ),
                  "cuStreamWaitValue32");
}

}  // namespace plexus::client
