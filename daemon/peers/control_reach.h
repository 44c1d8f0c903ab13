// Whether a peer daemon with no control connection is still worth trying. Without one it
// is unreachable, not lost, for the grace: this node's NICs or its own may be down, and its
// data link waits as long. The grace counts from the moment the connection was lost, not
// from each attempt (attempts every 200 ms would otherwise keep a peer that never answers
// for good); but a message queued while nothing else waits gets a grace of its own, or it
// would be dropped by the first attempt that fails after a long outage (a join sent to a
// root just after its NIC came back, while the root waits out its init timeout for it).
#pragma once

#include <chrono>
#include <optional>

namespace plexus::daemon {

class ControlReach {
 public:
  using Clock = std::chrono::steady_clock;

  // A connection is established: reachable.
  void connected() {
    since_.reset();
    retry_at_.reset();
  }
  // The connection in use failed: unreachable from `now`.
  void lost(Clock::time_point now) { since_ = now; }
  // An attempt to open one starts: unreachable from `now` unless it already was.
  void opening(Clock::time_point now) {
    if (!since_) since_ = now;
  }
  // A message is queued while no connection is up and no other message waits.
  void first_message_waiting(Clock::time_point now) {
    if (since_) since_ = now;
  }
  // An attempt failed on every address without a refusal. True: keep the peer, with the
  // next attempt due `retry` from now (due()); false: it has been unreachable for `grace`,
  // report it lost.
  bool keep_trying(Clock::time_point now, std::chrono::milliseconds grace,
                   std::chrono::milliseconds retry) {
    if (!since_) since_ = now;
    if (now - *since_ >= grace) return false;
    retry_at_ = now + retry;
    return true;
  }
  // Whether to start an attempt now: the one keep_trying scheduled is due, or none is
  // scheduled and messages wait (nothing was started for them while another attempt ran).
  // A due attempt is started once.
  bool due(Clock::time_point now, bool messages_waiting) {
    if (retry_at_ ? *retry_at_ > now : !messages_waiting) return false;
    retry_at_.reset();
    return true;
  }

 private:
  std::optional<Clock::time_point> since_;     // unreachable since
  std::optional<Clock::time_point> retry_at_;  // the next attempt, after one failed
};

}  // namespace plexus::daemon
