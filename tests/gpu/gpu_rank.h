// Helpers for the GPU tests: whether this machine has a usable GPU (asked in a child
// process: a process that initialises CUDA must not fork ranks afterwards), and, in a rank
// process, the first GPU's context and device memory through the driver Plexus loads.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tests/integration/collective_cases.h"

namespace plexus::test {

// `body`'s answer, run in a child process (so that this one never initialises CUDA), or
// why the child gave none (it died of a signal: "... died of signal N").
std::string in_child(const std::function<std::string()>& body);

// "" when a GPU can be used here, else why not (for GTEST_SKIP).
std::string gpu_unavailable_reason();

// One rank's GPU: the first device's primary context made current. Rank processes only.
class RankGpu {
 public:
  RankGpu();
  ~RankGpu();
  RankGpu(const RankGpu&) = delete;
  RankGpu& operator=(const RankGpu&) = delete;

  const std::string& error() const { return error_; }  // non-empty: unusable
  // Device memory (null with error() set on failure) and its release.
  std::byte* allocate(size_t bytes);
  void free(std::byte* device);
  // A cuMemCreate (VMM) allocation of at least `bytes`, mapped read-write here; with
  // `posix_fd` its requestedHandleTypes include CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
  // Freed with the RankGpu.
  std::byte* allocate_vmm(size_t bytes, bool posix_fd);
  // Synchronous copies: "" or why not.
  std::string copy(std::byte* dst, const std::byte* src, size_t bytes, bool to_device);
  // Buffers for run_case: host mirrors of `bytes` each and two device buffers.
  Buffers buffers(std::byte* host_a, std::byte* host_b, size_t bytes);

 private:
  std::string error_;
  void* context_ = nullptr;
  int device_ = 0;
  std::byte* device_a_ = nullptr;
  std::byte* device_b_ = nullptr;
  struct Vmm {
    unsigned long long address;
    size_t bytes;
    unsigned long long handle;
  };
  std::vector<Vmm> vmm_;
};

}  // namespace plexus::test
