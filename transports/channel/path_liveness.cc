// A path's silence, heartbeats and probation.
#include "transports/channel/path_liveness.h"

#include <algorithm>

namespace plexus::transports {

PathLiveness::PathLiveness(const Settings& settings, TimePoint now)
    : settings_(settings), last_received_(now), last_sent_(now), live_since_(now) {}

PathLiveness::Verdict PathLiveness::silence(TimePoint now, const FramePath& io,
                                            bool last_live_path) const {
  const auto quiet = now - last_received_;
  if (quiet <= settings_.path_timeout) return {};
  const auto allowed = last_live_path ? std::max(settings_.path_timeout, settings_.last_path_grace)
                                      : settings_.path_timeout;
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
  }
  return now - last_sent_ >= settings_.heartbeat_interval;
}

}  // namespace plexus::transports
