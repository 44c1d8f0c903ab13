// Consistency checks and lookups for NodeTopology.
#include "daemon/internode/node_topology.h"

#include <algorithm>

namespace plexus::daemon {

int NodeTopology::index_in_node(int rank) const {
  const auto& ranks = node_ranks[static_cast<size_t>(rank_node[static_cast<size_t>(rank)])];
  return static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

std::string NodeTopology::finish() {
  const int n = nodes();
  if (n < 1) return "a communicator needs at least one node";
  if (my_node < 0 || my_node >= n) return "this node is not part of the communicator";
  node_ranks.assign(static_cast<size_t>(n), {});
  for (int r = 0; r < nranks(); ++r) {
    const int node = rank_node[static_cast<size_t>(r)];
    if (node < 0 || node >= n) return "rank " + std::to_string(r) + " is on no known node";
    node_ranks[static_cast<size_t>(node)].push_back(r);
  }
  for (int node = 0; node < n; ++node) {
    if (node_ranks[static_cast<size_t>(node)].empty()) {
      return "node " + node_names[static_cast<size_t>(node)] + " holds no rank";
    }
  }
  return {};
}

}  // namespace plexus::daemon
