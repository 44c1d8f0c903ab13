// One source for torch 1.13 (Debian's libtorch-dev: backends subclass c10d::ProcessGroup)
// and torch 2.x (GPU machines: backends subclass c10d::Backend, which a ProcessGroup holds).
#pragma once

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace plexus::torch_backend {
using BackendBase = c10d::Backend;
}
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace plexus::torch_backend {
using BackendBase = c10d::ProcessGroup;
}
#endif

#define PLEXUS_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||         \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10::Allocator since torch 2.3: allocate() is no longer const, and copy_data() (which
// Allocator::clone uses, e.g. for copy-on-write storages) is pure virtual.
#define PLEXUS_TORCH_ALLOCATOR_V2_3 PLEXUS_TORCH_AT_LEAST(2, 3)
// c10d::Backend's allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced (what
// torch's _coalescing_manager calls for all_gather_into_tensor and reduce_scatter_tensor).
#define PLEXUS_TORCH_TENSOR_COALESCED PLEXUS_TORCH_AT_LEAST(2, 1)
// c10d::Backend's supportsShrinking() and shrink(), behind torch.distributed.shrink_group
// (pytorch#164518, merged October 2025; in 2.14 here, and 2.11 is the first torch surely after it).
#define PLEXUS_TORCH_SHRINK PLEXUS_TORCH_AT_LEAST(2, 11)
// c10d::Backend's suspend() and resume(), torch's memory offload API (pytorch#176300, March
// 2026; in 2.14 here).
#define PLEXUS_TORCH_SUSPEND PLEXUS_TORCH_AT_LEAST(2, 12)
