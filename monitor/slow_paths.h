// The slow-path rule. The paths to one peer daemon (one per rail; a latency-class twin is
// left out by the caller, as it carries one class alone) are siblings: each could carry
// any of the link's frames. Among siblings busy over the span (they sent in enough
// telemetry windows, or have bytes queued in their socket), a path is slow when its
// throughput is under `ratio` x the median of its siblings'. Throughput is the kernel's
// delivery rate (TCP_INFO): what user space counts per window is coupled across siblings
// (one slow path holds the whole op back, and in-order acknowledgement delays the others'
// chunks too) and a socket buffer takes a slow path's bytes in bursts. A sample taken with
// too little queued only bounds a path from below: it may clear a sibling, never condemn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace plexus::monitor {

struct PathTraffic {
  size_t group = 0;             // paths to the same peer share a group
  double rate_bytes_per_s = 0;  // the kernel's delivery rate (0: none yet)
  bool app_limited = false;     // that sample had too little data queued
  size_t busy_windows = 0;      // windows of the span it sent a data chunk in
  uint64_t unsent_bytes = 0;    // queued in its socket now
};

struct SlowPathRule {
  size_t min_busy_windows = 1;
  double ratio = 0;  // plexusd's --slow-path-ratio (its default is the daemon's, in one place)
};

struct PathVerdict {
  enum Kind { kUnjudged, kAtPar, kSlow } kind = kUnjudged;
  double siblings_median_rate = 0;
  size_t siblings = 0;
};

// One verdict per path, in input order. Unjudged: idle, no rate, an app-limited sample,
// or no busy sibling.
std::vector<PathVerdict> judge_paths(std::span<const PathTraffic> paths, const SlowPathRule& rule);

}  // namespace plexus::monitor
