// The client's buffer pool: one sealed memfd that the daemon maps too, so buffers
// allocated here cross the boundary as (offset, length) with no copy. The allocator
// is Boost.Interprocess's managed_external_buffer over the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "shm/memfd.h"

namespace plexus::shm {

class ClientPool {
 public:
  // Creates, seals and maps a pool of `bytes` (pages are committed only when touched).
  explicit ClientPool(size_t bytes);
  ~ClientPool();
  ClientPool(const ClientPool&) = delete;
  ClientPool& operator=(const ClientPool&) = delete;

  // 64-byte aligned; nullptr when the pool cannot satisfy the request.
  void* allocate(size_t bytes);
  // Returns false when ptr did not come from allocate().
  bool deallocate(void* ptr);

  // True when [ptr, ptr+bytes) lies wholly inside the pool.
  bool contains(const void* ptr, size_t bytes) const;
  uint64_t offset_of(const void* ptr) const;
  int fd() const { return fd_.get(); }
  const std::byte* base() const { return mapping_.data(); }
  size_t size() const { return mapping_.size(); }
  size_t free_bytes() const;

  // In a child just forked from the pool's owner: the pool's mapping becomes private
  // (MAP_PRIVATE over the same memfd, at the same address), so that what the child writes
  // into memory it inherited never reaches the parent or the daemon. Not a snapshot: a page
  // the child has not written still shows the memfd, the parent's and the daemon's later
  // writes included. If that mapping cannot be made (no memory), the pool is mapped shared
  // but read-only instead, so a write faults rather than reaching the parent; false then.
  // Only system calls: safe in a pthread_atfork child handler.
  bool make_private_after_fork() noexcept;

 private:
  struct Allocator;
  common::UniqueFd fd_;
  Mapping mapping_;
  std::unique_ptr<Allocator> allocator_;
  // Blocks handed out, so a foreign, interior or twice-freed pointer is refused rather
  // than corrupting the allocator.
  std::mutex live_mutex_;
  std::unordered_set<const void*> live_;
};

}  // namespace plexus::shm
