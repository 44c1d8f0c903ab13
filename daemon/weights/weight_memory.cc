#include "daemon/weights/weight_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/human_bytes.h"

namespace plexus::daemon::weights {

std::shared_ptr<shm::Mapping> WeightMemory::hand_out(const std::shared_ptr<State>& state,
                                                     std::unique_ptr<shm::Mapping> mapping,
                                                     uint64_t bytes) {
  // The deleter keeps the buffer as a spare (its bytes still under the cap).
  return std::shared_ptr<shm::Mapping>(mapping.release(), [state, bytes](shm::Mapping* m) {
    std::lock_guard lock(state->mutex);
    state->held -= bytes;
    state->spare_bytes += bytes;
    state->spares.emplace(bytes, std::unique_ptr<shm::Mapping>(m));
  });
}

common::Result<std::shared_ptr<shm::Mapping>> WeightMemory::allocate(uint64_t wanted) {
  if (wanted > (uint64_t{1} << 52)) {
    return common::fail("it asks for " + std::to_string(wanted) + " bytes");
  }
  const uint64_t bytes = counted(wanted);
  std::vector<std::unique_ptr<shm::Mapping>> let_go;  // unmapped after the lock
  {
    std::lock_guard lock(state_->mutex);
    State& s = *state_;
    if (auto same = s.spares.find(bytes); same != s.spares.end()) {
      std::unique_ptr<shm::Mapping> reused = std::move(same->second);
      s.spares.erase(same);
      s.spare_bytes -= bytes;
      s.held += bytes;
      return hand_out(state_, std::move(reused), bytes);
    }
    if (bytes > s.cap || s.held > s.cap - bytes) {
      return common::fail("it needs " + common::human_bytes(bytes) + " and the store holds " +
                          common::human_bytes(s.held) + " of its cap of " +
                          common::human_bytes(s.cap));
    }
    // Spares of other sizes make room, largest first.
    while (s.held + s.spare_bytes + bytes > s.cap && !s.spares.empty()) {
      auto largest = std::prev(s.spares.end());
      s.spare_bytes -= largest->first;
      let_go.push_back(std::move(largest->second));
      s.spares.erase(largest);
    }
    s.held += bytes;  // counted before the mapping is made: a racing allocation sees it
  }
  let_go.clear();
  const auto size = static_cast<size_t>(bytes);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    std::lock_guard lock(state_->mutex);
    state_->held -= bytes;
    return common::fail("the system gave no memory for " + common::human_bytes(bytes) + ": " +
                        std::strerror(err));
  }
  // Large versions are copied in and out whole: huge pages cut the faults and TLB misses (a
  // hint the kernel may ignore).
  (void)madvise(base, size, MADV_HUGEPAGE);
  return hand_out(state_, std::make_unique<shm::Mapping>(base, size), bytes);
}

uint64_t WeightMemory::held() const {
  std::lock_guard lock(state_->mutex);
  return state_->held;
}

uint64_t WeightMemory::spare() const {
  std::lock_guard lock(state_->mutex);
  return state_->spare_bytes;
}

uint64_t WeightMemory::cap() const {
  std::lock_guard lock(state_->mutex);
  return state_->cap;
}

}  // namespace plexus::daemon::weights
