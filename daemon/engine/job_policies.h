// Each job's scheduling policy (a traffic class and a weight: transports/channel/
// flow_policy.h) as the engine applies it to the links' send schedulers: the config's jobs
// table at first, changed at run time (plexusctl job set). The table's admission caps are
// applied to the job's counters with it (JobCaps). A job's frames are the flow of
// its JobCounters; what the schedulers report (bytes, queue delay) is counted there, and
// each second the jobs' achieved and configured shares are worked out from it. Engine
// thread only; the counters it writes are read by plexusctl and /metrics from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/engine/job_metrics.h"
#include "daemon/engine/job_settings.h"
#include "daemon/links/node_links.h"
#include "transports/channel/flow_policy.h"

namespace plexus::daemon {

class JobPolicies {
 public:
  using Clock = std::chrono::steady_clock;
  // `configured`: by job name; jobs not in it get the default policy and no caps.
  JobPolicies(NodeLinks& links, const JobsTable& configured);

  // A session of this job arrived: its flow gets the job's policy, its counters its caps.
  void job_seen(const std::shared_ptr<JobCounters>& job);
  // Changes `job`'s policy from now on (frames already waiting too). Returns "" or why not:
  // a job neither configured nor seen is refused, naming the known ones.
  [[nodiscard]] std::string set(const std::string& job, transports::FlowPolicy policy);
  // A config reload's jobs table: each job whose entry changed takes its new policy and
  // caps (one that left the table, the default policy and no caps); the others keep
  // theirs, a policy set at run time included.
  void reconfigure(const JobsTable& configured);
  // A frame of `flow` left a send scheduler (NodeLinks::Handler::on_scheduled).
  void scheduled(uint32_t flow, uint64_t bytes, std::chrono::nanoseconds waited);
  // Every kShareWindow: achieved and configured shares over the window just ended.
  void update_shares(Clock::time_point now);

  static constexpr auto kShareWindow = std::chrono::seconds(1);
  // Changes whenever a job's policy is applied: the engine re-sorts its sessions by class.
  uint64_t version() const { return version_; }

 private:
  transports::FlowPolicy policy_of(const std::string& job) const;
  void apply(JobCounters& job, transports::FlowPolicy policy);

  NodeLinks& links_;
  std::map<std::string, transports::FlowPolicy> policies_;  // configured, then as set
  std::map<std::string, JobCaps> caps_;                     // configured
  JobsTable configured_;                                    // the table as last read
  std::vector<std::shared_ptr<JobCounters>> by_flow_;       // the jobs seen, by flow
  Clock::time_point window_start_{};
  uint64_t version_ = 0;
};

}  // namespace plexus::daemon
