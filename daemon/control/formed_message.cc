#include "daemon/control/formed_message.h"

#include <set>
#include <string>
#include <utility>

#include "daemon/algorithms/algorithm.h"
#include "daemon/control/formed_tree.h"

namespace plexus::daemon {

size_t TopologyMessage::index_of(uint64_t instance) const {
  for (size_t n = 0; n < formed.nodes.size(); ++n) {
    if (formed.nodes[n].instance_id == instance) return n;
  }
  return formed.nodes.size();
}

std::vector<size_t> TopologyMessage::children_of(uint64_t instance) const {
  return formed_children(formed.nodes.size(), index_of(root), index_of(instance), fanout);
}

void write_formed(node_control::Formed::Builder out, const TopologyMessage& topology) {
  const NodeRendezvous::Formed& formed = topology.formed;
  auto nodes = out.initNodes(static_cast<unsigned>(formed.nodes.size()));
  for (unsigned i = 0; i < nodes.size(); ++i) {
    nodes[i].setInstanceId(formed.nodes[i].instance_id);
    nodes[i].setName(formed.nodes[i].name);
    auto addresses =
        nodes[i].initAddresses(static_cast<unsigned>(formed.nodes[i].addresses.size()));
    for (unsigned a = 0; a < addresses.size(); ++a) addresses.set(a, formed.nodes[i].addresses[a]);
  }
  auto rank_node = out.initRankNode(static_cast<unsigned>(formed.rank_node.size()));
  for (unsigned r = 0; r < rank_node.size(); ++r) {
    rank_node.set(r, static_cast<uint32_t>(formed.rank_node[r]));
  }
  out.setAlphaS(topology.cost.alpha_s);
  out.setBetaSPerByte(topology.cost.beta_s_per_byte);
  out.setAlgorithm(formed.algorithm);
  out.setRoot(topology.root);
  out.setFanout(topology.fanout);
}

common::Result<TopologyMessage> read_formed(node_control::Formed::Reader in, uint64_t me,
                                            uint64_t sender) {
  TopologyMessage t;
  t.root = in.getRoot();
  t.fanout = in.getFanout();
  const auto rank_count = in.getRankNode().size();
  if (rank_count == 0 || rank_count > kMaxRanks || in.getNodes().size() > rank_count) {
    return common::fail("it places " + std::to_string(rank_count) + " ranks on " +
                        std::to_string(in.getNodes().size()) + " nodes");
  }
  if (t.fanout == 0 || t.fanout > kMaxFormedFanout) {
    return common::fail("a fanout of " + std::to_string(t.fanout) + " (1 to " +
                        std::to_string(kMaxFormedFanout) + ")");
  }
  std::set<uint64_t> ids;
  size_t me_at = in.getNodes().size();
  size_t root_at = in.getNodes().size();  // a root that holds no rank is not listed
  for (auto node : in.getNodes()) {
    NodeInfo info{node.getInstanceId(), node.getName().cStr(), {}};
    for (auto a : node.getAddresses()) info.addresses.emplace_back(a.cStr());
    if (!ids.insert(info.instance_id).second) return common::fail("it lists a node twice");
    if (info.instance_id == me) me_at = t.formed.nodes.size();
    if (info.instance_id == t.root) root_at = t.formed.nodes.size();
    t.formed.nodes.push_back(std::move(info));
  }
  if (me_at == t.formed.nodes.size()) return common::fail("it does not list this node");
  bool from_above = false;
  for (size_t above : formed_ancestors(t.formed.nodes.size(), root_at, me_at, t.fanout)) {
    const uint64_t id = above == t.formed.nodes.size() ? t.root : t.formed.nodes[above].instance_id;
    from_above |= id == sender;
  }
  if (!from_above) return common::fail("it came from a node not above this one in its tree");
  for (uint32_t n : in.getRankNode()) {
    if (n >= t.formed.nodes.size()) return common::fail("a rank on a node it does not list");
    t.formed.rank_node.push_back(static_cast<int>(n));
  }
  t.formed.algorithm = in.getAlgorithm().cStr();
  t.cost = algo::LinkCost{in.getAlphaS(), in.getBetaSPerByte()};
  if (!(t.cost.alpha_s >= 0 && t.cost.alpha_s < 10) ||
      !(t.cost.beta_s_per_byte > 0 && t.cost.beta_s_per_byte < 1)) {
    t.cost = algo::LinkCost{};
  }
  return t;
}

std::string local_problem(const TopologyMessage& topology, std::optional<int> nranks) {
  const auto placed = topology.formed.rank_node.size();
  if (nranks && static_cast<int>(placed) != *nranks) {
    return "it places " + std::to_string(placed) + " ranks, not " + std::to_string(*nranks);
  }
  if (!topology.formed.algorithm.empty() && !algo::parse_algorithm(topology.formed.algorithm)) {
    return "an unknown algorithm (" + topology.formed.algorithm + ")";
  }
  return {};
}

}  // namespace plexus::daemon
