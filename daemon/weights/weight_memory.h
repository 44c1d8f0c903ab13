// The host memory the weight store holds versions in, under one cap for the node. A buffer
// is counted from its allocation until the last holder lets go of it (a pull still copying
// out of an evicted version keeps it, and its bytes, until the copy ends). A buffer let go
// is kept as a spare, still under the cap, and handed to the next allocation of its size: a
// trainer publishes the same bytes every step, and a fresh mapping would cost the publish a
// page fault (and the kernel's zeroing) per page, several times the copy itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/result.h"
#include "shm/memfd.h"

namespace plexus::daemon::weights {

// Any thread: buffers are let go on the copy thread too.
class WeightMemory {
 public:
  explicit WeightMemory(uint64_t cap) : state_(std::make_shared<State>()) { state_->cap = cap; }

  // A buffer of `bytes` (a spare of that size, or a new mapping whose pages are committed as
  // they are written), counted until its last holder lets go; why not (past the cap, or the
  // system has no memory) otherwise. Spares of other sizes are let go when room is needed.
  common::Result<std::shared_ptr<shm::Mapping>> allocate(uint64_t bytes);

  // What a buffer of `bytes` counts against the cap: whole pages, as the kernel maps them
  // (an empty one costs a page too).
  static uint64_t counted(uint64_t bytes) {
    return (std::max<uint64_t>(bytes, 1) + 4095) / 4096 * 4096;
  }

  uint64_t held() const;   // in buffers someone holds
  uint64_t spare() const;  // kept for reuse
  uint64_t cap() const;

 private:
  // Shared with the buffers' deleters, which may outlive the store.
  struct State {
    mutable std::mutex mutex;
    uint64_t cap = 0;
    uint64_t held = 0;
    uint64_t spare_bytes = 0;
    std::multimap<uint64_t, std::unique_ptr<shm::Mapping>> spares;  // by size
  };
  static std::shared_ptr<shm::Mapping> hand_out(const std::shared_ptr<State>& state,
                                                std::unique_ptr<shm::Mapping> mapping,
                                                uint64_t bytes);
  std::shared_ptr<State> state_;
};

}  // namespace plexus::daemon::weights
