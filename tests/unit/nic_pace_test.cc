// A NIC's rate from its paths' counters (daemon/links/nic_pace.h): paths taking turns on a
// NIC and paths sharing it at once (evenly or not) both read the NIC's rate, neither a path
// paced by a slow peer nor one carrying only heartbeats drags its NIC down, and the
// kernel's jiffy-stepped counters stay within bounds.
#include "daemon/links/nic_pace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace plexus::daemon {
namespace {

using Growth = NicPace::PathGrowth;
constexpr double kTickUs = 10'000;
// 25 MB/s: what a 200 Mbit/s NIC carries, in bytes per microsecond.
constexpr uint64_t kBytesPerUs = 25;

TEST(NicPaceTest, PathsTakingTurnsOnANicReadItsRateNotTwice) {
  NicPace pace;
  // Recursive halving's steps: path 1 has the NIC for 5 ticks, then path 2.
  for (int t = 0; t < 10; ++t) {
    const uint64_t path = t < 5 ? 1 : 2;
    pace.add_tick(kTickUs, {Growth{path, "nic0", 10'000 * kBytesPerUs, 10'000}});
  }
  const auto samples = pace.take();
  ASSERT_EQ(samples.count("nic0"), 1u);
  EXPECT_NEAR(samples.at("nic0").bytes_per_s, 25e6, 1e3);
  EXPECT_NEAR(samples.at("nic0").pressed_us, 100'000, 1);
  // Forgotten once taken.
  EXPECT_TRUE(pace.take().empty());
}

TEST(NicPaceTest, PathsSharingANicAtOnceReadItsRateNotAShare) {
  NicPace pace;
  // Three connections splitting the NIC unevenly (0.4 / 0.33 / 0.27), none left out.
  for (int t = 0; t < 10; ++t) {
    std::vector<Growth> tick;
    for (uint64_t path = 1; path <= 3; ++path) {
      const uint64_t hundredths = path == 1 ? 40 : path == 2 ? 33 : 27;
      tick.push_back({path, "nic0", 10'000 * kBytesPerUs * hundredths / 100, 10'000});
    }
    tick.push_back({4, "nic1", 10'000 * kBytesPerUs, 10'000});  // another NIC, alone
    pace.add_tick(kTickUs, tick);
  }
  const auto samples = pace.take();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_NEAR(samples.at("nic0").bytes_per_s, 25e6, 1e4);
  EXPECT_NEAR(samples.at("nic0").pressed_us, 100'000, 1);
  EXPECT_NEAR(samples.at("nic1").bytes_per_s, 25e6, 1e3);
}

TEST(NicPaceTest, PathsPressedAtOnceSteppingInJiffiesStillReadTheirNic) {
  NicPace pace;
  // Two connections sharing the NIC evenly; the kernel's counters step by 4 ms, so both
  // show 8 ms in one 10 ms tick and 12 ms in the next. Bounding each tick alone reads the
  // NIC 1.1x as long pressed as it was.
  for (int t = 0; t < 10; ++t) {
    const uint64_t busy = t % 2 == 0 ? 8'000 : 12'000;
    pace.add_tick(kTickUs, {Growth{1, "nic0", 10'000 * kBytesPerUs / 2, busy},
                            Growth{2, "nic0", 10'000 * kBytesPerUs / 2, busy}});
  }
  const auto samples = pace.take();
  EXPECT_NEAR(samples.at("nic0").bytes_per_s, 25e6, 0.05 * 25e6);
  EXPECT_LE(samples.at("nic0").pressed_us, 100'000 + NicPace::kJiffyUs);
}

TEST(NicPaceTest, APathPacedByASlowPeerDoesNotDragItsNicDown) {
  NicPace pace;
  // Path 1 runs at the NIC's rate half of each tick; path 2, to a peer whose
  // acknowledgements wait behind its own queue, is pressed all the time for 2 MB/s.
  for (int t = 0; t < 10; ++t) {
    pace.add_tick(kTickUs, {Growth{1, "nic0", 5'000 * kBytesPerUs, 5'000},
                            Growth{2, "nic0", 10'000 * 2, 10'000}});
  }
  const auto samples = pace.take();
  EXPECT_NEAR(samples.at("nic0").bytes_per_s, 25e6, 1e3);  // with path 2: 14.5 MB/s
  EXPECT_NEAR(samples.at("nic0").pressed_us, 50'000, 1);
  // Alone, a slow path is all the NIC shows.
  for (int t = 0; t < 10; ++t) pace.add_tick(kTickUs, {Growth{2, "nic0", 10'000 * 2, 10'000}});
  EXPECT_NEAR(pace.take().at("nic0").bytes_per_s, 2e6, 1e3);
}

TEST(NicPaceTest, APathCarryingOnlyHeartbeatsIsNotPressed) {
  NicPace pace;
  // Path 2's heartbeats each wait out a delayed ACK: 8 ms of every tick "pressed" for 64
  // bytes. Path 1 carries data in half the ticks.
  for (int t = 0; t < 10; ++t) {
    std::vector<Growth> tick{Growth{2, "nic0", 64, 8'000}};
    if (t % 2 == 0) tick.push_back({1, "nic0", 10'000 * kBytesPerUs, 10'000});
    pace.add_tick(kTickUs, tick);
  }
  const auto samples = pace.take();
  EXPECT_NEAR(samples.at("nic0").bytes_per_s, 25e6, 1e3);  // with path 2: 15.6 MB/s
  EXPECT_NEAR(samples.at("nic0").pressed_us, 50'000, 1);
  // Heartbeats alone: no sample (with them, 0 MB/s pressed 80 % of the time).
  for (int t = 0; t < 10; ++t) pace.add_tick(kTickUs, {Growth{2, "nic0", 64, 8'000}});
  EXPECT_TRUE(pace.take().empty());
}

TEST(NicPaceTest, JiffySteppedCountersStayWithinTheTickOrTheLongestPath) {
  NicPace pace;
  // Ticks of 5 ms and counters that step by 4 ms: a tick may show 8 ms on one path (then
  // the longest path's, within the ticks' time and a jiffy), or bytes acknowledged with no
  // pressed time (still counted).
  pace.add_tick(5'000, {Growth{1, "nic0", 8'000 * kBytesPerUs, 8'000},
                        Growth{2, "nic0", 4'000 * kBytesPerUs, 4'000}});
  pace.add_tick(5'000, {Growth{1, "nic0", 2'000 * kBytesPerUs, 0}});
  pace.add_tick(5'000, {Growth{1, "nic0", 4'000 * kBytesPerUs, 4'000},
                        Growth{2, "nic0", 2'000 * kBytesPerUs, 4'000}});
  const auto samples = pace.take();
  EXPECT_NEAR(samples.at("nic0").pressed_us, 8'000 + 0 + 5'000, 1);
  EXPECT_NEAR(samples.at("nic0").bytes_per_s, 20'000.0 * kBytesPerUs / 13'000 * 1e6, 1e3);
  // Nothing pressed, nothing acknowledged: no sample.
  pace.add_tick(kTickUs, {});
  EXPECT_TRUE(pace.take().empty());
}

}  // namespace
}  // namespace plexus::daemon
