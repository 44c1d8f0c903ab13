#include "transports/rdma/pool_windows.h"

#include <algorithm>
#include <utility>

namespace plexus::transports::rdma {

PoolWindows::PoolWindows(std::shared_ptr<const SendableMemory> sendable,
                         std::shared_ptr<WindowCache> windows, uint64_t min_bytes,
                         uint64_t window_bytes)
    : sendable_(std::move(sendable)),
      windows_(std::move(windows)),
      min_bytes_(min_bytes),
      stride_(std::max<uint64_t>(window_bytes / 2, 4096)) {}

MrCache::Pin PoolWindows::pin(std::span<const std::byte> payload) {
  if (windows_->refused() || payload.size() < min_bytes_) return {};
  const auto region = sendable_->find(payload.data(), payload.size());
  if (!region) return {};
  const uint64_t offset = static_cast<uint64_t>(payload.data() - region->base);
  const uint64_t window_offset = offset / stride_ * stride_;
  const uint64_t window_bytes = std::min<uint64_t>(2 * stride_, region->bytes - window_offset);
  if (offset + payload.size() > window_offset + window_bytes) return {};
  std::byte* const window = region->base + window_offset;
  auto pinned = windows_->lookup(region->id, window, static_cast<size_t>(window_bytes));
  if (!pinned.ok() && !windows_->refused() && windows_->drop_unpinned() > 0) {
    // The node's bound (or the cache) was full of windows no write reads now: they give way.
    pinned = windows_->lookup(region->id, window, static_cast<size_t>(window_bytes));
  }
  return pinned.ok() ? pinned.take() : MrCache::Pin{};
}

void PoolWindows::posted(MrCache::Pin pin) { in_flight_.push_back(std::move(pin)); }

void PoolWindows::write_completed() {
  if (!in_flight_.empty()) in_flight_.pop_front();
}

void PoolWindows::forget_withdrawn() {
  const uint64_t withdrawals = sendable_->withdrawals();
  if (withdrawals == withdrawals_seen_) return;
  withdrawals_seen_ = withdrawals;
  for (uint64_t owner : windows_->owners()) {
    if (!sendable_->holds(owner)) windows_->invalidate(owner);
  }
}

}  // namespace plexus::transports::rdma
