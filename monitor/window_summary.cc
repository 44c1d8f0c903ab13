#include "monitor/window_summary.h"

#include <algorithm>

namespace plexus::monitor {

WindowSummary summarize(std::span<const WindowRing::Window> windows,
                        std::chrono::nanoseconds width) {
  WindowSummary s;
  LatencyCounts merged{};
  uint64_t max_ns = 0;
  uint64_t busy_bytes_out = 0;
  for (const WindowRing::Window& w : windows) {
    ++s.windows;
    s += w;
    if (w.chunks_out > 0) ++s.sending_windows;
    if (w.busy()) {
      ++s.busy_windows;
      busy_bytes_out += w.bytes_out;
    }
    for (size_t b = 0; b < merged.size(); ++b) merged[b] += w.latency[b];
    max_ns = std::max(max_ns, w.latency_max_ns);
  }
  if (s.busy_windows > 0) {
    const double seconds =
        std::chrono::duration<double>(width).count() * static_cast<double>(s.busy_windows);
    s.busy_out_bytes_per_s = static_cast<double>(busy_bytes_out) / seconds;
  }
  for (uint64_t c : merged) s.latency.count += c;
  s.latency.max_us = static_cast<double>(max_ns) / 1000.0;
  s.latency.p50_us = latency_quantile_us(merged, 0.50, s.latency.max_us);
  s.latency.p99_us = latency_quantile_us(merged, 0.99, s.latency.max_us);
  return s;
}

WindowSummary summarize_recent(const WindowRing& ring, WindowRing::Clock::time_point now,
                               std::chrono::nanoseconds span) {
  const auto count = static_cast<size_t>(std::max<int64_t>(span / ring.width(), 1));
  const auto windows = ring.recent(now, count);
  return summarize(windows, ring.width());
}

}  // namespace plexus::monitor
