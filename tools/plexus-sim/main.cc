// plexus-sim: times the daemon's own collective schedules on a modelled cluster
// (docs/plexus-sim.md).
// CLI11's string splitting trips GCC 12's -Wnull-dereference (a false positive inside
// libstdc++), as in plexus-bench: silenced for this file, before any header is read.
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "tools/plexus-sim/collective_row.h"
#include "tools/plexus-sim/report.h"

namespace {

namespace algo = plexus::daemon::algo;

std::optional<algo::Collective> parse_collective(const std::string& name) {
  for (auto c : {algo::Collective::kAllreduce, algo::Collective::kReduceScatter,
                 algo::Collective::kAllgather, algo::Collective::kBroadcast,
                 algo::Collective::kReduce, algo::Collective::kAlltoall}) {
    if (name == algo::collective_name(c)) return c;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "plexus-sim: times plexusd's own inter-node schedules (its cost model's choice, its "
      "slice plans, its plan runner's round order) on a modelled cluster, one op per "
      "collective and size, and prints the time against the lower bound, the busiest NIC's "
      "bytes, the peers and data connections per node and a formation-time model "
      "(docs/plexus-sim.md)."};
  std::vector<int> node_counts{64};
  plexus::sim::ClusterModel cluster;
  double rate_gbit = 10;
  double latency_us = 5;
  double overhead_us = 0;
  double handshake_us = 50;
  std::vector<std::string> collectives{"allreduce", "allgather"};
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 1ull << 30;
  uint64_t factor = 8;
  std::string forced;
  plexus::sim::RowSpec spec;
  bool json = false;

  app.add_option("-n,--nodes", node_counts, "node counts to model, e.g. 64,512,4096")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--nics", cluster.nics, "NICs per node (a message stripes over all live ones)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--rate", rate_gbit,
                 "each NIC's rate in Gbit/s, each way (a veth shaped by tc tbf: its rate)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--latency", latency_us, "one-way latency per message, microseconds")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--overhead", overhead_us,
                 "per-message cost before its first byte leaves, microseconds")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--slow-node", cluster.slow_node, "a node whose NICs run slower (-1: none)")
      ->capture_default_str();
  app.add_option("--slow-factor", cluster.slow_factor,
                 "the slow node's NIC rate as a share of --rate, in (0, 1]")
      ->capture_default_str();
  app.add_option("--failed-nic", cluster.failed_nic_node,
                 "a node that has lost one of its NICs (-1: none; needs --nics >= 2)")
      ->capture_default_str();
  app.add_option("-c,--collectives", collectives,
                 "allreduce, reducescatter, allgather, broadcast, reduce, alltoall")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-b,--min-bytes", min_bytes, "smallest size (8, 4K, 1M, ...)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("-e,--max-bytes", max_bytes, "largest size")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("-f,--factor", factor, "each size is the previous one times this")
      ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--algo", forced,
                 "force an algorithm (ring, rhd, rd, bruck, binomial, chain, pairwise, "
                 "offload) instead of the cost model's choice; collectives it does not run "
                 "are reported as such");
  app.add_option("--window-slices", spec.window_slices,
                 "0: simulate every slice (exact); else only this many, scaling their time "
                 "by slices / window (quick; up to 60 % off where the slice pipeline settles "
                 "slowly, see docs/plexus-sim.md)")
      ->capture_default_str();
  app.add_option("--max-plan-steps", spec.max_plan_steps,
                 "skip a row whose plans hold more steps than this across the nodes (memory)")
      ->capture_default_str();
  app.add_option("--handshake-us", handshake_us,
                 "control-thread CPU per connection handshake, for the formation model")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--json", json, "one JSON object per row instead of the table");
  CLI11_PARSE(app, argc, argv);

  cluster.nic_rate = rate_gbit * 1e9 / 8;
  cluster.latency_s = latency_us * 1e-6;
  cluster.overhead_s = overhead_us * 1e-6;
  spec.handshake_s = handshake_us * 1e-6;
  if (!forced.empty()) {
    spec.forced = algo::parse_algorithm(forced);
    if (!spec.forced) {
      std::cerr << "plexus-sim: --algo " << forced << " names no algorithm\n";
      return 2;
    }
  }
  std::vector<algo::Collective> chosen;
  for (const std::string& name : collectives) {
    const auto c = parse_collective(name);
    if (!c) {
      std::cerr << "plexus-sim: --collectives: " << name << " is no collective\n";
      return 2;
    }
    chosen.push_back(*c);
  }
  if (min_bytes == 0 || min_bytes > max_bytes) {
    std::cerr << "plexus-sim: --min-bytes must be at least 1 and at most --max-bytes\n";
    return 2;
  }
  for (int nodes : node_counts) {
    cluster.nodes = nodes;
    if (const std::string bad = cluster.check(); !bad.empty()) {
      std::cerr << "plexus-sim: " << nodes << " nodes: " << bad << "\n";
      return 2;
    }
    if (!json) plexus::sim::print_header(std::cout, cluster);
    for (algo::Collective c : chosen) {
      spec.collective = c;
      uint64_t previous = 0;  // sizes below one element per node all come out the same
      for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
        spec.bytes = bytes;
        const plexus::sim::RowResult row = plexus::sim::simulate_row(cluster, spec);
        if (row.bytes == previous) {
          if (bytes > max_bytes / factor) break;
          continue;
        }
        previous = row.bytes;
        if (json) {
          plexus::sim::print_json(std::cout, cluster, row);
        } else {
          plexus::sim::print_row(std::cout, row);
        }
        std::cout.flush();
        if (bytes > max_bytes / factor) break;
      }
    }
  }
  return 0;
}
