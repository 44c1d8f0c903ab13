// What the daemon passes to its GPU reduction kernel (reduce_kernels.cu), by value: the
// kernel and its launcher (cuda_device_memory.cc) must agree on this layout, so both
// include it. Plain C++ with no CUDA header, so nvcc and the host compiler both read it.
#pragma once

#include <cstdint>

namespace plexus::daemon::gpu {

// Ranks (inputs) and results (outputs) one launch takes: a node's GPUs, at most 8 on
// the machines we serve. A communicator with more ranks on the node is reduced on the host.
inline constexpr int kMaxKernelReduceRanks = 8;

struct ReduceKernelArgs {
  const void* inputs[kMaxKernelReduceRanks];
  void* outputs[kMaxKernelReduceRanks];
  uint64_t count;         // elements
  uint32_t inputs_used;   // 1..kMaxKernelReduceRanks, folded in rank order
  uint32_t outputs_used;  // each receives the same result
  uint32_t avg_divisor;   // PLEXUS_AVG: the sum is divided by it
};

}  // namespace plexus::daemon::gpu
