// One path's pace, for ReliableChannel's striping and for its transport's queue: the rate at
// which the network takes the path's bytes, sampled over spans in which the path had a
// backlog throughout (so that the network, not the sender, set the pace), the peak of that
// rate (what the path can carry: ReliableChannel::capacity), and the queue the path may
// hold: how much may wait in it before it takes another frame (has_room), and how much its
// transport keeps, as FramePath::limit_queue was last told.
// Owns those measurements and that limit, not the path. Called on the channel's thread (its
// owner's), through ChannelPaths and ReliableChannel::tick.
#pragma once

#include <chrono>
#include <cstdint>

#include "transports/channel/frame_path.h"

namespace plexus::transports {

// What a path can carry as measured (ReliableChannel::capacity): the peak rate, bytes/s, and
// when it was taken (TimePoint{} when never measured).
struct PathCapacity {
  double bytes_per_s = 0;
  std::chrono::steady_clock::time_point measured_at{};
};

class PathPace {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Settings {
    uint64_t queue_bytes = 0;                    // ReliableChannel::Settings::path_queue_bytes
    std::chrono::microseconds queue_time{1000};  // path_queue_time
    uint64_t min_queue_bytes = 32 << 10;         // min_path_queue_bytes
  };
  // capacity(): a peak stands this long unless a higher one comes.
  static constexpr std::chrono::seconds kPeakWindow{5};

  // A path that came up at `now`. `latency`: the latency class's path, which carries that
  // class alone, so that what its transport holds in flight delays no other class: it is
  // never held to a limit in flight.
  PathPace(const Settings& settings, TimePoint now, bool latency);

  // Whether the path may take another frame: no more than Settings::queue_bytes wait in it.
  bool has_room(const FramePath& io) const { return io.waiting_bytes() <= settings_.queue_bytes; }
  // `bytes` of payload went to the network.
  void sent(uint64_t bytes) { sent_bytes_ += bytes; }
  // Every tick: ends a rate sample once it spans long enough, and sets the transport's queue
  // to the new rate. `frames_waiting`: frames wait in the channel for room on a path.
  // `mixing`: frames of several flows leave the channel (the transport is then held to its
  // queue in flight too).
  void tick(TimePoint now, FramePath& io, bool frames_waiting, bool mixing);
  // Tells the transport to queue about Settings::queue_time of the measured rate (and at
  // least min_queue_bytes); until the rate is measured, nothing: it holds what it holds by
  // itself. Only when that moved by a quarter since it was last told.
  void limit_queue(FramePath& io, bool mixing);

  // Bytes/s, 0 until measured, and again once not measured for a while (kRateForgetAfter).
  double rate() const { return rate_; }
  PathCapacity capacity() const { return {peak_rate_, peak_at_}; }

 private:
  // The network sets the pace: bytes unsent, or frames waiting for the path to make room.
  bool busy(const FramePath& io, bool frames_waiting) const {
    return io.unsent_bytes() > 0 || (frames_waiting && !has_room(io));
  }

  Settings settings_;
  bool latency_ = false;
  uint64_t sent_bytes_ = 0;  // since the last rate sample
  TimePoint sample_start_;
  bool busy_since_sample_ = true;  // unsent bytes, or held at its limit, at every tick since
  double rate_ = 0;                // bytes/s, 0 until measured
  TimePoint rate_measured_at_;     // the last sample
  double peak_rate_ = 0;           // the largest rate_ since peak_at_ (capacity())
  TimePoint peak_at_;
  uint64_t queue_limit_ = 0;      // as last given to FramePath::limit_queue (0: none yet)
  double queue_rate_ = 0;         // ditto
  bool queue_in_flight_ = false;  // ditto
};

}  // namespace plexus::transports
