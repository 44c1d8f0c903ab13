#include "transports/path/sendable_memory.h"

#include <utility>

namespace plexus::transports {

SendableMemory::Announcement::Announcement(Announcement&& other) noexcept
    : registry_(std::move(other.registry_)), id_(std::exchange(other.id_, 0)) {}

SendableMemory::Announcement& SendableMemory::Announcement::operator=(
    Announcement&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::move(other.registry_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void SendableMemory::Announcement::reset() {
  if (id_ == 0) return;
  if (auto registry = registry_.lock()) registry->withdraw(id_);
  id_ = 0;
  registry_.reset();
}

SendableMemory::Announcement SendableMemory::announce(std::span<std::byte> memory) {
  if (memory.empty()) return {};
  std::lock_guard lock(mutex_);
  const uint64_t id = next_id_++;
  by_base_[reinterpret_cast<uintptr_t>(memory.data())] = Region{id, memory.data(), memory.size()};
  return Announcement(weak_from_this(), id);
}

std::optional<SendableMemory::Region> SendableMemory::find(const std::byte* data,
                                                           size_t bytes) const {
  const auto address = reinterpret_cast<uintptr_t>(data);
  std::lock_guard lock(mutex_);
  auto it = by_base_.upper_bound(address);
  if (it == by_base_.begin()) return std::nullopt;
  --it;
  const Region& region = it->second;
  const uintptr_t offset = address - it->first;
  if (offset > region.bytes || bytes > region.bytes - offset) return std::nullopt;
  return region;
}

bool SendableMemory::holds(uint64_t id) const {
  std::lock_guard lock(mutex_);
  for (const auto& [base, region] : by_base_) {
    if (region.id == id) return true;
  }
  return false;
}

uint64_t SendableMemory::withdrawals() const {
  return withdrawals_.load(std::memory_order_acquire);
}

size_t SendableMemory::regions() const {
  std::lock_guard lock(mutex_);
  return by_base_.size();
}

void SendableMemory::withdraw(uint64_t id) {
  std::lock_guard lock(mutex_);
  for (auto it = by_base_.begin(); it != by_base_.end(); ++it) {
    if (it->second.id == id) {
      by_base_.erase(it);
      withdrawals_.fetch_add(1, std::memory_order_release);
      return;
    }
  }
}

}  // namespace plexus::transports
