// The paths of one channel (ReliableChannel; docs/architecture.md, sections 3 and 4): each
// one's transport (a FramePath, not owned: its owner keeps it until the path fails or the
// channel ends), state, class (the latency class's or not, a backup or not), liveness
// (PathLiveness) and pace (PathPace); the state changes, each told to Hooks::on_state; and
// the choice of a path for a frame (pick) or for an acknowledgement (pick_control).
// Owns that table; a failed path's id goes to the next path added. Called on the channel's
// thread (its owner's), through ReliableChannel and ChannelDispatcher.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "transports/channel/channel_sender.h"
#include "transports/channel/frame_path.h"
#include "transports/channel/path_liveness.h"
#include "transports/channel/path_pace.h"

namespace plexus::transports {

// kStandby: a healthy backup path (ChannelPaths::add's `backup`), used only without an active
// one. A drained path takes no new frames; what it has still drains.
enum class PathState { kProbation, kActive, kStandby, kDrained, kFailed };

class ChannelPaths {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Settings {
    PathLiveness::Settings liveness;
    PathPace::Settings pace;
  };
  struct Hooks {
    // A path changed state (detail: why it failed, or "").
    std::function<void(uint32_t path, PathState state, const std::string& detail)> on_state;
  };

  ChannelPaths(const Settings& settings, Hooks hooks);

  // A connected path, as ReliableChannel::add_path: on probation, or settled (on standby
  // when `backup`, else active). Returns its id.
  uint32_t add(FramePath* io, TimePoint now, bool probation, bool backup, bool latency);
  // The path is failed (it must be live): its transport is forgotten.
  void fail(uint32_t path, const std::string& reason);
  // Drains the path or takes it back (a failed one stays failed). Returns whether it was
  // taken back: it may take frames again.
  bool drain(uint32_t path, bool drained);
  // The path is proven (probation over, or taken early): active, or on standby if a backup.
  void settle(uint32_t path, const std::string& detail);

  PathState state(uint32_t path) const { return paths_.at(path).state; }
  bool latency(uint32_t path) const { return paths_.at(path).latency; }
  // Ids run from 0 to size() - 1, failed ones included.
  uint32_t size() const { return static_cast<uint32_t>(paths_.size()); }
  size_t usable() const;  // active ones (standby ones not counted)
  size_t live() const;    // not failed
  // When a frame last arrived on any path (own stalls discounted, as for silence).
  TimePoint last_heard() const;
  // The fastest measured rate of an active path (bytes/s; 0 until one is measured).
  double fastest_rate() const;

  // The path for a frame of `bytes` (of the latency class or not) among those with room
  // (kNoPath: none has room now).
  uint32_t pick(uint64_t bytes, bool latency) const;
  // The path for an acknowledgement (kNoPath: none is live).
  uint32_t pick_control() const;
  // Latency frames and the others go on paths of their own now (pick).
  bool classes_apart() const;

  // Queue on a live path (FramePath::queue, queue_urgent), which then carried something.
  void queue(uint32_t path, const wire::DataFrameHeader& header, std::span<const std::byte> payload,
             uint64_t token);
  void queue_urgent(uint32_t path, const wire::DataFrameHeader& header, uint64_t token);
  // Frame `seq` is in: a copy of it still being placed on another path than `except_path`
  // writes no more.
  void abandon_other_copies(uint64_t seq, uint32_t except_path);
  // Every live path's transport is told its queue again (PathPace::limit_queue).
  void limit_queues(bool mixing);
  // A tick begins: time this side did not look beyond a heartbeat interval (its own thread
  // was held up) is taken off every path's silence. `wanted`: when the channel asked for
  // this tick (ReliableChannel::next_tick): an idle channel's ticks are far apart by design,
  // and only lateness past that is a stall.
  void begin_tick(TimePoint now, TimePoint wanted = {});

  // A live path's transport, liveness and pace.
  FramePath& io(uint32_t path) const { return *paths_.at(path).io; }
  PathLiveness& liveness(uint32_t path) { return paths_.at(path).liveness; }
  const PathLiveness& liveness(uint32_t path) const { return paths_.at(path).liveness; }
  PathPace& pace(uint32_t path) { return paths_.at(path).pace; }
  const PathPace& pace(uint32_t path) const { return paths_.at(path).pace; }

 private:
  struct Path {
    FramePath* io = nullptr;  // null once failed
    PathState state = PathState::kActive;
    bool backup = false;   // settles on kStandby
    bool latency = false;  // the latency class's (add)
    PathLiveness liveness;
    PathPace pace;
  };

  // Whether a path of the latency class (or not) is live (active, with `active_only`).
  bool class_has_path(bool latency, bool active_only) const;
  void set_state(uint32_t path, PathState state, const std::string& detail);

  Settings settings_;
  Hooks hooks_;
  std::vector<Path> paths_;
  TimePoint last_tick_{};
};

}  // namespace plexus::transports
