// DeviceMemory over the CUDA driver API: client allocations mapped with cuIpcOpenMemHandle
// (cudaMalloc memory) or imported from a POSIX fd and mapped (cuMemCreate memory) in each
// device's primary context; copies on two streams per device (the copy engines), those to
// or from the host and between GPUs chunked so both engines work on a large copy, polled through
// events (the engine thread never blocks); host staging pinned with cuMemHostRegister, cached by
// size class (registering costs far more than a copy). With nvcc at build time, also the daemon's
// own reduction kernel (reduce_kernels.cu), loaded on a GPU the first time it is asked to reduce
// there.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/gpu/cuda_copy.h"
#include "daemon/gpu/cuda_device.h"
#include "daemon/gpu/device_memory.h"
#include "shm/cuda_driver.h"

#ifdef PLEXUS_HAVE_REDUCE_KERNEL
#include "daemon/gpu/cuda_kernel_driver.h"
#include "daemon/gpu/reduce_kernel_args.h"
#include "daemon/gpu/reduce_kernel_image.h"
#endif

namespace plexus::daemon::gpu {
namespace {

using cuda::CudaMapping;
using cuda::Device;
using cuda::kStreamsPerDevice;
using cuda::VmmImport;

constexpr uint64_t kCopyChunkBytes = 8u << 20;
constexpr uint64_t kHostCacheBytes = 1u << 30;  // freed pinned buffers kept for reuse

std::string uuid_text(const std::byte* uuid) {
  static const char* hex = "0123456789abcdef";
  std::string out = "GPU-";
  for (size_t i = 0; i < shm::kGpuUuidBytes; ++i) {
    const auto b = static_cast<unsigned>(uuid[i]);
    out += hex[b >> 4];
    out += hex[b & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) out += '-';
  }
  return out;
}

uint64_t size_class(uint64_t bytes) {
  uint64_t c = 4096;
  while (c < bytes) c <<= 1;
  return c;
}

class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory(const shm::CudaDriver& driver, std::vector<std::unique_ptr<Device>> devices)
      : driver_(driver), devices_(std::move(devices)) {}

  ~CudaDeviceMemory() override {
    for (auto& [size, buffers] : cached_) {
      for (std::byte* p : buffers) release_host(p);
    }
    for (auto& d : devices_) {
      driver_.ctx_set_current(d->context);
      for (CUstream s : d->streams) driver_.stream_destroy(s);
      if (d->aside_stream != nullptr) driver_.stream_destroy(d->aside_stream);
      for (CUstream s : d->urgent_streams) {
        if (s != nullptr) driver_.stream_destroy(s);
      }
#ifdef PLEXUS_HAVE_REDUCE_KERNEL
      if (d->kernel_stream != nullptr) driver_.stream_destroy(d->kernel_stream);
      if (const auto kernels = CudaKernelDriver::get();
          kernels.ok() && d->kernel_module != nullptr) {
        (*kernels)->module_unload(d->kernel_module);
      }
#endif
      driver_.primary_ctx_release(d->device);
    }
  }

  common::Result<std::shared_ptr<DeviceMapping>> open(const shm::GpuExport& exported) override {
    const Device* device = nullptr;
    for (const auto& d : devices_) {
      if (std::memcmp(d->uuid.data(), exported.device_uuid.data(), shm::kGpuUuidBytes) == 0) {
        device = d.get();
      }
    }
    if (device == nullptr) {
      return common::fail("GPU " + uuid_text(exported.device_uuid.data()) +
                          " is not one of this node's " + std::to_string(devices_.size()) +
                          " GPU(s)");
    }
    driver_.ctx_set_current(device->context);
    if (exported.posix_fd) return open_vmm(*device, exported);
    CUipcMemHandle handle;
    static_assert(sizeof(handle.reserved) == shm::kGpuIpcHandleBytes);
    std::memcpy(handle.reserved, exported.ipc_handle.data(), shm::kGpuIpcHandleBytes);
    CUdeviceptr base = 0;
    std::string error = driver_.check(
        driver_.ipc_open_mem_handle(&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
        "cuIpcOpenMemHandle");
    if (!error.empty()) return common::fail(std::move(error));
    std::shared_ptr<DeviceMapping> mapping =
        std::make_shared<CudaMapping>(shared_from_this(), driver_, *device, base, exported.bytes);
    // The size is the client's claim: what the driver mapped bounds it.
    CUdeviceptr range_base = 0;
    size_t range_bytes = 0;
    error = driver_.check(driver_.mem_get_address_range(&range_base, &range_bytes, base),
                          "cuMemGetAddressRange");
    if (!error.empty()) return common::fail(std::move(error));
    if (range_base != base || range_bytes < exported.bytes) {
      return common::fail("the handle maps " + std::to_string(range_bytes) +
                          " bytes, the process said " + std::to_string(exported.bytes));
    }
    return mapping;
  }

  // A cuMemCreate allocation from its shareable handle: imported, given an address range
  // here, mapped and made readable and writable by its device. The size is the client's
  // claim; cuMemMap refuses more than the allocation holds.
  common::Result<std::shared_ptr<DeviceMapping>> open_vmm(const Device& device,
                                                          const shm::GpuExport& exported) {
    VmmImport vmm;
    vmm.bytes = exported.bytes;
    std::string error;
    auto failed = [&](CUresult r, const char* what) {
      error = driver_.check(r, what);
      if (error.empty()) return false;
      vmm.undo(driver_);
      return true;
    };
    void* shareable = reinterpret_cast<void*>(static_cast<uintptr_t>(exported.posix_fd->get()));
    if (failed(driver_.mem_import_from_shareable_handle(&vmm.handle, shareable,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
               "cuMemImportFromShareableHandle")) {
      return common::fail(std::move(error));
    }
    CUmemAllocationProp prop{};
    if (failed(driver_.mem_get_allocation_properties(&prop, vmm.handle),
               "cuMemGetAllocationPropertiesFromHandle")) {
      return common::fail(std::move(error));
    }
    if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != device.ordinal) {
      vmm.undo(driver_);
      return common::fail("the allocation is not device memory of " +
                          uuid_text(exported.device_uuid.data()) + " (device " +
                          std::to_string(device.ordinal) + "), as the process said");
    }
    if (failed(driver_.mem_address_reserve(&vmm.reserved, vmm.bytes, 0, 0, 0),
               "cuMemAddressReserve")) {
      return common::fail(std::move(error));
    }
    if (failed(driver_.mem_map(vmm.reserved, vmm.bytes, 0, vmm.handle, 0),
               "cuMemMap (is the size the process gave the allocation's own?)")) {
      return common::fail(std::move(error));
    }
    vmm.mapped = true;
    // Readable by its own GPU, and by each other GPU here that can reach it, one at a time
    // (on a node of unconnected GPU pairs, asking for all at once fails), so that a copy
    // from or to another GPU's memory (a send between ranks on two GPUs) can use it. Which
    // were granted is kept: nothing runs on a GPU that was not (readable_by).
    const CUmemAccessDesc own = access_for(device.ordinal);
    if (failed(driver_.mem_set_access(vmm.reserved, vmm.bytes, &own, 1), "cuMemSetAccess")) {
      return common::fail(std::move(error));
    }
    vmm.readable_by = ordinal_bit(device.ordinal);
    for (const auto& other : devices_) {
      if (other->ordinal == device.ordinal) continue;
      const CUmemAccessDesc access = access_for(other->ordinal);
      if (driver_.mem_set_access(vmm.reserved, vmm.bytes, &access, 1) == CUDA_SUCCESS) {
        vmm.readable_by |= ordinal_bit(other->ordinal);
      }
    }
    const CUdeviceptr base = vmm.reserved;
    return std::shared_ptr<DeviceMapping>(std::make_shared<CudaMapping>(
        shared_from_this(), driver_, device, base, exported.bytes, vmm));
  }

  static uint64_t ordinal_bit(int ordinal) {
    return ordinal >= 0 && ordinal < 64 ? uint64_t{1} << ordinal : 0;
  }
  static CUmemAccessDesc access_for(int ordinal) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return access;
  }

  common::Result<HostBuffer> allocate_host(uint64_t bytes) override {
    const uint64_t c = size_class(std::max<uint64_t>(bytes, 1));
    auto& cached = cached_[c];
    if (!cached.empty()) {
      std::byte* p = cached.back();
      cached.pop_back();
      cached_bytes_ -= c;
      return HostBuffer(p, HostBufferDeleter{shared_from_this(), c});
    }
    void* p = std::aligned_alloc(4096, c);
    if (p == nullptr) {
      return common::fail("no host memory for " + std::to_string(c) + " bytes of GPU staging");
    }
    // Pageable memory works too, only slower: a refusal (memlock limits) is not an error.
    const CUresult pinned = driver_.mem_host_register(p, c, CU_MEMHOSTREGISTER_PORTABLE);
    if (pinned == CUDA_SUCCESS) {
      pinned_.insert(static_cast<std::byte*>(p));
    } else if (!warned_unpinned_) {
      warned_unpinned_ = true;  // once: every later buffer would say the same
      spdlog::warn(
          "GPU staging buffers are not pinned ({}; RLIMIT_MEMLOCK?): copies run at "
          "pageable speed",
          driver_.check(pinned, "cuMemHostRegister"));
    }
    return HostBuffer(static_cast<std::byte*>(p), HostBufferDeleter{shared_from_this(), c});
  }

  std::unique_ptr<CopyInFlight> start_to_host(std::byte* host, const DeviceMapping& mapping,
                                              uint64_t offset, uint64_t bytes) override {
    const auto& m = static_cast<const CudaMapping&>(mapping);
    return chunked(
        m.device(), bytes, kCopyChunkBytes, [&](uint64_t at, uint64_t n, CUstream stream) {
          return driver_.check(
              driver_.memcpy_dtoh_async(host + at, m.device_address() + offset + at, n, stream),
              "cuMemcpyDtoHAsync");
        });
  }

  std::unique_ptr<CopyInFlight> start_to_device(const DeviceMapping& mapping, uint64_t offset,
                                                const std::byte* host, uint64_t bytes) override {
    const auto& m = static_cast<const CudaMapping&>(mapping);
    return chunked(
        m.device(), bytes, kCopyChunkBytes, [&](uint64_t at, uint64_t n, CUstream stream) {
          return driver_.check(
              driver_.memcpy_htod_async(m.device_address() + offset + at, host + at, n, stream),
              "cuMemcpyHtoDAsync");
        });
  }

  // One copy on the device's aside stream, waited for: the copier thread has nothing else to
  // do meanwhile, and the copy engines interleave this stream with the engine's.
  std::string copy_aside(Toward toward, std::byte* host, const DeviceMapping& mapping,
                         uint64_t offset, uint64_t bytes) override {
    if (bytes == 0) return {};
    const auto& m = static_cast<const CudaMapping&>(mapping);
    const Device& device = m.device();
    std::lock_guard lock(aside_mutex_);
    driver_.ctx_set_current(device.context);
    if (device.aside_stream == nullptr) {
      std::string made = driver_.check(
          driver_.stream_create(&device.aside_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      if (!made.empty()) return made;
    }
    const CUdeviceptr at = m.device_address() + offset;
    std::string error =
        toward == Toward::kHost
            ? driver_.check(driver_.memcpy_dtoh_async(host, at, bytes, device.aside_stream),
                            "cuMemcpyDtoHAsync")
            : driver_.check(driver_.memcpy_htod_async(at, host, bytes, device.aside_stream),
                            "cuMemcpyHtoDAsync");
    // Waited for even after an error: what was issued may still read or write `host`.
    std::string synced =
        driver_.check(driver_.stream_synchronize(device.aside_stream), "cuStreamSynchronize");
    return error.empty() ? synced : error;
  }

  std::unique_ptr<CopyInFlight> start_device_to_device(const DeviceMapping& to, uint64_t to_offset,
                                                       const DeviceMapping& from,
                                                       uint64_t from_offset,
                                                       uint64_t bytes) override {
    const auto& dst = static_cast<const CudaMapping&>(to);
    const auto& src = static_cast<const CudaMapping&>(from);
    if (!src.readable_by(dst.device().ordinal)) {
      return std::make_unique<FinishedCopy>(
          "GPU " + std::to_string(dst.device().ordinal) + " was not granted access to GPU " +
          std::to_string(src.device().ordinal) +
          "'s cuMemCreate allocation (cuMemSetAccess refused it: no peer path between them)");
    }
    // Within one GPU the copy is one piece: whole, it runs at cuMemcpyDtoDAsync's rate;
    // cut into chunks on two streams it reached only 0.67-0.78 of that on an H200 (64-256
    // MiB, BENCHMARKS.md). Between GPUs the chunks keep both copy engines busy.
    const uint64_t chunk = src.device().ordinal == dst.device().ordinal ? bytes : kCopyChunkBytes;
    return chunked(dst.device(), bytes, chunk, [&](uint64_t at, uint64_t n, CUstream stream) {
      return driver_.check(
          driver_.memcpy_dtod_async(dst.device_address() + to_offset + at,
                                    from.device_address() + from_offset + at, n, stream),
          "cuMemcpyDtoDAsync");
    });
  }

  std::string reduce_kernel_unavailable() const override {
#ifdef PLEXUS_HAVE_REDUCE_KERNEL
    return CudaKernelDriver::get().error();
#else
    return "plexusd was built without nvcc, so without its reduction kernel";
#endif
  }

  common::Result<std::unique_ptr<CopyInFlight>> start_reduce(
      const DeviceReduction& reduction, const std::vector<DeviceSpan>& inputs,
      const std::vector<DeviceSpan>& outputs) override {
#ifndef PLEXUS_HAVE_REDUCE_KERNEL
    (void)reduction, (void)inputs, (void)outputs;
    return common::fail(reduce_kernel_unavailable());
#else
    const common::Result<const CudaKernelDriver*> driver = CudaKernelDriver::get();
    if (!driver.ok()) return common::fail(driver.error());
    const CudaKernelDriver* kernels = *driver;
    if (inputs.empty() || outputs.empty() || inputs.size() > kMaxKernelReduceRanks ||
        outputs.size() > kMaxKernelReduceRanks || reduction.dtype >= PLEXUS_NUM_DTYPES ||
        reduction.op >= PLEXUS_NUM_REDOPS) {
      return common::fail("a reduction the kernel does not take (" + std::to_string(inputs.size()) +
                          " inputs, " + std::to_string(outputs.size()) + " outputs)");
    }
    Device& run = mutable_device(static_cast<const CudaMapping&>(*outputs[0].mapping).device());
    driver_.ctx_set_current(run.context);
    if (std::string error = load_kernels(*kernels, run); !error.empty()) {
      return common::fail(std::move(error));
    }
    ReduceKernelArgs args{};
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& m = static_cast<const CudaMapping&>(*inputs[i].mapping);
      if (std::string error = reach(*kernels, run, m); !error.empty()) {
        return common::fail(std::move(error));
      }
      args.inputs[i] = reinterpret_cast<const void*>(m.device_address() + inputs[i].offset);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto& m = static_cast<const CudaMapping&>(*outputs[i].mapping);
      if (std::string error = reach(*kernels, run, m); !error.empty()) {
        return common::fail(std::move(error));
      }
      args.outputs[i] = reinterpret_cast<void*>(m.device_address() + outputs[i].offset);
    }
    args.count = reduction.count;
    args.inputs_used = static_cast<uint32_t>(inputs.size());
    args.outputs_used = static_cast<uint32_t>(outputs.size());
    args.avg_divisor = reduction.avg_divisor;
    using Copy = std::unique_ptr<CopyInFlight>;
    if (reduction.count == 0) return Copy(std::make_unique<FinishedCopy>());
    constexpr unsigned kThreads = 256;
    // Enough blocks to fill every SM several times over; each loops over the rest.
    const uint64_t wanted = (reduction.count + kThreads - 1) / kThreads;
    const auto blocks = static_cast<unsigned>(
        std::min<uint64_t>(wanted, static_cast<uint64_t>(run.multiprocessors) * 16));
    void* params[] = {&args};
    const std::string launched = driver_.check(
        kernels->launch_kernel(run.kernels[reduction.dtype][reduction.op], blocks, 1, 1, kThreads,
                               1, 1, 0, run.kernel_stream, params, nullptr),
        "cuLaunchKernel (the daemon's reduction kernel)");
    if (!launched.empty()) return Copy(std::make_unique<FinishedCopy>(launched));
    auto done = std::make_unique<CudaCopy>(shared_from_this(), driver_, run.context);
    if (std::string recorded = done->record(run.kernel_stream); !recorded.empty()) {
      driver_.stream_synchronize(run.kernel_stream);  // nothing else to wait on
      done->fail(std::move(recorded));
    }
    return Copy(std::move(done));
#endif
  }

  std::string describe() const override {
    return "cuda (" + std::to_string(devices_.size()) + " GPU(s))";
  }

  void prefer_urgent_copies(bool urgent) override { urgent_ = urgent; }

 protected:
  void free_host(std::byte* p, uint64_t bytes) override {
    if (cached_bytes_ + bytes <= kHostCacheBytes) {
      cached_[bytes].push_back(p);
      cached_bytes_ += bytes;
      return;
    }
    release_host(p);
  }

 private:
  void release_host(std::byte* p) {
    if (pinned_.erase(p) > 0) driver_.mem_host_unregister(p);
    std::free(p);
  }

  // Issues the copy in chunks alternating over the device's streams (both copy engines
  // work on a large copy), then an event on each stream used, which the copy polls.
  template <typename Issue>
  std::unique_ptr<CopyInFlight> chunked(const Device& device, uint64_t bytes, uint64_t chunk,
                                        Issue&& issue) {
    if (bytes == 0) return std::make_unique<FinishedCopy>();
    driver_.ctx_set_current(device.context);
    auto copy = std::make_unique<CudaCopy>(shared_from_this(), driver_, device.context);
    std::string error;
    const bool urgent = urgent_ && device.urgent_streams.back() != nullptr;
    const auto& streams = urgent ? device.urgent_streams : device.streams;
    size_t& next_stream = urgent ? device.next_urgent_stream : device.next_stream;
    const size_t first = next_stream;
    size_t next = first;
    for (uint64_t at = 0; at < bytes && error.empty(); at += chunk) {
      error = issue(at, std::min(chunk, bytes - at), streams[next]);
      next = (next + 1) % streams.size();
    }
    next_stream = next;
    const size_t used = std::min<uint64_t>(streams.size(), (bytes + chunk - 1) / chunk);
    for (size_t i = 0; i < used; ++i) {
      const CUstream stream = streams[(first + i) % streams.size()];
      std::string recorded = copy->record(stream);
      if (recorded.empty()) continue;
      // No event to poll on this stream: its chunks are waited for here (rare, and the
      // host buffer must not be reused under them).
      driver_.stream_synchronize(stream);
      if (error.empty()) error = std::move(recorded);
    }
    // What was issued still runs: the copy waits for it before it says it failed.
    if (!error.empty()) copy->fail(std::move(error));
    return copy;
  }

#ifdef PLEXUS_HAVE_REDUCE_KERNEL
  Device& mutable_device(const Device& device) {
    for (auto& d : devices_) {
      if (d.get() == &device) return *d;
    }
    std::abort();  // a mapping always names one of ours
  }

  // Loads the kernels on `device` once (its context current): "" or why not. A failure is
  // kept, so that later ops go to the host at once, naming it.
  std::string load_kernels(const CudaKernelDriver& kernels, Device& device) {
    if (device.kernel_module != nullptr) return {};
    if (device.kernel_error.empty()) {
      const std::span<const unsigned char> image = reduce_kernel_image();
      std::string e = driver_.check(kernels.module_load_data(&device.kernel_module, image.data()),
                                    "cuModuleLoadData (the daemon's reduction kernels)");
      for (int d = 0; d < PLEXUS_NUM_DTYPES && e.empty(); ++d) {
        for (int o = 0; o < PLEXUS_NUM_REDOPS && e.empty(); ++o) {
          const std::string name = "plexus_reduce_" + std::to_string(d) + "_" + std::to_string(o);
          e = driver_.check(kernels.module_get_function(
                                &device.kernels[static_cast<size_t>(d)][static_cast<size_t>(o)],
                                device.kernel_module, name.c_str()),
                            "cuModuleGetFunction");
          if (!e.empty()) e += " (" + name + ")";
        }
      }
      if (e.empty()) {
        e = driver_.check(
            kernels.device_get_attribute(&device.multiprocessors,
                                         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device.device),
            "cuDeviceGetAttribute");
      }
      if (e.empty()) {
        e = driver_.check(driver_.stream_create(&device.kernel_stream, CU_STREAM_NON_BLOCKING),
                          "cuStreamCreate");
      }
      if (e.empty()) {
        spdlog::info("GPU {}: the daemon's reduction kernels loaded ({} bytes)", device.ordinal,
                     image.size());
        return {};
      }
      if (device.kernel_module != nullptr) kernels.module_unload(device.kernel_module);
      device.kernel_module = nullptr;
      device.kernel_error = "GPU " + std::to_string(device.ordinal) + ": " + e;
      spdlog::warn("{}: reductions there run on the host", device.kernel_error);
    }
    return device.kernel_error;
  }

  // Whether a kernel on `run` may read and write `mapping`: granted to `run` if it is a
  // cuMemCreate allocation, and on the same GPU or by peer access, enabled the first time
  // it is needed. "" or why not.
  std::string reach(const CudaKernelDriver& kernels, const Device& run,
                    const CudaMapping& mapping) {
    const Device& other = mapping.device();
    if (!mapping.readable_by(run.ordinal)) {
      return "GPU " + std::to_string(run.ordinal) + " was not granted access to GPU " +
             std::to_string(other.ordinal) + "'s cuMemCreate allocation";
    }
    if (&run == &other || peers_enabled_.contains({run.ordinal, other.ordinal})) return {};
    int can = 0;
    std::string error = driver_.check(
        kernels.device_can_access_peer(&can, run.device, other.device), "cuDeviceCanAccessPeer");
    if (error.empty() && can == 0) {
      error = "GPU " + std::to_string(run.ordinal) + " cannot reach GPU " +
              std::to_string(other.ordinal) + "'s memory (no peer access)";
    }
    if (error.empty()) {
      const CUresult r = kernels.ctx_enable_peer_access(other.context, 0);
      if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
        error = driver_.check(r, "cuCtxEnablePeerAccess");
      }
    }
    if (!error.empty()) return error;
    peers_enabled_.insert({run.ordinal, other.ordinal});
    return {};
  }

  std::set<std::pair<int, int>> peers_enabled_;  // (from, to) ordinals
#endif

  const shm::CudaDriver& driver_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::map<uint64_t, std::vector<std::byte*>> cached_;  // size class -> free buffers
  uint64_t cached_bytes_ = 0;
  std::set<std::byte*> pinned_;
  bool warned_unpinned_ = false;
  bool urgent_ = false;     // prefer_urgent_copies (engine thread)
  std::mutex aside_mutex_;  // copy_aside: any thread
};

}  // namespace

common::Result<std::shared_ptr<DeviceMemory>> open_device_memory() {
  const common::Result<const shm::CudaDriver*> loaded = shm::CudaDriver::get();
  if (!loaded) return common::fail(loaded.error());
  const shm::CudaDriver* driver = *loaded;
  int count = 0;
  std::string why = driver->check(driver->device_get_count(&count), "cuDeviceGetCount");
  if (!why.empty()) return common::fail(std::move(why));
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < count; ++i) {
    auto d = std::make_unique<Device>();
    d->ordinal = i;
    CUuuid uuid;
    why = driver->check(driver->device_get(&d->device, i), "cuDeviceGet");
    if (why.empty())
      why = driver->check(driver->device_get_uuid(&uuid, d->device), "cuDeviceGetUuid");
    if (why.empty()) {
      why = driver->check(driver->primary_ctx_retain(&d->context, d->device),
                          "cuDevicePrimaryCtxRetain");
    }
    if (!why.empty()) return common::fail(std::move(why));
    std::memcpy(d->uuid.data(), uuid.bytes, shm::kGpuUuidBytes);
    driver->ctx_set_current(d->context);
    for (CUstream& s : d->streams) {
      why = driver->check(driver->stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      if (!why.empty()) return common::fail(std::move(why));
    }
    // Latency-class jobs' copy streams (Device::urgent_streams); without them, those
    // copies share the normal streams.
    int least = 0;
    int greatest = 0;
    std::string no_priority = driver->check(
        driver->ctx_get_stream_priority_range(&least, &greatest), "cuCtxGetStreamPriorityRange");
    for (CUstream& s : d->urgent_streams) {
      if (!no_priority.empty()) break;
      no_priority =
          driver->check(driver->stream_create_with_priority(&s, CU_STREAM_NON_BLOCKING, greatest),
                        "cuStreamCreateWithPriority");
      if (!no_priority.empty()) s = nullptr;
    }
    if (!no_priority.empty()) {
      spdlog::warn(
          "GPU {}: no copy streams of their own for latency-class jobs ({}): their "
          "copies share the normal ones",
          i, no_priority);
    }
    devices.push_back(std::move(d));
  }
  return std::shared_ptr<DeviceMemory>(
      std::make_shared<CudaDeviceMemory>(*driver, std::move(devices)));
}

}  // namespace plexus::daemon::gpu
