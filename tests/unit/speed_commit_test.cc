// The speed-agreement commit between daemons on the wire: what one node writes, every other
// reads back exactly; what does not fit the format is refused with its sizes.
#include "transports/wire/speed_commit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace plexus::transports::wire {
namespace {

using ::testing::HasSubstr;

TEST(SpeedCommitTest, ACommitReadsBackExactlyPaddedToWholeWords) {
  const SpeedCommit commit{
      uint64_t{1} << 40 | 7, 45'000'000, {64, 37, 64, 0, 65535}, "node n3 is slow"};
  const std::vector<std::byte> bytes = encode_speed_commit(commit);
  EXPECT_EQ(bytes.size() % 8, 0u);
  EXPECT_EQ(bytes.size(), 48u);       // 20 + 5 * 2 + 15, padded
  EXPECT_EQ(bytes[0], std::byte{7});  // little-endian
  const common::Result<SpeedCommit> decoded = decode_speed_commit(bytes, 5);
  ASSERT_TRUE(decoded.ok()) << decoded.error();
  const SpeedCommit& read = *decoded;
  EXPECT_EQ(read.first_op, commit.first_op);
  EXPECT_EQ(read.reference, commit.reference);
  EXPECT_EQ(read.speeds, commit.speeds);
  EXPECT_EQ(read.reason, commit.reason);
}

TEST(SpeedCommitTest, AReasonTooLongIsCutToTheLargestCommit) {
  const SpeedCommit commit{1, 2, {64, 32}, std::string(10000, 'x')};
  const std::vector<std::byte> bytes = encode_speed_commit(commit);
  EXPECT_EQ(bytes.size(), kMaxSpeedCommitBytes);
  const common::Result<SpeedCommit> read = decode_speed_commit(bytes, 2);
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->reason, std::string(kMaxSpeedCommitBytes - kSpeedCommitFixedBytes - 4, 'x'));
}

TEST(SpeedCommitTest, WhatDoesNotFitTheFormatIsRefusedWithItsSizes) {
  std::vector<std::byte> bytes = encode_speed_commit(SpeedCommit{1, 2, {64, 32, 16}, ""});
  EXPECT_THAT(decode_speed_commit(std::span(bytes).first(12), 3).error(),
              HasSubstr("12 bytes, not 20 to 4096"));
  EXPECT_THAT(decode_speed_commit(bytes, 2).error(), HasSubstr("3 speeds do not fit it (2 nodes"));
  bytes[16] = std::byte{200};  // a count past the payload
  EXPECT_THAT(decode_speed_commit(bytes, 1000).error(), HasSubstr("200 speeds do not fit"));
  std::vector<std::byte> huge(kMaxSpeedCommitBytes + 8);
  EXPECT_THAT(decode_speed_commit(huge, 3).error(), HasSubstr("not 20 to 4096"));
  EXPECT_FALSE(decode_speed_commit(huge, 3).ok()) << "a refused commit holds nothing";
}

}  // namespace
}  // namespace plexus::transports::wire
