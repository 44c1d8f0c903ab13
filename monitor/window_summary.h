// What a run of windows (WindowRing::recent) adds up to: totals, throughput over the busy
// windows, and chunk-latency percentiles from the merged histograms.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "monitor/latency_histogram.h"
#include "monitor/window_ring.h"

namespace plexus::monitor {

struct WindowSummary : TrafficCounts {
  size_t windows = 0;
  size_t busy_windows = 0;  // with a chunk either way
  // Bytes sent per second of busy windows: the rate while there was traffic, which idle
  // gaps between collectives do not dilute.
  double busy_out_bytes_per_s = 0;
  size_t sending_windows = 0;  // with a data chunk sent (monitor/slow_paths.h)
  LatencySummary latency;
};

WindowSummary summarize(std::span<const WindowRing::Window> windows,
                        std::chrono::nanoseconds width);
// The complete windows of the last `span` before `now` (at least one), summarized.
WindowSummary summarize_recent(const WindowRing& ring, WindowRing::Clock::time_point now,
                               std::chrono::nanoseconds span);

}  // namespace plexus::monitor
