// Measures where an InternodeOp's time goes, slice by slice (OpStageTimes): its local
// phase in, its rounds, its copy out. Reads the clock only when the daemon times ops
// (--telemetry on): four reads per slice; untimed, every reading is the zero time and
// nothing is summed. Owns the sums. Engine thread, called by InternodeOp.
#pragma once

#include <chrono>

#include "daemon/internode/op_stage_times.h"

namespace plexus::daemon {

class StageClock {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StageClock(bool timed) : timed_(timed) {}

  // Now, or the zero time when untimed.
  Clock::time_point now() const { return timed_ ? Clock::now() : Clock::time_point{}; }
  // A slice's local phase in, which began at `began`, is over: returns when its rounds
  // begin (now).
  Clock::time_point rounds_begin(Clock::time_point began);
  // A slice's rounds ran from `began` to `ended`, and its copy out from `ended` until now.
  void slice_finished(Clock::time_point began, Clock::time_point ended);
  const OpStageTimes& times() const { return times_; }

 private:
  bool timed_;
  OpStageTimes times_;
};

}  // namespace plexus::daemon
