#include "tools/plexus-sim/cluster_model.h"

#include <algorithm>
#include <cmath>

namespace plexus::sim {

std::string ClusterModel::check() const {
  if (nodes < 1) return "nodes must be at least 1";
  if (nics < 1) return "nics must be at least 1";
  if (!(nic_rate > 0)) return "rate must be positive";
  if (!(latency_s >= 0)) return "latency must not be negative";
  if (!(overhead_s >= 0)) return "overhead must not be negative";
  if (slow_node >= nodes) return "slow node " + std::to_string(slow_node) + " is not below nodes";
  if (!(slow_factor > 0 && slow_factor <= 1)) return "slow factor must be in (0, 1]";
  if (failed_nic_node >= nodes) {
    return "failed-NIC node " + std::to_string(failed_nic_node) + " is not below nodes";
  }
  if (failed_nic_node >= 0 && nics < 2) {
    return "failed NIC on node " + std::to_string(failed_nic_node) +
           " leaves it no NIC (needs nics >= 2)";
  }
  return {};
}

double ClusterModel::capacity(int i) const {
  return live_nics(i) * nic_rate * (i == slow_node ? slow_factor : 1.0);
}

double ClusterModel::median_capacity() const {
  std::vector<double> all;
  for (int i = 0; i < nodes; ++i) all.push_back(capacity(i));
  std::sort(all.begin(), all.end());
  return all[all.size() / 2];
}

std::vector<double> ClusterModel::agreed_speeds() const {
  constexpr double kAlikeAbove = 0.75;
  constexpr double kSpeedSteps = 64;
  const double reference = median_capacity();
  std::vector<double> speeds;
  bool any_slow = false;
  for (int i = 0; i < nodes; ++i) {
    const double ratio = capacity(i) / reference;
    if (ratio >= kAlikeAbove) {
      speeds.push_back(1.0);
      continue;
    }
    speeds.push_back(std::max(1.0, std::floor(ratio * kSpeedSteps)) / kSpeedSteps);
    any_slow = true;
  }
  if (!any_slow) speeds.clear();
  return speeds;
}

daemon::algo::LinkCost ClusterModel::link_cost() const {
  daemon::algo::LinkCost cost;
  cost.alpha_s = std::max(latency_s, 20e-6);
  cost.beta_s_per_byte = agreed_speeds().empty() ? 1.0 / nic_rate : 1.0 / median_capacity();
  return cost;
}

}  // namespace plexus::sim
