// Device pointers through the driver loaded at run time: one cuPointerGetAttributes call
// per buffer per op (it answers for host pointers too, without an error), and an export
// once per allocation: cuIpcGetMemHandle, or for cuMemCreate memory its POSIX fd.
#include <cstring>
#include <memory>
#include <optional>

#include "clientlib/src/gpu_pointer.h"
#include "shm/cuda_driver.h"

namespace plexus::client {

common::Result<std::optional<GpuPointer>> query_gpu_pointer(const void* ptr) {
  // A process that has not loaded the driver has no device memory.
  const shm::CudaDriver* driver = shm::CudaDriver::get_if_loaded();
  if (driver == nullptr) return {std::nullopt};
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
    return common::fail("cannot tell whether the buffer is GPU memory: " +
                        driver->check(r, "cuPointerGetAttributes"));
  }
  if (memory_type != CU_MEMORYTYPE_DEVICE) return {std::nullopt};
  if (managed != 0) {
    return common::fail(
        "it is CUDA managed memory, which cannot be shared with plexusd (use cudaMalloc "
        "or plexus_alloc)");
  }
  GpuPointer p;
  p.allocation.buffer_id = buffer_id;
  p.allocation.base = static_cast<uint64_t>(range_start);
  p.allocation.bytes = range_size;
  return std::optional(p);
}

namespace {

// A cuMemCreate (VMM) allocation has no IPC handle; its shareable POSIX file descriptor
// is exported instead, which needs the allocation to have asked for that handle type.
struct VmmExport {
  std::shared_ptr<const common::UniqueFd> posix_fd;
  int ordinal = -1;
};

// The export of the VMM allocation at `base`, or why it cannot be exported; nullopt when
// it is not one at all.
std::optional<common::Result<VmmExport>> export_vmm_allocation(const shm::CudaDriver& driver,
                                                               CUdeviceptr base) {
  CUmemGenericAllocationHandle handle = 0;
  if (driver.mem_retain_allocation_handle(&handle, reinterpret_cast<void*>(base)) != CUDA_SUCCESS)
    return std::nullopt;
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
  if (!error.empty()) return common::Result<VmmExport>(common::fail(std::move(error)));
  return common::Result<VmmExport>(
      VmmExport{std::make_shared<const common::UniqueFd>(fd), prop.location.id});
}

}  // namespace

common::Result<shm::GpuExport> export_gpu_allocation(const GpuAllocation& allocation) {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded) return common::fail(loaded.error());
  const shm::CudaDriver* driver = *loaded;
  shm::GpuExport exported;
  const auto base = static_cast<CUdeviceptr>(allocation.base);
  CUipcMemHandle handle;
  int ordinal = -1;
  std::string error = driver->check(driver->ipc_get_mem_handle(&handle, base), "cuIpcGetMemHandle");
  if (error.empty()) {
    std::memcpy(exported.ipc_handle.data(), handle.reserved, shm::kGpuIpcHandleBytes);
    CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL;
    void* value = &ordinal;
    error = driver->check(driver->pointer_get_attributes(1, &attribute, &value, base),
                          "cuPointerGetAttributes");
  } else if (std::optional<common::Result<VmmExport>> vmm = export_vmm_allocation(*driver, base)) {
    // A VMM allocation's own outcome replaces the IPC error; for any other allocation the
    // IPC error says it best.
    error = vmm->error();
    if (vmm->ok()) {
      exported.posix_fd = std::move((*vmm)->posix_fd);
      ordinal = (*vmm)->ordinal;
    }
  }
  if (!error.empty()) return common::fail(std::move(error));
  CUdevice device = 0;
  CUuuid uuid;
  error = driver->check(driver->device_get(&device, ordinal), "cuDeviceGet");
  if (error.empty())
    error = driver->check(driver->device_get_uuid(&uuid, device), "cuDeviceGetUuid");
  if (!error.empty()) return common::fail(std::move(error));
  std::memcpy(exported.device_uuid.data(), uuid.bytes, shm::kGpuUuidBytes);
  exported.bytes = allocation.bytes;
  return exported;
}

}  // namespace plexus::client
