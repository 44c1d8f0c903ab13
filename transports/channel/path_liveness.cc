// A path's silence, heartbeats and probation.
#include "transports/channel/path_liveness.h"

#include <algorithm>

namespace plexus::transports {

PathLiveness::PathLiveness(const Settings& settings, TimePoint now)
    : settings_(settings),
      last_received_(now),
      last_sent_(now),
      live_since_(now),
      last_traffic_(now),
      active_since_(now),
      promised_(settings.heartbeat_interval),
      peer_interval_(0) {}

PathLiveness::TimePoint PathLiveness::silence_due() const {
  // What the peer's latest promise allows beyond the short interval's silence.
  const auto promised = peer_interval_ > settings_.heartbeat_interval
                            ? peer_interval_ - settings_.heartbeat_interval
                            : std::chrono::milliseconds(0);
  TimePoint due = last_received_ + settings_.path_timeout + promised;
  // With traffic here, the peer has traffic too and answers within the path timeout.
  if (!idle_) {
    due = std::min(due, std::max(last_received_, active_since_) + settings_.path_timeout);
  }
  return due;
}

PathLiveness::Verdict PathLiveness::silence(TimePoint now, const FramePath& io,
                                            bool last_live_path) const {
  const TimePoint due = silence_due();
  if (now <= due) return {};
  const auto timeout = due - last_received_;
  const auto quiet = now - last_received_;
  const auto allowed =
      last_live_path ? std::max<Clock::duration>(timeout, settings_.last_path_grace) : timeout;
  if (transport_hears_peer(io)) return {Silence::kSlowPeer, {}};
  if (quiet <= allowed) return {Silence::kWithinGrace, {}};
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  return {Silence::kFailed,
          "nothing received for " + std::to_string(duration_cast<milliseconds>(quiet).count()) +
              " ms (timeout " + std::to_string(duration_cast<milliseconds>(allowed).count()) +
              " ms)"};
}

bool PathLiveness::transport_hears_peer(const FramePath& io) const {
  const int64_t quiet_ms = io.network_silence_ms();
  return quiet_ms >= 0 && std::chrono::milliseconds(quiet_ms) <= settings_.path_timeout;
}

bool PathLiveness::heartbeat_due(TimePoint now, uint64_t backlog_bytes) {
  if (carried_since_tick_ || backlog_bytes > 0) {
    last_sent_ = now;
    carried_since_tick_ = false;
    had_traffic(now);
  }
  if (!idle_ && now - last_traffic_ >= settings_.idle_after) idle_ = true;
  const std::chrono::milliseconds every = interval();
  if (every != promised_) return true;  // the peer is told at once
  const auto early = idle_ ? every / 4 : std::chrono::milliseconds(0);
  return now - last_sent_ >= every - early;
}

}  // namespace plexus::transports
