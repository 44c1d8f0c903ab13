// What the config's jobs table sets for one job: its scheduling policy on the links
// (transports/channel/flow_policy.h) and its admission caps on this node. Applied to the
// job's counters when its first session arrives (JobPolicies::job_seen).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "transports/channel/flow_policy.h"

namespace plexus::daemon {

// 0 is no cap. An op past a cap is refused when submitted, before it joins its
// communicator, with NO_MEMORY naming the job, the cap and the config key.
struct JobCaps {
  // Bytes of the job's ops in flight on this node, each rank's op counted as the larger of
  // its send and receive buffers (from submission to completion).
  uint64_t max_inflight_bytes = 0;
  // Host memory the staging copies of the job's GPU ops hold, over all its processes
  // (each process is also held to plexusd --max-gpu-staging-bytes).
  uint64_t max_staging_bytes = 0;
  bool operator==(const JobCaps&) const = default;
};

struct JobSettings {
  transports::FlowPolicy policy;
  JobCaps caps;
  bool operator==(const JobSettings&) const = default;
};

using JobsTable = std::map<std::string, JobSettings>;

}  // namespace plexus::daemon
