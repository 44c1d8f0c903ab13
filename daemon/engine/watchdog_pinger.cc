#include "daemon/engine/watchdog_pinger.h"

namespace plexus::daemon {

void WatchdogPinger::set(std::function<void()> ping, std::chrono::microseconds every) {
  ping_ = std::move(ping);
  every_ = every;
}

void WatchdogPinger::turn(bool idle) {
  if (!ping_) return;
  if (!idle && ++turns_ < kTurns) return;
  turns_ = 0;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return;
  next_ = now + every_;
  ping_();
}

}  // namespace plexus::daemon
