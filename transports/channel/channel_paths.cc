// A channel's paths: their states, and which one takes a frame or an acknowledgement.
#include "transports/channel/channel_paths.h"

#include <algorithm>

namespace plexus::transports {
namespace {

// Where a path goes once it is proven (probation over, or undrained).
PathState settled_state(bool backup) { return backup ? PathState::kStandby : PathState::kActive; }

}  // namespace

ChannelPaths::ChannelPaths(const Settings& settings, Hooks hooks)
    : settings_(settings), hooks_(std::move(hooks)) {}

uint32_t ChannelPaths::add(FramePath* io, TimePoint now, bool probation, bool backup,
                           bool latency) {
  uint32_t id = 0;
  while (id < paths_.size() && paths_[id].state != PathState::kFailed) ++id;
  Path p{.io = io,
         .state = probation ? PathState::kProbation : settled_state(backup),
         .backup = backup,
         .latency = latency,
         .liveness = PathLiveness(settings_.liveness, now),
         .pace = PathPace(settings_.pace, now, latency)};
  if (id == paths_.size()) {
    paths_.push_back(std::move(p));
  } else {
    paths_[id] = std::move(p);
  }
  if (hooks_.on_state) hooks_.on_state(id, paths_[id].state, "");
  return id;
}

void ChannelPaths::set_state(uint32_t path, PathState state, const std::string& detail) {
  Path& p = paths_.at(path);
  if (p.state == state) return;
  p.state = state;
  if (hooks_.on_state) hooks_.on_state(path, state, detail);
}

void ChannelPaths::fail(uint32_t path, const std::string& reason) {
  set_state(path, PathState::kFailed, reason);
  paths_.at(path).io = nullptr;
}

bool ChannelPaths::drain(uint32_t path, bool drained) {
  const Path& p = paths_.at(path);
  if (p.state == PathState::kFailed) return false;
  if (drained) {
    set_state(path, PathState::kDrained, "");
    return false;
  }
  if (p.state != PathState::kDrained) return false;
  // Straight back: a drained path kept its heartbeats, so it is known to be live.
  set_state(path, settled_state(p.backup), "");
  return true;
}

void ChannelPaths::settle(uint32_t path, const std::string& detail) {
  set_state(path, settled_state(paths_.at(path).backup), detail);
}

size_t ChannelPaths::usable() const {
  return static_cast<size_t>(std::count_if(
      paths_.begin(), paths_.end(), [](const Path& p) { return p.state == PathState::kActive; }));
}

size_t ChannelPaths::live() const {
  return static_cast<size_t>(std::count_if(
      paths_.begin(), paths_.end(), [](const Path& p) { return p.state != PathState::kFailed; }));
}

ChannelPaths::TimePoint ChannelPaths::last_heard() const {
  TimePoint last{};
  for (const Path& p : paths_) last = std::max(last, p.liveness.last_heard());
  return last;
}

double ChannelPaths::fastest_rate() const {
  double fastest = 0;
  for (const Path& p : paths_) {
    if (p.state == PathState::kActive) fastest = std::max(fastest, p.pace.rate());
  }
  return fastest;
}

// The active path expected to finish `bytes` first: its backlog over its measured rate
// (paths not measured yet count as fast as the fastest measured one). With no active path,
// a backup on standby, then a path on probation, is better than waiting, and a drained one
// better than a hang. Only paths with room are candidates: when the best tier has none, the
// frame waits (kNoPath) rather than going to a worse tier. A latency frame has only the
// latency paths for candidates while one is active (it then never waits in the kernel's or
// the switches' queues behind another class's bytes); other frames only the other paths
// while one is live in any state (the latency paths' priority queues are not for bulk).
bool ChannelPaths::class_has_path(bool latency, bool active_only) const {
  return std::any_of(paths_.begin(), paths_.end(), [&](const Path& p) {
    return p.latency == latency && p.state != PathState::kFailed &&
           (!active_only || p.state == PathState::kActive);
  });
}

bool ChannelPaths::classes_apart() const {
  return class_has_path(true, true) && class_has_path(false, false);
}

uint32_t ChannelPaths::pick(uint64_t bytes, bool latency) const {
  const double fastest = std::max(fastest_rate(), 1.0);
  const bool own_class_only = class_has_path(latency, /*active_only=*/latency);
  for (PathState wanted :
       {PathState::kActive, PathState::kStandby, PathState::kProbation, PathState::kDrained}) {
    uint32_t best = kNoPath;
    double best_cost = 0;
    bool tier = false;
    for (uint32_t i = 0; i < paths_.size(); ++i) {
      const Path& p = paths_[i];
      if (p.state != wanted || (own_class_only && p.latency != latency)) continue;
      tier = true;
      if (!p.pace.has_room(*p.io)) continue;
      const double rate = p.pace.rate() > 0 ? p.pace.rate() : fastest;
      const double cost = static_cast<double>(p.io->backlog_bytes() + bytes) / rate;
      if (best == kNoPath || cost < best_cost) {
        best = i;
        best_cost = cost;
      }
    }
    if (tier) return best;
  }
  return kNoPath;
}

// Acknowledgements go on the live path with the least backlog, an active latency path first
// (they are small, and a sender's ops wait on them: they should not queue behind bulk data);
// on a backup only when no other is left (an idle backup would otherwise take them all, and
// a silent fault of the route between the rails would then hold them up until the path
// timeout).
uint32_t ChannelPaths::pick_control() const {
  uint32_t best = kNoPath;
  auto better = [](const Path& p, const Path& than) {
    const bool fast = p.latency && p.state == PathState::kActive;
    const bool than_fast = than.latency && than.state == PathState::kActive;
    if (fast != than_fast) return fast;
    return p.io->backlog_bytes() < than.io->backlog_bytes();
  };
  for (const bool standby : {false, true}) {
    for (uint32_t i = 0; i < paths_.size(); ++i) {
      const Path& p = paths_[i];
      if (p.state == PathState::kFailed || (p.state == PathState::kStandby) != standby) continue;
      if (best == kNoPath || better(p, paths_[best])) best = i;
    }
    if (best != kNoPath) return best;
  }
  return kNoPath;
}

void ChannelPaths::queue(uint32_t path, const wire::DataFrameHeader& header,
                         std::span<const std::byte> payload, uint64_t token) {
  Path& p = paths_[path];
  p.io->queue(header, payload, token);
  p.liveness.carried();
}

void ChannelPaths::queue_urgent(uint32_t path, const wire::DataFrameHeader& header,
                                uint64_t token) {
  Path& p = paths_[path];
  p.io->queue_urgent(header, token);
  p.liveness.carried();
}

void ChannelPaths::abandon_other_copies(uint64_t seq, uint32_t except_path) {
  for (uint32_t i = 0; i < paths_.size(); ++i) {
    if (i != except_path && paths_[i].state != PathState::kFailed) {
      paths_[i].io->abandon_placement_of(seq);
    }
  }
}

void ChannelPaths::limit_queues(bool mixing) {
  for (Path& p : paths_) {
    if (p.io != nullptr) p.pace.limit_queue(*p.io, mixing);
  }
}

void ChannelPaths::begin_tick(TimePoint now, TimePoint wanted) {
  const auto since_tick = now - std::max(last_tick_, std::min(wanted, now));
  const bool had_tick = last_tick_ != TimePoint{};
  last_tick_ = now;
  if (!had_tick || since_tick <= settings_.liveness.heartbeat_interval) return;
  for (Path& p : paths_) {
    if (p.state != PathState::kFailed) {
      p.liveness.held_up(now, since_tick - settings_.liveness.heartbeat_interval);
    }
  }
}

}  // namespace plexus::transports
