// Messages into frames (daemon/links/message_sender.h), between two PeerLinks over loopback
// TCP: a message is cut into chunk_bytes chunks (no rate measured yet) with their offsets and
// its `done` runs once, after the last; a marker carries the caller's chunk and offset; a
// notice is cut to kMaxAbortReasonBytes; with no link nothing is sent.
#include "daemon/links/message_sender.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/unit/peer_links_pair.h"
#include "tests/unit/sender_side.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {
namespace {

using Clock = transports::ReliableChannel::Clock;
namespace wire = transports::wire;
constexpr uint32_t kChunk = test::SenderSide::kChunk;
using test::SenderSide;

TEST(MessageSenderTest, AMessageIsCutIntoChunksAndItsDoneRunsOnceAfterTheLast) {
  SenderSide a;
  SenderSide b;
  test::connect_pair(a, b);
  std::vector<std::byte> data(2 * kChunk + 100, std::byte{3});
  int done = 0;
  a.sender.set_comm_flow(7, 1);
  ASSERT_TRUE(a.sender.send_message(2, 7, 4, 9, data, nullptr, [&done] { ++done; }));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return done > 0 && b.frames.size() == 3; }));
  EXPECT_EQ(done, 1);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b.frames[i].type, wire::FrameType::kData);
    EXPECT_EQ(b.frames[i].comm_id, 7u);
    EXPECT_EQ(b.frames[i].op_seq, 4u);
    EXPECT_EQ(b.frames[i].step, 9u);
    EXPECT_EQ(b.frames[i].chunk, i);
    EXPECT_EQ(b.frames[i].offset, uint64_t{i} * kChunk);
    EXPECT_EQ(b.frames[i].length, i < 2 ? kChunk : 100u);
  }
}

TEST(MessageSenderTest, AMarkerCarriesTheCallersChunkAndOffset) {
  SenderSide a;
  SenderSide b;
  test::connect_pair(a, b);
  bool done = false;
  ASSERT_TRUE(a.sender.send_marker(2, 7, 4, 9, 12345, 6, [&done] { done = true; }));
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return done && !b.frames.empty(); }));
  EXPECT_EQ(b.frames[0].chunk, 6u);
  EXPECT_EQ(b.frames[0].offset, 12345u);
  EXPECT_EQ(b.frames[0].length, 0u);
}

TEST(MessageSenderTest, ANoticeIsCutToItsLimit) {
  SenderSide a;
  SenderSide b;
  test::connect_pair(a, b);
  const std::string reason(wire::kMaxAbortReasonBytes + 50, 'x');
  a.sender.send_notice(2, wire::make_departed({.comm_id = 7, .rank = 3, .collectives = 11}),
                       reason);
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return !b.frames.empty(); }));
  EXPECT_EQ(b.frames[0].type, wire::FrameType::kDeparted);
  const wire::Departed departed = wire::read_departed(b.frames[0]);
  EXPECT_EQ(departed.comm_id, 7u);
  EXPECT_EQ(departed.rank, 3u);
  EXPECT_EQ(departed.collectives, 11u);
  EXPECT_EQ(b.text, reason.substr(0, wire::kMaxAbortReasonBytes));
}

TEST(MessageSenderTest, WithNoLinkNothingIsSentOrCalled) {
  SenderSide a;
  bool done = false;
  std::vector<std::byte> data(10);
  EXPECT_FALSE(a.sender.send_message(2, 7, 0, 0, data, nullptr, [&done] { done = true; }));
  EXPECT_FALSE(a.sender.send_marker(2, 7, 0, 0, 0, 0, [&done] { done = true; }));
  a.sender.send_notice(2, wire::make_abort(7, 0), "why");
  EXPECT_FALSE(done);
}

}  // namespace
}  // namespace plexus::daemon
