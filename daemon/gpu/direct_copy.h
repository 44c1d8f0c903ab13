// The one copy that moves matched direct ops (StagedOp::direct): a send and its receive, or
// a block of a collective moved by the copy engines, straight from where the input lies
// (its GPU, its copy aside, or a host pool) to where the result goes. D2D, D2H, H2D, or a
// host memcpy. Engine thread (GpuStaging); the copy is polled like any other.
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/gpu/device_memory.h"
#include "daemon/gpu/staged_op.h"

namespace plexus::daemon::gpu {

// Starts `bytes` from `from_at` into the input to `to_at` into the result: `from` / `to`
// are the direct ops, or null where that side is in a host pool (at from_host / to_host).
// A send whose input was snapshotted goes from its copy aside (waited for, if still
// running). Marks both ops matched. A copy onto the very bytes it reads (an in-place rank's
// own block) is none.
std::unique_ptr<CopyInFlight> copy_part(DeviceMemory& device, StagedOp* from,
                                        const std::byte* from_host, uint64_t from_at, StagedOp* to,
                                        std::byte* to_host, uint64_t to_at, uint64_t bytes);

// The whole of a matched send and receive.
inline std::unique_ptr<CopyInFlight> copy_between(DeviceMemory& device, StagedOp* from,
                                                  const std::byte* from_host, StagedOp* to,
                                                  std::byte* to_host, uint64_t bytes) {
  return copy_part(device, from, from_host, 0, to, to_host, 0, bytes);
}

}  // namespace plexus::daemon::gpu
