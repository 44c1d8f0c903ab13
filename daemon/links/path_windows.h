// One path's telemetry windows (monitor/window_ring.h), held in full only while the path has
// traffic: a path with none yet, or none for the full ring's whole span (its windows all
// idle, which readers see as zeros anyway), holds a ring of two windows that carries its
// totals alone. The first record after that makes the full ring again, the totals carried
// over. At a thousand idle peers that is a few hundred KiB, not gigabytes.
// Owns the current ring; a reader's copy (the published snapshot's) keeps an older ring alive
// until it lets it go. Engine thread only (the rings themselves are read from any thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "monitor/window_ring.h"

namespace plexus::daemon {

class PathWindows {
 public:
  using Clock = monitor::WindowRing::Clock;

  // Full rings of `windows` windows of `width` (as WindowRing's).
  PathWindows(std::chrono::nanoseconds width, size_t windows);

  // The ring to record into at `now`: the full one, made if the path held the small one.
  monitor::WindowRing& at(Clock::time_point now);
  // Lets the full ring go if nothing was recorded for its whole span before `now`; returns
  // whether it did.
  bool release_if_idle(Clock::time_point now);
  std::shared_ptr<const monitor::WindowRing> ring() const { return ring_; }
  bool full() const { return full_; }

 private:
  void replace(size_t windows);

  std::chrono::nanoseconds width_;
  size_t windows_;
  std::shared_ptr<monitor::WindowRing> ring_;
  bool full_ = false;
  Clock::time_point last_record_{};
};

}  // namespace plexus::daemon
