// One path's liveness (ReliableChannel): when it last heard the peer (silence longer than
// the path timeout fails it, but for a slow peer daemon or the last path's grace), whether
// it carried anything since the last tick (an idle path sends a heartbeat every
// heartbeat_interval, so that its peer does not take it for dead), and when it came up (a
// returning path's probation ends stable_after later).
// Owns those times. Called on the channel's thread (its owner's), through ChannelPaths and
// ReliableChannel::tick.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "transports/channel/frame_path.h"

namespace plexus::transports {

class PathLiveness {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  struct Settings {  // as ReliableChannel::Settings's of the same names
    std::chrono::milliseconds heartbeat_interval{50};
    std::chrono::milliseconds path_timeout{200};
    std::chrono::milliseconds stable_after{500};
    std::chrono::milliseconds last_path_grace{2000};
  };

  // A path that came up at `now`, its first heartbeat queued (carried()).
  PathLiveness(const Settings& settings, TimePoint now);

  // A frame arrived on the path.
  void heard(TimePoint now) { last_received_ = now; }
  TimePoint last_heard() const { return last_received_; }
  // This side did not look for `stall` (its own thread was held up): nobody's silence.
  void held_up(TimePoint now, Clock::duration stall) {
    last_received_ = std::min(now, last_received_ + stall);
  }

  enum class Silence {
    kNone,         // heard within the path timeout
    kSlowPeer,     // silent past it while its transport hears the peer: a slow peer daemon
    kWithinGrace,  // the last live path, silent past it but within last_path_grace
    kFailed,       // silent too long: the path fails (Verdict::reason says how long)
  };
  struct Verdict {
    Silence silence = Silence::kNone;
    std::string reason;  // kFailed's
  };
  // `last_live_path`: no other path of the channel is live (failing this one loses the peer,
  // and there is nowhere to fail over to: it is given the grace). The kernel (`io`) is asked
  // only of a path that is quiet: this runs every tick.
  Verdict silence(TimePoint now, const FramePath& io, bool last_live_path) const;

  // The path's probation (if it is on one) is over: it has been live for stable_after.
  bool proven(TimePoint now) const { return now - live_since_ >= settings_.stable_after; }

  // Something was queued on the path.
  void carried() { carried_since_tick_ = true; }
  // Every tick: whether the path has been idle (nothing queued, nothing in its transport:
  // `backlog_bytes`) for heartbeat_interval. If so, the caller queues one, then calls
  // heartbeat_sent().
  bool heartbeat_due(TimePoint now, uint64_t backlog_bytes);
  void heartbeat_sent(TimePoint now) {
    last_sent_ = now;
    carried_since_tick_ = false;
  }

 private:
  // Whether the path's transport (the kernel's TCP) has heard the peer within the timeout.
  bool transport_hears_peer(const FramePath& io) const;

  Settings settings_;
  TimePoint last_received_;
  TimePoint last_sent_;  // as of the last tick
  bool carried_since_tick_ = false;
  TimePoint live_since_;
};

}  // namespace plexus::transports
