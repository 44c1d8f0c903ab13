#include "daemon/engine/job_metrics.h"

#include <algorithm>

namespace plexus::daemon {

std::shared_ptr<JobCounters> JobCounterTable::for_job(const std::string& job) {
  std::lock_guard lock(mutex_);
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return it->second;
  const std::string& name = jobs_.size() < kMaxJobs ? job : std::string("other");
  auto& slot = jobs_[name];
  if (!slot) slot = std::make_shared<JobCounters>(name, static_cast<uint32_t>(jobs_.size()));
  return slot;
}

std::vector<std::shared_ptr<const JobCounters>> JobCounterTable::all() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const JobCounters>> out;
  for (const auto& [name, counters] : jobs_) out.push_back(counters);
  return out;
}

void DurationHistogram::record(std::chrono::nanoseconds duration) {
  const double seconds = std::chrono::duration<double>(duration).count();
  size_t bucket = 0;
  while (bucket < kUpperBoundsSeconds.size() && seconds > kUpperBoundsSeconds[bucket]) ++bucket;
  bump_single_writer(counts_[bucket], uint64_t{1});
  bump_single_writer(sum_ns_, static_cast<uint64_t>(std::max<int64_t>(duration.count(), 0)));
}

DurationHistogram::Snapshot DurationHistogram::snapshot() const {
  Snapshot s;
  for (size_t b = 0; b < s.counts.size(); ++b) {
    s.counts[b] = counts_[b].load(std::memory_order_relaxed);
    s.count += s.counts[b];
  }
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

double DurationHistogram::Snapshot::quantile_bound(double q) const {
  if (count == 0) return 0;
  const double want = q * static_cast<double>(count);
  uint64_t seen = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    seen += counts[b];
    if (static_cast<double>(seen) >= want) {
      return b < kUpperBoundsSeconds.size() ? kUpperBoundsSeconds[b] : 1e9;
    }
  }
  return 1e9;
}

}  // namespace plexus::daemon
