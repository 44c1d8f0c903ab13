#include "monitor/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace plexus::monitor {

double latency_quantile_us(const LatencyCounts& counts, double q, double max_us) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the wanted sample, 1-based: at least the first.
  const double rank = std::max(1.0, std::ceil(q * static_cast<double>(total)));
  uint64_t below = 0;
  for (int b = 0; b < kLatencyBuckets; ++b) {
    const uint64_t here = counts[static_cast<size_t>(b)];
    if (here == 0) continue;
    if (static_cast<double>(below + here) >= rank) {
      // Samples are taken as spread evenly over the bucket.
      const double fraction = (rank - static_cast<double>(below)) / static_cast<double>(here);
      const double value = bucket_low_us(b) + fraction * (bucket_high_us(b) - bucket_low_us(b));
      return max_us > 0 ? std::min(value, max_us) : value;
    }
    below += here;
  }
  return max_us;  // not reached: the loop covers every sample
}

}  // namespace plexus::monitor
