#include "tools/plexusctl/ops_view.h"

#include <cstdio>
#include <string>

#include "tools/plexusctl/format.h"

namespace plexus::ctl {

json ops_to_json(shm::control::OpsReply::Reader ops) {
  json out;
  out["node"] = ops.getNode().cStr();
  out["stall_ms"] = ops.getStallMs();
  out["inflight"] = json::array();
  for (auto op : ops.getInflight()) {
    json missing = json::array();
    for (auto r : op.getMissingRanks()) {
      missing.push_back({{"rank", r.getRank()}, {"pid", r.getPid()}, {"node", r.getNode().cStr()}});
    }
    json nodes = json::array();
    for (auto n : op.getWaitingNodes()) nodes.push_back(n.cStr());
    out["inflight"].push_back({{"comm", op.getComm().cStr()},
                               {"job", op.getJob().cStr()},
                               {"collective", op.getCollective().cStr()},
                               {"seq", op.getSeq()},
                               {"bytes", op.getBytes()},
                               {"algorithm", op.getAlgorithm().cStr()},
                               {"state", op.getState().cStr()},
                               {"age_ms", op.getAgeMs()},
                               {"idle_ms", op.getIdleMs()},
                               {"stalled", op.getStalled()},
                               {"arrived", op.getArrived()},
                               {"local_ranks", op.getLocalRanks()},
                               {"missing_ranks", missing},
                               {"waiting_nodes", nodes},
                               {"slices_done", op.getSlicesDone()},
                               {"slices", op.getSlices()},
                               {"waiting_for", op.getWaitingFor().cStr()}});
  }
  out["finished"] = json::array();
  for (auto op : ops.getFinished()) {
    out["finished"].push_back({{"comm", op.getComm().cStr()},
                               {"job", op.getJob().cStr()},
                               {"collective", op.getCollective().cStr()},
                               {"seq", op.getSeq()},
                               {"bytes", op.getBytes()},
                               {"algorithm", op.getAlgorithm().cStr()},
                               {"status", op.getStatus().cStr()},
                               {"end_unix_ms", op.getEndUnixMs()},
                               {"arrival_spread_us", op.getArrivalSpreadUs()},
                               {"run_us", op.getRunUs()},
                               {"last_rank", op.getLastRank()},
                               {"slices", op.getSlices()},
                               {"local_in_us", op.getLocalInUs()},
                               {"network_us", op.getNetworkUs()},
                               {"local_out_us", op.getLocalOutUs()},
                               {"slowest_slice_us", op.getSlowestSliceUs()}});
  }
  return out;
}

json only_stuck(json ops) {
  json stuck = json::array();
  for (auto& op : ops["inflight"]) {
    if (op["stalled"].get<bool>()) stuck.push_back(std::move(op));
  }
  ops["inflight"] = std::move(stuck);
  return ops;
}

namespace {

// "in 40us net 3.1ms out 20us, 4 slices, slowest 1.6ms"; "-" for a single-node op.
std::string stages_text(const json& op) {
  const uint64_t slices = op.value("slices", uint64_t{0});
  if (slices == 0) return "-";
  auto us = [&op](const char* key) {
    return human_us(static_cast<double>(op[key].get<uint64_t>()));
  };
  return "in " + us("local_in_us") + " net " + us("network_us") + " out " + us("local_out_us") +
         ", " + std::to_string(slices) + (slices == 1 ? " slice" : " slices") + ", slowest " +
         us("slowest_slice_us");
}

}  // namespace

void print_ops(const json& ops, bool show_finished) {
  const auto& inflight = ops["inflight"];
  std::printf("node %s: %zu collective(s) in flight; stalled after %u ms without progress\n",
              ops["node"].get<std::string>().c_str(), inflight.size(),
              ops["stall_ms"].get<unsigned>());
  if (!inflight.empty()) {
    std::printf("%-9s %-12s %-14s %6s %10s %-18s %9s %9s  %s\n", "COMM", "JOB", "COLLECTIVE", "SEQ",
                "SIZE", "STATE", "AGE", "IDLE", "WAITING FOR");
    for (const auto& op : inflight) {
      std::printf("%-9s %-12s %-14s %6llu %10s %-18s %9s %9s  %s%s\n",
                  op["comm"].get<std::string>().c_str(), op["job"].get<std::string>().c_str(),
                  op["collective"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(op["seq"].get<uint64_t>()),
                  human_bytes(op["bytes"].get<uint64_t>()).c_str(),
                  op["state"].get<std::string>().c_str(),
                  human_us(static_cast<double>(op["age_ms"].get<uint64_t>()) * 1000).c_str(),
                  human_us(static_cast<double>(op["idle_ms"].get<uint64_t>()) * 1000).c_str(),
                  op["waiting_for"].get<std::string>().c_str(),
                  op["stalled"].get<bool>() ? "  STALLED" : "");
    }
  }
  if (!show_finished) return;
  const auto& finished = ops["finished"];
  if (finished.empty()) {
    std::printf("\nno finished collectives recorded (they are timed with --telemetry on)\n");
    return;
  }
  std::printf("\nlast %zu finished:\n%-9s %-12s %-14s %6s %10s %-10s %-9s %10s %10s %5s  %s\n",
              finished.size(), "COMM", "JOB", "COLLECTIVE", "SEQ", "SIZE", "ALGORITHM", "STATUS",
              "SPREAD", "RUN", "LAST", "STAGES (summed over slices)");
  for (const auto& op : finished) {
    std::printf("%-9s %-12s %-14s %6llu %10s %-10s %-9s %10s %10s %5d  %s\n",
                op["comm"].get<std::string>().c_str(), op["job"].get<std::string>().c_str(),
                op["collective"].get<std::string>().c_str(),
                static_cast<unsigned long long>(op["seq"].get<uint64_t>()),
                human_bytes(op["bytes"].get<uint64_t>()).c_str(),
                op["algorithm"].get<std::string>().c_str(), op["status"].get<std::string>().c_str(),
                human_us(static_cast<double>(op["arrival_spread_us"].get<uint64_t>())).c_str(),
                human_us(static_cast<double>(op["run_us"].get<uint64_t>())).c_str(),
                op["last_rank"].get<int>(), stages_text(op).c_str());
  }
}

}  // namespace plexus::ctl
