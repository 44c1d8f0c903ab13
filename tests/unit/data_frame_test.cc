// The data frame header: round trip, and every invalid field refused with its name.
#include "transports/wire/data_frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>

namespace plexus::transports::wire {
namespace {

using ::testing::HasSubstr;
using Bytes = std::array<std::byte, kDataFrameHeaderBytes>;

DataFrameHeader sample() {
  DataFrameHeader h;
  h.type = FrameType::kData;
  h.length = 4096;
  h.comm_id = 0x0123456789ABCDEFull;
  h.op_seq = 77;
  h.step = 3;
  h.chunk = 9;
  h.offset = 9ull * 4096;
  h.channel_seq = 1ull << 40;
  return h;
}

Bytes encode(const DataFrameHeader& h) {
  Bytes b;
  encode_data_frame_header(h, b);
  return b;
}

TEST(DataFrameTest, RoundTripsEveryField) {
  const DataFrameHeader h = sample();
  const DecodedHeader d = decode_data_frame_header(encode(h), {});
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.header.type, h.type);
  EXPECT_EQ(d.header.length, h.length);
  EXPECT_EQ(d.header.comm_id, h.comm_id);
  EXPECT_EQ(d.header.op_seq, h.op_seq);
  EXPECT_EQ(d.header.step, h.step);
  EXPECT_EQ(d.header.chunk, h.chunk);
  EXPECT_EQ(d.header.offset, h.offset);
  EXPECT_EQ(d.header.channel_seq, h.channel_seq);
}

TEST(DataFrameTest, IsLittleEndianOnTheWire) {
  const Bytes b = encode(sample());
  EXPECT_EQ(b[0], std::byte{0x50});
  EXPECT_EQ(b[1], std::byte{0x58});
  EXPECT_EQ(b[8], std::byte{0xEF});  // comm_id's low byte first
}

TEST(DataFrameTest, EveryBadFieldIsRefusedByName) {
  Bytes b = encode(sample());
  b[0] = std::byte{0};
  EXPECT_THAT(decode_data_frame_header(b, {}).error, HasSubstr("bad magic"));
  b = encode(sample());
  b[2] = std::byte{7};
  EXPECT_THAT(decode_data_frame_header(b, {}).error, HasSubstr("version 7"));
  b = encode(sample());
  b[3] = std::byte{9};
  EXPECT_THAT(decode_data_frame_header(b, {}).error, HasSubstr("unknown type 9"));
  DataFrameHeader h = sample();
  h.length = 5u << 20;
  EXPECT_THAT(decode_data_frame_header(encode(h), {}).error,
              HasSubstr("payload length 5242880 exceeds the limit 4194304"));
  h = sample();
  h.type = FrameType::kAck;
  EXPECT_THAT(decode_data_frame_header(encode(h), {}).error, HasSubstr("ack frame carries 4096"));
  h = sample();
  h.offset = UINT64_MAX - 10;
  EXPECT_THAT(decode_data_frame_header(encode(h), {}).error, HasSubstr("overflows"));
}

}  // namespace
}  // namespace plexus::transports::wire
