#include "python/plexus_torch/pool_tensors.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <atomic>

#include "plexus/plexus.h"

namespace plexus::torch_backend {
namespace {

// The process that enabled the allocator: only it allocates from and frees to its pool (a
// forked child has a pool of its own, or none, and must not open a session for this).
std::atomic<pid_t> g_owner{0};
std::atomic<size_t> g_min_bytes{0};
at::Allocator* g_fallback = nullptr;

void free_to_pool(void* p) {
  if (::getpid() == g_owner.load(std::memory_order_relaxed)) plexus_free(p);
  // In a child the memory is the parent's mapping: leaving it is all a child can do.
}

// For raw_deallocate callers: a pointer from either allocator.
void free_either(void* p) {
  if (::getpid() == g_owner.load(std::memory_order_relaxed) && plexus_free(p) == PLEXUS_SUCCESS) {
    return;
  }
  if (c10::DeleterFnPtr d = g_fallback->raw_deleter(); d != nullptr) d(p);
}

class PoolAllocator final : public at::Allocator {
 public:
  at::DataPtr allocate(size_t n) const override {
    if (n >= g_min_bytes.load(std::memory_order_relaxed) &&
        ::getpid() == g_owner.load(std::memory_order_relaxed)) {
      void* p = nullptr;
      if (plexus_alloc(&p, n) == PLEXUS_SUCCESS) {
        return {p, p, &free_to_pool, at::Device(at::kCPU)};
      }
      // The pool is full: torch's own memory (staged when it meets a collective).
    }
    return g_fallback->allocate(n);
  }
  at::DeleterFnPtr raw_deleter() const override { return &free_either; }
};

}  // namespace

at::Tensor pool_empty_like(const at::Tensor& like) {
  const size_t bytes = static_cast<size_t>(like.numel()) * like.element_size();
  void* memory = nullptr;
  TORCH_CHECK(plexus_alloc(&memory, bytes == 0 ? 1 : bytes) == PLEXUS_SUCCESS,
              "plexus_torch.empty_like: ", bytes,
              " bytes from the Plexus pool: ", plexus_get_last_error(),
              " (PLEXUS_POOL_SIZE sets the pool's size)");
  return at::from_blob(
      memory, like.sizes(), [](void* p) { plexus_free(p); },
      at::TensorOptions().dtype(like.scalar_type()).device(at::kCPU));
}

void use_pool_allocator(size_t min_bytes) {
  static PoolAllocator allocator;  // torch keeps the pointer: static lifetime
  g_min_bytes.store(min_bytes, std::memory_order_relaxed);
  if (g_owner.load() == ::getpid()) return;  // already on: only the threshold changed
  g_fallback = c10::GetCPUAllocator();
  g_owner.store(::getpid());
  c10::SetCPUAllocator(&allocator, /*priority=*/255);
}

}  // namespace plexus::torch_backend
