// The idle-link close protocol's decisions for one link (link_retire.h).
#include "daemon/links/link_retire.h"

#include <algorithm>

namespace plexus::daemon {

LinkRetire::Step LinkRetire::tick(const RetireFacts& facts, TimePoint now,
                                  std::chrono::milliseconds idle_close) {
  if (state_ == State::kAgreed) {
    return now - agreed_at_ >= kAgreedLimit ? Step::kUnretire : Step::kNone;
  }
  if (state_ == State::kAsked && now - asked_at_ >= kAskLimit) {
    state_ = State::kOpen;  // no answer: as if refused, and the peer told so
    quiet_since_.reset();
    return Step::kCallOff;
  }
  if (state_ != State::kOpen) return Step::kNone;
  if (!facts.quiet || !facts.paths_idle) {
    quiet_since_.reset();
    return Step::kNone;
  }
  if (!quiet_since_) quiet_since_ = now;
  const bool due = idle_close.count() != 0 && now - *quiet_since_ >= idle_close;
  return due && now >= next_ask_ && facts.may_retire ? Step::kAsk : Step::kNone;
}

void LinkRetire::ask(uint64_t frames_sent, uint64_t paths_added, TimePoint now) {
  state_ = State::kAsked;
  asked_at_ = now;
  ++ask_id_;
  sent_at_ask_ = frames_sent;
  paths_at_ask_ = paths_added;
}

LinkRetire::Step LinkRetire::peer_asked(const RetireFacts& facts, uint64_t id, bool never,
                                        TimePoint now) {
  if (state_ == State::kAgreed && id == agreed_id_) return Step::kNone;  // a copy
  if (state_ == State::kAsked) {
    // Crossed: the lower incarnation's ask goes on (an unknown one's does not).
    if (facts.peer_incarnation != 0 && facts.own_incarnation < facts.peer_incarnation) {
      return Step::kNone;
    }
    state_ = State::kOpen;  // the peer drops this side's ask: answer its own
  }
  if (never || state_ != State::kOpen || !facts.may_retire || !facts.quiet) return Step::kRefuse;
  state_ = State::kAgreed;
  agreed_id_ = id;
  agreed_at_ = now;
  return Step::kAgree;
}

LinkRetire::Step LinkRetire::peer_agreed(const RetireFacts& facts, uint64_t id) {
  const bool this_ask = state_ == State::kAsked && id == ask_id_;
  if (this_ask && facts.may_retire && facts.quiet && facts.frames_sent == sent_at_ask_ &&
      facts.paths_added == paths_at_ask_) {
    return Step::kClose;
  }
  if (this_ask) {
    state_ = State::kOpen;
    quiet_since_.reset();
  }
  return Step::kCallOff;  // the peer lets its held frames go
}

LinkRetire::Step LinkRetire::peer_refused(uint64_t id, TimePoint now,
                                          std::chrono::milliseconds idle_close) {
  if (state_ == State::kAsked && id == ask_id_) {
    state_ = State::kOpen;
    // Not asked again for a while: idle_close from now, and at least a second.
    quiet_since_ = now;
    next_ask_ = now + std::max<std::chrono::milliseconds>(idle_close, std::chrono::seconds(1));
    return Step::kNone;
  }
  return Step::kNone;
}

LinkRetire::Step LinkRetire::peer_called_off(uint64_t id) {
  return state_ == State::kAgreed && id == agreed_id_ ? Step::kUnretire : Step::kNone;
}

LinkRetire::Step LinkRetire::path_failed() {
  if (state_ != State::kAsked) return Step::kNone;
  state_ = State::kOpen;
  quiet_since_.reset();
  return Step::kCallOff;
}

void LinkRetire::unretired() {
  state_ = State::kOpen;
  quiet_since_.reset();
}

void LinkRetire::dormant() {
  state_ = State::kDormant;
  quiet_since_.reset();
}

void LinkRetire::reopened() {
  state_ = State::kOpen;
  quiet_since_.reset();
}

}  // namespace plexus::daemon
