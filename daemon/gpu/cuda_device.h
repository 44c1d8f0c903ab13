// What the daemon holds of one GPU (its context, copy streams, loaded reduction kernels) and
// of one client allocation mapped on it (an IPC-opened one, or a cuMemCreate one imported
// and mapped here), for cuda_device_memory.cc, which makes and uses them. Called on the
// thread that holds the DeviceMemory (the engine thread; the control thread maps), but for
// the aside stream (the weight store's copier thread, under the owner's mutex). A mapping is
// unmapped on whichever thread lets go of it last.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/gpu/device_memory.h"
#include "shm/cuda_driver.h"

namespace plexus::daemon::gpu::cuda {

inline constexpr size_t kStreamsPerDevice = 2;

struct Device {
  int ordinal = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::array<std::byte, shm::kGpuUuidBytes> uuid{};
  std::array<CUstream, kStreamsPerDevice> streams{};
  // The stream the next copy starts on: copies smaller than a chunk (a collective's many
  // blocks) take turns, so both copy engines work on them.
  mutable size_t next_stream = 0;
  // The same for a latency-class job's copies: streams of their own, so that they do not
  // queue behind a bulk job's chunks in one stream's order (the copy engines interleave
  // streams). Made at the context's greatest priority, though CUDA orders only kernels by
  // it. Null where the driver made none.
  std::array<CUstream, kStreamsPerDevice> urgent_streams{};
  mutable size_t next_urgent_stream = 0;
  // copy_aside's stream (the weight store's copies), made on its first copy; guarded by the
  // owner's aside mutex, as that thread is not the engine's.
  mutable CUstream aside_stream = nullptr;
  // The reduction kernels, once loaded here (null until then); why they could not be.
  CUmodule kernel_module = nullptr;
  std::array<std::array<CUfunction, PLEXUS_NUM_REDOPS>, PLEXUS_NUM_DTYPES> kernels{};
  CUstream kernel_stream = nullptr;
  int multiprocessors = 1;
  std::string kernel_error;
};

// A VMM allocation imported here: what was done to map it, undone in reverse.
struct VmmImport {
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr reserved = 0;  // the address range, once reserved
  size_t bytes = 0;
  bool mapped = false;
  // Device ordinals (bit i: GPU i) cuMemSetAccess made it readable by: its own GPU, and
  // those that can reach it. Peer access does not open VMM memory; only this does.
  uint64_t readable_by = 0;
  void undo(const shm::CudaDriver& driver) {
    if (mapped) driver.mem_unmap(reserved, bytes);
    if (reserved != 0) driver.mem_address_free(reserved, bytes);
    if (handle != 0) driver.mem_release(handle);
    *this = VmmImport{};
  }
};

class CudaMapping final : public DeviceMapping {
 public:
  // `owner` keeps `device` (its streams and context) alive while the mapping lives.
  // `vmm`: how a cuMemCreate allocation was mapped; empty for an IPC-opened one.
  CudaMapping(std::shared_ptr<const DeviceMemory> owner, const shm::CudaDriver& driver,
              const Device& device, CUdeviceptr base, uint64_t bytes, VmmImport vmm = {})
      : DeviceMapping(static_cast<uint64_t>(base), bytes),
        owner_(std::move(owner)),
        driver_(driver),
        device_(device),
        vmm_(vmm) {}
  ~CudaMapping() override {
    driver_.ctx_set_current(device_.context);
    if (vmm_.handle != 0) {
      vmm_.undo(driver_);
    } else {
      driver_.ipc_close_mem_handle(static_cast<CUdeviceptr>(device_address()));
    }
  }
  const Device& device() const { return device_; }
  // Whether a copy or kernel on GPU `ordinal` may touch it: an IPC-opened allocation by
  // peer access (the caller's concern), a cuMemCreate one only where access was granted.
  bool readable_by(int ordinal) const {
    return vmm_.handle == 0 ||
           (ordinal >= 0 && ordinal < 64 && ((vmm_.readable_by >> ordinal) & 1));
  }

 private:
  std::shared_ptr<const DeviceMemory> owner_;
  const shm::CudaDriver& driver_;
  const Device& device_;
  VmmImport vmm_;
};

}  // namespace plexus::daemon::gpu::cuda
