#include "daemon/links/nic_pace.h"

#include <algorithm>
#include <set>
#include <utility>

namespace plexus::daemon {

void NicPace::add_tick(double wall_us, std::vector<PathGrowth> growth) {
  std::erase_if(growth, [](const PathGrowth& g) { return g.acked < kMinTickBytes; });
  if (wall_us <= 0 || growth.empty()) return;
  ticks_.push_back({wall_us, std::move(growth)});
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
    if (static_cast<double>(t.busy_us) < kMinBusyUs) continue;
    double& best = fastest[t.nic];
    best = std::max(best, rate(t));
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
  for (const Tick& tick : ticks_) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> busy;  // per NIC: sum, longest
    for (const PathGrowth& g : tick.growth) {
      if (paced.count(g.path) != 0) continue;
      nics[g.nic].acked += g.acked;
      auto& [sum, longest] = busy[g.nic];
      sum += g.busy_us;
      longest = std::max(longest, g.busy_us);
    }
    for (const auto& [nic, b] : busy) {
      // The counters step in jiffies, so a path may show more than the tick: then the
      // longest path's time.
      const auto longest = static_cast<double>(b.second);
      nics[nic].pressed_us +=
          std::clamp(static_cast<double>(b.first), longest, std::max(longest, tick.wall_us));
    }
  }
  ticks_.clear();
  std::map<std::string, NicSample> samples;
  for (const auto& [nic, sum] : nics) {
    if (sum.pressed_us <= 0) continue;
    // Never below its fastest path alone: one connection cannot outrun its NIC.
    samples[nic] = {std::max(static_cast<double>(sum.acked) / sum.pressed_us * 1e6, fastest[nic]),
                    sum.pressed_us};
  }
  return samples;
}

}  // namespace plexus::daemon
