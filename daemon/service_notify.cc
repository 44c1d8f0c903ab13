#include "daemon/service_notify.h"

#include <systemd/sd-daemon.h>

#include <spdlog/spdlog.h>

#include <time.h>

#include <cstdint>
#include <cstring>

namespace plexus::daemon {

namespace {

void notify(const std::string& state) {
  // unset_environment 0: the engine thread pings for as long as the daemon runs.
  const int sent = sd_notify(0, state.c_str());
  if (sent < 0) spdlog::warn("sd_notify: {}", std::strerror(-sent));
}

// STATUS= takes one line: a newline would start another assignment.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

}  // namespace

ServiceNotify::ServiceNotify() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    interval_ = std::chrono::microseconds(usec / 2);
  }
}

void ServiceNotify::ready(const std::string& status) const {
  notify("READY=1\nSTATUS=" + one_line(status));
}

void ServiceNotify::status(const std::string& status) const {
  notify("STATUS=" + one_line(status));
}

void ServiceNotify::watchdog() const { notify("WATCHDOG=1"); }

void ServiceNotify::reloading() const {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t usec =
      static_cast<uint64_t>(now.tv_sec) * 1000000u + static_cast<uint64_t>(now.tv_nsec) / 1000u;
  notify("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

void ServiceNotify::reloaded() const { notify("READY=1"); }

void ServiceNotify::stopping(const std::string& status) const {
  notify("STOPPING=1\nSTATUS=" + one_line(status));
}

}  // namespace plexus::daemon
