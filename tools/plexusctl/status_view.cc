#include "tools/plexusctl/status_view.h"

#include <cstdio>

#include "tools/plexusctl/format.h"

namespace plexus::ctl {

namespace control = shm::control;

json status_to_json(control::StatusReply::Reader status) {
  json out;
  out["version"] = status.getVersion().cStr();
  out["node"] = status.getNodeName().cStr();
  out["pid"] = status.getPid();
  out["uptime_ms"] = status.getUptimeMs();
  out["socket"] = status.getSocketPath().cStr();
  out["workers"] = status.getWorkers();
  out["reduce_isa"] = status.getReduceIsa().cStr();
  out["ops_completed"] = status.getOpsCompleted();
  out["bad_entries"] = status.getBadEntries();
  out["bad_messages"] = status.getBadMessages();
  out["sessions"] = json::array();
  for (auto s : status.getSessions()) {
    out["sessions"].push_back({{"id", s.getId()},
                               {"pid", s.getPid()},
                               {"uid", s.getUid()},
                               {"role", s.getRole() == control::Role::RANK ? "rank" : "admin"},
                               {"process", s.getProcessName().cStr()},
                               {"pool_bytes", s.getPoolBytes()},
                               {"comms", s.getComms()},
                               {"ops_submitted", s.getOpsSubmitted()},
                               {"bad_entries", s.getBadEntries()},
                               {"job", s.getJob().cStr()}});
  }
  out["jobs"] = json::array();
  for (auto j : status.getJobs()) {
    json collectives = json::array();
    for (auto c : j.getCollectives()) {
      collectives.push_back({{"collective", c.getCollective().cStr()},
                             {"ops", c.getOps()},
                             {"payload_bytes", c.getPayloadBytes()}});
    }
    out["jobs"].push_back({{"name", j.getName().cStr()},
                           {"sessions", j.getSessions()},
                           {"failed_completions", j.getFailedCompletions()},
                           {"class", j.getTrafficClass().cStr()},
                           {"weight", j.getWeight()},
                           {"configured_share", j.getConfiguredShare()},
                           {"achieved_share", j.getAchievedShare()},
                           {"sent_to_peers_bytes", j.getScheduledBytes()},
                           {"queue_delay_frames", j.getQueueDelayFrames()},
                           {"queue_delay_mean_us", j.getQueueDelayMeanUs()},
                           {"queue_delay_p99_us", j.getQueueDelayP99Us()},
                           {"max_inflight_bytes", j.getMaxInflightBytes()},
                           {"inflight_bytes", j.getInflightBytes()},
                           {"max_staging_bytes", j.getMaxStagingBytes()},
                           {"refused_ops", j.getRefusedOps()},
                           {"collectives", collectives}});
  }
  out["comms"] = json::array();
  for (auto c : status.getComms()) {
    json ranks = json::array();
    for (auto r : c.getRanks()) {
      ranks.push_back({{"rank", r.getRank()}, {"pid", r.getPid()}, {"session", r.getSessionId()}});
    }
    out["comms"].push_back({{"id", c.getTokenPrefix().cStr()},
                            {"nranks", c.getNranks()},
                            {"state", c.getState().cStr()},
                            {"broken_reason", c.getBrokenReason().cStr()},
                            {"origin", c.getOrigin().cStr()},
                            {"successor", c.getSuccessor().cStr()},
                            {"ops_completed", c.getOpsCompleted()},
                            {"bytes_moved", c.getBytesMoved()},
                            {"ranks", ranks}});
  }
  return out;
}

void print_status(const json& s) {
  const uint64_t up_s = s["uptime_ms"].get<uint64_t>() / 1000;
  size_t ranks = 0;
  for (const auto& session : s["sessions"]) ranks += session["role"] == "rank" ? 1 : 0;
  std::printf("plexusd %s on node %s  pid %u  up %llus  socket %s\n",
              s["version"].get<std::string>().c_str(), s["node"].get<std::string>().c_str(),
              s["pid"].get<unsigned>(), static_cast<unsigned long long>(up_s),
              s["socket"].get<std::string>().c_str());
  std::printf("workers %u (+ engine thread), reduce kernels %s\n", s["workers"].get<unsigned>(),
              s["reduce_isa"].get<std::string>().c_str());
  std::printf(
      "rank sessions %zu, communicators %zu, ops completed %llu, bad ring entries %llu, "
      "bad control messages %llu\n",
      ranks, s["comms"].size(), static_cast<unsigned long long>(s["ops_completed"].get<uint64_t>()),
      static_cast<unsigned long long>(s["bad_entries"].get<uint64_t>()),
      static_cast<unsigned long long>(s["bad_messages"].get<uint64_t>()));
  if (ranks == 0) return;
  std::printf("\n%-8s %-8s %-6s %-16s %-16s %10s %6s %12s %8s\n", "SESSION", "PID", "UID",
              "PROCESS", "JOB", "POOL", "COMMS", "OPS", "BAD");
  for (const auto& x : s["sessions"]) {
    if (x["role"] != "rank") continue;
    std::printf("%-8llu %-8d %-6u %-16s %-16s %10s %6u %12llu %8llu\n",
                static_cast<unsigned long long>(x["id"].get<uint64_t>()), x["pid"].get<int>(),
                x["uid"].get<unsigned>(), x["process"].get<std::string>().c_str(),
                x["job"].get<std::string>().c_str(),
                human_bytes(x["pool_bytes"].get<uint64_t>()).c_str(), x["comms"].get<unsigned>(),
                static_cast<unsigned long long>(x["ops_submitted"].get<uint64_t>()),
                static_cast<unsigned long long>(x["bad_entries"].get<uint64_t>()));
  }
}

void print_jobs(const json& s) {
  if (s["jobs"].empty()) {
    std::printf("no jobs yet (a rank's job is $PLEXUS_JOB, else its process name)\n");
    return;
  }
  // SHARE: configured / achieved over the last second, of the bytes sent to other nodes;
  // DELAY: the mean and 99th percentile (bucket bound) of frames' wait in a send scheduler.
  std::printf("%-20s %6s %10s %12s %8s %-10s %6s %13s %17s  %s\n", "JOB", "RANKS", "OPS", "PAYLOAD",
              "FAILED", "CLASS", "WEIGHT", "SHARE CFG/GOT", "DELAY MEAN/P99", "BY COLLECTIVE");
  for (const auto& j : s["jobs"]) {
    uint64_t ops = 0;
    uint64_t bytes = 0;
    std::string by;
    for (const auto& c : j["collectives"]) {
      ops += c["ops"].get<uint64_t>();
      bytes += c["payload_bytes"].get<uint64_t>();
      by += (by.empty() ? "" : ", ") + c["collective"].get<std::string>() + " " +
            std::to_string(c["ops"].get<uint64_t>());
    }
    char share[32];
    std::snprintf(share, sizeof(share), "%.0f%%/%.0f%%", 100 * j["configured_share"].get<double>(),
                  100 * j["achieved_share"].get<double>());
    char delay[48];
    if (j["queue_delay_frames"].get<uint64_t>() == 0) {
      std::snprintf(delay, sizeof(delay), "-");
    } else if (const double p99_ms = j["queue_delay_p99_us"].get<double>() / 1000;
               p99_ms >= 1e9) {  // past the histogram's last bucket (tens of seconds)
      std::snprintf(delay, sizeof(delay), "%.2f ms/>42 s",
                    j["queue_delay_mean_us"].get<double>() / 1000);
    } else {
      std::snprintf(delay, sizeof(delay), "%.2f/%.2f ms",
                    j["queue_delay_mean_us"].get<double>() / 1000, p99_ms);
    }
    std::printf("%-20s %6u %10llu %12s %8llu %-10s %6u %13s %17s  %s\n",
                j["name"].get<std::string>().c_str(), j["sessions"].get<unsigned>(),
                static_cast<unsigned long long>(ops), human_bytes(bytes).c_str(),
                static_cast<unsigned long long>(j["failed_completions"].get<uint64_t>()),
                j["class"].get<std::string>().c_str(), j["weight"].get<unsigned>(), share, delay,
                by.c_str());
  }
}

void print_comms(const json& s) {
  if (s["comms"].empty()) {
    std::printf("no communicators\n");
    return;
  }
  std::printf("%-10s %6s %-7s %12s %12s  %s\n", "COMM", "RANKS", "STATE", "OPS", "MOVED",
              "RANK:PID");
  for (const auto& c : s["comms"]) {
    std::string members;
    for (const auto& r : c["ranks"]) {
      if (!members.empty()) members += " ";
      members +=
          std::to_string(r["rank"].get<unsigned>()) + ":" + std::to_string(r["pid"].get<int>());
    }
    std::printf("%-10s %6u %-7s %12llu %12s  %s\n", c["id"].get<std::string>().c_str(),
                c["nranks"].get<unsigned>(), c["state"].get<std::string>().c_str(),
                static_cast<unsigned long long>(c["ops_completed"].get<uint64_t>()),
                human_bytes(c["bytes_moved"].get<uint64_t>()).c_str(), members.c_str());
    if (c["state"] == "broken" || c["state"] == "revoked") {
      std::printf("           reason: %s\n", c["broken_reason"].get<std::string>().c_str());
    }
    if (!c["origin"].get<std::string>().empty()) {
      std::printf("           from: the %s\n", c["origin"].get<std::string>().c_str());
    }
    if (!c["successor"].get<std::string>().empty()) {
      std::printf("           successor: %s\n", c["successor"].get<std::string>().c_str());
    }
  }
}

}  // namespace plexus::ctl
