// What the daemon needs of the GPUs on its node: map an allocation a client exported, move
// bytes between it and host memory with the copy engines, and, where built with it, reduce on
// the device with the daemon's own kernel (start_reduce). CUDA implements it
// (cuda_device_memory.cc); tests implement it over host memory. In plexusd the control thread
// opens it (open_device_memory, on the first GPU registration) and maps each allocation
// (open), so that the driver's blocking calls hold up no collective; the engine thread does
// the rest (host buffers, copies, reductions), but for copy_aside, which the weight store's
// copier thread calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "plexus/plexus_types.h"
#include "shm/gpu_export.h"

namespace plexus::daemon::gpu {

// A client allocation mapped into the daemon; unmapped when the last reference goes
// (a region table entry, each op in flight on it, and each weight store pull waiting or copy
// queued for it).
class DeviceMapping {
 public:
  virtual ~DeviceMapping() = default;
  uint64_t bytes() const { return bytes_; }
  uint64_t device_address() const { return address_; }

 protected:
  DeviceMapping(uint64_t address, uint64_t bytes) : address_(address), bytes_(bytes) {}

 private:
  uint64_t address_;
  uint64_t bytes_;
};

// A copy issued to the copy engines. The engine thread polls it between other work, so
// one client's large copy never stalls another client's ops.
class CopyInFlight {
 public:
  // Waits for a copy still running: the memory it reads and writes is freed after it.
  virtual ~CopyInFlight() = default;
  // False while it runs; true once it ended well; why it failed once it ended badly.
  virtual common::Result<bool> done() = 0;
  // Blocks until it ends: "" or why it failed.
  virtual std::string wait() = 0;
};

// A copy that ended before it started (nothing to copy, or issuing it failed).
class FinishedCopy final : public CopyInFlight {
 public:
  explicit FinishedCopy(std::string error = {}) : error_(std::move(error)) {}
  common::Result<bool> done() override {
    if (!error_.empty()) return common::fail(error_);
    return true;
  }
  std::string wait() override { return error_; }

 private:
  std::string error_;
};

// Where one rank's input or result of a reduction on the GPU lies.
struct DeviceSpan {
  const DeviceMapping* mapping = nullptr;
  uint64_t offset = 0;
};

// An element-wise reduction the daemon's kernel runs: what reduce_arrays does on the host.
struct DeviceReduction {
  plexus_dtype_t dtype = PLEXUS_FLOAT32;
  plexus_redop_t op = PLEXUS_SUM;
  uint64_t count = 0;
  uint32_t avg_divisor = 1;
};

// Host memory the copy engines read and write at full speed (pinned where the device
// allows it); returned to the allocator's cache when freed.
class DeviceMemory;
struct HostBufferDeleter {
  std::shared_ptr<DeviceMemory> owner;  // the allocator outlives its buffers
  uint64_t bytes = 0;
  void operator()(std::byte* p) const;
};
using HostBuffer = std::unique_ptr<std::byte[], HostBufferDeleter>;

// Held by shared_ptr: mappings and host buffers keep it alive (a session may outlive the
// engine at shutdown).
class DeviceMemory : public std::enable_shared_from_this<DeviceMemory> {
 public:
  virtual ~DeviceMemory() = default;
  // Maps `exported` (the driver checks the handle; the size is the client's claim and is
  // checked against what the driver maps), or why not.
  virtual common::Result<std::shared_ptr<DeviceMapping>> open(const shm::GpuExport& exported) = 0;
  virtual common::Result<HostBuffer> allocate_host(uint64_t bytes) = 0;
  // Copies [offset, offset + bytes) of `mapping` to or from host memory on the copy
  // engines and returns at once; the copy says when it is done. The caller has checked
  // the range, and keeps `host` alive until then (a copy destroyed early waits for itself).
  virtual std::unique_ptr<CopyInFlight> start_to_host(std::byte* host, const DeviceMapping& mapping,
                                                      uint64_t offset, uint64_t bytes) = 0;
  virtual std::unique_ptr<CopyInFlight> start_to_device(const DeviceMapping& mapping,
                                                        uint64_t offset, const std::byte* host,
                                                        uint64_t bytes) = 0;
  // Device to device, both mapped here (one node's GPUs: a copy-engine copy).
  virtual std::unique_ptr<CopyInFlight> start_device_to_device(const DeviceMapping& to,
                                                               uint64_t to_offset,
                                                               const DeviceMapping& from,
                                                               uint64_t from_offset,
                                                               uint64_t bytes) = 0;
  // The same, waiting for the copy: "" or why it failed (benchmarks, tests).
  std::string to_host(std::byte* host, const DeviceMapping& mapping, uint64_t offset,
                      uint64_t bytes) {
    return start_to_host(host, mapping, offset, bytes)->wait();
  }
  std::string to_device(const DeviceMapping& mapping, uint64_t offset, const std::byte* host,
                        uint64_t bytes) {
    return start_to_device(mapping, offset, host, bytes)->wait();
  }
  std::string device_to_device(const DeviceMapping& to, uint64_t to_offset,
                               const DeviceMapping& from, uint64_t from_offset, uint64_t bytes) {
    return start_device_to_device(to, to_offset, from, from_offset, bytes)->wait();
  }
  // Any thread, blocking (the weight store's copier thread): copies between host memory and
  // [offset, offset + bytes) of `mapping` on streams kept for such copies alone, so that a
  // model's gigabytes never queue ahead of a collective's copies on the engine's streams.
  // The caller has checked the range. "" or why it failed.
  enum class Toward { kHost, kDevice };
  virtual std::string copy_aside(Toward toward, std::byte* host, const DeviceMapping& mapping,
                                 uint64_t offset, uint64_t bytes) = 0;
  // Copies started from now on go on the devices' streams kept for latency-class jobs (true)
  // or their normal ones. Engine thread: it says which as it serves each session.
  virtual void prefer_urgent_copies(bool urgent) { (void)urgent; }
  // Whether start_reduce can run here: "" or why not (built without nvcc, no GPU, ...).
  virtual std::string reduce_kernel_unavailable() const {
    return "this device has no reduction kernel";
  }
  // Folds `inputs` element-wise in order (the daemon's kernel, on the GPU of outputs[0],
  // launched on the daemon's own stream) into every span of `outputs`; returns at once, as
  // the copies do. An output may be the very same span as an input. Why not where it
  // cannot run (a GPU that cannot reach another's memory): the caller then reduces on the
  // host. The caller keeps the mappings alive until it has ended.
  virtual common::Result<std::unique_ptr<CopyInFlight>> start_reduce(
      const DeviceReduction& reduction, const std::vector<DeviceSpan>& inputs,
      const std::vector<DeviceSpan>& outputs) {
    (void)reduction, (void)inputs, (void)outputs;
    return common::fail(reduce_kernel_unavailable());
  }
  // "cuda (2 devices)", for status and logs.
  virtual std::string describe() const = 0;

 protected:
  friend struct HostBufferDeleter;
  virtual void free_host(std::byte* p, uint64_t bytes) = 0;
};

inline void HostBufferDeleter::operator()(std::byte* p) const {
  if (p != nullptr && owner != nullptr) owner->free_host(p, bytes);
}

// The node's GPUs through CUDA, or why not (built without CUDA, no driver, no device):
// the daemon then refuses GPU registrations with that reason.
common::Result<std::shared_ptr<DeviceMemory>> open_device_memory();

}  // namespace plexus::daemon::gpu
