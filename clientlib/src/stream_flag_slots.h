// The process's stream flags (shm::StreamFlags): one page-aligned block of the shared pool,
// mapped for the GPU once, cut into slots that stream-ordered calls borrow from submission
// to completion. Every use of a slot gets a fresh ticket, so a flag left over from the
// slot's previous use never reads as this one's. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "shm/pool.h"
#include "shm/ring_layout.h"

namespace plexus::client {

struct StreamSlot {
  int index = -1;
  uint32_t ticket = 0;
  uint64_t pool_offset = 0;  // of its StreamFlags
  uint64_t ready_device = 0;
  uint64_t done_device = 0;
};

class StreamFlagSlots {
 public:
  static constexpr size_t kBlockBytes = 64 * 1024;
  static constexpr size_t kSlots = kBlockBytes / sizeof(shm::StreamFlags);

  explicit StreamFlagSlots(shm::ClientPool& pool) : pool_(pool) {}
  ~StreamFlagSlots();
  // A free slot with a fresh ticket; nullopt while every slot is in use (a completion will
  // free one); or why not (no room in the pool, the GPU cannot map it).
  common::Result<std::optional<StreamSlot>> acquire();
  // Sets the slot's done flag to `ticket` (the daemon has, unless it died) and frees it.
  void release(int index, uint32_t ticket);

 private:
  [[nodiscard]] std::string map_block();

  shm::ClientPool& pool_;
  std::mutex mutex_;
  void* allocation_ = nullptr;
  std::byte* block_ = nullptr;  // page-aligned within allocation_
  uint64_t block_device_ = 0;
  std::vector<int> free_;
  uint32_t next_ticket_ = 1;
};

}  // namespace plexus::client
