// What plexusctl ops shows: the collectives in flight on this node (with what each waits
// for) and the last ones finished (with their timing). Built on the engine thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plexus/plexus_types.h"

namespace plexus::daemon {

struct OpRankRef {
  int rank = -1;
  pid_t pid = 0;
  std::string node;
};

struct InflightOpReport {
  std::string comm;  // token prefix
  std::string job;
  std::string collective;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  std::string algorithm;  // "" before it starts
  std::string state;      // "waiting for ranks", "queued", "running"
  uint64_t age_ms = 0;    // since its first local rank submitted it (or it was first seen)
  uint64_t idle_ms = 0;   // since it last made progress
  bool stalled = false;
  uint32_t arrived = 0;
  uint32_t local_ranks = 0;
  std::vector<OpRankRef> missing_ranks;    // local ranks that have not submitted it
  std::vector<std::string> waiting_nodes;  // peer nodes whose data has not all come
  uint64_t slices_done = 0;
  uint64_t slices = 0;
};

struct FinishedOpReport {
  std::string comm;
  std::string job;
  std::string collective;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  std::string algorithm;
  std::string status;  // "ok" or the result's name
  int64_t end_unix_ms = 0;
  uint64_t arrival_spread_us = 0;  // first to last local rank submitting it
  uint64_t run_us = 0;             // last submission to completion
  int last_rank = -1;
  // Multi-node ops: time per stage summed over `slices` (OpStageTimes); 0 slices: none.
  uint64_t slices = 0;
  uint64_t local_in_us = 0;
  uint64_t network_us = 0;
  uint64_t local_out_us = 0;
  uint64_t slowest_slice_us = 0;  // the slowest slice's inter-node rounds
};

struct OpsReport {
  std::vector<InflightOpReport> inflight;
  std::vector<FinishedOpReport> finished;  // newest last
};

// Finished ops kept for the report.
inline constexpr size_t kFinishedOpsKept = 64;

// "ok", "peer_lost", "mismatch", ...: a result as a word for reports.
const char* result_name(plexus_result_t result);
// What the op waits for, as a sentence: "waiting for rank 2 (pid 4242) on node n1 to
// submit it", "waiting for data from node n2", ...
std::string waiting_for_text(const InflightOpReport& op);
// The op as event evidence (field names as in plexusctl ops --json).
nlohmann::json to_json(const InflightOpReport& op);

}  // namespace plexus::daemon
