// How fast each local NIC carries bytes while the network sets the pace, from its paths'
// transport counters (TCP_INFO: bytes acknowledged, microseconds pressed) read every
// tick. NodeLinks turns the samples into the node's figure that the slow-node schedule
// compares across nodes.
//
// A NIC's pressed time is not its paths' added up (connections share a NIC at once, as a
// ring's slices do, or take turns on it, as recursive halving's steps do):
// - Within a tick, the NIC was pressed at least as long as its longest path and at most as
//   long as all of them, and never longer than the tick. Over a whole report neither bound
//   is right; over 10 ms the two are close. The counters step in jiffies (4 ms at HZ=250),
//   so a tick may show more than its length: the excess is carried, and a NIC is never
//   pressed longer than the ticks so far.
// - A path that carried only heartbeats and acknowledgements in a tick is "pressed" for
//   nothing: each small frame is in flight until the peer's ACK comes back (behind the
//   peer's own data, or delayed), so an idle path reads pressed much of the time at 0 MB/s.
//   A tick counts for a path only when at least kMinTickBytes were acknowledged in it. (So
//   a data path's ticks with nothing acknowledged, a loss stalling it, are left out too and
//   a lossy NIC reads somewhat high. Counting ticks with data queued instead took in the
//   paths to a slow peer, whose data waits behind its queue, and healthy nodes read 0.7 of
//   their NICs.)
// And some paths say nothing of their NIC:
// - A path to a slow peer is pressed long for few bytes: its acknowledgements come back
//   behind that peer's own full send queue. A path reading below kPacedShare of the NIC's
//   fastest path is left out of the NIC's figure.
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
  // peer, not by this NIC. (Connections splitting a NIC more unevenly than that lose their
  // slow ones' bytes, reading the NIC low; 0.3 let in enough of the paths to a slow peer
  // that healthy nodes read 0.7 of their NICs.)
  static constexpr double kPacedShare = 0.5;
  // A path's rate counts, for leaving others out and as a floor under its NIC's figure (one
  // connection cannot outrun its NIC), once it was pressed this long in a report (3
  // jiffies). Requiring 40 ms left healthy nodes whose paths run in bursts (waiting on a
  // slow node) without their floor, reading 0.75 of their NICs.
  static constexpr double kMinBusyUs = 12'000;
  // Less acknowledged in a tick is control traffic (a few frames).
  static constexpr uint64_t kMinTickBytes = 4096;
  // The kernel's pressed-time step: a jiffy at Debian's HZ=250.
  static constexpr double kJiffyUs = 4'000;

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
