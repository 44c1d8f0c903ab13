// What the Prometheus exporter reports per job and collective: ops run and their payload
// bytes, failed completions, and op durations by collective. The engine thread is the
// only writer (a plain load and store, no locked instruction); the exporter reads them from
// its own thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "shm/ring_layout.h"
#include "transports/channel/flow_policy.h"

namespace plexus::daemon {

inline constexpr size_t kOpKinds = size_t{shm::kMaxOpcode} + 1;  // indexed by opcode

template <typename T>
void bump_single_writer(std::atomic<T>& counter, T by) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// Durations in buckets 4x apart from 10 us to 42 s. One writer (record), any readers.
class DurationHistogram {
 public:
  static constexpr std::array<double, 12> kUpperBoundsSeconds = {
      1e-5,     4e-5,    1.6e-4,  6.4e-4,  2.56e-3,  1.024e-2,
      4.096e-2, 0.16384, 0.65536, 2.62144, 10.48576, 41.94304};
  struct Snapshot {
    std::array<uint64_t, kUpperBoundsSeconds.size() + 1> counts{};  // per bucket; last: +Inf
    uint64_t count = 0;
    double sum_seconds = 0;
    // The upper bound of the bucket holding quantile q (0..1); +Inf as 1e9; 0 when empty.
    double quantile_bound(double q) const;
  };
  void record(std::chrono::nanoseconds duration);
  Snapshot snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, kUpperBoundsSeconds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

struct JobCounters {
  JobCounters(std::string name, uint32_t flow_id) : job(std::move(name)), flow(flow_id) {}
  const std::string job;
  // Its frames' flow in the links' send schedulers (1..; 0 is frames of no job).
  const uint32_t flow;
  // Per collective run on this node (a point-to-point message counts one send, one recv).
  std::array<std::atomic<uint64_t>, kOpKinds> ops{};
  std::array<std::atomic<uint64_t>, kOpKinds> payload_bytes{};  // count x element size
  std::atomic<uint64_t> failed_completions{0};                  // per rank, any collective

  // Scheduling, written by the engine thread (JobPolicies). Its policy as applied.
  std::atomic<transports::TrafficClass> traffic_class{transports::FlowPolicy{}.traffic_class};
  std::atomic<uint32_t> weight{transports::FlowPolicy{}.weight};
  transports::FlowPolicy policy() const {
    return {traffic_class.load(std::memory_order_relaxed), weight.load(std::memory_order_relaxed)};
  }
  // Payload its frames took to peer daemons, and how long each waited in a send scheduler.
  std::atomic<uint64_t> scheduled_bytes{0};
  DurationHistogram queue_delay;
  // Over the last share window (JobPolicies): its part of all bytes sent to peers, and what its
  // weight entitles it to among the jobs of its class that sent in that window.
  std::atomic<double> achieved_share{0};
  std::atomic<double> configured_share{0};
  uint64_t scheduled_bytes_at_window = 0;  // engine thread only

  // Admission (JobCaps, 0: none), as applied; and what the job holds against them. Written
  // by the engine thread only.
  std::atomic<uint64_t> max_inflight_bytes{0};
  std::atomic<uint64_t> max_staging_bytes{0};
  std::atomic<uint64_t> inflight_bytes{0};  // its ops from submission to completion
  // Host bytes its staged GPU ops hold, over its processes (gpu::StagedOp charges it).
  std::shared_ptr<uint64_t> staging_bytes = std::make_shared<uint64_t>(0);
  // Ops refused for a cap, or for their process's --max-gpu-staging-bytes.
  std::atomic<uint64_t> refused_ops{0};
};

// Job names are client-chosen: at most kMaxJobs get counters of their own, later ones
// share "other", so a label's values stay bounded.
class JobCounterTable {
 public:
  static constexpr size_t kMaxJobs = 64;
  // Any thread.
  std::shared_ptr<JobCounters> for_job(const std::string& job);
  std::vector<std::shared_ptr<const JobCounters>> all() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<JobCounters>> jobs_;
};

// Op durations (first local submission to completion) by collective.
class OpDurationHistograms {
 public:
  // Engine thread.
  void record(shm::Opcode opcode, std::chrono::nanoseconds duration) {
    per_op_[static_cast<size_t>(opcode) % kOpKinds].record(duration);
  }
  // Any thread.
  DurationHistogram::Snapshot snapshot(shm::Opcode opcode) const {
    return per_op_[static_cast<size_t>(opcode) % kOpKinds].snapshot();
  }

 private:
  std::array<DurationHistogram, kOpKinds> per_op_{};
};

}  // namespace plexus::daemon
