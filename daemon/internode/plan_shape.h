// What the inter-node algorithms plan for when a multi-node communicator runs a collective:
// the collective's kind and its algo::Shape among the nodes (one participant per node,
// each node's segment its ranks' blocks). A pure function of the topology and the
// arguments, so every node computes the same shape; InternodeRunner's cost model needs it
// before any op exists, and InternodeOp plans each slice with it.
#pragma once

#include "daemon/algorithms/algorithm.h"
#include "daemon/internode/node_topology.h"
#include "daemon/local/local_collectives.h"

namespace plexus::daemon {

algo::Collective collective_of(shm::Opcode opcode);
// The shape the algorithm plans for (also what the cost model needs).
algo::Shape plan_shape(const NodeTopology& topology, const CollectiveArgs& args);

}  // namespace plexus::daemon
