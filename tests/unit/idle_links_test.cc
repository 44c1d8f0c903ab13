// What an idle link costs: a path with no traffic heartbeats at the idle interval, says so to
// its peer before it waits longer, and snaps back at its first traffic; the peer allows the
// silence promised, no more, and while it has traffic itself only the path timeout; a path's
// telemetry ring is full only while it has traffic, its totals carried across.
#include <gtest/gtest.h>

#include "daemon/links/path_windows.h"
#include "transports/channel/path_liveness.h"

namespace plexus::idle_links_test {
namespace {

using namespace std::chrono_literals;
using transports::PathLiveness;
using Silence = PathLiveness::Silence;

class QuietPath : public transports::FramePath {
 public:
  void queue(const transports::wire::DataFrameHeader&, std::span<const std::byte>,
             uint64_t) override {}
  uint64_t backlog_bytes() const override { return 0; }
  void abandon_placement_of(uint64_t) override {}
};

const PathLiveness::Settings kSettings{.heartbeat_interval = 50ms,
                                       .path_timeout = 200ms,
                                       .stable_after = 500ms,
                                       .last_path_grace = 2000ms,
                                       .idle_heartbeat_interval = 1000ms,
                                       .idle_after = 1000ms};

TEST(IdleLinksTest, AnIdlePathHeartbeatsAtTheIdleIntervalAndSnapsBackAtItsFirstTraffic) {
  const auto t0 = std::chrono::steady_clock::now();
  PathLiveness path(kSettings, t0);
  EXPECT_FALSE(path.idle());
  EXPECT_TRUE(path.wants_backlog()) << "a path with traffic asks its transport";
  ASSERT_TRUE(path.heartbeat_due(t0 + 50ms, 0));
  EXPECT_EQ(path.promise(), 50ms);
  path.heartbeat_sent(t0 + 50ms);
  EXPECT_FALSE(path.heartbeat_due(t0 + 99ms, 0));

  // A second with no traffic: idle, and the peer is told at once, before the longer wait.
  ASSERT_TRUE(path.heartbeat_due(t0 + 1000ms, 0));
  EXPECT_TRUE(path.idle());
  EXPECT_EQ(path.promise(), 1000ms);
  path.heartbeat_sent(t0 + 1000ms);
  EXPECT_FALSE(path.wants_backlog()) << "an idle path's transport is not asked";
  EXPECT_EQ(path.heartbeat_at(), t0 + 2000ms);
  EXPECT_FALSE(path.heartbeat_due(t0 + 1749ms, 0));
  EXPECT_TRUE(path.heartbeat_due(t0 + 1750ms, 0)) << "a quarter early serves with others";
  path.heartbeat_sent(t0 + 1750ms);

  // Traffic: the short interval again, told to the peer at the next tick.
  path.carried();
  ASSERT_TRUE(path.heartbeat_due(t0 + 1800ms, 0));
  EXPECT_FALSE(path.idle());
  EXPECT_EQ(path.promise(), 50ms);
  path.heartbeat_sent(t0 + 1800ms);
  EXPECT_FALSE(path.heartbeat_due(t0 + 1849ms, 0));
  EXPECT_TRUE(path.heartbeat_due(t0 + 1850ms, 0));

  // A frame heard from the peer (not a heartbeat) counts as traffic too.
  PathLiveness other(kSettings, t0);
  ASSERT_TRUE(other.heartbeat_due(t0 + 1000ms, 0));
  other.heartbeat_sent(t0 + 1000ms);
  other.heard(t0 + 1100ms, false);
  EXPECT_FALSE(other.heartbeat_due(t0 + 1100ms, 0)) << "a heartbeat heard is no traffic";
  EXPECT_TRUE(other.idle());
  other.heard(t0 + 1200ms, true);
  EXPECT_TRUE(other.heartbeat_due(t0 + 1200ms, 0));
  EXPECT_FALSE(other.idle());
}

TEST(IdleLinksTest, ThePeerIsAllowedTheSilenceItPromisedAndNoMoreOnceThisSideHasTraffic) {
  const auto t0 = std::chrono::steady_clock::now();
  const QuietPath io;
  PathLiveness path(kSettings, t0);
  ASSERT_TRUE(path.heartbeat_due(t0 + 1000ms, 0));  // idle
  path.heartbeat_sent(t0 + 1000ms);
  path.heard(t0 + 1000ms, false);
  EXPECT_EQ(path.silence_due(), t0 + 1200ms) << "no promise: the path timeout";
  path.peer_promised(1000ms);
  // The promise's interval in place of the heartbeat interval: 1000 + (200 - 50).
  EXPECT_EQ(path.silence_due(), t0 + 2150ms);
  EXPECT_EQ(path.silence(t0 + 2150ms, io, false).silence, Silence::kNone);
  const PathLiveness::Verdict failed = path.silence(t0 + 2151ms, io, false);
  EXPECT_EQ(failed.silence, Silence::kFailed);
  EXPECT_EQ(failed.reason, "nothing received for 1151 ms (timeout 1150 ms)");

  // This side sends again: the peer gets it and promises the short interval, so it owes an
  // answer within the path timeout of that, whatever it promised while idle.
  path.carried();
  path.heartbeat_due(t0 + 1500ms, 0);
  EXPECT_EQ(path.silence_due(), t0 + 1700ms);
  EXPECT_EQ(path.silence(t0 + 1701ms, io, false).silence, Silence::kFailed);
  path.heard(t0 + 1650ms, true);
  EXPECT_EQ(path.silence_due(), t0 + 1850ms);
}

TEST(IdleLinksTest, APathsRingIsFullOnlyWithTrafficAndItsTotalsAreCarriedAcross) {
  daemon::PathWindows windows(1ms, 100);
  EXPECT_FALSE(windows.full());
  EXPECT_EQ(windows.ring()->capacity(), 2u) << "no traffic yet: the small ring";

  const auto t = monitor::WindowRing::Clock::now();
  windows.at(t).sent(t, 1000);
  EXPECT_TRUE(windows.full());
  EXPECT_EQ(windows.ring()->capacity(), 100u);
  const auto held = windows.ring();  // a reader's copy

  EXPECT_FALSE(windows.release_if_idle(t + 99ms)) << "windows of the span are still in it";
  EXPECT_TRUE(windows.release_if_idle(t + 100ms));
  EXPECT_FALSE(windows.full());
  EXPECT_EQ(windows.ring()->capacity(), 2u);
  EXPECT_EQ(windows.ring()->totals().bytes_out, 1000u);
  EXPECT_EQ(held->totals().bytes_out, 1000u) << "the reader's copy lives on";
  EXPECT_FALSE(windows.release_if_idle(t + 500ms)) << "nothing more to let go";

  windows.at(t + 200ms).sent(t + 200ms, 500);
  EXPECT_TRUE(windows.full());
  EXPECT_EQ(windows.ring()->totals().bytes_out, 1500u);
  EXPECT_EQ(windows.ring()->totals().chunks_out, 2u);
}

}  // namespace
}  // namespace plexus::idle_links_test
