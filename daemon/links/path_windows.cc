// A path's telemetry ring, full while it has traffic.
#include "daemon/links/path_windows.h"

namespace plexus::daemon {
namespace {

constexpr size_t kIdleWindows = 2;  // WindowRing's least

}  // namespace

PathWindows::PathWindows(std::chrono::nanoseconds width, size_t windows)
    : width_(width), windows_(windows) {
  replace(kIdleWindows);
}

void PathWindows::replace(size_t windows) {
  const monitor::TrafficCounts totals = ring_ ? ring_->totals() : monitor::TrafficCounts{};
  ring_ = std::make_shared<monitor::WindowRing>(width_, windows, totals);
  full_ = windows == windows_;
}

monitor::WindowRing& PathWindows::at(Clock::time_point now) {
  if (!full_) replace(windows_);
  last_record_ = now;
  return *ring_;
}

bool PathWindows::release_if_idle(Clock::time_point now) {
  if (!full_ || windows_ <= kIdleWindows ||
      now - last_record_ < width_ * static_cast<int64_t>(windows_)) {
    return false;
  }
  replace(kIdleWindows);
  return true;
}

}  // namespace plexus::daemon
