// The engine's watch over its ops: timing each collective (telemetry on), the rank-skew
// rule fed as each collective's last local rank arrives, the stall watch over every
// communicator's oldest pending collective every ~100 ms, the ops report plexusctl ops
// shows, and the counters the exporter reads. None of it runs per frame or per chunk.
// Engine thread only, but for the counters (single writer: the engine; any thread reads).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/engine/comm.h"
#include "daemon/engine/job_metrics.h"
#include "daemon/engine/op_report.h"
#include "daemon/internode/op_stage_times.h"
#include "monitor/event_log.h"
#include "shm/entry_validation.h"

namespace plexus::daemon {

class Session;

class OpWatch {
 public:
  using Clock = std::chrono::steady_clock;
  struct Settings {
    std::string node_name;                   // in events and reports
    bool timing = false;                     // telemetry on: ops timed, rank skew watched
    std::chrono::milliseconds stall{0};      // no progress this long is a stalled op
    std::chrono::milliseconds rank_skew{0};  // a rank this late, op after op, is reported
  };

  OpWatch(Settings settings, std::shared_ptr<monitor::EventLog> events);

  bool timing() const { return settings_.timing; }
  // A config reload's thresholds: stalls from the next look on, rank skew for every
  // communicator's next op.
  void set_thresholds(std::chrono::milliseconds stall, std::chrono::milliseconds rank_skew);
  // A new communicator: watched for stalls, its ranks' arrival skew followed when timed.
  void watch(const std::shared_ptr<Comm>& comm);
  // A local rank submitted its part of `op` (in op.parts already). Timed ops only.
  void note_arrival(Comm& comm, PendingCollective& op, int rank);
  // `op` (number `seq`) of `comm` ended, run by `algorithm`. Timed ops only.
  void record_finished(const Comm& comm, const PendingCollective& op, uint64_t seq,
                       const char* algorithm, plexus_result_t status,
                       const OpStageTimes& stages = {});
  // Looks for stalled collectives every ~100 ms; `idle`: the engine's loop found nothing.
  void maybe_look(bool idle);
  // The collectives in flight and the last ones finished.
  OpsReport report() const;

  // Counts a finished op, in one place: the communicator's and the daemon's op and byte
  // counters and its job's per-collective counters for each rank's call it completes (a
  // matched send and recv are one op of two calls). A send whose op ends on another node
  // counts its bytes and call only (`op_ends_here` false).
  void count_completed(Comm& comm, uint64_t bytes, const shm::ValidatedEntry& call,
                       const shm::ValidatedEntry* other_call = nullptr, bool op_ends_here = true);
  void count_bad_entry(Session& session);

  // Any thread: what the exporter and plexusctl status read.
  JobCounterTable& job_counters() { return job_counters_; }
  const OpDurationHistograms& op_durations() const { return op_durations_; }
  uint64_t bad_entries() const { return bad_entries_.load(std::memory_order_relaxed); }
  uint64_t ops_completed() const { return ops_completed_.load(std::memory_order_relaxed); }

 private:
  void look(Clock::time_point now);
  InflightOpReport describe(const Comm& comm, size_t index, Clock::time_point now) const;

  // The last kFinishedOpsKept finished ops, raw (formatted by report()).
  struct FinishedOp {
    CommToken token{};
    std::shared_ptr<const JobCounters> job;  // its name
    shm::Opcode opcode{};
    uint64_t seq = 0;
    uint64_t bytes = 0;
    const char* algorithm = "";
    plexus_result_t status = PLEXUS_SUCCESS;
    Clock::time_point first_arrival{}, all_arrived{}, end{};
    int last_rank = -1;
    OpStageTimes stages;
  };

  Settings settings_;
  std::shared_ptr<monitor::EventLog> events_;
  std::vector<std::weak_ptr<Comm>> watched_;  // every communicator, for the stall watch
  std::array<FinishedOp, kFinishedOpsKept> finished_ops_{};
  size_t finished_next_ = 0;  // ops recorded so far
  Clock::time_point next_look_{};
  uint32_t loop_ticks_ = 0;
  JobCounterTable job_counters_;
  OpDurationHistograms op_durations_;
  std::atomic<uint64_t> bad_entries_{0};
  std::atomic<uint64_t> ops_completed_{0};
};

}  // namespace plexus::daemon
