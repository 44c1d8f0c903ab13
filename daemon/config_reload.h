// What a config reload changes while plexusd runs. Live: the jobs table (policies and caps),
// the anomaly thresholds (stall-ms, rank-skew-ms, slow-path-ratio), the local collectives'
// thresholds (parallel-threshold, local-slice-bytes), log-level and events-file. Everything
// else is fixed at start (sockets bound, NICs and peers opened, telemetry rings and worker
// threads sized): a change to it is named, and takes effect at the next start; so is a
// change of jobs that turns --latency-connections auto's answer.
#pragma once

#include <string>
#include <vector>

#include "daemon/config.h"

namespace plexus::daemon {

struct ReloadPlan {
  Config in_use;  // the settings in use after it: `read`'s live ones, the rest unchanged
  std::vector<std::string> applied;         // "key: old -> new"
  std::vector<std::string> restart_needed;  // likewise; in_use keeps the old value
};

// `in_use`: the settings the daemon runs with; `read`: those just read (names resolved as
// in_use's are).
ReloadPlan plan_reload(const Config& in_use, const Config& read);

}  // namespace plexus::daemon
