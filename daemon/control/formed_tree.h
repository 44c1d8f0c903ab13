// Which nodes a communicator's topology (a FORMED message) goes to from each node: down a
// tree rooted at the root daemon, so that the root sends it to `fanout` nodes, not to every
// member (at 4,096 nodes the whole node table to each would be ~640 MiB out of one daemon).
// The tree is over the nodes in this order: the root first, then the others in participant
// order; the node at place p forwards to places p * fanout + 1 .. p * fanout + fanout. A root
// that holds no rank of the communicator (any process may make the unique id) is not listed:
// it is index `nodes`, at place 0 before them all. Every node computes the same tree from the
// message alone. Pure arithmetic, no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace plexus::daemon {

// The FORMED fanout the root uses (carried in the message: each node forwards as it says).
inline constexpr uint32_t kFormedFanout = 8;
// A message's fanout outside 1 .. this is refused as malformed.
inline constexpr uint32_t kMaxFormedFanout = 64;

// The indexes (into the participant order of `nodes` nodes) that node `me` forwards the
// topology to, when the root is node `root` (`nodes` for a root not listed, as `me` may be).
// `fanout` at least 1.
std::vector<size_t> formed_children(size_t nodes, size_t root, size_t me, uint32_t fanout);
// The nodes above `me`, its parent first, the root last: who may send it the topology (its
// parent, or, where a parent's daemon was lost, a node above that took its children over).
std::vector<size_t> formed_ancestors(size_t nodes, size_t root, size_t me, uint32_t fanout);

}  // namespace plexus::daemon
