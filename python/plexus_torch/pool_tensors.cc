#include "python/plexus_torch/pool_tensors.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <boost/interprocess/managed_external_buffer.hpp>
#include <mutex>
#include <new>
#include <optional>

#include "plexus/plexus.h"
#include "python/plexus_torch/torch_compat.h"

namespace plexus::torch_backend {
namespace bip = boost::interprocess;
namespace {

// The process that enabled the allocator: only it allocates from and frees to its arena (a
// forked child has a pool of its own, or none, and must not open a session for this).
std::atomic<pid_t> g_owner{0};
std::atomic<size_t> g_min_bytes{0};
std::atomic<at::Allocator*> g_fallback{nullptr};  // torch's allocator before ours

// The allocator's own part of the pool, reserved whole when it is turned on: half the pool,
// so that the other half stays in one piece for staging tensors outside it (blocks of the
// allocator scattered over the whole pool would leave no room for a large one). Its pages,
// once touched, stay resident (and mapped by plexusd) until the process ends, as a caching
// allocator's would.
struct Arena {
  std::byte* base = nullptr;
  size_t size = 0;
  std::optional<bip::managed_external_buffer> heap;
};
std::mutex g_arena_mutex;
Arena g_arena;

bool from_pool(const void* p) {
  std::lock_guard lock(g_arena_mutex);
  const auto* b = static_cast<const std::byte*>(p);
  return g_arena.base != nullptr && b >= g_arena.base && b < g_arena.base + g_arena.size;
}

void free_to_pool(void* p) {
  if (::getpid() != g_owner.load(std::memory_order_acquire)) return;  // a child: the parent's
  std::lock_guard lock(g_arena_mutex);
  g_arena.heap->deallocate(p);
}

// For raw_deallocate callers: a pointer from either allocator.
void free_either(void* p) {
  if (::getpid() == g_owner.load(std::memory_order_acquire) && from_pool(p)) {
    free_to_pool(p);
    return;
  }
  at::Allocator* fallback = g_fallback.load(std::memory_order_acquire);
  if (c10::DeleterFnPtr d = fallback->raw_deleter(); d != nullptr) d(p);
}

class PoolAllocator final : public at::Allocator {
 public:
#if PLEXUS_TORCH_ALLOCATOR_V2_3
  at::DataPtr allocate(size_t n) override {
#else
  at::DataPtr allocate(size_t n) const override {
#endif
    if (n >= g_min_bytes.load(std::memory_order_relaxed) &&
        ::getpid() == g_owner.load(std::memory_order_acquire)) {
      std::unique_lock lock(g_arena_mutex);
      if (void* p = g_arena.heap->allocate_aligned(n, 64, std::nothrow); p != nullptr) {
        return {p, p, &free_to_pool, at::Device(at::kCPU)};
      }
      // The arena full: torch's own memory (staged when it meets a collective).
    }
    return g_fallback.load(std::memory_order_acquire)->allocate(n);
  }
  at::DeleterFnPtr raw_deleter() const override { return &free_either; }
#if PLEXUS_TORCH_ALLOCATOR_V2_3
  // Both allocators' memory is ordinary host memory: a plain copy.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif
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
  static const bool atfork_installed = [] {
    // A fork while another thread allocates: the child's copy of the lock would stay held.
    pthread_atfork(nullptr, nullptr, [] { new (&g_arena_mutex) std::mutex(); });
    return true;
  }();
  (void)atfork_installed;
  g_min_bytes.store(min_bytes, std::memory_order_relaxed);
  if (g_owner.load(std::memory_order_acquire) == ::getpid()) return;  // on: the threshold only
  size_t pool = 0;
  void* base = nullptr;
  if (plexus_pool_size(&pool) != PLEXUS_SUCCESS ||
      plexus_alloc(&base, pool / 2) != PLEXUS_SUCCESS) {
    TORCH_WARN("plexus_torch: the pool allocator stays off (tensors are staged instead): ",
               plexus_get_last_error());
    return;
  }
  {
    // A child forked after the parent turned it on takes its own pool over; the parent's
    // arena it inherited is its private copy, never freed into.
    std::lock_guard lock(g_arena_mutex);
    g_arena.base = static_cast<std::byte*>(base);
    g_arena.size = pool / 2;
    g_arena.heap.emplace(bip::create_only, base, pool / 2);
  }
  // Once: a child finds ours installed already and must not become its own fallback.
  if (c10::GetCPUAllocator() != &allocator) {
    g_fallback.store(c10::GetCPUAllocator(), std::memory_order_release);
  }
  g_owner.store(::getpid(), std::memory_order_release);
  c10::SetCPUAllocator(&allocator, /*priority=*/255);
}

}  // namespace

bool from_pool_allocator(const at::Tensor& tensor) {
  return tensor.device().is_cpu() && tensor.layout() == at::kStrided &&
         tensor.storage().data() != nullptr && from_pool(tensor.storage().data());
}

void use_pool_allocator(size_t min_bytes) {
  std::lock_guard lock(g_install_mutex);
  use_pool_allocator_locked(min_bytes);
}

void use_pool_allocator_unless_on(size_t min_bytes) {
  std::lock_guard lock(g_install_mutex);
  if (g_owner.load(std::memory_order_acquire) == ::getpid()) return;
  use_pool_allocator_locked(min_bytes);
}

}  // namespace plexus::torch_backend
