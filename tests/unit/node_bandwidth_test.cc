// The node's bandwidth measure (daemon/links/node_bandwidth.h): a NIC pressed the whole
// report reads its rate, paths without counters add the largest per-peer sum of their
// capacity (latency paths left out), a gone path's NIC no longer counts, paths to a peer much
// slower than the median are left out, and peers' reports go stale, are capped, and are
// forgotten with their link.
#include "daemon/links/node_bandwidth.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace plexus::daemon {
namespace {

using Clock = NodeBandwidth::Clock;
using Active = NodeBandwidth::ActivePath;
constexpr auto kTick = std::chrono::milliseconds(10);
constexpr uint64_t kBytesPerTick = 250'000;  // 25 MB/s over a 10 ms tick

transports::PathDelivery counters(uint64_t acked, uint64_t busy_us) {
  transports::PathDelivery d;
  d.acked_bytes = acked;
  d.network_busy_us = busy_us;
  return d;
}

// Ten ticks of `paths` (path ids 1.., to peers 1..) each pressed the whole tick at 25 MB/s,
// starting at `now`; returns the time after them.
Clock::time_point ten_pressed_ticks(NodeBandwidth& b, Clock::time_point now, int paths,
                                    uint64_t& acked, uint64_t& busy) {
  for (int t = 0; t < 10; ++t) {
    acked += kBytesPerTick;
    busy += 10'000;
    for (int p = 1; p <= paths; ++p) {
      b.read_path(static_cast<uint64_t>(p), static_cast<uint64_t>(p), "nic0",
                  counters(acked, busy));
    }
    now += kTick;
    b.end_tick(now);
  }
  return now;
}

TEST(NodeBandwidthTest, ANicPressedTheWholeReportReadsItsRate) {
  NodeBandwidth b;
  auto now = Clock::now();
  uint64_t acked = 0;
  uint64_t busy = 0;
  b.read_path(1, 1, "nic0", counters(0, 1));  // the first reading: nothing to grow from
  b.end_tick(now);
  const std::vector<Active> active{{1, 1, "nic0", false, 0}};
  EXPECT_EQ(b.report(active, now), 0);  // the first report only starts the span
  now = ten_pressed_ticks(b, now, 1, acked, busy);
  EXPECT_NEAR(b.report(active, now), 25e6, 1e4);
  EXPECT_NEAR(b.own(active), 25e6, 1e4);
  // Not active (failed, standby): not counted.
  EXPECT_EQ(b.own({}), 0);
}

TEST(NodeBandwidthTest, PathsWithoutCountersAddTheLargestPerPeerSumOfTheirCapacity) {
  NodeBandwidth b;
  const std::vector<Active> active{{1, 1, "mlx0", false, 10e9},
                                   {1, 2, "mlx1", false, 12e9},
                                   {1, 3, "mlx0", true, 50e9},
                                   {2, 4, "mlx0", false, 15e9}};
  EXPECT_DOUBLE_EQ(b.own(active), 22e9);
}

TEST(NodeBandwidthTest, AGonePathsNicNoLongerCounts) {
  NodeBandwidth b;
  auto now = Clock::now();
  uint64_t acked = 0;
  uint64_t busy = 0;
  b.read_path(1, 1, "nic0", counters(0, 1));
  b.end_tick(now);
  b.report({}, now);
  now = ten_pressed_ticks(b, now, 1, acked, busy);
  const std::vector<Active> active{{1, 1, "nic0", false, 1e6}};
  EXPECT_NEAR(b.report(active, now), 25e6, 1e4);
  b.end_tick(now + kTick);  // path 1 not read: gone
  // A path with that id would now count by its capacity, as one without counters.
  EXPECT_DOUBLE_EQ(b.own(active), 1e6);
}

TEST(NodeBandwidthTest, PathsToAPeerMuchSlowerThanTheMedianAreLeftOut) {
  NodeBandwidth b;
  auto now = Clock::now();
  b.peer_reported(1, 1'000'000, now);    // 1 MB/s: much slower than the median
  b.peer_reported(2, 100'000'000, now);  // 100 MB/s
  b.peer_reported(3, 100'000'000, now);
  b.report({}, now);
  uint64_t acked = 0;
  uint64_t busy = 0;
  b.read_path(1, 1, "nic0", counters(0, 1));
  b.end_tick(now);
  now = ten_pressed_ticks(b, now, 1, acked, busy);  // path 1, to peer 1
  const std::vector<Active> active{{1, 1, "nic0", false, 0}};
  EXPECT_EQ(b.report(active, now), 0);
}

TEST(NodeBandwidthTest, APeersReportGoesStaleIsCappedAndIsForgottenWithItsLink) {
  NodeBandwidth b;
  const auto now = Clock::now();
  EXPECT_EQ(b.peer(1, now), 0);
  b.peer_reported(1, 5'000'000, now);
  EXPECT_EQ(b.peer(1, now + std::chrono::seconds(1)), 5e6);
  EXPECT_EQ(b.peer(1, now + NodeBandwidth::kStaleReport + std::chrono::milliseconds(1)), 0);
  b.peer_reported(2, 20'000'000'000'000ull, now);  // past 10 TB/s: no measure
  EXPECT_EQ(b.peer(2, now), 0);
  b.forget_peer(1);
  EXPECT_EQ(b.peer(1, now), 0);
}

}  // namespace
}  // namespace plexus::daemon
