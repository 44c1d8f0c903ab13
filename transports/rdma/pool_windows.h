// The windows of announced client pools (transports/path/sendable_memory.h) that one RDMA
// path sends from, so that a large payload goes from where it lies instead of through the
// bounce ring: which window holds a payload (a pool is registered in windows of
// settings.registration_window_bytes, one starting every half window, so that a payload of up
// to half a window lies wholly in one), and the pin of each posted frame's window until its
// write completes (an empty pin for a copied frame; a reliable connection completes its writes
// in order, so a FIFO). The registrations themselves are the device's, shared by every path
// over it (WindowCache, owned by verbs_device.h, whose calls register and deregister; tests
// give fakes). Owned by the path's verbs objects (path_verbs.h), which free it after the queue
// pair. Called only by the thread that runs the paths (the links' event loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>

#include "transports/path/sendable_memory.h"
#include "transports/rdma/mr_cache.h"
#include "transports/rdma/window_cache.h"

namespace plexus::transports::rdma {

class PoolWindows {
 public:
  // `min_bytes`: smaller payloads are copied; `window_bytes`: the registration window;
  // `windows`: the device's registrations.
  PoolWindows(std::shared_ptr<const SendableMemory> sendable, std::shared_ptr<WindowCache> windows,
              uint64_t min_bytes, uint64_t window_bytes);
  PoolWindows(const PoolWindows&) = delete;
  PoolWindows& operator=(const PoolWindows&) = delete;

  // The pinned registration of the pool window holding `payload`, or an empty pin: the payload
  // is then copied (too small to be worth it, not in an announced pool, not wholly inside its
  // window, every window held, the node's pinned bound spent, or a registration failed once:
  // copying is always correct, only slower).
  MrCache::Pin pin(std::span<const std::byte> payload);
  // A frame was posted holding `pin` (empty for a copied frame) until its write completes.
  void posted(MrCache::Pin pin);
  // The oldest posted frame's write completed: its window may go now.
  void write_completed();
  // A pool whose session went may be mapped again at the same address under a new id: the
  // old id's windows must never serve it, and their pinned pages go back.
  void forget_withdrawn();

 private:
  std::shared_ptr<const SendableMemory> sendable_;
  std::shared_ptr<WindowCache> windows_;
  uint64_t min_bytes_;
  uint64_t stride_;  // a window starts every half window
  uint64_t withdrawals_seen_ = 0;
  std::deque<MrCache::Pin> in_flight_;
};

}  // namespace plexus::transports::rdma
