// One row of plexus-sim's table: one collective of one size on the modelled cluster, with
// the algorithm the daemon's cost model picks (or a forced one), the daemon's own slice
// plans for every node (SlicePlans: the layout, the plans and the sliceability check
// InternodeOp uses), timed by OpSimulation. Stateless functions over plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/algorithms/algorithm.h"
#include "daemon/internode/op_slices.h"
#include "tools/plexus-sim/cluster_model.h"

namespace plexus::sim {

struct RowSpec {
  daemon::algo::Collective collective = daemon::algo::Collective::kAllreduce;
  uint64_t bytes = 8;  // asked for; see RowResult::bytes
  std::optional<daemon::algo::Algorithm> forced;
  // 0: simulate every slice (exact). Else only this many, and the op's time is theirs scaled
  // by slices / window: quick, but off by up to 60 % where the pipeline takes many slices
  // to settle (a chain broadcast at 64 nodes; 20 % for bruck's 1 GiB allgather).
  uint64_t window_slices = 0;
  // Refuse to simulate when the nodes' plans hold more steps than this in all (memory:
  // ~40 bytes a step); a ring or pairwise plan has O(N) steps per node.
  uint64_t max_plan_steps = 40'000'000;
  double handshake_s = 50e-6;  // control-thread CPU per connection handshake (formation)
  uint32_t in_flight = daemon::kSlicesInFlight;
};

struct RowResult {
  daemon::algo::Collective collective = daemon::algo::Collective::kAllreduce;
  // n as bounds.h has it, in float32 elements: the vector (allreduce, broadcast, reduce),
  // the whole result or input (allgather, reducescatter: bytes / N per node, at least one
  // element), what a node sends (alltoall: bytes / N per pair, at least one element).
  uint64_t bytes = 0;
  daemon::algo::Algorithm algorithm = daemon::algo::Algorithm::kRing;
  std::string failure;          // why the daemon would fail the op (nothing else is filled in)
  std::string skipped;          // why it was not timed (the plan figures are filled in)
  double seconds = 0;           // simulated
  double bound = 0;             // lower_bound_seconds
  double estimate = 0;          // the cost model's figure for the chosen algorithm
  int peers_max = 0;            // distinct peers of the node with most (peers_of)
  int paths_max = 0;            // that times its live NICs: the data connections it needs
  double nic_bytes_max = 0;     // bytes the busiest NIC sends over the op
  double formation_s = 0;       // Formation::plan_tree for paths_max
  double formation_mesh_s = 0;  // Formation::full_mesh
  uint64_t slices = 0;
  uint64_t slices_simulated = 0;
  uint64_t messages = 0;  // simulated
};

// `cluster` must pass check().
RowResult simulate_row(const ClusterModel& cluster, const RowSpec& spec);

}  // namespace plexus::sim
