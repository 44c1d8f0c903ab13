#include "clientlib/src/stream_flag_slots.h"

#include <cstddef>
#include <cstring>

#include "clientlib/src/gpu_stream.h"
#include "shm/stream_flags.h"

namespace plexus::client {
namespace {
constexpr uintptr_t kPage = 4096;
}

StreamFlagSlots::~StreamFlagSlots() {
  if (block_ != nullptr) unmap_for_device(block_);
  if (allocation_ != nullptr) pool_.deallocate(allocation_);
}

std::string StreamFlagSlots::map_block() {
  allocation_ = pool_.allocate(kBlockBytes + kPage);
  if (allocation_ == nullptr) {
    return "the shared pool has no room for the " + std::to_string(kBlockBytes) +
           "-byte stream flags (raise PLEXUS_POOL_SIZE)";
  }
  const auto at = (reinterpret_cast<uintptr_t>(allocation_) + kPage - 1) & ~(kPage - 1);
  block_ = reinterpret_cast<std::byte*>(at);
  std::memset(block_, 0, kBlockBytes);
  const common::Result<uint64_t> device = map_for_device(block_, kBlockBytes);
  if (!device) {
    pool_.deallocate(allocation_);
    allocation_ = nullptr;
    block_ = nullptr;
    return device.error();
  }
  block_device_ = *device;
  for (size_t i = kSlots; i > 0; --i) free_.push_back(static_cast<int>(i - 1));
  return {};
}

common::Result<std::optional<StreamSlot>> StreamFlagSlots::acquire() {
  std::lock_guard lock(mutex_);
  if (block_ == nullptr) {
    if (std::string error = map_block(); !error.empty()) return common::fail(std::move(error));
  }
  if (free_.empty()) return {std::nullopt};
  StreamSlot slot;
  slot.index = free_.back();
  free_.pop_back();
  slot.ticket = next_ticket_++;
  if (next_ticket_ == 0) next_ticket_ = 1;  // 0 is every flag's first value
  const uint64_t within = static_cast<uint64_t>(slot.index) * sizeof(shm::StreamFlags);
  shm::arm_stream_done(shm::stream_flags_at(block_, within), slot.ticket);
  slot.pool_offset = pool_.offset_of(block_ + within);
  slot.ready_device = block_device_ + within + offsetof(shm::StreamFlags, ready);
  slot.done_device = block_device_ + within + offsetof(shm::StreamFlags, done);
  return std::optional(slot);
}

void StreamFlagSlots::release(int index, uint32_t ticket) {
  std::lock_guard lock(mutex_);
  shm::release_stream(
      shm::stream_flags_at(block_, static_cast<uint64_t>(index) * sizeof(shm::StreamFlags)),
      ticket);
  free_.push_back(index);
}

}  // namespace plexus::client
