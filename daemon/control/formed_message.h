// A communicator's topology as it travels between daemons (node_control.capnp's Formed,
// less its token): written by the root and by each node that passes it on down the tree
// (formed_tree.h), and read, untrusted, by every member. Reading checks what passing it on
// relies on and says what is wrong: this node listed, once, as every node; the sender a node
// above this one in the tree; every rank placed on a listed node; a fanout in range. A cost
// out of range is replaced by the default. What only this node's ranks rely on (the rank
// count they gave, an algorithm this daemon knows) is checked apart, after it went on. Pure:
// no I/O, no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/algorithms/cost_model.h"
#include "daemon/control/node_control.capnp.h"
#include "daemon/control/node_rendezvous.h"

namespace plexus::daemon {

struct TopologyMessage {
  NodeRendezvous::Formed formed;
  algo::LinkCost cost;
  uint64_t root = 0;    // the root daemon's instance id
  uint32_t fanout = 0;  // formed_tree.h's
  // Where daemon `instance` is in formed.nodes; formed.nodes.size() when not listed (as a
  // root that holds no rank is not: formed_tree.h's index for it).
  size_t index_of(uint64_t instance) const;
  // The nodes formed_tree.h has `instance` send it on to.
  std::vector<size_t> children_of(uint64_t instance) const;
};

void write_formed(node_control::Formed::Builder out, const TopologyMessage& topology);
// `me`: this daemon; `sender`: the daemon it came from.
common::Result<TopologyMessage> read_formed(node_control::Formed::Reader in, uint64_t me,
                                            uint64_t sender);
// Why this node's ranks cannot use `topology` (empty: they can); `nranks`: the communicator's
// size as they gave it, when they wait for it.
std::string local_problem(const TopologyMessage& topology, std::optional<int> nranks);

}  // namespace plexus::daemon
