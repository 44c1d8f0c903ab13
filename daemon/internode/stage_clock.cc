#include "daemon/internode/stage_clock.h"

#include <algorithm>

namespace plexus::daemon {

StageClock::Clock::time_point StageClock::rounds_begin(Clock::time_point began) {
  if (!timed_) return {};
  const auto now = Clock::now();
  times_.local_in += now - began;
  return now;
}

void StageClock::slice_finished(Clock::time_point began, Clock::time_point ended) {
  if (!timed_) return;
  const auto rounds = ended - began;
  times_.network += rounds;
  times_.slowest_slice_network =
      std::max<std::chrono::nanoseconds>(times_.slowest_slice_network, rounds);
  times_.local_out += Clock::now() - ended;
  ++times_.slices;
}

}  // namespace plexus::daemon
