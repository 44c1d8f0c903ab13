// The host memory the weight store holds versions in, under one cap for the node. A buffer
// is counted from its allocation until the last holder lets go of it (a pull still copying
// out of an evicted version keeps it, and its bytes, until the copy ends).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/result.h"
#include "shm/memfd.h"

namespace plexus::daemon::weights {

// Any thread: buffers are let go on the copy thread too.
class WeightMemory {
 public:
  explicit WeightMemory(uint64_t cap) : counts_(std::make_shared<Counts>()), cap_(cap) {}

  // A zeroed buffer of `bytes` (pages committed as they are written), counted until its last
  // holder lets go; why not (past the cap, or the system has no memory) otherwise.
  common::Result<std::shared_ptr<shm::Mapping>> allocate(uint64_t bytes);

  uint64_t held() const { return counts_->held.load(std::memory_order_relaxed); }
  uint64_t cap() const { return cap_; }
  void set_cap(uint64_t cap) { cap_ = cap; }

 private:
  // Shared with the buffers' deleters, which may outlive the store.
  struct Counts {
    std::atomic<uint64_t> held{0};
  };
  std::shared_ptr<Counts> counts_;
  uint64_t cap_;
};

}  // namespace plexus::daemon::weights
