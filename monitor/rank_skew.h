// The rank-skew rule: one rank submitting last, well after the others, op after op (a
// straggler: a slow data loader, a throttled GPU, a noisy neighbour). Fed one observation
// per collective; reports when, among the last `window` ops, one rank was late by at
// least `min_lateness` in `late_ops` or more of them. After a report it stays quiet for
// `quiet` so a persistent straggler is one event every so often, not one per op.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

namespace plexus::monitor {

struct RankSkewRule {
  uint32_t window = 16;
  uint32_t late_ops = 12;
  std::chrono::microseconds min_lateness{0};  // plexusd's --rank-skew-ms
  std::chrono::seconds quiet{10};
};

struct RankSkewFinding {
  int rank = -1;
  uint32_t late_ops = 0;  // of `window`
  uint32_t window = 0;
  std::chrono::microseconds median_lateness{0};  // over its late ops
};

class RankSkewDetector {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RankSkewDetector(RankSkewRule rule) : rule_(rule) {}
  // One collective: `last_rank` submitted `lateness` after the first rank did.
  std::optional<RankSkewFinding> observe(Clock::time_point now, int last_rank,
                                         std::chrono::microseconds lateness);
  // A new threshold (a config reload): the window starts again, since the ops in it were
  // judged late or not by the old one.
  void set_min_lateness(std::chrono::microseconds min_lateness) {
    rule_.min_lateness = min_lateness;
    recent_.clear();
  }

 private:
  struct Arrival {
    int late_rank;  // -1: nobody was late enough
    std::chrono::microseconds lateness;
  };
  RankSkewRule rule_;
  std::deque<Arrival> recent_;
  std::optional<Clock::time_point> quiet_until_;
};

}  // namespace plexus::monitor
