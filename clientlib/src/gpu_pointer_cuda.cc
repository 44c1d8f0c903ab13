// Device pointers through the driver loaded at run time: one cuPointerGetAttributes call
// per buffer per op (it answers for host pointers too, without an error), and
// cuIpcGetMemHandle once per allocation.
#include <cstring>

#include "clientlib/src/gpu_pointer.h"
#include "shm/cuda_driver.h"

namespace plexus::client {

std::optional<GpuPointer> query_gpu_pointer(const void* ptr, std::string* error) {
  // A process that has not loaded the driver has no device memory.
  const shm::CudaDriver* driver = shm::CudaDriver::get_if_loaded();
  if (driver == nullptr) return std::nullopt;
  unsigned memory_type = 0;
  unsigned long long buffer_id = 0;
  CUdeviceptr range_start = 0;
  size_t range_size = 0;
  unsigned managed = 0;
  CUpointer_attribute attributes[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
      CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[] = {&memory_type, &buffer_id, &range_start, &range_size, &managed};
  const CUresult r = driver->pointer_get_attributes(
      5, attributes, values, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr)));
  if (r != CUDA_SUCCESS || memory_type != CU_MEMORYTYPE_DEVICE) return std::nullopt;
  if (managed != 0) {
    *error =
        "it is CUDA managed memory, which cannot be shared with plexusd (use cudaMalloc "
        "or plexus_alloc)";
    return std::nullopt;
  }
  GpuPointer p;
  p.allocation.buffer_id = buffer_id;
  p.allocation.base = static_cast<uint64_t>(range_start);
  p.allocation.bytes = range_size;
  return p;
}

std::string export_gpu_allocation(const GpuAllocation& allocation, shm::GpuExport* out) {
  std::string why;
  const shm::CudaDriver* driver = shm::CudaDriver::get(&why);
  if (driver == nullptr) return why;
  CUipcMemHandle handle;
  std::string error =
      driver->check(driver->ipc_get_mem_handle(&handle, static_cast<CUdeviceptr>(allocation.base)),
                    "cuIpcGetMemHandle (an allocation made with cuMemCreate or a memory pool "
                    "cannot be shared this way yet)");
  if (!error.empty()) return error;
  int ordinal = -1;
  CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL;
  void* value = &ordinal;
  error = driver->check(driver->pointer_get_attributes(1, &attribute, &value,
                                                       static_cast<CUdeviceptr>(allocation.base)),
                        "cuPointerGetAttributes");
  if (!error.empty()) return error;
  CUdevice device = 0;
  CUuuid uuid;
  error = driver->check(driver->device_get(&device, ordinal), "cuDeviceGet");
  if (error.empty())
    error = driver->check(driver->device_get_uuid(&uuid, device), "cuDeviceGetUuid");
  if (!error.empty()) return error;
  std::memcpy(out->ipc_handle.data(), handle.reserved, shm::kGpuIpcHandleBytes);
  std::memcpy(out->device_uuid.data(), uuid.bytes, shm::kGpuUuidBytes);
  out->bytes = allocation.bytes;
  return {};
}

}  // namespace plexus::client
