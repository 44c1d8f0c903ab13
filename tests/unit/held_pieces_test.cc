// Pieces ahead of their slice: held in arrival order, handed over per slice, counted per
// sender, and bounded.
#include "daemon/internode/held_pieces.h"

#include <gtest/gtest.h>

namespace plexus::daemon {
namespace {

std::vector<std::byte> bytes(size_t n, uint8_t value) {
  return std::vector<std::byte>(n, std::byte{value});
}

TEST(HeldPiecesTest, PiecesAreHandedOverPerSliceInArrivalOrderAndCountedPerSender) {
  HeldPieces held;
  EXPECT_EQ(held.hold(1, 3, 0, 64, bytes(8, 1)), "");
  EXPECT_EQ(held.hold(2, 4, 1, 0, bytes(16, 2)), "");
  EXPECT_EQ(held.hold(1, 3, 0, 0, bytes(4, 3)), "");
  EXPECT_EQ(held.bytes_from(1), 12u);
  EXPECT_EQ(held.bytes_from(2), 16u);
  EXPECT_EQ(held.bytes_from(0), 0u);
  std::vector<HeldPieces::Piece> three = held.take(3);
  ASSERT_EQ(three.size(), 2u);
  EXPECT_EQ(three[0].offset, 64u);
  EXPECT_EQ(three[0].data, bytes(8, 1));
  EXPECT_EQ(three[1].offset, 0u);
  EXPECT_EQ(three[1].node, 1);
  EXPECT_EQ(three[1].message, 0u);
  EXPECT_TRUE(held.take(3).empty()) << "handed over once";
  EXPECT_EQ(held.bytes_from(1), 0u);
  EXPECT_EQ(held.take(4).size(), 1u);
}

TEST(HeldPiecesTest, MoreThanTheLimitAheadIsRefusedAndTakingMakesRoom) {
  HeldPieces held;
  const std::vector<std::byte> big(kMaxHeldSliceBytes / 2);
  EXPECT_EQ(held.hold(1, 5, 0, 0, big), "");
  EXPECT_EQ(held.hold(1, 6, 0, 0, big), "");
  EXPECT_EQ(held.hold(1, 7, 0, 0, bytes(1, 0)), "more than 1 GiB of data ahead of this node");
  EXPECT_EQ(held.bytes_from(1), kMaxHeldSliceBytes) << "the refused piece is not held";
  held.take(5);
  EXPECT_EQ(held.hold(1, 7, 0, 0, bytes(1, 0)), "");
}

}  // namespace
}  // namespace plexus::daemon
