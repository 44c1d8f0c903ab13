// Strict priority with floors between classes, deficit round robin within one.
#include "transports/channel/send_scheduler.h"

#include <algorithm>

namespace plexus::transports {

SendScheduler::SendScheduler(Settings settings, const FlowPolicies* policies)
    : settings_(settings), policies_(policies) {
  for (double& f : settings_.floor) f = std::clamp(f, 0.0, 0.9);
  settings_.quantum_bytes = std::max<uint32_t>(settings_.quantum_bytes, 1);
}

void SendScheduler::push(Frame frame) {
  if (frame.flow >= flows_.size()) flows_.resize(frame.flow + 1);
  Flow& f = flows_[frame.flow];
  if (f.frames.empty()) {
    f.deficit = 0;
    f.credited = false;
    classes_[static_cast<size_t>(policies_->of(frame.flow).traffic_class)].round.push_back(
        frame.flow);
  }
  ++frames_;
  bytes_ += frame.payload.size();
  f.frames.push_back(frame);
  choice_.valid = false;  // a frame of a higher class may have come
}

void SendScheduler::refile() {
  if (policies_->version() == policies_seen_) return;
  policies_seen_ = policies_->version();
  std::vector<uint32_t> moved;
  for (size_t c = 0; c < kTrafficClasses; ++c) {
    auto& round = classes_[c].round;
    for (auto it = round.begin(); it != round.end();) {
      if (static_cast<size_t>(policies_->of(*it).traffic_class) == c) {
        ++it;
        continue;
      }
      moved.push_back(*it);
      it = round.erase(it);
    }
  }
  for (uint32_t id : moved) {
    Flow& f = flows_[id];
    f.credited = false;
    f.deficit = 0;
    classes_[static_cast<size_t>(policies_->of(id).traffic_class)].round.push_back(id);
  }
  for (Class& c : classes_) {
    if (c.round.empty()) c.credit = 0;
  }
}

uint32_t SendScheduler::turn_in(size_t c) {
  auto& round = classes_[c].round;
  // Ends: every pass over the round adds at least a quantum to each flow's deficit, and a
  // frame is at most a few quanta.
  for (;;) {
    const uint32_t id = round.front();
    Flow& f = flows_[id];
    if (!f.credited) {
      const uint32_t weight = std::clamp(policies_->of(id).weight, kMinWeight, kMaxWeight);
      f.deficit += static_cast<int64_t>(settings_.quantum_bytes) * weight;
      f.credited = true;
    }
    if (static_cast<int64_t>(cost(f.frames.front())) <= f.deficit) return id;
    f.credited = false;  // its turn is over; what it has left carries over
    round.pop_front();
    round.push_back(id);
  }
}

SendScheduler::Choice SendScheduler::choose(ClassMask classes) {
  refile();
  auto in = [classes](size_t c) { return (classes & (1u << c)) != 0; };
  size_t top = kTrafficClasses;
  for (size_t c = 0; c < kTrafficClasses; ++c) {
    if (in(c) && !classes_[c].round.empty()) {
      top = c;
      break;
    }
  }
  if (top == kTrafficClasses) return {};
  Choice best{true, classes, top, turn_in(top), false};
  // A lower class owed its floor goes first (the one owed most, if several are).
  double owed = 0;
  for (size_t c = top + 1; c < kTrafficClasses; ++c) {
    if (!in(c) || classes_[c].round.empty()) continue;
    const uint32_t id = turn_in(c);
    const double credit = classes_[c].credit;
    if (credit >= static_cast<double>(cost(flows_[id].frames.front())) && credit > owed) {
      best = Choice{true, classes, c, id, true};
      owed = credit;
    }
  }
  return best;
}

bool SendScheduler::ensure_choice(ClassMask classes) {
  if (frames_ == 0) return false;
  // A policy changed since the choice was made, or it was made among other classes: it may
  // no longer be the one.
  if (policies_->version() != policies_seen_ || choice_.classes != classes) choice_.valid = false;
  if (!choice_.valid) choice_ = choose(classes);
  return choice_.valid;
}

const SendScheduler::Frame* SendScheduler::peek(ClassMask classes) {
  if (!ensure_choice(classes)) return nullptr;
  return &flows_[choice_.flow].frames.front();
}

SendScheduler::Frame SendScheduler::pop(ClassMask classes) {
  ensure_choice(classes);
  choice_.valid = false;
  Flow& f = flows_[choice_.flow];
  Frame frame = f.frames.front();
  f.frames.pop_front();
  const uint64_t bytes = cost(frame);
  f.deficit -= static_cast<int64_t>(bytes);
  --frames_;
  bytes_ -= frame.payload.size();
  Class& served = classes_[choice_.cls];
  // Served by priority, a class is not being starved: what it was owed lapses.
  served.credit = choice_.by_credit ? served.credit - static_cast<double>(bytes) : 0;
  // The classes below it with frames waiting are owed their floor of these bytes.
  for (size_t c = choice_.cls + 1; c < kTrafficClasses; ++c) {
    const double floor = settings_.floor[c];
    if (!classes_[c].round.empty() && floor > 0) {
      classes_[c].credit += static_cast<double>(bytes) * floor / (1 - floor);
    }
  }
  if (f.frames.empty()) {
    f.deficit = 0;
    f.credited = false;
    served.round.pop_front();  // the flow whose turn it was is at the front
    if (served.round.empty()) served.credit = 0;
  }
  return frame;
}

}  // namespace plexus::transports
