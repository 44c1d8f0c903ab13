#include "daemon/engine/op_report.h"

namespace plexus::daemon {

const char* result_name(plexus_result_t result) {
  switch (result) {
    case PLEXUS_SUCCESS:
      return "ok";
    case PLEXUS_ERR_PEER_LOST:
      return "peer_lost";
    case PLEXUS_ERR_MISMATCH:
      return "mismatch";
    case PLEXUS_ERR_COMM_ABORTED:
      return "aborted";
    case PLEXUS_ERR_TIMEOUT:
      return "timeout";
    case PLEXUS_ERR_INVALID_ARGUMENT:
      return "invalid_argument";
    case PLEXUS_ERR_NO_MEMORY:
      return "no_memory";
    default:
      return "error";
  }
}

std::string waiting_for_text(const InflightOpReport& op) {
  std::string text;
  auto add = [&text](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  if (!op.missing_ranks.empty()) {
    std::string ranks;
    for (const OpRankRef& r : op.missing_ranks) {
      if (!ranks.empty()) ranks += ", ";
      ranks += "rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + ")";
    }
    add("waiting for " + ranks + " on node " + op.missing_ranks.front().node + " to submit it");
  }
  if (!op.waiting_nodes.empty()) {
    std::string nodes;
    for (const std::string& n : op.waiting_nodes) nodes += (nodes.empty() ? "" : ", ") + n;
    add("waiting for data from node " + nodes);
  }
  if (text.empty()) add(op.state == "queued" ? "queued behind an earlier collective" : op.state);
  return text;
}

nlohmann::json to_json(const InflightOpReport& op) {
  nlohmann::json missing = nlohmann::json::array();
  for (const OpRankRef& r : op.missing_ranks) {
    missing.push_back({{"rank", r.rank}, {"pid", r.pid}, {"node", r.node}});
  }
  return {{"comm", op.comm},
          {"job", op.job},
          {"collective", op.collective},
          {"seq", op.seq},
          {"bytes", op.bytes},
          {"algorithm", op.algorithm},
          {"state", op.state},
          {"age_ms", op.age_ms},
          {"idle_ms", op.idle_ms},
          {"stalled", op.stalled},
          {"arrived", op.arrived},
          {"local_ranks", op.local_ranks},
          {"missing_ranks", missing},
          {"waiting_nodes", op.waiting_nodes},
          {"slices_done", op.slices_done},
          {"slices", op.slices},
          {"waiting_for", waiting_for_text(op)}};
}

}  // namespace plexus::daemon
