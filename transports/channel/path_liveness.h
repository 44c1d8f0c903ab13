// One path's liveness (ReliableChannel): when it last heard the peer (silence longer than
// the peer allows for fails it, but for a slow peer daemon or the last path's grace), whether
// it carried anything since the last tick (a path with no traffic sends a heartbeat every
// heartbeat_interval, and every idle_heartbeat_interval once it has had none for idle_after,
// so that its peer does not take it for dead), and when it came up (a returning path's
// probation ends stable_after later).
//
// Every heartbeat promises the peer when the next frame comes at the latest: the interval
// its sender heartbeats at now. A path going idle says so before it waits longer, and one
// that has traffic again says so at once, so the peer allows the silence its side promised,
// never more: path_timeout, plus what the promise adds to heartbeat_interval. While this side
// has traffic, the peer owes an answer within path_timeout whatever it promised while idle
// (it gets this side's frames, and a peer with traffic promises the short interval), so a
// dead path is found as fast as without the idle interval once it carries anything.
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
    // Not above heartbeat_interval: never idle.
    std::chrono::milliseconds idle_heartbeat_interval{1000};
    std::chrono::milliseconds idle_after{1000};
  };

  // A path that came up at `now`, its first heartbeat queued (carried()), with traffic.
  PathLiveness(const Settings& settings, TimePoint now);

  // A frame arrived on the path: a heartbeat, or `traffic` (anything else, which the
  // peer sends only while it has traffic itself).
  void heard(TimePoint now, bool traffic = true) {
    last_received_ = now;
    if (traffic) had_traffic(now);
  }
  // A heartbeat's promise: the peer sends again within `interval` (0: an older peer that
  // promises nothing, taken as this side's heartbeat_interval).
  void peer_promised(std::chrono::milliseconds interval) { peer_interval_ = interval; }
  TimePoint last_heard() const { return last_received_; }
  // This side did not look for `stall` (its own thread was held up): nobody's silence.
  void held_up(TimePoint now, Clock::duration stall) {
    last_received_ = std::min(now, last_received_ + stall);
  }

  enum class Silence {
    kNone,         // heard within what the peer promised
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
  // only of a path that is past silence_due(): this runs every tick.
  Verdict silence(TimePoint now, const FramePath& io, bool last_live_path) const;
  // From when silence() asks the kernel and may fail the path.
  TimePoint silence_due() const;

  // The path's probation (if it is on one) is over: it has been live for stable_after.
  bool proven(TimePoint now) const { return now - live_since_ >= settings_.stable_after; }

  // Something was queued on the path.
  void carried() { carried_since_tick_ = true; }
  // Whether heartbeat_due wants the transport's backlog: only while the path has traffic
  // (an idle path's transport holds nothing of it; asking is a system call).
  bool wants_backlog() const { return !carried_since_tick_ && !idle_; }
  // Every tick: whether the path has had nothing queued and nothing in its transport
  // (`backlog_bytes`, 0 when not wanted) for its interval, or its interval changed (it went
  // idle, or has traffic again). If so, the caller queues a heartbeat promising promise(),
  // then calls heartbeat_sent().
  bool heartbeat_due(TimePoint now, uint64_t backlog_bytes);
  void heartbeat_sent(TimePoint now) {
    last_sent_ = now;
    carried_since_tick_ = false;
    promised_ = interval();
  }
  // The interval the path heartbeats at now, which its heartbeats promise.
  std::chrono::milliseconds promise() const { return interval(); }
  // No traffic either way for idle_after, as of the last heartbeat_due.
  bool idle() const { return idle_; }
  // When the next heartbeat is due (an idle path's: a quarter early is as good, so that
  // one wake-up serves many paths).
  TimePoint heartbeat_at() const { return last_sent_ + interval(); }

 private:
  // Whether the path's transport (the kernel's TCP) has heard the peer within the timeout.
  bool transport_hears_peer(const FramePath& io) const;
  void had_traffic(TimePoint now) {
    if (idle_) active_since_ = now;
    idle_ = false;
    last_traffic_ = now;
  }
  std::chrono::milliseconds interval() const {
    return idle_ ? std::max(settings_.idle_heartbeat_interval, settings_.heartbeat_interval)
                 : settings_.heartbeat_interval;
  }

  Settings settings_;
  TimePoint last_received_;
  TimePoint last_sent_;  // as of the last tick
  bool carried_since_tick_ = false;
  TimePoint live_since_;
  TimePoint last_traffic_;  // the latest frame other than a heartbeat, either way
  TimePoint active_since_;  // the traffic that ended the latest idle spell
  bool idle_ = false;
  std::chrono::milliseconds promised_;       // by this side's latest heartbeat
  std::chrono::milliseconds peer_interval_;  // the peer's latest promise (0: none)
};

}  // namespace plexus::transports
