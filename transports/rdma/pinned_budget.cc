#include "transports/rdma/pinned_budget.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace plexus::transports::rdma {
namespace {

std::atomic<uint64_t>& counter(PinnedBudget::State& state, PinnedBudget::Use use) {
  return use == PinnedBudget::Use::kPath ? state.paths : state.windows;
}

}  // namespace

PinnedBudget::Hold& PinnedBudget::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
    use_ = other.use_;
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBudget::Hold::release() {
  if (state_ != nullptr && bytes_ != 0) {
    counter(*state_, use_).fetch_sub(bytes_, std::memory_order_relaxed);
  }
  bytes_ = 0;
  state_.reset();
}

common::Result<PinnedBudget::Hold> PinnedBudget::take(uint64_t bytes, Use use) {
  std::atomic<uint64_t>& mine = counter(*state_, use);
  const uint64_t max = state_->max_bytes;
  bool taken = false;
  for (uint64_t held = mine.load(std::memory_order_relaxed); !taken;) {
    const uint64_t beside = use == Use::kPath ? 0 : held_by_paths();
    if (held + beside > max || bytes > max - held - beside) break;
    taken = mine.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed);
  }
  if (!taken) {
    return common::fail("the node's RDMA pinned-memory bound (--rdma-pinned-max-bytes " +
                        std::to_string(state_->max_bytes) + ") is spent: paths hold " +
                        std::to_string(held_by_paths()) + " bytes and registered pool windows " +
                        std::to_string(held_by_windows()) + ", and " +
                        (use == Use::kPath ? "a path's rings need " : "a pool window needs ") +
                        std::to_string(bytes));
  }
  Hold hold;
  hold.state_ = state_;
  hold.use_ = use;
  hold.bytes_ = bytes;
  return hold;
}

uint64_t ring_bytes_within(uint64_t max_bytes, uint64_t paths, uint64_t extra, uint64_t frame,
                           uint64_t largest) {
  const uint64_t floor = std::bit_ceil(std::max<uint64_t>(frame, 1));
  const uint64_t per_path = max_bytes / std::max<uint64_t>(paths, 1);
  const uint64_t share = per_path > extra ? (per_path - extra) / 2 : 0;
  const uint64_t fitting = share == 0 ? 0 : std::bit_floor(share);
  return std::max(floor, std::min(fitting, std::bit_floor(std::max<uint64_t>(largest, 1))));
}

}  // namespace plexus::transports::rdma
