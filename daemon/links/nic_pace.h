// How fast each local NIC carries bytes while the network sets the pace (issue 21), from its
// paths' transport counters (TCP_INFO: bytes acknowledged, microseconds pressed) read every
// tick. NodeLinks turns the samples into the node's figure that the slow-node schedule
// compares across nodes.
//
// Two things make a NIC's pressed time more than adding up its paths' (connections share a
// NIC at once, as a ring's slices do, or take turns on it, as recursive halving's steps do):
// - Within a tick, the NIC was pressed at least as long as its longest path and at most as
//   long as all of them, and never longer than the tick. Over a whole report neither bound
//   is right; over 10 ms the two are close.
// - A path that carried only heartbeats and acknowledgements in a tick is pressed for
//   nothing: each small frame waits out the receiver's delayed ACK (40 ms), so an idle path
//   with a heartbeat every 50 ms reads pressed most of the time. A tick counts for a path
//   only when at least kMinTickBytes of it were acknowledged.
// - A path to a slow peer is pressed long for few bytes: its acknowledgements come back
//   behind that peer's own full send queue. Its time says nothing of this NIC, so a path
//   reading below kPacedShare of the NIC's fastest path is left out of the NIC's figure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace plexus::daemon {

class NicPace {
 public:
  // What one path's counters grew by in a tick.
  struct PathGrowth {
    uint64_t path = 0;  // any id unique among the node's paths
    std::string nic;
    uint64_t acked = 0;
    uint64_t busy_us = 0;
  };
  struct NicSample {
    double bytes_per_s = 0;
    double pressed_us = 0;  // how long the NIC's counted paths kept it pressed
  };

  // A path whose report rate is below this share of its NIC's fastest path is paced by its
  // peer, not by this NIC.
  static constexpr double kPacedShare = 0.5;
  // A path's rate counts (for the fastest and for leaving it out) once it was pressed this
  // long in a report: the kernel counts pressed time in jiffies (4 ms at HZ=250).
  static constexpr double kMinBusyUs = 12'000;
  // Less acknowledged in a tick is control traffic (a few frames), not data: the tick is
  // left out for that path. (A path carrying data at under 0.4 MB/s is not measured.)
  static constexpr uint64_t kMinTickBytes = 4096;

  // One tick's growth of the paths' counters, `wall_us` after the previous tick.
  void add_tick(double wall_us, std::vector<PathGrowth> growth);
  // Per NIC with a path pressed since the last call, its rate and pressed time over the
  // ticks since then (which it forgets).
  std::map<std::string, NicSample> take();

 private:
  struct Tick {
    double wall_us = 0;
    std::vector<PathGrowth> growth;
  };
  std::vector<Tick> ticks_;
};

}  // namespace plexus::daemon
