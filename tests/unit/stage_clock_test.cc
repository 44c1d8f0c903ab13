// Where a sliced op's time goes: nothing read or summed untimed; timed, each stage summed
// over the slices and the slowest slice's rounds kept.
#include "daemon/internode/stage_clock.h"

#include <gtest/gtest.h>

namespace plexus::daemon {
namespace {

using std::chrono::milliseconds;

TEST(StageClockTest, UntimedItReadsNoClockAndSumsNothing) {
  StageClock clock(false);
  EXPECT_EQ(clock.now(), StageClock::Clock::time_point{});
  const auto began = clock.rounds_begin(StageClock::Clock::now() - milliseconds(5));
  EXPECT_EQ(began, StageClock::Clock::time_point{});
  clock.slice_finished(began, began + milliseconds(3));
  EXPECT_EQ(clock.times().slices, 0u);
  EXPECT_EQ(clock.times().local_in.count(), 0);
  EXPECT_EQ(clock.times().network.count(), 0);
  EXPECT_EQ(clock.times().local_out.count(), 0);
}

TEST(StageClockTest, TimedEachStageIsSummedAndTheSlowestRoundsKept) {
  StageClock clock(true);
  const auto now = clock.now();
  EXPECT_NE(now, StageClock::Clock::time_point{});
  const auto rounds = clock.rounds_begin(now - milliseconds(5));
  EXPECT_GE(rounds, now);
  EXPECT_GE(clock.times().local_in, milliseconds(5));
  const auto past = StageClock::Clock::now() - milliseconds(100);
  clock.slice_finished(past, past + milliseconds(30));
  clock.slice_finished(past, past + milliseconds(50));
  clock.slice_finished(past, past + milliseconds(20));
  EXPECT_EQ(clock.times().slices, 3u);
  EXPECT_EQ(clock.times().network, milliseconds(100));
  EXPECT_EQ(clock.times().slowest_slice_network, milliseconds(50));
  EXPECT_GE(clock.times().local_out, milliseconds(50 + 70 + 80)) << "ended until now, each";
}

}  // namespace
}  // namespace plexus::daemon
