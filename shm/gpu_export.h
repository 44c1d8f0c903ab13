// What a client sends to register one GPU allocation with the daemon: the exported handle
// (a cudaMalloc allocation's IPC handle, or a cuMemCreate allocation's POSIX file
// descriptor, passed with SCM_RIGHTS), the allocation's size and the device it lives on.
// Everything in it is hostile: the daemon maps the handle through the driver (which
// refuses handles it did not make) and bounds every later access by `bytes`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/unique_fd.h"

namespace plexus::shm {

inline constexpr size_t kGpuIpcHandleBytes = 64;  // CU_IPC_HANDLE_SIZE
inline constexpr size_t kGpuUuidBytes = 16;

struct GpuExport {
  // Set for a VMM allocation (cuMemCreate with POSIX file descriptor handles): its
  // shareable handle. Shared so that an export can be copied into a posted task.
  std::shared_ptr<const common::UniqueFd> posix_fd;
  std::array<std::byte, kGpuIpcHandleBytes> ipc_handle{};  // otherwise
  uint64_t bytes = 0;                                      // the whole allocation
  std::array<std::byte, kGpuUuidBytes> device_uuid{};      // which GPU
};

// Regions an entry may name: 0 is the host pool, registered GPU allocations get ids from
// 1 up, at most this many per session.
inline constexpr uint32_t kMaxGpuRegionsPerSession = 4096;

}  // namespace plexus::shm
