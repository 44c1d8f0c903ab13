// ChannelDelivery: every numbered frame is delivered once, a fenced one only after every
// frame numbered before it, a latency path's frame is acknowledged on its own, and a frame
// placed on one path has its other copies abandoned.
#include "transports/channel/channel_delivery.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "transports/channel/channel_sender.h"

namespace plexus::transports::channel_delivery_test {
namespace {

// What the delivery handed on: channel_seq of each frame, in order, and the copies abandoned.
struct Receiver {
  std::vector<uint64_t> delivered;
  std::vector<std::pair<uint64_t, uint32_t>> abandoned;  // seq, except_path
  std::vector<std::byte> destination = std::vector<std::byte>(4096);
  ChannelCounters counters;
  ChannelDelivery delivery{
      {.on_frame =
           [this](const wire::DataFrameHeader& h, std::span<const std::byte>) {
             delivered.push_back(h.channel_seq);
             return std::string();
           },
       .place =
           [this](const wire::DataFrameHeader&) {
             return Placement{destination, nullptr};
           },
       .on_placed =
           [this](const wire::DataFrameHeader& h) {
             delivered.push_back(h.channel_seq);
             return std::string();
           },
       .abandon_other_copies = [this](uint64_t seq,
                                      uint32_t except) { abandoned.emplace_back(seq, except); }},
      counters};
};

wire::DataFrameHeader frame(uint64_t seq, uint32_t length = 10,
                            wire::FrameType type = wire::FrameType::kData) {
  wire::DataFrameHeader h;
  h.type = type;
  h.length = length;
  h.channel_seq = seq;
  return h;
}

TEST(ChannelDeliveryTest, DeliversOnceAndHoldsAFencedFrameUntilEveryEarlierOneIsIn) {
  Receiver r;
  EXPECT_EQ(r.delivery.receive(frame(1), {}, false), "");
  EXPECT_EQ(r.delivery.receive(frame(3, 0), {}, false), "") << "zero-length: fenced";
  EXPECT_EQ(r.delivery.receive(frame(4, 0, wire::FrameType::kAbort), {}, false), "");
  EXPECT_EQ(r.delivery.receive(frame(3, 0), {}, false), "");
  EXPECT_EQ(r.delivery.receive(frame(1), {}, false), "");
  EXPECT_EQ(r.counters.duplicates_dropped, 2u);
  EXPECT_EQ(r.delivered, std::vector<uint64_t>{1});
  EXPECT_EQ(r.delivery.receive(frame(2), {}, false), "");
  EXPECT_EQ(r.delivered, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(r.abandoned, (std::vector<std::pair<uint64_t, uint32_t>>{{1, kNoPath}, {2, kNoPath}}));
  EXPECT_EQ(r.delivery.take_ack(nullptr), 4u);
  EXPECT_FALSE(r.delivery.ack_due());

  EXPECT_EQ(r.delivery.receive(frame(5 + kChannelWindowFrames), {}, false),
            "frame 65541 is outside the channel window (every frame up to 4 has arrived)");
  EXPECT_EQ(r.delivery.receive(frame(0), {}, false), "") << "a peer without reliability";
  EXPECT_EQ(r.delivered.back(), 0u);
}

TEST(ChannelDeliveryTest, ALatencyPathsFrameIsAcknowledgedWithoutWaitingForEarlierOnes) {
  Receiver r;
  EXPECT_EQ(r.delivery.receive(frame(3), {}, /*latency_path=*/true), "");
  ASSERT_TRUE(r.delivery.ack_due());
  ChannelReceiver::Range selective;
  EXPECT_EQ(r.delivery.take_ack(&selective), 0u);
  EXPECT_EQ(selective.first, 3u);
  EXPECT_EQ(selective.last, 3u);
}

TEST(ChannelDeliveryTest, AFramePlacedOnOnePathAbandonsItsOtherCopiesAndTheirFinishIsDropped) {
  Receiver r;
  const Placement where = r.delivery.place(frame(1, 4096));
  EXPECT_EQ(where.destination.size(), 4096u);
  EXPECT_EQ(r.delivery.placed(frame(1, 4096), 2, false), "");
  EXPECT_EQ(r.abandoned, (std::vector<std::pair<uint64_t, uint32_t>>{{1, 2}}));
  EXPECT_EQ(r.delivery.place(frame(1, 4096)).destination.data(), nullptr) << "a duplicate";
  EXPECT_EQ(r.delivery.placed(frame(1, 4096), 0, false), "");
  EXPECT_EQ(r.counters.duplicates_dropped, 1u);
  EXPECT_EQ(r.delivered, std::vector<uint64_t>{1});
  EXPECT_EQ(r.delivery.place(frame(2, 0)).destination.data(), nullptr) << "fenced: received";
}

// A placed frame whose op failed (its placement abandoned by its owner) still counts as
// received: the cumulative acknowledgement goes past it, a fenced frame behind it is
// delivered, and its copy sent again is a duplicate. Without this, the sender's window
// would stall behind it.
TEST(ChannelDeliveryTest, AFrameWhosePlacementItsOwnerAbandonedIsReceivedButNotDelivered) {
  Receiver r;
  EXPECT_EQ(r.delivery.place(frame(1, 4096)).destination.size(), 4096u);
  EXPECT_EQ(r.delivery.receive(frame(2, 0), {}, false), "") << "fenced behind 1";
  EXPECT_TRUE(r.delivered.empty());
  EXPECT_EQ(r.delivery.discarded(frame(1, 4096), 3, false), "");
  EXPECT_EQ(r.delivered, std::vector<uint64_t>{2}) << "1 delivered nowhere, 2 no longer held";
  EXPECT_EQ(r.abandoned, (std::vector<std::pair<uint64_t, uint32_t>>{{1, 3}}));
  EXPECT_EQ(r.delivery.take_ack(nullptr), 2u);
  EXPECT_EQ(r.delivery.receive(frame(1, 4096), {}, false), "");
  EXPECT_EQ(r.counters.duplicates_dropped, 1u) << "its copy from another path";
  EXPECT_EQ(r.delivery.discarded(frame(1, 4096), 0, false), "") << "a second end: nothing";
  EXPECT_EQ(r.delivered, std::vector<uint64_t>{2});
}

}  // namespace
}  // namespace plexus::transports::channel_delivery_test
