// The slow-path rule: a path whose sending rate (bytes per second of the windows it sent
// in, so idle gaps do not count against it) is well below the median of its peers' over
// enough such windows. Its peers are the node's other paths with enough sending windows
// in the same span; a path needs at least one to be judged.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace plexus::monitor {

struct PathSendingRate {
  double bytes_per_s = 0;      // over its sending windows
  size_t sending_windows = 0;  // windows it sent a data chunk in
};

struct SlowPathRule {
  size_t min_sending_windows = 50;
  double ratio = 0.5;  // slow: under ratio x the peers' median
};

struct SlowPath {
  size_t index = 0;  // into the input
  double bytes_per_s = 0;
  double peers_median_bytes_per_s = 0;
  size_t peers = 0;
};

std::vector<SlowPath> find_slow_paths(std::span<const PathSendingRate> paths,
                                      const SlowPathRule& rule);

}  // namespace plexus::monitor
