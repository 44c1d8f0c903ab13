#include "tools/plexus-sim/report.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace plexus::sim {
namespace {

std::string printf_string(const char* format, double value, const char* unit) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value, unit);
  return buffer;
}

// One fixed-width cell line (columns as print_header names them).
constexpr const char* kRowFormat = "%-13s %9s %-8s %10s %10s %7s %10s %5s %5s %10s %10s %10s %9s\n";

}  // namespace

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  const bool whole = bytes == std::floor(bytes);
  return printf_string(whole ? "%.0f %s" : "%.1f %s", bytes, kUnits[unit]);
}

std::string format_seconds(double s) {
  if (s < 1e-6) return printf_string("%.0f %s", s * 1e9, "ns");
  if (s < 1e-3) return printf_string("%.2f %s", s * 1e6, "us");
  if (s < 1) return printf_string("%.2f %s", s * 1e3, "ms");
  return printf_string("%.2f %s", s, "s");
}

void print_header(std::ostream& out, const ClusterModel& c) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "# %d nodes x %d NIC(s) at %.3g Gbit/s, %.3g us one way, %.3g us per message",
                c.nodes, c.nics, c.nic_rate * 8 / 1e9, c.latency_s * 1e6, c.overhead_s * 1e6);
  out << line;
  if (c.slow_node >= 0) out << ", node " << c.slow_node << " at " << c.slow_factor << "x";
  if (c.failed_nic_node >= 0) out << ", node " << c.failed_nic_node << " lost a NIC";
  out << "\n";
  std::snprintf(line, sizeof(line), kRowFormat, "collective", "size", "algo", "time", "bound",
                "x bound", "model", "peers", "paths", "NIC bytes", "formation", "full mesh",
                "slices");
  out << line;
}

void print_row(std::ostream& out, const RowResult& r) {
  char line[512];
  const char* collective = daemon::algo::collective_name(r.collective);
  const std::string size = format_bytes(static_cast<double>(r.bytes));
  const char* algorithm = daemon::algo::algorithm_name(r.algorithm);
  if (!r.failure.empty()) {
    std::snprintf(line, sizeof(line), "%-13s %9s %-8s %s\n", collective, size.c_str(), algorithm,
                  r.failure.c_str());
    out << line;
    return;
  }
  if (!r.skipped.empty()) {
    std::snprintf(line, sizeof(line), "%-13s %9s %-8s %10s %10s %7s %10s %5d %5d %10s %s\n",
                  collective, size.c_str(), algorithm, "-", format_seconds(r.bound).c_str(), "-",
                  format_seconds(r.estimate).c_str(), r.peers_max, r.paths_max,
                  format_bytes(r.nic_bytes_max).c_str(), r.skipped.c_str());
    out << line;
    return;
  }
  const std::string slices = std::to_string(r.slices_simulated) + "/" + std::to_string(r.slices);
  std::snprintf(line, sizeof(line), kRowFormat, collective, size.c_str(), algorithm,
                format_seconds(r.seconds).c_str(), format_seconds(r.bound).c_str(),
                printf_string("%.2f%s", r.bound > 0 ? r.seconds / r.bound : 0.0, "").c_str(),
                format_seconds(r.estimate).c_str(), std::to_string(r.peers_max).c_str(),
                std::to_string(r.paths_max).c_str(), format_bytes(r.nic_bytes_max).c_str(),
                format_seconds(r.formation_s).c_str(), format_seconds(r.formation_mesh_s).c_str(),
                slices.c_str());
  out << line;
}

void print_json(std::ostream& out, const ClusterModel& c, const RowResult& r) {
  nlohmann::json j = {
      {"nodes", c.nodes},
      {"nics", c.nics},
      {"rate_bytes_per_s", c.nic_rate},
      {"latency_s", c.latency_s},
      {"collective", daemon::algo::collective_name(r.collective)},
      {"bytes", r.bytes},
      {"algorithm", daemon::algo::algorithm_name(r.algorithm)},
  };
  if (!r.failure.empty()) {
    j["failure"] = r.failure;
  } else {
    if (!r.skipped.empty()) j["skipped"] = r.skipped;
    j.update({{"seconds", r.seconds},
              {"bound_s", r.bound},
              {"model_s", r.estimate},
              {"peers_max", r.peers_max},
              {"paths_max", r.paths_max},
              {"nic_bytes_max", r.nic_bytes_max},
              {"formation_s", r.formation_s},
              {"formation_full_mesh_s", r.formation_mesh_s},
              {"slices", r.slices},
              {"slices_simulated", r.slices_simulated},
              {"messages", r.messages}});
  }
  out << j.dump() << "\n";
}

}  // namespace plexus::sim
