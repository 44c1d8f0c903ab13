// The engine loop's side of systemd's watchdog: pings at least every `every` while the loop
// turns, so an engine stuck in one op or command stops pinging and is restarted. Looks at
// the clock every kTurns busy turns and at every idle one, so a busy loop reads it rarely.
// Set before the engine thread starts; called on the engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace plexus::daemon {

class WatchdogPinger {
 public:
  static constexpr uint32_t kTurns = 256;

  void set(std::function<void()> ping, std::chrono::microseconds every);
  // One turn of the loop (`idle`: it made no progress): pings when due.
  void turn(bool idle);

 private:
  std::function<void()> ping_;
  std::chrono::microseconds every_{0};
  std::chrono::steady_clock::time_point next_{};
  uint32_t turns_ = 0;
};

}  // namespace plexus::daemon
