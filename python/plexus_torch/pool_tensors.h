// CPU tensors whose memory is in this process's Plexus pool: collectives on them go
// without the copy in and out that tensors in torch's own memory need (docs/BENCHMARKS.md:
// 11-27x gloo instead of 2.7-3.8x on 4 ranks).
#pragma once

#include <ATen/ATen.h>

#include <cstddef>

namespace plexus::torch_backend {

// An uninitialised CPU tensor shaped and typed as `like`, in the pool (freed back to it
// when torch frees the tensor). Throws naming the size when the pool is full.
at::Tensor pool_empty_like(const at::Tensor& like);

// Whether the tensor's storage was allocated from the pool by the pool allocator (for
// tests and benchmarks: which path its collectives take).
bool from_pool_allocator(const at::Tensor& tensor);

// The smallest CPU allocation the pool allocator takes by default: below it the copy a
// collective would save costs less than the pool space.
inline constexpr size_t kPoolMinBytes = size_t{1} << 20;

// From now on, CPU allocations of at least min_bytes made by this process come from the
// allocator's arena, half the pool reserved when it is first turned on, while it has room
// (torch's allocator otherwise): DDP's buckets, parameters and gradients then need no
// staging, and the pool's other half stays whole for staging the rest. A child forked after
// this (a DataLoader worker) gets a private copy of what it inherited (libplexus remaps the
// pool at fork), allocates from torch's allocator and never frees into the arena. If the
// arena cannot be reserved, a warning says why and tensors are staged as before.
void use_pool_allocator(size_t min_bytes);
// use_pool_allocator(min_bytes) unless this process has it on already (keeping the
// threshold it was given): what the first plexus process group does.
void use_pool_allocator_unless_on(size_t min_bytes);

}  // namespace plexus::torch_backend
