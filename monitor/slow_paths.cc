#include "monitor/slow_paths.h"

#include <algorithm>

namespace plexus::monitor {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

std::vector<SlowPath> find_slow_paths(std::span<const PathSendingRate> paths,
                                      const SlowPathRule& rule) {
  std::vector<SlowPath> slow;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].sending_windows < rule.min_sending_windows) continue;
    std::vector<double> peers;
    for (size_t j = 0; j < paths.size(); ++j) {
      if (j != i && paths[j].sending_windows >= rule.min_sending_windows) {
        peers.push_back(paths[j].bytes_per_s);
      }
    }
    if (peers.empty()) continue;
    const size_t peer_count = peers.size();
    const double peers_median = median(std::move(peers));
    if (paths[i].bytes_per_s < rule.ratio * peers_median) {
      slow.push_back({i, paths[i].bytes_per_s, peers_median, peer_count});
    }
  }
  return slow;
}

}  // namespace plexus::monitor
