#include "tools/plexus-sim/collective_row.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "daemon/algorithms/cost_model.h"
#include "daemon/internode/node_topology.h"
#include "daemon/internode/plan_shape.h"
#include "daemon/internode/slice_plans.h"
#include "tools/plexus-sim/bounds.h"
#include "tools/plexus-sim/op_simulation.h"

namespace plexus::sim {
namespace {

namespace algo = daemon::algo;
constexpr uint64_t kElem = 4;  // float32

shm::Opcode opcode_of(algo::Collective c) {
  switch (c) {
    case algo::Collective::kAllreduce:
      return shm::Opcode::kAllReduce;
    case algo::Collective::kReduceScatter:
      return shm::Opcode::kReduceScatter;
    case algo::Collective::kAllgather:
      return shm::Opcode::kAllGather;
    case algo::Collective::kBroadcast:
      return shm::Opcode::kBroadcast;
    case algo::Collective::kReduce:
      return shm::Opcode::kReduce;
    case algo::Collective::kAlltoall:
      return shm::Opcode::kAllToAll;
  }
  return shm::Opcode::kAllReduce;
}

bool per_rank_blocks(algo::Collective c) {
  return c == algo::Collective::kAllgather || c == algo::Collective::kReduceScatter ||
         c == algo::Collective::kAlltoall;
}

uint64_t send_bytes(const algo::Plan& plan) {
  uint64_t bytes = 0;
  for (const algo::Step& s : plan.steps) {
    if (s.kind == algo::StepKind::kSend) bytes += s.bytes;
  }
  return bytes;
}

// The layout's time for all its slices from the simulated window's: the window's time
// scaled by slices / window. The window holds the op's start (its first slices overlap
// nothing yet) and its tail (its last ones share the links with fewer): a per-slice rate
// measured inside it came out 7-15 % off for rhd at 16 slices of 64, scaling within 1 %.
double extrapolate(const std::vector<double>& done, uint64_t slices) {
  const double window = *std::max_element(done.begin(), done.end());
  return window * static_cast<double>(slices) / static_cast<double>(done.size());
}

}  // namespace

RowResult simulate_row(const ClusterModel& cluster, const RowSpec& spec) {
  RowResult row;
  row.collective = spec.collective;
  const int nodes = cluster.nodes;
  const auto n = static_cast<uint64_t>(nodes);

  daemon::NodeTopology topology;
  topology.node_names.resize(n);
  for (int i = 0; i < nodes; ++i) topology.rank_node.push_back(i);
  topology.finish();

  daemon::CollectiveArgs args{opcode_of(spec.collective), PLEXUS_FLOAT32, PLEXUS_SUM, 0, 0};
  args.count = per_rank_blocks(spec.collective) ? std::max<uint64_t>(1, spec.bytes / (n * kElem))
                                                : std::max<uint64_t>(1, spec.bytes / kElem);
  row.bytes = args.count * kElem * (per_rank_blocks(spec.collective) ? n : 1);

  // The algorithm as InternodeRunner::start_op picks it: the whole op's shape, the
  // communicator's cost, the agreed speeds.
  const std::vector<double> speeds = cluster.agreed_speeds();
  algo::Shape shape = daemon::plan_shape(topology, args);
  shape.speeds = speeds;
  const algo::LinkCost cost = cluster.link_cost();
  row.algorithm = algo::choose_algorithm(shape, cost, spec.forced);
  if (spec.forced && *spec.forced != row.algorithm) {
    row.failure = std::string(algo::algorithm_name(*spec.forced)) + " does not run " +
                  algo::collective_name(spec.collective);
    return row;
  }
  row.estimate = algo::estimate_seconds(row.algorithm, shape, cost);
  row.bound = lower_bound_seconds(spec.collective, nodes, static_cast<double>(row.bytes), cluster);

  const daemon::SlicePlans first(topology, args, row.algorithm, daemon::kSliceWorkBytes, speeds);
  row.slices = first.layout().slices;
  const uint64_t steps = first.plan_of(0).steps.size() + first.plan_of(row.slices - 1).steps.size();
  // Too many steps to hold every node's plans: each node's are made, measured and dropped.
  const bool timed = steps * n <= spec.max_plan_steps;
  if (!timed) {
    row.skipped = "not timed: the plans hold " + std::to_string(steps * n) +
                  " steps across the nodes (--max-plan-steps " +
                  std::to_string(spec.max_plan_steps) + ")";
  }
  std::vector<std::unique_ptr<daemon::SlicePlans>> plans;
  std::vector<SlicedPlan> sliced;
  const uint64_t window = spec.window_slices == 0 ? row.slices : spec.window_slices;
  row.slices_simulated = timed ? std::min(row.slices, window) : 0;
  for (int i = 0; i < nodes; ++i) {
    topology.my_node = i;
    auto made = std::make_unique<daemon::SlicePlans>(topology, args, row.algorithm,
                                                     daemon::kSliceWorkBytes, speeds);
    if (!made->failure().empty()) {
      row.failure = "the daemon fails it: " + made->failure();
      return row;
    }
    const algo::Plan& full = made->plan_of(0);
    const algo::Plan& last = made->plan_of(row.slices - 1);
    std::vector<int> peers = algo::peers_of(full);
    const std::vector<int> more = algo::peers_of(last);
    peers.insert(peers.end(), more.begin(), more.end());
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    row.peers_max = std::max(row.peers_max, static_cast<int>(peers.size()));
    row.paths_max = std::max(row.paths_max, static_cast<int>(peers.size()) * cluster.live_nics(i));
    const double sent =
        static_cast<double>(send_bytes(full)) * static_cast<double>(row.slices - 1) +
        static_cast<double>(send_bytes(last));
    row.nic_bytes_max = std::max(row.nic_bytes_max, sent / cluster.live_nics(i));
    if (!timed) continue;
    // Past the window every slice runs the full plan.
    const bool whole = row.slices_simulated == row.slices;
    sliced.push_back(
        SlicedPlan{&full, whole && &last != &full ? &last : nullptr, row.slices_simulated});
    plans.push_back(std::move(made));
  }
  const Formation formation = formation_seconds(nodes, row.paths_max, cluster, spec.handshake_s);
  row.formation_s = formation.plan_tree;
  row.formation_mesh_s = formation.full_mesh;
  if (!timed) return row;

  OpSimulation simulation(cluster, std::move(sliced), spec.in_flight);
  const OpTiming timing = simulation.run();
  if (!timing.failure.empty()) {
    row.failure = "simulation failed: " + timing.failure;
    return row;
  }
  row.messages = timing.messages;
  row.seconds = extrapolate(timing.slices_done, row.slices);
  return row;
}

}  // namespace plexus::sim
