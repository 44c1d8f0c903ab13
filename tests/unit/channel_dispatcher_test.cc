// ChannelDispatcher: frames are numbered as they leave the scheduler, a failed path's frames
// go again on another, the peer's acknowledgements release them (and one of frames never
// sent is refused); without reliability a frame is done once written.
#include "transports/channel/channel_dispatcher.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace plexus::transports::channel_dispatcher_test {
namespace {

// A path that records the channel_seq and token of every data frame queued on it.
class RecordingPath : public FramePath {
 public:
  void queue(const wire::DataFrameHeader& header, std::span<const std::byte>,
             uint64_t token) override {
    frames.emplace_back(header.channel_seq, token);
  }
  uint64_t backlog_bytes() const override { return 1000 * frames.size(); }
  void abandon_placement_of(uint64_t) override {}

  std::vector<std::pair<uint64_t, uint64_t>> frames;  // channel_seq, path token (the same)
};

struct Sender {
  explicit Sender(bool reliable)
      : dispatcher(settings(reliable), hooks(), nullptr, paths, counters) {}
  static ChannelDispatcher::Settings settings(bool reliable) { return {.reliable = reliable}; }
  ChannelDispatcher::Hooks hooks() {
    return {
        .on_released = [this](uint64_t token,
                              uint32_t path) { released.emplace_back(token, path); },
        .on_resent = [this](uint32_t path, uint64_t bytes) { resent.emplace_back(path, bytes); }};
  }
  void send(uint64_t token) {
    wire::DataFrameHeader h;
    h.length = static_cast<uint32_t>(payload.size());
    dispatcher.send(h, payload, token, 0);
  }

  std::vector<std::pair<uint64_t, uint32_t>> released;  // token, path
  std::vector<std::pair<uint32_t, uint64_t>> resent;    // path, bytes
  std::vector<std::byte> payload = std::vector<std::byte>(100);
  ChannelCounters counters;
  ChannelPaths paths{{}, {}};
  ChannelDispatcher dispatcher;
};

wire::ChannelControl ack(uint64_t cumulative) { return {.acknowledged = cumulative}; }

TEST(ChannelDispatcherTest, FramesAreNumberedAsTheyLeaveAndAFailedPathsGoAgainUntilAcknowledged) {
  const auto t0 = std::chrono::steady_clock::now();
  Sender s(/*reliable=*/true);
  s.send(1);  // no path yet: it waits in the scheduler, unnumbered
  EXPECT_EQ(s.dispatcher.waiting(), 1u);
  EXPECT_TRUE(s.dispatcher.scheduled());
  RecordingPath a, b;
  s.paths.add(&a, t0, false, false, false);
  s.paths.add(&b, t0, false, false, false);
  EXPECT_TRUE(s.dispatcher.pump());
  s.send(2);
  EXPECT_EQ(s.dispatcher.waiting(), 0u);
  EXPECT_EQ(s.dispatcher.unacknowledged(), 2u);
  EXPECT_EQ(s.counters.frames_sent, 2u);
  // Striped: the second frame went where less waits.
  ASSERT_EQ(a.frames, (std::vector<std::pair<uint64_t, uint64_t>>{{1, 1}}));
  ASSERT_EQ(b.frames, (std::vector<std::pair<uint64_t, uint64_t>>{{2, 2}}));

  s.paths.fail(0, "killed");
  s.dispatcher.path_failed(0);
  EXPECT_EQ(s.dispatcher.waiting(), 1u);
  EXPECT_TRUE(s.dispatcher.pump());
  EXPECT_EQ(s.counters.frames_resent, 1u);
  EXPECT_EQ(s.counters.bytes_resent, 100u);
  EXPECT_EQ(s.resent, (std::vector<std::pair<uint32_t, uint64_t>>{{1, 100}}));
  EXPECT_EQ(b.frames.back(), (std::pair<uint64_t, uint64_t>{1, 1})) << "the same number again";

  EXPECT_EQ(s.dispatcher.acknowledge(ack(2)), "");
  EXPECT_EQ(s.released.size(), 2u);
  EXPECT_EQ(s.dispatcher.unacknowledged(), 0u);
  EXPECT_NE(s.dispatcher.acknowledge(ack(3)), "") << "frame 3 was never sent";
}

TEST(ChannelDispatcherTest, WithoutReliabilityAFrameCarriesNoNumberAndIsDoneOnceWritten) {
  const auto t0 = std::chrono::steady_clock::now();
  Sender s(/*reliable=*/false);
  RecordingPath a;
  s.paths.add(&a, t0, false, false, false);
  s.send(7);
  ASSERT_EQ(a.frames.size(), 1u);
  EXPECT_EQ(a.frames[0], (std::pair<uint64_t, uint64_t>{0, 7}));
  EXPECT_TRUE(s.released.empty());
  s.dispatcher.written(7, 0);
  EXPECT_EQ(s.released, (std::vector<std::pair<uint64_t, uint32_t>>{{7, 0}}));

  s.paths.fail(0, "gone");
  s.send(8);  // no path: lost, as on a broken TCP connection
  EXPECT_EQ(s.released.back(), (std::pair<uint64_t, uint32_t>{8, kNoPath}));
}

}  // namespace
}  // namespace plexus::transports::channel_dispatcher_test
