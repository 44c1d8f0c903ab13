#include "shm/pool.h"

#include <sys/mman.h>

#include <boost/interprocess/managed_external_buffer.hpp>

namespace plexus::shm {

namespace bip = boost::interprocess;

struct ClientPool::Allocator {
  bip::managed_external_buffer buffer;
};

ClientPool::ClientPool(size_t bytes)
    : fd_(create_sealed_memfd("plexus-pool", bytes)),
      mapping_(map_shared(fd_.get(), bytes)),
      allocator_(std::make_unique<Allocator>(
          Allocator{bip::managed_external_buffer(bip::create_only, mapping_.data(), bytes)})) {}

ClientPool::~ClientPool() = default;

bool ClientPool::make_private_after_fork() noexcept {
  void* base = mapping_.data();
  // MAP_NORESERVE: a private writable mapping would otherwise be charged the whole pool
  // against overcommit in every child, and could fail where the shared one did not.
  void* again = ::mmap(base, mapping_.size(), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd_.get(), 0);
  if (again == base) return true;
  // Some kernels unmap the old range before failing: map it again, read-only.
  (void)::mmap(base, mapping_.size(), PROT_READ, MAP_SHARED | MAP_FIXED, fd_.get(), 0);
  return false;
}

void* ClientPool::allocate(size_t bytes) {
  // Boost's size arithmetic wraps for sizes near SIZE_MAX: refuse what cannot fit.
  if (bytes > mapping_.size()) return nullptr;
  void* ptr = allocator_->buffer.allocate_aligned(bytes == 0 ? 1 : bytes, 64, std::nothrow);
  if (ptr != nullptr) {
    std::lock_guard lock(live_mutex_);
    live_.insert(ptr);
  }
  return ptr;
}

bool ClientPool::deallocate(void* ptr) {
  {
    std::lock_guard lock(live_mutex_);
    if (live_.erase(ptr) == 0) return false;
  }
  allocator_->buffer.deallocate(ptr);
  return true;
}

bool ClientPool::contains(const void* ptr, size_t bytes) const {
  auto p = reinterpret_cast<uintptr_t>(ptr);
  auto base = reinterpret_cast<uintptr_t>(mapping_.data());
  return p >= base && p - base <= mapping_.size() && bytes <= mapping_.size() - (p - base);
}

uint64_t ClientPool::offset_of(const void* ptr) const {
  return reinterpret_cast<uintptr_t>(ptr) - reinterpret_cast<uintptr_t>(mapping_.data());
}

size_t ClientPool::free_bytes() const { return allocator_->buffer.get_free_memory(); }

}  // namespace plexus::shm
