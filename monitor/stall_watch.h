// The stalled-op rule: an op whose progress key (anything that changes whenever it moves:
// a rank submitting, a frame arriving) stays the same for the threshold is stalled, and
// is reported once until it moves again. The engine looks every ~100 ms, so it costs the
// data path nothing.
#pragma once

#include <chrono>
#include <cstdint>

namespace plexus::monitor {

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // How long `key` has been unchanged as of `now`.
  Clock::duration observe(uint64_t key, Clock::time_point now) {
    if (!seen_ || key != key_) {
      seen_ = true;
      key_ = key;
      since_ = now;
      reported_ = false;
    }
    return now - since_;
  }
  // True once per stall: when the op has been idle `threshold` and was not yet reported.
  bool should_report(Clock::time_point now, Clock::duration threshold) {
    if (!seen_ || reported_ || now - since_ < threshold) return false;
    reported_ = true;
    return true;
  }
  // The op finished or went away: the next one starts fresh.
  void reset() { seen_ = false; }
  Clock::time_point since() const { return since_; }
  // Whether this stall has been reported (the op has not moved since).
  bool reported() const { return seen_ && reported_; }

 private:
  bool seen_ = false;
  bool reported_ = false;
  uint64_t key_ = 0;
  Clock::time_point since_{};
};

}  // namespace plexus::monitor
