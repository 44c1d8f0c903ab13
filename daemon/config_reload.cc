#include "daemon/config_reload.h"

#include <map>

#include "daemon/config_options.h"

namespace plexus::daemon {
namespace {

using Take = void (*)(Config& to, const Config& from);

// The live settings, by key: how each is taken from what was read.
const std::map<std::string, Take>& live_settings() {
  static const std::map<std::string, Take> live{
      {"log-level", [](Config& to, const Config& from) { to.log_level = from.log_level; }},
      {"events-file", [](Config& to, const Config& from) { to.events_file = from.events_file; }},
      {"stall-ms", [](Config& to, const Config& from) { to.stall_ms = from.stall_ms; }},
      {"rank-skew-ms", [](Config& to, const Config& from) { to.rank_skew_ms = from.rank_skew_ms; }},
      {"slow-path-ratio",
       [](Config& to, const Config& from) { to.slow_path_ratio = from.slow_path_ratio; }},
      {"parallel-threshold",
       [](Config& to, const Config& from) {
         to.parallel_threshold_bytes = from.parallel_threshold_bytes;
       }},
      {"local-slice-bytes",
       [](Config& to, const Config& from) { to.local_slice_bytes = from.local_slice_bytes; }},
  };
  return live;
}

}  // namespace

ReloadPlan plan_reload(const Config& in_use, const Config& read) {
  ReloadPlan plan{in_use, {}, {}};
  const std::map<std::string, std::string> before = config_values(in_use);
  const std::map<std::string, std::string> after = config_values(read);
  std::map<std::string, std::pair<std::string, std::string>> changed;
  for (const auto& [key, value] : before) {
    auto it = after.find(key);
    const std::string now = it == after.end() ? "(none)" : it->second;
    if (now != value) changed[key] = {value, now};
  }
  for (const auto& [key, value] : after) {
    if (before.count(key) == 0) changed[key] = {"(none)", value};
  }
  for (const auto& [key, values] : changed) {
    const std::string line = key + ": " + values.first + " -> " + values.second;
    if (key.rfind("jobs.", 0) == 0) {
      plan.in_use.jobs = read.jobs;
      plan.applied.push_back(line);
    } else if (auto take = live_settings().find(key); take != live_settings().end()) {
      take->second(plan.in_use, read);
      plan.applied.push_back(line);
    } else {
      plan.restart_needed.push_back(line);
    }
  }
  // The jobs reload live, but the latency class's connections were opened (or not) at start.
  const bool had = wants_latency_connections(in_use);
  if (had != wants_latency_connections(plan.in_use)) {
    plan.restart_needed.push_back(
        std::string("latency-connections (auto, by the jobs' classes): ") +
        (had ? "on -> off" : "off -> on"));
  }
  return plan;
}

}  // namespace plexus::daemon
