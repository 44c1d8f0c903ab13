// This node's bandwidth as its links measured it, which the nodes' speed agreement compares,
// and what each peer last reported of its own.
//
// The node's figure, in bytes/s, 0 when nothing is measured: per local NIC with an active path,
// a NicPace sample every report (bytes acknowledged over the time the network set the pace,
// from TCP_INFO read every tick on the paths with traffic), summed over the NICs. A NIC pressed for
// at least kPressedShare of the report's span moves its measure (weight kRateWeight), up or down;
// one pressed less (a light load, a window opening again after idle, which reads low) only raises
// it. Over pressed time, as a delivery-rate sample is one round trip's worth (a shaper's burst
// reads as gigabytes a second) and user-space counts see a socket buffer fill. Paths whose
// transport counts neither (RDMA) add the largest per-peer sum of the channel's own measure
// (ReliableChannel::capacity). Paths to a peer that reports itself much slower than the median
// node are left out (kSlowerPeer of the median of this node's and its peers'): their
// acknowledgements come back at the peer's pace.
//
// Owns, per path, its transport's counters as last read; the NIC samples since the last
// report; each NIC's measure; each peer's latest report and whether it paces its paths. Knows
// nothing of the links: NodeLinks feeds it what PeerLinks reads of its paths, and sends the
// figure report() returns. Engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/links/nic_pace.h"
#include "transports/path/data_path.h"

namespace plexus::daemon {

class NodeBandwidth {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr double kPressedShare = 0.5;
  // Paths to a peer that reports less than this fraction of the median node's figure are
  // left out of this node's (their pace is the peer's).
  static constexpr double kSlowerPeer = 0.75;
  static constexpr double kRateWeight = 0.3;
  // A report's NIC sample counts once its paths were pressed at least this long (3
  // jiffies: shorter ones are mostly rounding).
  static constexpr double kMinBusyUs = 12'000;
  static constexpr auto kStaleReport = std::chrono::seconds(2);

  // Every tick, every path (`path`: unique among the node's paths) of `peer` over local NIC
  // `nic`, with its transport's counters when it keeps them; then end_tick.
  void read_path(uint64_t peer, uint64_t path, const std::string& nic,
                 const std::optional<transports::PathDelivery>& delivery);
  // Each NIC's pressed time in the tick; a path not read since the last end_tick is gone.
  void end_tick(Clock::time_point now);

  // A path the channel has active, with its channel's measure of what it can carry.
  struct ActivePath {
    uint64_t peer = 0;
    uint64_t path = 0;
    std::string nic;
    bool latency = false;  // the latency class's: it shares its rail's NIC and link
    double capacity_bytes_per_s = 0;
  };
  // The node's figure over the paths active now.
  double own(std::span<const ActivePath> active) const;
  // Every report: judges which peers are much slower than the median, turns the NIC samples
  // since the last report into each NIC's measure, and returns the node's figure to send.
  double report(std::span<const ActivePath> active, Clock::time_point now);

  // `peer` reported `bytes_per_s` of its own (a kNodeRate frame).
  void peer_reported(uint64_t peer, uint64_t bytes_per_s, Clock::time_point now);
  // What `peer` last reported, or 0: none, or none for kStaleReport.
  double peer(uint64_t peer, Clock::time_point now) const;
  // The link to `peer` is gone: a new one starts with no report.
  void forget_peer(uint64_t peer);

 private:
  struct Seen {  // a path's transport counters as last read
    uint64_t acked = 0;
    uint64_t busy_us = 0;
    uint64_t tick = 0;  // the tick it was last read in
  };
  struct PeerReport {
    double bytes_per_s = 0;
    Clock::time_point at{};
    bool paces = false;  // much slower than the median (kSlowerPeer)
  };
  std::unordered_map<uint64_t, Seen> seen_;  // by path
  std::unordered_map<uint64_t, PeerReport> peers_;
  std::vector<NicPace::PathGrowth> growth_;  // this tick's
  uint64_t ticks_ = 0;
  std::map<std::string, double> nic_measures_;  // bytes/s per local NIC
  Clock::time_point measured_at_{};             // the last report
  NicPace nic_pace_;                            // since the last report
  Clock::time_point sampled_at_{};              // the last end_tick
};

}  // namespace plexus::daemon
