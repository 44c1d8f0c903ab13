// Chunk latencies as a histogram of power-of-two buckets of microseconds: cheap to record
// (a bit scan), cheap to merge across windows (adding counts), and percentiles within a
// factor of two by construction, refined by interpolating inside the bucket.
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>

namespace plexus::monitor {

// Bucket 0: under 2 us; bucket b (1..kLatencyBuckets-2): [2^b, 2^(b+1)) us; the last bucket
// takes everything from 2^(kLatencyBuckets-1) us (about 8.4 s) up.
inline constexpr int kLatencyBuckets = 24;

inline int latency_bucket(std::chrono::nanoseconds latency) {
  const auto us =
      latency.count() <= 0 ? uint64_t{0} : static_cast<uint64_t>(latency.count()) / 1000;
  if (us < 2) return 0;
  const int b = std::bit_width(us) - 1;  // floor(log2(us))
  return b >= kLatencyBuckets ? kLatencyBuckets - 1 : b;
}

// Where bucket b starts and ends, in microseconds (the last one is given the width of a
// doubling, for interpolation).
inline double bucket_low_us(int b) { return b == 0 ? 0.0 : static_cast<double>(uint64_t{1} << b); }
inline double bucket_high_us(int b) { return static_cast<double>(uint64_t{1} << (b + 1)); }

using LatencyCounts = std::array<uint64_t, kLatencyBuckets>;

struct LatencySummary {
  uint64_t count = 0;
  double p50_us = 0;
  double p99_us = 0;
  double max_us = 0;  // exact, from the windows' maxima
};

// The q-quantile (0 < q <= 1) of `counts`: the bucket where the cumulative count reaches
// q * total, interpolated linearly inside it; 0 for an empty histogram. Never above
// `max_us` when that is known (> 0).
double latency_quantile_us(const LatencyCounts& counts, double q, double max_us = 0);

}  // namespace plexus::monitor
