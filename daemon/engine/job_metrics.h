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

namespace plexus::daemon {

inline constexpr size_t kOpKinds = size_t{shm::kMaxOpcode} + 1;  // indexed by opcode

template <typename T>
void bump_single_writer(std::atomic<T>& counter, T by) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

struct JobCounters {
  explicit JobCounters(std::string name) : job(std::move(name)) {}
  const std::string job;
  // Per collective run on this node (a point-to-point message counts one send, one recv).
  std::array<std::atomic<uint64_t>, kOpKinds> ops{};
  std::array<std::atomic<uint64_t>, kOpKinds> payload_bytes{};  // count x element size
  std::atomic<uint64_t> failed_completions{0};                  // per rank, any collective
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

// Op durations (first local submission to completion) by collective, in buckets 4x apart
// from 10 us to 42 s.
class OpDurationHistograms {
 public:
  static constexpr std::array<double, 12> kUpperBoundsSeconds = {
      1e-5,     4e-5,    1.6e-4,  6.4e-4,  2.56e-3,  1.024e-2,
      4.096e-2, 0.16384, 0.65536, 2.62144, 10.48576, 41.94304};
  struct Snapshot {
    std::array<uint64_t, kUpperBoundsSeconds.size() + 1> counts{};  // per bucket; last: +Inf
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  // Engine thread.
  void record(shm::Opcode opcode, std::chrono::nanoseconds duration);
  // Any thread.
  Snapshot snapshot(shm::Opcode opcode) const;

 private:
  struct PerOp {
    std::array<std::atomic<uint64_t>, kUpperBoundsSeconds.size() + 1> counts{};
    std::atomic<uint64_t> sum_ns{0};
  };
  std::array<PerOp, kOpKinds> per_op_{};
};

}  // namespace plexus::daemon
