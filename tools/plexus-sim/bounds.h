// What no schedule can beat on the modelled cluster, and what forming a communicator costs.
// Sizes are `n` bytes: the vector (allreduce, broadcast, reduce), the whole result
// (allgather), the whole input (reducescatter) or what one node sends (alltoall).
#pragma once

#include "daemon/algorithms/algorithm.h"
#include "tools/plexus-sim/cluster_model.h"

namespace plexus::sim {

// Bytes some node must send or receive: 2(p-1)/p n (allreduce), (p-1)/p n (allgather,
// reducescatter, alltoall), n (broadcast, reduce: the root sends or receives it whole).
double min_volume(daemon::algo::Collective collective, int p, double n);

// A lower bound no schedule of the daemon beats on the model: the larger of ceil(log2 p)
// message hops (one-way latency plus per-message overhead each: every node's data must
// reach every other node and each plan sends a node one message per round) and one hop
// plus the bandwidth term: min_volume at the median node's capacity, or what the slowest
// node must take in itself at its own, whichever is longer: (p-1)/p n (the others' data;
// the offload schedules spare a slow node the rest), n for broadcast and reduce. The
// classical alpha log p + beta volume (Chan et al. 2007) adds hops and bandwidth, but slices
// in flight overlap them, so a sliced schedule may come in under that sum.
double lower_bound_seconds(daemon::algo::Collective collective, int p, double n,
                           const ClusterModel& cluster);

// Formation, modelled (not simulated), with RTT = 2 x latency and `handshake_s` the control
// thread's CPU per connection handshake (Cap'n Proto + HMAC):
// - plan_tree: issue 37's design: the rendezvous climbs a tree of daemons and FORMED comes
//   back down (ceil(log2 N) RTT), then each node dials only its plans' peers on every live
//   rail at once (TCP connect + the peer handshake: 2 RTT) and handles those handshakes one
//   after another: ceil(log2 N) RTT + 2 RTT + paths x handshake_s.
// - full_mesh: the daemon before issue 37: every member joins at the root (2 RTT + N-1
//   handshakes there), then dials every other member on every rail:
//   4 RTT + (N-1) x handshake_s + (N-1) x nics x handshake_s.
struct Formation {
  double plan_tree = 0;
  double full_mesh = 0;
};
Formation formation_seconds(int nodes, int paths, const ClusterModel& cluster, double handshake_s);

}  // namespace plexus::sim
