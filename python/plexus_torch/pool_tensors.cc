#include "python/plexus_torch/pool_tensors.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "plexus/plexus.h"

namespace plexus::torch_backend {
namespace {

// The process that enabled the allocator: only it allocates from and frees to its pool (a
// forked child has a pool of its own, or none, and must not open a session for this).
std::atomic<pid_t> g_owner{0};
std::atomic<size_t> g_min_bytes{0};
at::Allocator* g_fallback = nullptr;  // torch's allocator before ours, set once

// The allocator takes at most half the pool, so that tensors outside it can still be staged
// through the rest (a full pool would fail their collectives instead of slowing them).
std::mutex g_sizes_mutex;
std::unordered_map<void*, size_t> g_sizes;  // what the allocator took from the pool
size_t g_in_use = 0;
size_t g_budget = 0;

// Half of this process's pool (0 when libplexus cannot open it: no allocation goes there).
size_t pool_budget() {
  size_t pool = 0;
  return plexus_pool_size(&pool) == PLEXUS_SUCCESS ? pool / 2 : 0;
}

void free_to_pool(void* p) {
  if (::getpid() != g_owner.load(std::memory_order_relaxed)) return;  // a child: the parent's
  {
    std::lock_guard lock(g_sizes_mutex);
    if (auto it = g_sizes.find(p); it != g_sizes.end()) {
      g_in_use -= it->second;
      g_sizes.erase(it);
    }
  }
  plexus_free(p);
}

bool from_pool(void* p) {
  std::lock_guard lock(g_sizes_mutex);
  return g_sizes.count(p) != 0;
}

// For raw_deallocate callers: a pointer from either allocator.
void free_either(void* p) {
  if (from_pool(p)) {
    free_to_pool(p);
    return;
  }
  if (c10::DeleterFnPtr d = g_fallback->raw_deleter(); d != nullptr) d(p);
}

class PoolAllocator final : public at::Allocator {
 public:
  at::DataPtr allocate(size_t n) const override {
    if (n >= g_min_bytes.load(std::memory_order_relaxed) &&
        ::getpid() == g_owner.load(std::memory_order_relaxed)) {
      std::unique_lock lock(g_sizes_mutex);
      if (g_in_use + n <= g_budget) {
        g_in_use += n;  // reserved before the allocation, returned if it fails
        lock.unlock();
        void* p = nullptr;
        if (plexus_alloc(&p, n) == PLEXUS_SUCCESS) {
          lock.lock();
          g_sizes[p] = n;
          return {p, p, &free_to_pool, at::Device(at::kCPU)};
        }
        lock.lock();
        g_in_use -= n;
      }
      // Over the budget or the pool full: torch's own memory (staged when it meets a
      // collective).
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
  const pid_t owner = ::getpid();
  return at::from_blob(
      memory, like.sizes(),
      [owner](void* p) {
        if (::getpid() == owner) plexus_free(p);  // a child holds the parent's mapping
      },
      at::TensorOptions().dtype(like.scalar_type()).device(at::kCPU));
}

namespace {

std::mutex g_install_mutex;  // two groups made at once on two threads turn it on once

void use_pool_allocator_locked(size_t min_bytes) {
  static PoolAllocator allocator;  // torch keeps the pointer: static lifetime
  g_min_bytes.store(min_bytes, std::memory_order_relaxed);
  if (g_owner.load() == ::getpid()) return;  // already on: only the threshold changed
  // Once: a child forked after the parent turned it on finds ours installed already (it
  // must not become its own fallback), and takes the pool over as its own.
  if (c10::GetCPUAllocator() != &allocator) g_fallback = c10::GetCPUAllocator();
  {
    std::lock_guard lock(g_sizes_mutex);
    g_sizes.clear();  // a child's copy names the parent's blocks
    g_in_use = 0;
    g_budget = pool_budget();
  }
  g_owner.store(::getpid());
  c10::SetCPUAllocator(&allocator, /*priority=*/255);
}

}  // namespace

bool from_pool_allocator(const at::Tensor& tensor) {
  return tensor.device().is_cpu() && tensor.storage().data() != nullptr &&
         from_pool(tensor.storage().data());
}

void use_pool_allocator(size_t min_bytes) {
  std::lock_guard lock(g_install_mutex);
  use_pool_allocator_locked(min_bytes);
}

void use_pool_allocator_unless_on(size_t min_bytes) {
  std::lock_guard lock(g_install_mutex);
  if (g_owner.load() == ::getpid()) return;
  use_pool_allocator_locked(min_bytes);
}

}  // namespace plexus::torch_backend
