// PathPace: a path's rate is sampled only while the network sets the pace, forgotten when
// not measured again, its peak kept; the transport is told its queue only when it moves.
#include "transports/channel/path_pace.h"

#include <gtest/gtest.h>

#include <vector>

namespace plexus::transports::path_pace_test {
namespace {

using namespace std::chrono_literals;

// A path whose queue the test sets, and which records what limit_queue told it.
class PacedPath : public FramePath {
 public:
  struct Limit {
    uint64_t bytes;
    double rate;
    bool in_flight;
  };
  void queue(const wire::DataFrameHeader&, std::span<const std::byte>, uint64_t) override {}
  uint64_t backlog_bytes() const override { return unsent; }
  uint64_t unsent_bytes() const override { return unsent; }
  uint64_t waiting_bytes() const override { return waiting; }
  void limit_queue(uint64_t bytes, double rate, bool in_flight_too) override {
    limits.push_back({bytes, rate, in_flight_too});
  }
  void abandon_placement_of(uint64_t) override {}

  uint64_t unsent = 0;
  uint64_t waiting = 0;
  std::vector<Limit> limits;
};

const PathPace::Settings kSettings{
    .queue_bytes = 1000, .queue_time = 1000us, .min_queue_bytes = 32 << 10};

TEST(PathPaceTest, MeasuresOnlyWhileBusyForgetsAnUnmeasuredRateAndKeepsThePeak) {
  const auto t0 = std::chrono::steady_clock::now();
  PacedPath io;
  PathPace pace(kSettings, t0, /*latency=*/false);
  io.unsent = 1;  // a backlog throughout: the network sets the pace
  pace.sent(40000);
  pace.tick(t0 + 10ms, io, false, false);
  EXPECT_EQ(pace.rate(), 0) << "a sample spans 20 ms";
  pace.tick(t0 + 20ms, io, false, false);
  EXPECT_DOUBLE_EQ(pace.rate(), 2e6);
  EXPECT_DOUBLE_EQ(pace.capacity().bytes_per_s, 2e6);
  EXPECT_EQ(pace.capacity().measured_at, t0 + 20ms);

  // Idle at a tick: the sender, not the network, set the pace; nothing is learnt.
  io.unsent = 0;
  pace.sent(1000);
  pace.tick(t0 + 40ms, io, false, false);
  EXPECT_DOUBLE_EQ(pace.rate(), 2e6);

  // Frames waiting for room count as busy (from the next sample, which starts busy): 0.7 of
  // the old rate and 0.3 of the sample.
  io.waiting = 2000;
  pace.tick(t0 + 60ms, io, true, false);
  pace.sent(20000);
  pace.tick(t0 + 80ms, io, true, false);
  EXPECT_DOUBLE_EQ(pace.rate(), 0.7 * 2e6 + 0.3 * 1e6);
  EXPECT_DOUBLE_EQ(pace.capacity().bytes_per_s, 2e6) << "the peak stands";

  io.waiting = 0;
  pace.tick(t0 + 80ms + 1s, io, false, false);
  EXPECT_EQ(pace.rate(), 0) << "not measured for a second: forgotten";
  EXPECT_DOUBLE_EQ(pace.capacity().bytes_per_s, 2e6) << "the capacity is kept";
}

TEST(PathPaceTest, TheTransportIsToldItsQueueOnlyWhenItMovesAndALatencyPathIsNeverHeldInFlight) {
  const auto t0 = std::chrono::steady_clock::now();
  PacedPath io;
  PacedPath latency_io;
  PathPace pace(kSettings, t0, /*latency=*/false);
  PathPace latency(kSettings, t0, /*latency=*/true);
  pace.limit_queue(io, true);
  EXPECT_TRUE(io.limits.empty()) << "no rate yet: the transport holds what it holds";

  io.unsent = latency_io.unsent = 1;
  pace.sent(1'000'000);  // 50 MB/s: 50 KB in the 1 ms queue time, above the minimum
  latency.sent(1'000'000);
  pace.tick(t0 + 20ms, io, false, false);
  latency.tick(t0 + 20ms, latency_io, false, /*mixing=*/true);
  ASSERT_EQ(io.limits.size(), 1u);
  EXPECT_EQ(io.limits[0].bytes, 50'000u);
  EXPECT_DOUBLE_EQ(io.limits[0].rate, 5e7);
  EXPECT_FALSE(io.limits[0].in_flight);

  pace.limit_queue(io, false);
  EXPECT_EQ(io.limits.size(), 1u) << "unchanged: not told again";
  pace.limit_queue(io, true);
  ASSERT_EQ(io.limits.size(), 2u) << "flows mix: held in flight too";
  EXPECT_TRUE(io.limits[1].in_flight);

  latency.limit_queue(latency_io, true);
  ASSERT_EQ(latency_io.limits.size(), 1u);
  EXPECT_FALSE(latency_io.limits[0].in_flight);

  // A rate within a quarter of the one told keeps the limit; beyond it, the limit moves.
  pace.sent(1'100'000);
  pace.tick(t0 + 40ms, io, false, true);
  EXPECT_EQ(io.limits.size(), 2u);
  pace.sent(4'000'000);
  pace.tick(t0 + 60ms, io, false, true);
  ASSERT_EQ(io.limits.size(), 3u);
  EXPECT_GT(io.limits[2].bytes, 50'000u);
}

TEST(PathPaceTest, APathHasRoomWhileLittleWaitsInIt) {
  PacedPath io;
  const PathPace pace(kSettings, std::chrono::steady_clock::now(), false);
  io.waiting = 1000;
  EXPECT_TRUE(pace.has_room(io));
  io.waiting = 1001;
  EXPECT_FALSE(pace.has_room(io));
}

}  // namespace
}  // namespace plexus::transports::path_pace_test
