#include "monitor/rank_skew.h"

#include <algorithm>
#include <map>
#include <vector>

namespace plexus::monitor {

std::optional<RankSkewFinding> RankSkewDetector::observe(Clock::time_point now, int last_rank,
                                                         std::chrono::microseconds lateness) {
  recent_.push_back({lateness >= rule_.min_lateness ? last_rank : -1, lateness});
  while (recent_.size() > rule_.window) recent_.pop_front();
  if (recent_.size() < rule_.window) return std::nullopt;
  if (quiet_until_ && now < *quiet_until_) return std::nullopt;
  std::map<int, uint32_t> late_count;
  for (const Arrival& a : recent_) {
    if (a.late_rank >= 0) ++late_count[a.late_rank];
  }
  for (const auto& [rank, count] : late_count) {
    if (count < rule_.late_ops) continue;
    std::vector<std::chrono::microseconds> latenesses;
    for (const Arrival& a : recent_) {
      if (a.late_rank == rank) latenesses.push_back(a.lateness);
    }
    std::nth_element(latenesses.begin(), latenesses.begin() + latenesses.size() / 2,
                     latenesses.end());
    RankSkewFinding finding{rank, count, rule_.window, latenesses[latenesses.size() / 2]};
    quiet_until_ = now + rule_.quiet;
    recent_.clear();
    return finding;
  }
  return std::nullopt;
}

}  // namespace plexus::monitor
