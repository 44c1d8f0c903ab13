#include "tools/plexus-sim/bounds.h"

#include <algorithm>
#include <bit>

namespace plexus::sim {
namespace {

double ceil_log2(int p) {
  return p <= 1 ? 0.0 : static_cast<double>(std::bit_width(static_cast<unsigned>(p - 1)));
}

}  // namespace

double min_volume(daemon::algo::Collective collective, int p, double n) {
  using daemon::algo::Collective;
  if (p <= 1) return 0;
  const double share = (p - 1.0) / p * n;
  switch (collective) {
    case Collective::kAllreduce:
      return 2.0 * share;
    case Collective::kBroadcast:
    case Collective::kReduce:
      return n;
    default:
      return share;
  }
}

double lower_bound_seconds(daemon::algo::Collective collective, int p, double n,
                           const ClusterModel& cluster) {
  if (p <= 1) return 0;
  double slowest = cluster.capacity(0);
  for (int i = 1; i < cluster.nodes; ++i) slowest = std::min(slowest, cluster.capacity(i));
  const bool rooted = collective == daemon::algo::Collective::kBroadcast ||
                      collective == daemon::algo::Collective::kReduce;
  const double own = rooted ? n : (p - 1.0) / p * n;
  const double bandwidth =
      std::max(min_volume(collective, p, n) / cluster.median_capacity(), own / slowest);
  const double hop = cluster.latency_s + cluster.overhead_s;
  return std::max(ceil_log2(p) * hop, hop + bandwidth);
}

Formation formation_seconds(int nodes, int paths, const ClusterModel& cluster, double handshake_s) {
  const double rtt = 2.0 * cluster.latency_s;
  const double others = nodes - 1.0;
  Formation f;
  f.plan_tree = ceil_log2(nodes) * rtt + 2.0 * rtt + paths * handshake_s;
  f.full_mesh = 4.0 * rtt + others * handshake_s + others * cluster.nics * handshake_s;
  return f;
}

}  // namespace plexus::sim
