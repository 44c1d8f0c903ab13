// CPU tensors whose memory is in this process's Plexus pool: collectives on them go
// without the copy in and out that tensors in torch's own memory need (docs/BENCHMARKS.md:
// 10-20x gloo instead of 2-4x on 4 ranks).
#pragma once

#include <ATen/ATen.h>

#include <cstddef>

namespace plexus::torch_backend {

// An uninitialised CPU tensor shaped and typed as `like`, in the pool (freed back to it
// when torch frees the tensor). Throws naming the size when the pool is full.
at::Tensor pool_empty_like(const at::Tensor& like);

// From now on, CPU allocations of at least min_bytes made by this process come from the
// pool while it has room (torch's allocator otherwise): DDP's buckets, parameters and
// gradients then need no staging. Opt-in, because pool memory is shared, not copy-on-write:
// a child forked after this (a DataLoader worker) that writes into a tensor it inherited
// writes into the parent's. Children allocate from torch's allocator, never the pool.
void use_pool_allocator(size_t min_bytes);

}  // namespace plexus::torch_backend
