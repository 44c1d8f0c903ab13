#include "daemon/engine/job_policies.h"

#include <spdlog/spdlog.h>

#include <array>

namespace plexus::daemon {

JobPolicies::JobPolicies(NodeLinks& links, const JobsTable& configured)
    : links_(links), configured_(configured) {
  for (const auto& [job, settings] : configured) {
    policies_[job] = settings.policy;
    if (settings.caps != JobCaps{}) caps_[job] = settings.caps;
  }
}

transports::FlowPolicy JobPolicies::policy_of(const std::string& job) const {
  auto it = policies_.find(job);
  return it == policies_.end() ? transports::FlowPolicy{} : it->second;
}

void JobPolicies::apply(JobCounters& job, transports::FlowPolicy policy) {
  ++version_;
  links_.set_flow_policy(job.flow, policy);
  job.traffic_class.store(policy.traffic_class, std::memory_order_relaxed);
  job.weight.store(policy.weight, std::memory_order_relaxed);
}

void JobPolicies::job_seen(const std::shared_ptr<JobCounters>& job) {
  if (!job) return;
  if (by_flow_.size() <= job->flow) by_flow_.resize(job->flow + 1);
  if (by_flow_[job->flow] == job) return;
  by_flow_[job->flow] = job;
  apply(*job, policy_of(job->job));
  if (auto it = caps_.find(job->job); it != caps_.end()) {
    job->max_inflight_bytes.store(it->second.max_inflight_bytes, std::memory_order_relaxed);
    job->max_staging_bytes.store(it->second.max_staging_bytes, std::memory_order_relaxed);
  }
}

std::string JobPolicies::set(const std::string& job, transports::FlowPolicy policy) {
  JobCounters* counters = nullptr;
  for (const auto& j : by_flow_) {
    if (j && j->job == job) counters = j.get();
  }
  if (counters == nullptr && policies_.count(job) == 0) {
    std::string known;
    for (const auto& [name, p] : policies_) known += (known.empty() ? "" : ", ") + name;
    for (const auto& j : by_flow_) {
      if (j && policies_.count(j->job) == 0) known += (known.empty() ? "" : ", ") + j->job;
    }
    return "unknown job '" + job.substr(0, 64) +
           "': no session of it has connected and the config's jobs table does not name it" +
           (known.empty() ? std::string(" (no job is known yet)") : " (known: " + known + ")");
  }
  const transports::FlowPolicy before = policy_of(job);
  policies_[job] = policy;
  if (counters != nullptr) apply(*counters, policy);
  spdlog::info("job {}: class {} weight {} (was {} weight {})", job,
               transports::traffic_class_name(policy.traffic_class), policy.weight,
               transports::traffic_class_name(before.traffic_class), before.weight);
  return {};
}

void JobPolicies::reconfigure(const JobsTable& configured) {
  std::map<std::string, JobSettings> changed;
  for (const auto& [job, settings] : configured) {
    auto before = configured_.find(job);
    if (before == configured_.end() || before->second != settings) changed[job] = settings;
  }
  for (const auto& [job, settings] : configured_) {
    if (configured.count(job) == 0) changed[job] = JobSettings{};  // left the table
  }
  configured_ = configured;
  for (const auto& [job, settings] : changed) {
    // A job out of the table is no longer known by it (job set then needs a session of it).
    if (configured.count(job) == 0) {
      policies_.erase(job);
    } else {
      policies_[job] = settings.policy;
    }
    if (settings.caps == JobCaps{}) {
      caps_.erase(job);
    } else {
      caps_[job] = settings.caps;
    }
    for (const auto& seen : by_flow_) {
      if (!seen || seen->job != job) continue;
      apply(*seen, settings.policy);
      seen->max_inflight_bytes.store(settings.caps.max_inflight_bytes, std::memory_order_relaxed);
      seen->max_staging_bytes.store(settings.caps.max_staging_bytes, std::memory_order_relaxed);
    }
    spdlog::info("job {}: class {} weight {}, caps in flight {} staging {} (config reload)", job,
                 transports::traffic_class_name(settings.policy.traffic_class),
                 settings.policy.weight, settings.caps.max_inflight_bytes,
                 settings.caps.max_staging_bytes);
  }
}

void JobPolicies::scheduled(uint32_t flow, uint64_t bytes, std::chrono::nanoseconds waited) {
  if (flow >= by_flow_.size() || !by_flow_[flow]) return;
  JobCounters& job = *by_flow_[flow];
  bump_single_writer(job.scheduled_bytes, bytes);
  job.queue_delay.record(waited);
}

void JobPolicies::update_shares(Clock::time_point now) {
  if (now - window_start_ < kShareWindow) return;
  window_start_ = now;
  // Each job's bytes in the window just ended (by flow), their total, and the weights of
  // the jobs that sent, by class.
  std::vector<uint64_t> sent(by_flow_.size(), 0);
  uint64_t total = 0;
  std::array<uint64_t, transports::kTrafficClasses> class_weights{};
  for (size_t flow = 0; flow < by_flow_.size(); ++flow) {
    JobCounters* job = by_flow_[flow].get();
    if (job == nullptr) continue;
    sent[flow] =
        job->scheduled_bytes.load(std::memory_order_relaxed) - job->scheduled_bytes_at_window;
    job->scheduled_bytes_at_window += sent[flow];
    total += sent[flow];
    const transports::FlowPolicy policy = job->policy();
    if (sent[flow] > 0) class_weights[static_cast<size_t>(policy.traffic_class)] += policy.weight;
  }
  for (size_t flow = 0; flow < by_flow_.size(); ++flow) {
    JobCounters* job = by_flow_[flow].get();
    if (job == nullptr) continue;
    const transports::FlowPolicy policy = job->policy();
    const uint64_t weights = class_weights[static_cast<size_t>(policy.traffic_class)];
    job->achieved_share.store(
        total == 0 ? 0 : static_cast<double>(sent[flow]) / static_cast<double>(total),
        std::memory_order_relaxed);
    job->configured_share.store(
        sent[flow] == 0 || weights == 0
            ? 0
            : static_cast<double>(policy.weight) / static_cast<double>(weights),
        std::memory_order_relaxed);
  }
}

}  // namespace plexus::daemon
