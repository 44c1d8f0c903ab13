// The weight store with device memory against a real plexusd: one process publishes versions
// from cudaMalloc and cuMemCreate memory, another pulls each into its own device memory, by
// the daemon's copy engines; every byte checked. Skips, saying why, where there is no
// usable GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plexus/plexus.h"
#include "tests/gpu/gpu_rank.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"

namespace plexus::test {
namespace {

constexpr uint64_t kVersions = 4;
// Not multiples of a page or a copy chunk: the tails are copied too.
constexpr size_t kIpcBytes = (24u << 20) + 4099;
constexpr size_t kVmmBytes = (1u << 20) + 77;

std::byte pattern(uint64_t version, size_t i, int tensor) {
  return static_cast<std::byte>((i * 131 + version * 7 + static_cast<size_t>(tensor) * 59) >> 2);
}

// `gpu` copies `host` (filled with version's pattern for `tensor`) to `device`; "" or why not.
std::string put(RankGpu& gpu, std::byte* device, std::vector<std::byte>& host, uint64_t version,
                int tensor) {
  for (size_t i = 0; i < host.size(); ++i) host[i] = pattern(version, i, tensor);
  return gpu.copy(device, host.data(), host.size(), true);
}

// "" when `device` holds version's pattern for `tensor`.
std::string holds(RankGpu& gpu, std::byte* device, std::vector<std::byte>& host, uint64_t version,
                  int tensor) {
  if (std::string e = gpu.copy(host.data(), device, host.size(), false); !e.empty()) return e;
  for (size_t i = 0; i < host.size(); ++i) {
    if (host[i] != pattern(version, i, tensor)) {
      return "tensor " + std::to_string(tensor) + " byte " + std::to_string(i) +
             " is not version " + std::to_string(version) + "'s";
    }
  }
  return {};
}

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    const std::string why = gpu_unavailable_reason();                            \
    if (!why.empty()) GTEST_SKIP() << "needs a GPU with a CUDA driver: " << why; \
  } while (0)

TEST(GpuWeightsTest, VersionsPublishedFromDeviceMemoryArePulledExactIntoAnotherProcesssDevice) {
  SKIP_WITHOUT_GPU();
  DaemonProcess daemon;
  const std::string model = "gpu-policy-" + std::to_string(::getpid());
  auto results = run_ranks(
      daemon.socket_path(), 2, [&](int rank, int, const plexus_unique_id_t&) -> std::string {
        RankGpu gpu;
        if (!gpu.error().empty()) return "GPU: " + gpu.error();
        std::byte* ipc = gpu.allocate(kIpcBytes);
        std::byte* vmm = gpu.allocate_vmm(kVmmBytes, true);
        if (ipc == nullptr || vmm == nullptr) return "GPU: " + gpu.error();
        std::vector<std::byte> host_ipc(kIpcBytes), host_vmm(kVmmBytes);
        plexus_weight_tensor_t tensors[] = {{"layers.0.weight", ipc, kIpcBytes},
                                            {"layers.0.bias", vmm, kVmmBytes}};
        if (rank == 0) {
          for (uint64_t v = 1; v <= kVersions; ++v) {
            if (std::string e = put(gpu, ipc, host_ipc, v, 0); !e.empty()) return e;
            if (std::string e = put(gpu, vmm, host_vmm, v, 1); !e.empty()) return e;
            if (plexus_weights_publish(model.c_str(), v, tensors, 2) != PLEXUS_SUCCESS) {
              return "publish " + std::to_string(v) + ": " + plexus_get_last_error();
            }
          }
          return {};
        }
        uint64_t last = 0;
        while (last < kVersions) {
          uint64_t got = 0;
          if (plexus_weights_pull(model.c_str(), 0, last, 60000, tensors, 2, &got) !=
              PLEXUS_SUCCESS) {
            return "pull newer than " + std::to_string(last) + ": " + plexus_get_last_error();
          }
          if (got <= last)
            return "pulled " + std::to_string(got) + " after " + std::to_string(last);
          if (std::string e = holds(gpu, ipc, host_ipc, got, 0); !e.empty()) return e;
          if (std::string e = holds(gpu, vmm, host_vmm, got, 1); !e.empty()) return e;
          last = got;
        }
        return {};
      });
  EXPECT_EQ(failures(results), "") << daemon.log();
}

}  // namespace
}  // namespace plexus::test
