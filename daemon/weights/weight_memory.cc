#include "daemon/weights/weight_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "common/human_bytes.h"

namespace plexus::daemon::weights {

common::Result<std::shared_ptr<shm::Mapping>> WeightMemory::allocate(uint64_t bytes) {
  // Counted before the mapping is made, so that two publishes racing for the last room
  // cannot both pass the cap.
  uint64_t held = counts_->held.load(std::memory_order_relaxed);
  do {
    if (bytes > cap_ || held > cap_ - bytes) {
      return common::fail("it needs " + common::human_bytes(bytes) + " and the store holds " +
                          common::human_bytes(held) + " of its cap of " +
                          common::human_bytes(cap_));
    }
  } while (!counts_->held.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  const size_t size = bytes == 0 ? 1 : static_cast<size_t>(bytes);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    counts_->held.fetch_sub(bytes, std::memory_order_relaxed);
    return common::fail("the system gave no memory for " + common::human_bytes(bytes) + ": " +
                        std::strerror(err));
  }
  // Large versions are copied in and out whole: huge pages halve the TLB misses (a hint).
  (void)madvise(base, size, MADV_HUGEPAGE);
  std::shared_ptr<Counts> counts = counts_;
  return std::shared_ptr<shm::Mapping>(new shm::Mapping(base, size),
                                       [counts, bytes](shm::Mapping* mapping) {
                                         delete mapping;
                                         counts->held.fetch_sub(bytes, std::memory_order_relaxed);
                                       });
}

}  // namespace plexus::daemon::weights
