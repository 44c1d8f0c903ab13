#include "monitor/slow_paths.h"

#include <algorithm>

namespace plexus::monitor {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

bool measured(const PathTraffic& path, const SlowPathRule& rule) {
  return (path.busy_windows >= rule.min_busy_windows || path.unsent_bytes > 0) &&
         path.rate_bytes_per_s > 0;
}

}  // namespace

std::vector<PathVerdict> judge_paths(std::span<const PathTraffic> paths, const SlowPathRule& rule) {
  std::vector<PathVerdict> verdicts(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!measured(paths[i], rule) || paths[i].app_limited) continue;
    std::vector<double> rates;
    for (size_t j = 0; j < paths.size(); ++j) {
      if (j != i && paths[j].group == paths[i].group && measured(paths[j], rule)) {
        rates.push_back(paths[j].rate_bytes_per_s);
      }
    }
    if (rates.empty()) continue;
    PathVerdict& v = verdicts[i];
    v.siblings = rates.size();
    v.siblings_median_rate = median(std::move(rates));
    v.kind = paths[i].rate_bytes_per_s < rule.ratio * v.siblings_median_rate ? PathVerdict::kSlow
                                                                             : PathVerdict::kAtPar;
  }
  return verdicts;
}

}  // namespace plexus::monitor
