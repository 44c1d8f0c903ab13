// plexus-sim's output: a plain-text table (one row per collective and size) or JSON lines.
// Stateless.
#pragma once

#include <ostream>
#include <span>

#include "tools/plexus-sim/cluster_model.h"
#include "tools/plexus-sim/collective_row.h"

namespace plexus::sim {

void print_header(std::ostream& out, const ClusterModel& cluster);
void print_row(std::ostream& out, const RowResult& row);
void print_json(std::ostream& out, const ClusterModel& cluster, const RowResult& row);

// "8 B", "4 KiB", "1 GiB" (exact powers of 1024, else with one decimal).
std::string format_bytes(double bytes);
// "812 ns", "3.25 us", "1.20 ms", "4.01 s".
std::string format_seconds(double seconds);

}  // namespace plexus::sim
