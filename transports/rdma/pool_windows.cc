#include "transports/rdma/pool_windows.h"

#include <algorithm>
#include <utility>

namespace plexus::transports::rdma {

PoolWindows::PoolWindows(std::shared_ptr<const SendableMemory> sendable, MrCache::Calls calls,
                         uint64_t min_bytes, uint64_t window_bytes, uint32_t max_registrations)
    : sendable_(std::move(sendable)),
      min_bytes_(min_bytes),
      stride_(std::max<uint64_t>(window_bytes / 2, 4096)),
      cache_(MrCache::Calls{[this, register_region = std::move(calls.register_region)](
                                std::byte* base, size_t bytes) {
                              auto registered = register_region(base, bytes);
                              if (!registered.ok()) refused_ = true;
                              return registered;
                            },
                            std::move(calls.deregister)},
             max_registrations) {}

MrCache::Pin PoolWindows::pin(std::span<const std::byte> payload) {
  if (refused_ || payload.size() < min_bytes_) return {};
  const auto region = sendable_->find(payload.data(), payload.size());
  if (!region) return {};
  const uint64_t offset = static_cast<uint64_t>(payload.data() - region->base);
  const uint64_t window_offset = offset / stride_ * stride_;
  const uint64_t window_bytes = std::min<uint64_t>(2 * stride_, region->bytes - window_offset);
  if (offset + payload.size() > window_offset + window_bytes) return {};
  auto pinned =
      cache_.lookup(region->id, region->base + window_offset, static_cast<size_t>(window_bytes));
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
  for (uint64_t owner : cache_.owners()) {
    if (!sendable_->holds(owner)) cache_.invalidate(owner);
  }
}

}  // namespace plexus::transports::rdma
