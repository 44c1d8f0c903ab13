#include "daemon/links/nic_pace.h"

#include <algorithm>
#include <set>
#include <utility>

namespace plexus::daemon {

void NicPace::add_tick(double wall_us, std::vector<PathGrowth> growth) {
  if (wall_us <= 0) return;
  std::erase_if(growth, [](const PathGrowth& g) { return g.acked < kMinTickBytes; });
  ticks_.push_back({wall_us, std::move(growth)});  // kept empty too: its time bounds the NICs'
}

std::map<std::string, NicPace::NicSample> NicPace::take() {
  struct Total {
    std::string nic;
    uint64_t acked = 0;
    uint64_t busy_us = 0;
  };
  std::map<uint64_t, Total> paths;
  for (const Tick& tick : ticks_) {
    for (const PathGrowth& g : tick.growth) {
      Total& t = paths[g.path];
      t.nic = g.nic;
      t.acked += g.acked;
      t.busy_us += g.busy_us;
    }
  }
  auto rate = [](const Total& t) {
    return static_cast<double>(t.acked) / static_cast<double>(t.busy_us) * 1e6;
  };
  std::map<std::string, double> fastest;  // per NIC, bytes/s
  for (const auto& [path, t] : paths) {
    if (static_cast<double>(t.busy_us) >= kMinBusyUs) {
      fastest[t.nic] = std::max(fastest[t.nic], rate(t));
    }
  }
  std::set<uint64_t> paced;
  for (const auto& [path, t] : paths) {
    if (static_cast<double>(t.busy_us) >= kMinBusyUs && rate(t) < kPacedShare * fastest[t.nic]) {
      paced.insert(path);
    }
  }
  struct Sum {
    uint64_t acked = 0;
    double pressed_us = 0;
  };
  std::map<std::string, Sum> nics;
  double elapsed_us = 0;  // the ticks' time so far
  for (const Tick& tick : ticks_) {
    elapsed_us += tick.wall_us;
    std::map<std::string, std::pair<uint64_t, uint64_t>> busy;  // per NIC: sum, longest
    for (const PathGrowth& g : tick.growth) {
      if (paced.count(g.path) != 0) continue;
      nics[g.nic].acked += g.acked;
      auto& [sum, longest] = busy[g.nic];
      sum += g.busy_us;
      longest = std::max(longest, g.busy_us);
    }
    for (const auto& [nic, b] : busy) {
      // A path may show more than the tick (jiffies): then the longest path's, as long as
      // the NIC's total stays within the ticks' time and one jiffy (a lone path's counts add
      // up to its exact total; paths pressed at once all step up in the same tick).
      const auto longest = static_cast<double>(b.second);
      Sum& sum = nics[nic];
      const double pressed =
          std::clamp(static_cast<double>(b.first), longest, std::max(longest, tick.wall_us));
      sum.pressed_us += std::clamp(elapsed_us + kJiffyUs - sum.pressed_us, 0.0, pressed);
    }
  }
  ticks_.clear();
  std::map<std::string, NicSample> samples;
  for (const auto& [nic, sum] : nics) {
    if (sum.pressed_us <= 0) continue;
    samples[nic] = {std::max(static_cast<double>(sum.acked) / sum.pressed_us * 1e6, fastest[nic]),
                    sum.pressed_us};
  }
  return samples;
}

}  // namespace plexus::daemon
