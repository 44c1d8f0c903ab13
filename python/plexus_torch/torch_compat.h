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

// c10::Allocator since torch 2.3: allocate() is no longer const, and copy_data() (which
// Allocator::clone uses, e.g. for copy-on-write storages) is pure virtual.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define PLEXUS_TORCH_ALLOCATOR_V2_3 1
#else
#define PLEXUS_TORCH_ALLOCATOR_V2_3 0
#endif
