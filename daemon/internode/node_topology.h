// Where a multi-node communicator's ranks live: which node holds each rank, the nodes in
// the order the inter-node algorithms number them, and this daemon's place among them.
// Made by the rendezvous; identical on every node of the communicator.
#pragma once

#include <string>
#include <vector>

namespace plexus::daemon {

struct NodeTopology {
  int my_node = 0;
  std::vector<std::string> node_names;       // by node index
  std::vector<int> rank_node;                // by rank
  std::vector<std::vector<int>> node_ranks;  // by node: its ranks, ascending

  int nodes() const { return static_cast<int>(node_names.size()); }
  int nranks() const { return static_cast<int>(rank_node.size()); }
  const std::vector<int>& local_ranks() const { return node_ranks[static_cast<size_t>(my_node)]; }
  // The position of `rank` in its node's list.
  int index_in_node(int rank) const;

  // Builds node_ranks from rank_node; returns why the description is inconsistent (a
  // rank on no node, a node with no rank, my_node out of range), or an empty string.
  std::string finish();
};

}  // namespace plexus::daemon
