// The daemon's copy engines against the driver's own copies, at one size, in one run: a
// child process exports two device buffers (as a client does); this process maps them
// through plexusd's DeviceMemory (cuIpcOpenMemHandle, chunked copies on two streams, pinned
// staging) and times device->host, host->device and device->device, interleaved with the
// same copies done alone on buffers of its own (one cuMemcpy*Async and a synchronize).
// Prints GB/s of both and the ratio. Needs a GPU; says why not without one.

// CLI11's string splitting trips GCC 12's -Wnull-dereference (a false positive inside
// <string>; see tools/plexus-bench/options.cc).
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/gpu/device_memory.h"
#include "shm/cuda_driver.h"

namespace {

using plexus::shm::CudaDriver;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "gpu_copy_bench: %s\n", why.c_str());
  std::exit(1);
}

void check(const CudaDriver& d, CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) die(d.check(r, what));
}

// The child: two allocations of `bytes`, their exports written to `fd`, then it waits for
// the parent to close `wait_fd` (the mappings must outlive the measurement).
[[noreturn]] void export_buffers(size_t bytes, int fd, int wait_fd) {
  const plexus::common::Result<const CudaDriver*> loaded = CudaDriver::get();
  if (!loaded) die(loaded.error());
  const CudaDriver* d = *loaded;
  CUdevice device;
  CUcontext context;
  check(*d, d->device_get(&device, 0), "cuDeviceGet");
  check(*d, d->primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
  check(*d, d->ctx_set_current(context), "cuCtxSetCurrent");
  CUuuid uuid;
  check(*d, d->device_get_uuid(&uuid, device), "cuDeviceGetUuid");
  for (int i = 0; i < 2; ++i) {
    CUdeviceptr p;
    check(*d, d->mem_alloc(&p, bytes), "cuMemAlloc");
    CUipcMemHandle handle;
    check(*d, d->ipc_get_mem_handle(&handle, p), "cuIpcGetMemHandle");
    plexus::shm::GpuExport e;
    std::memcpy(e.ipc_handle.data(), handle.reserved, e.ipc_handle.size());
    std::memcpy(e.device_uuid.data(), uuid.bytes, e.device_uuid.size());
    e.bytes = bytes;
    if (::write(fd, &e, sizeof(e)) != static_cast<ssize_t>(sizeof(e))) die("pipe write");
  }
  char c;
  (void)!::read(wait_fd, &c, 1);  // returns when the parent is done
  std::_Exit(0);
}

template <typename Fn>
double gbs(size_t bytes, int iters, Fn&& fn) {
  fn();  // warm
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) fn();
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(bytes) * iters / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"plexusd's GPU copies (DeviceMemory) against the driver's own, side by side"};
  size_t mib = 64;
  int iters = 20;
  int rounds = 5;
  app.add_option("--mib", mib, "Copy size in MiB")->capture_default_str();
  app.add_option("--iters", iters, "Copies per measurement")->capture_default_str();
  app.add_option("--rounds", rounds, "Interleaved rounds (the median is reported)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const size_t bytes = mib << 20;

  int exports[2], hold[2];
  if (::pipe(exports) != 0 || ::pipe(hold) != 0) die("pipe");
  const pid_t child = ::fork();  // before this process touches CUDA
  if (child == 0) {
    ::close(exports[0]);
    ::close(hold[1]);
    export_buffers(bytes, exports[1], hold[0]);
  }
  ::close(exports[1]);
  ::close(hold[0]);
  plexus::shm::GpuExport exported[2];
  for (auto& e : exported) {
    if (::read(exports[0], &e, sizeof(e)) != static_cast<ssize_t>(sizeof(e))) {
      die("the exporting child failed (its error is above)");
    }
  }

  auto opened = plexus::daemon::gpu::open_device_memory();
  if (!opened.ok()) die(opened.error());
  auto device = opened.take();
  auto mapped_a = device->open(exported[0]);
  if (!mapped_a.ok()) die(mapped_a.error());
  auto mapped_b = device->open(exported[1]);
  if (!mapped_b.ok()) die(mapped_b.error());
  auto a = mapped_a.take();
  auto b = mapped_b.take();
  auto allocated = device->allocate_host(bytes);
  if (!allocated.ok()) die(allocated.error());
  auto host = allocated.take();

  // The same copies done alone, on this process's own allocations.
  const CudaDriver& d = **CudaDriver::get();
  CUdeviceptr own_a, own_b;
  check(d, d.mem_alloc(&own_a, bytes), "cuMemAlloc");
  check(d, d.mem_alloc(&own_b, bytes), "cuMemAlloc");
  std::vector<std::byte> own_host_memory(bytes + 4096);
  auto* own_host = reinterpret_cast<std::byte*>(
      (reinterpret_cast<uintptr_t>(own_host_memory.data()) + 4095) & ~uintptr_t{4095});
  check(d, d.mem_host_register(own_host, bytes, CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister");
  auto alone = [&](auto&& issue, const char* what) {
    check(d, issue(), what);
    check(d, d.stream_synchronize(nullptr), "cuStreamSynchronize");
  };
  auto need = [](const std::string& e) {
    if (!e.empty()) die(e);
  };

  struct Row {
    const char* name;
    std::vector<double> daemon, alone;
  } rows[3] = {{"device->host", {}, {}}, {"host->device", {}, {}}, {"device->device", {}, {}}};
  for (int round = 0; round < rounds; ++round) {
    rows[0].daemon.push_back(
        gbs(bytes, iters, [&] { need(device->to_host(host.get(), *a, 0, bytes)); }));
    rows[0].alone.push_back(gbs(bytes, iters, [&] {
      alone([&] { return d.memcpy_dtoh_async(own_host, own_a, bytes, nullptr); },
            "cuMemcpyDtoHAsync");
    }));
    rows[1].daemon.push_back(
        gbs(bytes, iters, [&] { need(device->to_device(*a, 0, host.get(), bytes)); }));
    rows[1].alone.push_back(gbs(bytes, iters, [&] {
      alone([&] { return d.memcpy_htod_async(own_a, own_host, bytes, nullptr); },
            "cuMemcpyHtoDAsync");
    }));
    rows[2].daemon.push_back(
        gbs(bytes, iters, [&] { need(device->device_to_device(*b, 0, *a, 0, bytes)); }));
    rows[2].alone.push_back(gbs(bytes, iters, [&] {
      alone([&] { return d.memcpy_dtod_async(own_b, own_a, bytes, nullptr); }, "cuMemcpyDtoDAsync");
    }));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("# %zu MiB, %d copies x %d interleaved rounds (medians); %s\n", mib, iters, rounds,
              device->describe().c_str());
  std::printf("%-16s %14s %14s %8s\n", "copy", "plexusd GB/s", "alone GB/s", "ratio");
  for (const Row& r : rows) {
    const double p = median(r.daemon);
    const double s = median(r.alone);
    std::printf("%-16s %14.2f %14.2f %8.3f\n", r.name, p, s, p / s);
  }
  d.mem_host_unregister(own_host);
  ::close(hold[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return 0;
}
