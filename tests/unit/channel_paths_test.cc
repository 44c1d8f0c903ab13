// ChannelPaths: every state change is told once, a failed path's id is reused, a drained
// path comes straight back; a frame goes to the best tier of paths with room (never to a
// worse tier), each class to its own paths, and an acknowledgement to an active latency path
// first and to a backup last.
#include "transports/channel/channel_paths.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace plexus::transports::channel_paths_test {
namespace {

using namespace std::chrono_literals;

// A path whose backlog and queue the test sets, and which records what was queued on it.
class TablePath : public FramePath {
 public:
  void queue(const wire::DataFrameHeader& header, std::span<const std::byte>,
             uint64_t token) override {
    queued.push_back({header.type, token});
  }
  uint64_t backlog_bytes() const override { return backlog; }
  uint64_t waiting_bytes() const override { return waiting; }
  void abandon_placement_of(uint64_t seq) override { abandoned.push_back(seq); }

  uint64_t backlog = 0;
  uint64_t waiting = 0;
  std::vector<std::pair<wire::FrameType, uint64_t>> queued;
  std::vector<uint64_t> abandoned;
};

struct Notices {
  std::vector<std::tuple<uint32_t, PathState, std::string>> seen;
  ChannelPaths::Hooks hooks() {
    return {.on_state = [this](uint32_t path, PathState state, const std::string& detail) {
      seen.emplace_back(path, state, detail);
    }};
  }
};

TEST(ChannelPathsTest, StateChangesAreToldOnceAndAFailedPathsIdIsReused) {
  const auto t0 = std::chrono::steady_clock::now();
  Notices notices;
  ChannelPaths paths({}, notices.hooks());
  TablePath a, b, c;
  EXPECT_EQ(paths.add(&a, t0, false, false, false), 0u);
  EXPECT_EQ(paths.add(&b, t0, false, /*backup=*/true, false), 1u);
  EXPECT_EQ(paths.state(1), PathState::kStandby);
  paths.fail(0, "socket error");
  EXPECT_EQ(paths.live(), 1u);
  EXPECT_EQ(paths.usable(), 0u) << "a standby path is not counted";
  EXPECT_EQ(paths.add(&c, t0, /*probation=*/true, false, false), 0u);
  paths.settle(0, "");
  paths.settle(0, "");  // already active: not told again

  EXPECT_FALSE(paths.drain(1, true));
  EXPECT_TRUE(paths.drain(1, false)) << "straight back, to standby";
  EXPECT_FALSE(paths.drain(1, false));
  using S = PathState;
  const std::vector<std::tuple<uint32_t, PathState, std::string>> want = {
      {0, S::kActive, ""},    {1, S::kStandby, ""}, {0, S::kFailed, "socket error"},
      {0, S::kProbation, ""}, {0, S::kActive, ""},  {1, S::kDrained, ""},
      {1, S::kStandby, ""}};
  EXPECT_EQ(notices.seen, want);
  EXPECT_EQ(paths.size(), 2u);
}

TEST(ChannelPathsTest, AFrameGoesToTheBestTierWithRoomAndWaitsRatherThanGoWorse) {
  const auto t0 = std::chrono::steady_clock::now();
  Notices notices;
  ChannelPaths paths({}, notices.hooks());
  TablePath a, b, standby;
  paths.add(&a, t0, false, false, false);
  paths.add(&b, t0, false, false, false);
  paths.add(&standby, t0, false, /*backup=*/true, false);
  a.backlog = 1000;
  EXPECT_EQ(paths.pick(100, false), 1u) << "the least backlog, neither measured";
  b.waiting = 1;  // settings' queue_bytes is 0: no room
  EXPECT_EQ(paths.pick(100, false), 0u);
  a.waiting = 1;
  EXPECT_EQ(paths.pick(100, false), kNoPath) << "the standby path is a worse tier";
  EXPECT_FALSE(paths.drain(0, true));
  EXPECT_FALSE(paths.drain(1, true));
  EXPECT_EQ(paths.pick(100, false), 2u) << "no active path: the standby one";
  EXPECT_EQ(paths.pick_control(), 1u) << "a drained path before a backup, the least backlog";
}

TEST(ChannelPathsTest, EachClassHasItsOwnPathsAndAcknowledgementsTakeTheLatencyPathFirst) {
  const auto t0 = std::chrono::steady_clock::now();
  Notices notices;
  ChannelPaths paths({}, notices.hooks());
  TablePath bulk, fast;
  paths.add(&bulk, t0, false, false, false);
  paths.add(&fast, t0, false, false, /*latency=*/true);
  fast.backlog = 1 << 20;
  EXPECT_TRUE(paths.classes_apart());
  EXPECT_EQ(paths.pick(100, true), 1u);
  EXPECT_EQ(paths.pick(100, false), 0u);
  EXPECT_EQ(paths.pick_control(), 1u) << "an active latency path first, whatever its backlog";
  EXPECT_TRUE(paths.latency(1));

  paths.queue_urgent(1, {.type = wire::FrameType::kAck}, 7);
  paths.abandon_other_copies(5, 1);
  ASSERT_EQ(fast.queued.size(), 1u);
  EXPECT_EQ(fast.queued[0].second, 7u);
  EXPECT_EQ(bulk.abandoned, std::vector<uint64_t>{5});
  EXPECT_TRUE(fast.abandoned.empty());

  paths.fail(1, "gone");
  EXPECT_FALSE(paths.classes_apart());
  EXPECT_EQ(paths.pick(100, true), 0u) << "no latency path: the others";
}

TEST(ChannelPathsTest, TimeHeldUpIsTakenOffEveryLivePathsSilence) {
  const auto t0 = std::chrono::steady_clock::now();
  Notices notices;
  ChannelPaths paths({.liveness = {.heartbeat_interval = 50ms}}, notices.hooks());
  TablePath a;
  paths.add(&a, t0, false, false, false);
  paths.begin_tick(t0);
  paths.begin_tick(t0 + 40ms);
  EXPECT_EQ(paths.last_heard(), t0) << "within a heartbeat interval: no stall";
  paths.begin_tick(t0 + 340ms);
  EXPECT_EQ(paths.last_heard(), t0 + 250ms);
}

}  // namespace
}  // namespace plexus::transports::channel_paths_test
