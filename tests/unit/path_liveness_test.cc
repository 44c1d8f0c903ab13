// PathLiveness: a path silent past the timeout fails, but for a slow peer daemon or the last
// path's grace; time this side was held up is not silence; an idle path heartbeats; a
// returning path is proven after stable_after.
#include "transports/channel/path_liveness.h"

#include <gtest/gtest.h>

namespace plexus::transports::path_liveness_test {
namespace {

using namespace std::chrono_literals;
using Silence = PathLiveness::Silence;

// A path whose "kernel" reports how long its transport has not heard the peer.
class QuietPath : public FramePath {
 public:
  void queue(const wire::DataFrameHeader&, std::span<const std::byte>, uint64_t) override {}
  uint64_t backlog_bytes() const override { return 0; }
  void abandon_placement_of(uint64_t) override {}
  int64_t network_silence_ms() const override { return network_silence; }

  int64_t network_silence = -1;
};

const PathLiveness::Settings kSettings{.heartbeat_interval = 50ms,
                                       .path_timeout = 200ms,
                                       .stable_after = 500ms,
                                       .last_path_grace = 2000ms};

TEST(PathLivenessTest, SilencePastTheTimeoutFailsButForASlowPeerOrTheLastPathsGrace) {
  const auto t0 = std::chrono::steady_clock::now();
  QuietPath io;
  PathLiveness path(kSettings, t0);
  EXPECT_EQ(path.silence(t0 + 200ms, io, false).silence, Silence::kNone);

  const PathLiveness::Verdict failed = path.silence(t0 + 300ms, io, false);
  EXPECT_EQ(failed.silence, Silence::kFailed);
  EXPECT_EQ(failed.reason, "nothing received for 300 ms (timeout 200 ms)");
  EXPECT_EQ(path.silence(t0 + 300ms, io, true).silence, Silence::kWithinGrace);
  EXPECT_EQ(path.silence(t0 + 2500ms, io, true).reason,
            "nothing received for 2500 ms (timeout 2000 ms)");

  io.network_silence = 150;  // the transport hears the peer: its daemon is slow
  EXPECT_EQ(path.silence(t0 + 300ms, io, false).silence, Silence::kSlowPeer);
  io.network_silence = 250;
  EXPECT_EQ(path.silence(t0 + 300ms, io, false).silence, Silence::kFailed);

  path.heard(t0 + 290ms);
  EXPECT_EQ(path.last_heard(), t0 + 290ms);
  EXPECT_EQ(path.silence(t0 + 300ms, io, false).silence, Silence::kNone);
}

TEST(PathLivenessTest, TimeThisSideWasHeldUpIsTakenOffButNotPastNow) {
  const auto t0 = std::chrono::steady_clock::now();
  PathLiveness path(kSettings, t0);
  path.held_up(t0 + 300ms, 250ms);
  EXPECT_EQ(path.last_heard(), t0 + 250ms);
  path.held_up(t0 + 300ms, 250ms);
  EXPECT_EQ(path.last_heard(), t0 + 300ms);
}

TEST(PathLivenessTest, AnIdlePathHeartbeatsEveryIntervalAndABusyOneDoesNot) {
  const auto t0 = std::chrono::steady_clock::now();
  PathLiveness path(kSettings, t0);
  EXPECT_FALSE(path.heartbeat_due(t0 + 49ms, 0));
  ASSERT_TRUE(path.heartbeat_due(t0 + 50ms, 0));
  path.heartbeat_sent(t0 + 50ms);
  EXPECT_FALSE(path.heartbeat_due(t0 + 99ms, 0));

  path.carried();  // a frame went on it: that tells the peer it lives
  EXPECT_FALSE(path.heartbeat_due(t0 + 100ms, 0));
  EXPECT_FALSE(path.heartbeat_due(t0 + 149ms, 0));
  EXPECT_FALSE(path.heartbeat_due(t0 + 160ms, 4096)) << "bytes still in its transport";
  EXPECT_FALSE(path.heartbeat_due(t0 + 209ms, 0));
  EXPECT_TRUE(path.heartbeat_due(t0 + 210ms, 0));
}

TEST(PathLivenessTest, AReturningPathIsProvenAfterStableAfter) {
  const auto t0 = std::chrono::steady_clock::now();
  const PathLiveness path(kSettings, t0);
  EXPECT_FALSE(path.proven(t0 + 499ms));
  EXPECT_TRUE(path.proven(t0 + 500ms));
}

}  // namespace
}  // namespace plexus::transports::path_liveness_test
