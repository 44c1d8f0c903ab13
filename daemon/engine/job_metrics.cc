#include "daemon/engine/job_metrics.h"

namespace plexus::daemon {

std::shared_ptr<JobCounters> JobCounterTable::for_job(const std::string& job) {
  std::lock_guard lock(mutex_);
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return it->second;
  const std::string& name = jobs_.size() < kMaxJobs ? job : std::string("other");
  auto& slot = jobs_[name];
  if (!slot) slot = std::make_shared<JobCounters>(name);
  return slot;
}

std::vector<std::shared_ptr<const JobCounters>> JobCounterTable::all() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const JobCounters>> out;
  for (const auto& [name, counters] : jobs_) out.push_back(counters);
  return out;
}

void OpDurationHistograms::record(shm::Opcode opcode, std::chrono::nanoseconds duration) {
  PerOp& h = per_op_[static_cast<size_t>(opcode) % kOpKinds];
  const double seconds = std::chrono::duration<double>(duration).count();
  size_t bucket = 0;
  while (bucket < kUpperBoundsSeconds.size() && seconds > kUpperBoundsSeconds[bucket]) ++bucket;
  bump_single_writer(h.counts[bucket], uint64_t{1});
  bump_single_writer(h.sum_ns, static_cast<uint64_t>(std::max<int64_t>(duration.count(), 0)));
}

OpDurationHistograms::Snapshot OpDurationHistograms::snapshot(shm::Opcode opcode) const {
  const PerOp& h = per_op_[static_cast<size_t>(opcode) % kOpKinds];
  Snapshot s;
  for (size_t b = 0; b < s.counts.size(); ++b) {
    s.counts[b] = h.counts[b].load(std::memory_order_relaxed);
    s.count += s.counts[b];
  }
  s.sum_seconds = static_cast<double>(h.sum_ns.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

}  // namespace plexus::daemon
