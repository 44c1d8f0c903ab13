// The modelled cluster plexus-sim times plans on: nodes with NICs of one rate and one-way
// latency, a per-message cost, one slow node and one failed NIC. A node's NICs are pooled:
// the daemon stripes a message over every live path to a peer (one per rail), so a node
// sends and receives at the sum of its live NICs' rates. Plain data, read by every part.
#pragma once

#include <string>
#include <vector>

#include "daemon/algorithms/cost_model.h"

namespace plexus::sim {

struct ClusterModel {
  int nodes = 2;
  int nics = 1;              // per node
  double nic_rate = 1.25e9;  // bytes/s each way per NIC (10 Gbit/s)
  double latency_s = 5e-6;   // one way, per message
  double overhead_s = 0;     // per message, before its first byte leaves
  int slow_node = -1;        // -1: none
  double slow_factor = 1;    // the slow node's NICs run at this share of nic_rate
  int failed_nic_node = -1;  // -1: none; else one of that node's NICs is down

  // Empty, or which field is inconsistent and why.
  std::string check() const;
  // Bytes/s node `i` sends (and receives) at: its live NICs, times the slow factor.
  double capacity(int i) const;
  int live_nics(int i) const { return nics - (i == failed_nic_node ? 1 : 0); }
  // The speeds the nodes' speed agreement would commit (algo::Shape::speeds): each node's
  // capacity over the upper median's, 1 at or above 0.75 of it, else snapped down to k/64
  // (SpeedAgreement::speeds_of with plexusd's default --slow-node-below); empty when alike.
  std::vector<double> agreed_speeds() const;
  // The communicator's cost as the root computes it (NodeJoins::comm_cost): alpha the
  // one-way latency, at least 20 us; beta one NIC's nominal rate (the advertised speed), or
  // while a node is slow the median node's measured rate (InternodeRunner::start_op).
  daemon::algo::LinkCost link_cost() const;
  // The upper median of the nodes' capacities (SpeedAgreement::reference_of).
  double median_capacity() const;
};

}  // namespace plexus::sim
