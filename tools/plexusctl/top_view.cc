#include "tools/plexusctl/top_view.h"

#include <cstdio>
#include <ctime>
#include <map>
#include <string>

#include "tools/plexusctl/format.h"
#include "tools/plexusctl/links_view.h"
#include "tools/plexusctl/ops_view.h"

namespace plexus::ctl {
namespace {

struct JobTotals {
  uint64_t ops = 0;
  uint64_t bytes = 0;
};

std::map<std::string, JobTotals> job_totals(const json& status) {
  std::map<std::string, JobTotals> totals;
  for (const auto& j : status["jobs"]) {
    JobTotals& t = totals[j["name"].get<std::string>()];
    for (const auto& c : j["collectives"]) {
      t.ops += c["ops"].get<uint64_t>();
      t.bytes += c["payload_bytes"].get<uint64_t>();
    }
  }
  return totals;
}

}  // namespace

void print_top(const json& status, const json& links, const json& ops, const json* previous,
               double seconds) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char clock[16];
  std::strftime(clock, sizeof(clock), "%H:%M:%S", &local);
  size_t ranks = 0;
  for (const auto& s : status["sessions"]) ranks += s["role"] == "rank" ? 1 : 0;
  const uint64_t ops_done = status["ops_completed"].get<uint64_t>();
  std::string ops_rate = "-";
  if (previous != nullptr && seconds > 0) {
    const uint64_t before = (*previous)["ops_completed"].get<uint64_t>();
    char text[32];
    std::snprintf(text, sizeof(text), "%.0f",
                  static_cast<double>(ops_done - std::min(ops_done, before)) / seconds);
    ops_rate = text;
  }
  std::printf("plexus top  node %s  plexusd %s pid %u  up %llus  %s\n",
              status["node"].get<std::string>().c_str(),
              status["version"].get<std::string>().c_str(), status["pid"].get<unsigned>(),
              static_cast<unsigned long long>(status["uptime_ms"].get<uint64_t>() / 1000), clock);
  std::printf("ranks %zu  communicators %zu  ops %llu  ops/s %s  bad entries %llu\n\n", ranks,
              status["comms"].size(), static_cast<unsigned long long>(ops_done), ops_rate.c_str(),
              static_cast<unsigned long long>(status["bad_entries"].get<uint64_t>()));
  print_nics(links);
  std::printf("\n%-20s %6s %10s %14s %8s\n", "JOB", "RANKS", "OPS/s", "PAYLOAD/s", "FAILED");
  const auto totals = job_totals(status);
  const auto before =
      previous != nullptr ? job_totals(*previous) : std::map<std::string, JobTotals>{};
  for (const auto& j : status["jobs"]) {
    const std::string name = j["name"].get<std::string>();
    const JobTotals& t = totals.at(name);
    auto it = before.find(name);
    std::string op_rate = "-", byte_rate = "-";
    if (previous != nullptr && seconds > 0) {
      const JobTotals b = it == before.end() ? JobTotals{} : it->second;
      char text[32];
      std::snprintf(text, sizeof(text), "%.0f", static_cast<double>(t.ops - b.ops) / seconds);
      op_rate = text;
      byte_rate =
          human_bytes(static_cast<uint64_t>(static_cast<double>(t.bytes - b.bytes) / seconds)) +
          "/s";
    }
    std::printf("%-20s %6u %10s %14s %8llu\n", name.c_str(), j["sessions"].get<unsigned>(),
                op_rate.c_str(), byte_rate.c_str(),
                static_cast<unsigned long long>(j["failed_completions"].get<uint64_t>()));
  }
  std::printf("\n");
  print_ops(ops, false);
}

}  // namespace plexus::ctl
