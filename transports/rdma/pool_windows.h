// The windows of announced client pools (transports/path/sendable_memory.h) that one RDMA
// path has registered with its device, so that a large payload goes from where it lies
// instead of through the bounce ring: which window holds a payload (a pool is registered in
// windows of settings.registration_window_bytes, one starting every half window, so that a
// payload of up to half a window lies wholly in one), the registrations themselves (MrCache),
// and the pin of each posted frame's window until its write completes (an empty pin for a
// copied frame; a reliable connection completes its writes in order, so a FIFO). Owned by the
// path's verbs objects (path_verbs.h), which free it after the queue pair and before the
// protection domain; the register and deregister calls come from there (tests give fakes).
// Called only by the thread that runs the path (the links' event loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>

#include "transports/path/sendable_memory.h"
#include "transports/rdma/mr_cache.h"

namespace plexus::transports::rdma {

class PoolWindows {
 public:
  // `min_bytes`: smaller payloads are copied; `window_bytes`: the registration window;
  // `max_registrations`: windows kept registered (MrCache's bound).
  PoolWindows(std::shared_ptr<const SendableMemory> sendable, MrCache::Calls calls,
              uint64_t min_bytes, uint64_t window_bytes, uint32_t max_registrations);
  PoolWindows(const PoolWindows&) = delete;
  PoolWindows& operator=(const PoolWindows&) = delete;

  // The pinned registration of the pool window holding `payload`, or an empty pin: the payload
  // is then copied (too small to be worth it, not in an announced pool, not wholly inside its
  // window, every window held, or a registration failed once: copying is always correct, only
  // slower).
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
  uint64_t min_bytes_;
  uint64_t stride_;  // a window starts every half window
  // A registration failed: the memory cannot be pinned, it would fail again, so the path
  // copies from now on rather than retry a pin of a whole window per frame.
  bool refused_ = false;
  uint64_t withdrawals_seen_ = 0;
  MrCache cache_;
  std::deque<MrCache::Pin> in_flight_;
};

}  // namespace plexus::transports::rdma
