// The upper median of the positive values (0 when none): the figure nodes' bandwidths are
// judged against (SpeedAgreement, NodeLinks), robust to one node reading high or low.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace plexus {

inline double upper_median_of_positive(std::span<const double> values) {
  std::vector<double> known;
  for (double v : values) {
    if (v > 0) known.push_back(v);
  }
  if (known.empty()) return 0;
  auto middle = known.begin() + static_cast<std::ptrdiff_t>(known.size() / 2);
  std::nth_element(known.begin(), middle, known.end());
  return *middle;
}

}  // namespace plexus
