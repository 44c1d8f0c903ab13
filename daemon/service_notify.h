// systemd's service notification protocol (sd_notify, from libsystemd): READY=1 once the
// daemon serves, STATUS= lines, WATCHDOG=1 pings, STOPPING=1. Every call is a no-op where
// systemd did not start plexusd with NOTIFY_SOCKET (by hand, or libplexus's autostart), so
// main() uses it unconditionally. Thread-safe: sd_notify sends one datagram per call.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace plexus::daemon {

class ServiceNotify {
 public:
  // Reads WATCHDOG_USEC (and WATCHDOG_PID) as systemd set them.
  ServiceNotify();

  // How often to ping: half the unit's WatchdogSec, as sd_watchdog_enabled(3) advises;
  // nothing when the unit has no watchdog.
  std::optional<std::chrono::microseconds> watchdog_interval() const { return interval_; }

  void ready(const std::string& status) const;
  void status(const std::string& status) const;
  void watchdog() const;
  void stopping(const std::string& status) const;
  // Around a config reload (SIGHUP): RELOADING=1 with the monotonic time systemd asks for,
  // then READY=1 once it is done (applied or refused, as the log says).
  void reloading() const;
  void reloaded() const;

 private:
  std::optional<std::chrono::microseconds> interval_;
};

}  // namespace plexus::daemon
