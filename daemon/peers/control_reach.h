// Whether a peer daemon with no control connection is still worth trying. Without one it
// is unreachable, not lost, for the grace: this node's NICs or its own may be down, and its
// data link waits as long. The grace counts from the moment the connection was lost, not
// from each attempt (attempts every 200 ms would otherwise keep a peer that never answers
// for good). But a message queued while no connection is up is not dropped before an
// attempt started after it has failed, and one queued while nothing else waits gets a
// grace of its own: an attempt started before it (a connect to a dead address takes
// seconds to give up) says nothing of the addresses that answer now, and a join sent to a
// root just after a NIC came back would otherwise be dropped while the root waits out its
// init timeout for it. Messages that keep coming cannot keep a peer that never answers:
// past twice the grace from the loss it is given up whatever waits.
#pragma once

#include <chrono>
#include <optional>

namespace plexus::daemon {

class ControlReach {
 public:
  using Clock = std::chrono::steady_clock;

  // A connection is established: reachable, and the messages waiting go on it.
  void connected() {
    since_.reset();
    lost_at_.reset();
    retry_at_.reset();
    message_at_.reset();
  }
  // The connection in use failed: unreachable from `now`.
  void lost(Clock::time_point now) { since_ = lost_at_ = now; }
  // An attempt to open one starts (over every address in turn): unreachable from `now`
  // unless it already was.
  void opening(Clock::time_point now) {
    if (!since_) since_ = now;
    if (!lost_at_) lost_at_ = now;
    attempt_at_ = now;
  }
  // A message is queued while no connection is up; `first`: no other message waits.
  void message_waiting(Clock::time_point now, bool first) {
    message_at_ = now;
    if (first && since_) since_ = now;
  }
  // An attempt failed on every address without a refusal. True: keep the peer, with the
  // next attempt due `retry` from now (due()); false: it has been unreachable for `grace`
  // and every message waiting has seen an attempt fail, report it lost.
  bool keep_trying(Clock::time_point now, std::chrono::milliseconds grace,
                   std::chrono::milliseconds retry) {
    if (!since_) since_ = now;
    if (!lost_at_) lost_at_ = now;
    const bool untried = message_at_ && (!attempt_at_ || *attempt_at_ < *message_at_);
    if (now - *since_ >= grace && (!untried || now - *lost_at_ >= 2 * grace)) return false;
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
  std::optional<Clock::time_point> since_;       // the grace counts from here
  std::optional<Clock::time_point> lost_at_;     // unreachable since (no restart)
  std::optional<Clock::time_point> retry_at_;    // the next attempt, after one failed
  std::optional<Clock::time_point> attempt_at_;  // when the last attempt started
  std::optional<Clock::time_point> message_at_;  // the last message queued with none up
};

}  // namespace plexus::daemon
