// Closed-form α-β costs of each algorithm (p participants, n bytes of work vector).
#include "daemon/algorithms/cost_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <utility>

namespace plexus::daemon::algo {
namespace {

inline constexpr double kChainPieceBytes = 512.0 * 1024.0;
// Offload is chosen only when its estimate is below this fraction of the best other one's.
inline constexpr double kOffloadMustWin = 0.95;

double ceil_log2(int p) {
  return p <= 1 ? 0.0 : static_cast<double>(std::bit_width(static_cast<unsigned>(p - 1)));
}

double total_bytes(const Shape& s) {
  const double e = s.elem_bytes;
  switch (s.collective) {
    case Collective::kAllgather:
    case Collective::kReduceScatter:
      return e * static_cast<double>(
                     std::accumulate(s.segments.begin(), s.segments.end(), uint64_t{0}));
    case Collective::kAlltoall:
      return e * static_cast<double>(
                     std::accumulate(s.send_counts.begin(), s.send_counts.end(), uint64_t{0}));
    default:
      return e * static_cast<double>(s.count);
  }
}

double slowest_speed(const Shape& s) {
  return s.speeds.empty() ? 1.0 : *std::min_element(s.speeds.begin(), s.speeds.end());
}

// Offload's slow participant's speed and the slowest of the others' (1 without speeds).
std::pair<double, double> offload_speeds(const Shape& s, int slow) {
  double slow_speed = 1.0;
  double others = 1.0;
  for (int i = 0; i < s.participants && !s.speeds.empty(); ++i) {
    const double speed = s.speeds[static_cast<size_t>(i)];
    if (i == slow) {
      slow_speed = speed;
    } else {
      others = std::min(others, speed);
    }
  }
  return {slow_speed, others};
}

// The offload allgather (offload_allgather.cc): the busier of the slow node sending its
// block and a healthy node sending its own block to the slow node plus q-1 ring hops of its
// block and a slow piece, and a slice's rounds. The slow node's receiving is taken as fast
// (the nodes measure what they send): where it is as slow both ways (a NIC lost to
// failover), it takes in (p-1)/p N either way and this runs as the ring does, not faster.
double offload_allgather_seconds(const Shape& s, const LinkCost& c) {
  const int p = s.participants;
  const int slow = offload_split(s).slow;
  const double n = total_bytes(s);
  const double pd = p;
  const double q = pd - 1.0;
  const auto [slow_speed, others] = offload_speeds(s, slow);
  const double slow_block =
      s.elem_bytes * static_cast<double>(s.segments[static_cast<size_t>(slow)]);
  const double healthy_volume = (n - slow_block) / q + (q - 1.0) / q * n;
  // Per slice (kSliceWorkBytes of work, a slow block's share of it), as offload's.
  const double chunks =
      std::clamp(std::floor(std::min(slow_block, static_cast<double>(kSliceWorkBytes) / pd) /
                            static_cast<double>(kOffloadChunkBytes)),
                 1.0, 8.0);
  const double rounds = 2.0 * (q - 1.0) + chunks;
  return rounds * c.alpha_s +
         std::max(slow_block / slow_speed, healthy_volume / others) * c.beta_s_per_byte;
}

}  // namespace

double estimate_seconds(Algorithm algorithm, const Shape& s, const LinkCost& c) {
  const int p = s.participants;
  if (p <= 1) return 0.0;
  const double n = total_bytes(s);
  const double a = c.alpha_s;
  // Every algorithm but offload has each participant on the critical path of every round
  // or pipeline stage: the slowest link sets the pace.
  const double b = c.beta_s_per_byte / slowest_speed(s);
  const double pd = p;
  const int pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(p)));
  const double fold = pow2 == p ? 0.0 : 2.0 * (a + n * b);
  const double log_core = std::log2(static_cast<double>(pow2));
  switch (algorithm) {
    case Algorithm::kRing: {
      const double passes = s.collective == Collective::kAllreduce ? 2.0 : 1.0;
      return passes * (pd - 1.0) * (a + n / pd * b);
    }
    case Algorithm::kRecursiveHalvingDoubling:
      return fold + 2.0 * log_core * a + 2.0 * (pow2 - 1.0) / pow2 * n * b;
    case Algorithm::kRecursiveDoubling:
      return fold + log_core * (a + n * b);
    case Algorithm::kBruck:
      return (ceil_log2(p) + 1.0) * a + (pd - 1.0) / pd * n * b;
    case Algorithm::kBinomial:
      return ceil_log2(p) * (a + n * b);
    case Algorithm::kChain: {
      const double pieces = std::max(1.0, std::ceil(n / kChainPieceBytes));
      return (pieces + pd - 2.0) * (a + n / pieces * b);
    }
    case Algorithm::kPairwise:
      return (pd - 1.0) * (a + n / pd * b);
    case Algorithm::kOffload: {
      if (s.collective == Collective::kAllgather) return offload_allgather_seconds(s, c);
      // The busier of the slow link and the healthy ones (offload.cc gives their volumes),
      // the healthy ring's rounds per chunk, and the pipeline's fill (a chunk's upload).
      const auto [slow, f] = offload_split(s);
      const double q = pd - 1.0;
      const auto [slow_speed, others] = offload_speeds(s, slow);
      const double base_b = c.beta_s_per_byte;
      const double slow_volume = (1.0 + (pd - 2.0) * f) * n;
      const double healthy_volume = ((2.0 * q - 1.0) / q * (1.0 - f) + f) * n;
      // Rounds: a slice's chunks' (slices of kSliceWorkBytes, run a few at once, so their
      // rounds overlap).
      const double chunks =
          std::clamp(std::floor(std::min(n, static_cast<double>(kSliceWorkBytes)) /
                                static_cast<double>(kOffloadChunkBytes)),
                     1.0, 8.0);
      const double rounds = chunks * 2.0 * std::max(pd - 2.0, 1.0);
      return rounds * a + std::max(slow_volume / slow_speed, healthy_volume / others) * base_b +
             std::min(n, static_cast<double>(kOffloadChunkBytes)) * base_b / slow_speed;
    }
  }
  return 0.0;
}

Algorithm choose_algorithm(const Shape& shape, const LinkCost& cost,
                           std::optional<Algorithm> forced) {
  if (forced && supports(*forced, shape.collective)) return *forced;
  const auto candidates = algorithms_for(shape.collective);
  Algorithm best = candidates.front();
  double best_cost = estimate_seconds(best, shape, cost);
  for (Algorithm a : candidates.subspan(1)) {
    if (a == Algorithm::kOffload) continue;
    const double t = estimate_seconds(a, shape, cost);
    if (t < best_cost) {
      best = a;
      best_cost = t;
    }
  }
  // Offload only where a participant is slower than the others (Shape::speeds): with equal
  // links it can only lose. And only by a margin, as its pipeline is modelled loosely.
  if (supports(Algorithm::kOffload, shape.collective) && slowest_speed(shape) < 1.0 &&
      estimate_seconds(Algorithm::kOffload, shape, cost) < kOffloadMustWin * best_cost) {
    best = Algorithm::kOffload;
  }
  return best;
}

}  // namespace plexus::daemon::algo
