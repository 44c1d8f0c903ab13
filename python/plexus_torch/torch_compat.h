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
