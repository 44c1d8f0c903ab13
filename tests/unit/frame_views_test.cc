// The typed views of a data frame's header (transports/wire/frame_views.h): each kind's
// fields survive the wire (encode, decode) as the view wrote them, and the family bits of a
// data frame's op_seq are told apart in one order.
#include "transports/wire/frame_views.h"

#include <gtest/gtest.h>

#include <array>
#include <limits>

namespace plexus::transports::wire {
namespace {

DataFrameHeader over_the_wire(const DataFrameHeader& h) {
  std::array<std::byte, kDataFrameHeaderBytes> bytes{};
  encode_data_frame_header(h, bytes);
  const DecodedHeader decoded = decode_data_frame_header(bytes, DataFrameLimits{});
  EXPECT_TRUE(decoded.ok()) << decoded.error;
  return decoded.header;
}

TEST(FrameViewsTest, DataFamiliesAreToldApartByTheTopBitsPointToPointFirst) {
  EXPECT_EQ(data_family(0), DataFamily::kCollective);
  EXPECT_EQ(data_family((uint64_t{1} << 62) - 1), DataFamily::kCollective);
  EXPECT_EQ(data_family(point_to_point_op_seq(0)), DataFamily::kPointToPoint);
  EXPECT_EQ(data_family(speed_op_seq(7)), DataFamily::kSpeed);
  // Both bits: a weight relay's version (a point-to-point message number stays below 2^62).
  EXPECT_EQ(data_family(kPointToPointBit | kSpeedBit), DataFamily::kWeights);
  EXPECT_EQ(data_family(weights_op_seq(3)), DataFamily::kWeights);
  EXPECT_EQ(weights_version(weights_op_seq(12345)), 12345u);
  EXPECT_EQ(data_family(point_to_point_op_seq((uint64_t{1} << 62) - 1)), DataFamily::kPointToPoint);
  EXPECT_EQ(speed_generation(speed_op_seq(12345)), 12345u);
  const WeightsRange r = read_weights_range(weights_range_step(4095, 77));
  EXPECT_EQ(r.shard, 4095u);
  EXPECT_EQ(r.range, 77u);
}

TEST(FrameViewsTest, ADataFrameNamesItsCommunicatorOpAndStep) {
  const DataFrameHeader h =
      over_the_wire(make_data(0x1234, 99, encode_collective_step({.slice = 2, .message = 5})));
  EXPECT_EQ(h.type, FrameType::kData);
  EXPECT_EQ(h.comm_id, 0x1234u);
  EXPECT_EQ(h.op_seq, 99u);
  EXPECT_EQ(decode_collective_step(h.step).slice, 2u);
  EXPECT_EQ(decode_collective_step(h.step).message, 5u);
}

TEST(FrameViewsTest, ACollectiveStepHoldsItsSliceAndMessage) {
  const CollectiveStep s = decode_collective_step(encode_collective_step({77, 4095}));
  EXPECT_EQ(s.slice, 77u);
  EXPECT_EQ(s.message, 4095u);
  const CollectiveStep last =
      decode_collective_step(encode_collective_step({kMaxSlices - 1, kMaxMessagesPerSlice - 1}));
  EXPECT_EQ(last.slice, kMaxSlices - 1);
  EXPECT_EQ(last.message, kMaxMessagesPerSlice - 1);
}

TEST(FrameViewsTest, APointToPointFrameNamesItsMessageSourceAndDestination) {
  DataFrameHeader h;
  h.op_seq = point_to_point_op_seq(41);
  h.step = point_to_point_step(65535, 3);
  h.chunk = kPointToPointEndChunk;
  const PointToPointTag tag = read_point_to_point(over_the_wire(h));
  EXPECT_EQ(tag.message, 41u);
  EXPECT_EQ(tag.source, 65535u);
  EXPECT_EQ(tag.destination, 3u);
}

TEST(FrameViewsTest, APointToPointEndMarkerCarriesTheTagLittleEndian) {
  for (int32_t tag : {0, 1, -1, 0x12345678, std::numeric_limits<int32_t>::min()}) {
    const auto bytes = encode_point_to_point_end(tag);
    EXPECT_EQ(decode_point_to_point_end(bytes), tag) << tag;
  }
  const auto bytes = encode_point_to_point_end(0x01020304);
  EXPECT_EQ(bytes[0], std::byte{4});
  EXPECT_EQ(bytes[3], std::byte{1});
}

TEST(FrameViewsTest, AnAcknowledgementCarriesIncarnationCumulativePointAndRun) {
  const ChannelControl sent{0xabcdef0123456789ull, 100, 104, 110};
  const DataFrameHeader h = over_the_wire(make_channel_control(FrameType::kAck, sent));
  EXPECT_EQ(h.type, FrameType::kAck);
  EXPECT_TRUE(is_channel_control(h));
  const ChannelControl got = read_channel_control(h);
  EXPECT_EQ(got.incarnation, sent.incarnation);
  EXPECT_EQ(got.acknowledged, 100u);
  EXPECT_EQ(got.run_first, 104u);
  EXPECT_EQ(got.run_last, 110u);
  EXPECT_TRUE(is_channel_control(make_channel_control(FrameType::kHeartbeat, {})));
  EXPECT_FALSE(is_channel_control(make_abort(1, 0)));
}

TEST(FrameViewsTest, DepartedAbortPathNoticeAndNodeRateKeepTheirFields) {
  const Departed d = read_departed(over_the_wire(make_departed({9, 5, 1234})));
  EXPECT_EQ(d.comm_id, 9u);
  EXPECT_EQ(d.rank, 5u);
  EXPECT_EQ(d.collectives, 1234u);
  const DataFrameHeader abort = over_the_wire(make_abort(77, 13));
  EXPECT_EQ(abort.type, FrameType::kAbort);
  EXPECT_EQ(abort.comm_id, 77u);
  EXPECT_EQ(abort.step, 13u);  // the code its ranks fail with

  const PathNoticeFrame n =
      read_path_notice(over_the_wire(make_path_notice({PathNotice::kDrained, 0x1111, 0x2222})));
  EXPECT_EQ(n.what, PathNotice::kDrained);
  EXPECT_EQ(n.from, 0x1111u);
  EXPECT_EQ(n.to, 0x2222u);

  const DataFrameHeader rate = over_the_wire(make_node_rate(12'500'000'000ull));
  EXPECT_EQ(rate.type, FrameType::kNodeRate);
  EXPECT_EQ(read_node_rate(rate), 12'500'000'000ull);
}

}  // namespace
}  // namespace plexus::transports::wire
