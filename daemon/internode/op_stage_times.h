// Where a multi-node collective's time went, stage by stage, summed over its slices:
// gathering or reducing the local ranks' inputs into the slice, the inter-node rounds, and
// copying the result out. Slices overlap (a few run at once), so the sum of the stages may
// exceed the op's run time; the slowest slice's rounds say whether one slice dragged.
// Measured only when the daemon times ops (--telemetry on): four clock reads per slice.
#pragma once

#include <chrono>
#include <cstdint>

namespace plexus::daemon {

struct OpStageTimes {
  uint64_t slices = 0;  // 0: not measured (a single-node op, or telemetry off)
  std::chrono::nanoseconds local_in{0};
  std::chrono::nanoseconds network{0};
  std::chrono::nanoseconds local_out{0};
  std::chrono::nanoseconds slowest_slice_network{0};
};

}  // namespace plexus::daemon
