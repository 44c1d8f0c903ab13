// Device pointers through the driver loaded at run time: one cuPointerGetAttributes call
// per buffer per op (it answers for host pointers too, without an error), and an export
// once per allocation: cuIpcGetMemHandle, or for cuMemCreate memory its POSIX fd.
#include <cstring>
#include <memory>

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
  if (r != CUDA_SUCCESS) {
    // It answers for any pointer, so this is the driver failing (a destroyed context, a
    // lost device): taking a device pointer for host memory would fault in our memcpy.
    *error = "cannot tell whether the buffer is GPU memory: " +
             driver->check(r, "cuPointerGetAttributes");
    return std::nullopt;
  }
  if (memory_type != CU_MEMORYTYPE_DEVICE) return std::nullopt;
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

namespace {

// A cuMemCreate (VMM) allocation has no IPC handle; its shareable POSIX file descriptor
// is exported instead, which needs the allocation to have asked for that handle type.
// `*is_vmm` says whether it is one at all.
std::string export_vmm_allocation(const shm::CudaDriver& driver, CUdeviceptr base,
                                  shm::GpuExport* out, int* ordinal, bool* is_vmm) {
  CUmemGenericAllocationHandle handle = 0;
  *is_vmm =
      driver.mem_retain_allocation_handle(&handle, reinterpret_cast<void*>(base)) == CUDA_SUCCESS;
  if (!*is_vmm) return "not a cuMemCreate allocation";
  CUmemAllocationProp prop{};
  std::string error = driver.check(driver.mem_get_allocation_properties(&prop, handle),
                                   "cuMemGetAllocationPropertiesFromHandle");
  if (error.empty() &&
      (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    error =
        "it was allocated with cuMemCreate without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in "
        "requestedHandleTypes, so plexusd cannot map it (ask for that handle type, or use "
        "cudaMalloc)";
  }
  int fd = -1;
  if (error.empty()) {
    error = driver.check(driver.mem_export_to_shareable_handle(
                             &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                         "cuMemExportToShareableHandle");
  }
  driver.mem_release(handle);  // the retain's reference; the allocation stays
  if (!error.empty()) return error;
  out->posix_fd = std::make_shared<const common::UniqueFd>(fd);
  *ordinal = prop.location.id;
  return {};
}

}  // namespace

std::string export_gpu_allocation(const GpuAllocation& allocation, shm::GpuExport* out) {
  std::string why;
  const shm::CudaDriver* driver = shm::CudaDriver::get(&why);
  if (driver == nullptr) return why;
  const auto base = static_cast<CUdeviceptr>(allocation.base);
  CUipcMemHandle handle;
  int ordinal = -1;
  std::string error = driver->check(driver->ipc_get_mem_handle(&handle, base), "cuIpcGetMemHandle");
  if (error.empty()) {
    std::memcpy(out->ipc_handle.data(), handle.reserved, shm::kGpuIpcHandleBytes);
    CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL;
    void* value = &ordinal;
    error = driver->check(driver->pointer_get_attributes(1, &attribute, &value, base),
                          "cuPointerGetAttributes");
  } else {
    bool is_vmm = false;
    std::string vmm_error = export_vmm_allocation(*driver, base, out, &ordinal, &is_vmm);
    if (is_vmm) error = std::move(vmm_error);  // else the IPC error says it best
  }
  if (!error.empty()) return error;
  CUdevice device = 0;
  CUuuid uuid;
  error = driver->check(driver->device_get(&device, ordinal), "cuDeviceGet");
  if (error.empty())
    error = driver->check(driver->device_get_uuid(&uuid, device), "cuDeviceGetUuid");
  if (!error.empty()) return error;
  std::memcpy(out->device_uuid.data(), uuid.bytes, shm::kGpuUuidBytes);
  out->bytes = allocation.bytes;
  return {};
}

}  // namespace plexus::client
