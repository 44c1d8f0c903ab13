// The client pool windows registered on one verbs device for zero-copy sends, shared by every
// path over it (verbs_device.h owns it; each path's PoolWindows, pool_windows.h, looks windows
// up here): the registrations (MrCache, at most `max_registrations` at once), each holding its
// bytes of the node's pinned-memory bound (pinned_budget.h) until deregistered, and whether a
// registration failed for good. A window that does not fit the bound is a failure of the
// moment (the payload is copied, and a later one may fit); a registration the device refused
// means the memory cannot be pinned, so every path of the device copies from then on rather
// than try a whole window's pin per frame. Knows nothing of libibverbs: the device gives the
// calls (tests give fakes). Called only by the thread that runs the paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "transports/rdma/mr_cache.h"
#include "transports/rdma/pinned_budget.h"

namespace plexus::transports::rdma {

class WindowCache {
 public:
  // `budget`: null, no bound but MrCache's.
  WindowCache(MrCache::Calls calls, size_t max_registrations, std::shared_ptr<PinnedBudget> budget);
  WindowCache(const WindowCache&) = delete;
  WindowCache& operator=(const WindowCache&) = delete;

  // MrCache's, within the budget.
  common::Result<MrCache::Pin> lookup(uint64_t owner, std::byte* base, size_t bytes) {
    return cache_.lookup(owner, base, bytes);
  }
  void invalidate(uint64_t owner) { cache_.invalidate(owner); }
  std::vector<uint64_t> owners() const { return cache_.owners(); }
  // Registrations no work request holds go now (a path's rings want their bytes).
  uint64_t drop_unpinned() { return cache_.drop_unpinned(); }
  bool refused() const { return *refused_; }
  size_t entries() const { return cache_.entries(); }

 private:
  std::shared_ptr<bool> refused_ = std::make_shared<bool>(false);
  MrCache cache_;  // after refused_: its calls set it
};

}  // namespace plexus::transports::rdma
