// The chunks not yet released (daemon/links/chunk_tokens.h): a token's memory is held until it
// is released, its `done` is handed back rather than run, tokens are reused, and a lost
// peer's chunks let their memory go without running anything.
#include "daemon/links/chunk_tokens.h"

#include <gtest/gtest.h>

#include <memory>

namespace plexus::daemon {
namespace {

using Clock = transports::ReliableChannel::Clock;

TEST(ChunkTokensTest, AReleasedChunkLetsItsMemoryGoAndHandsBackItsDone) {
  ChunkTokens tokens;
  auto memory = std::make_shared<int>(7);
  int done = 0;
  const auto now = Clock::now();
  const uint64_t token = tokens.take(
      3, memory, [&done] { ++done; }, now);
  EXPECT_EQ(memory.use_count(), 2);
  ChunkTokens::Released released = tokens.release(token);
  EXPECT_EQ(memory.use_count(), 1);
  EXPECT_EQ(released.peer, 3u);
  EXPECT_EQ(released.sent_at, now);
  EXPECT_EQ(done, 0);  // the caller runs it
  ASSERT_TRUE(released.done);
  released.done();
  EXPECT_EQ(done, 1);
  // The token is free again.
  EXPECT_EQ(tokens.take(4, nullptr, nullptr, now), token);
}

TEST(ChunkTokensTest, ALostPeersChunksLetTheirMemoryGoWithoutRunningAnything) {
  ChunkTokens tokens;
  auto lost = std::make_shared<int>(1);
  auto kept = std::make_shared<int>(2);
  int done = 0;
  const auto now = Clock::now();
  tokens.take(
      1, lost, [&done] { ++done; }, now);
  const uint64_t other = tokens.take(
      2, kept, [&done] { ++done; }, now);
  tokens.take(
      1, lost, [&done] { ++done; }, now);
  tokens.drop_peer(1);
  EXPECT_EQ(lost.use_count(), 1);
  EXPECT_EQ(kept.use_count(), 2);
  EXPECT_EQ(done, 0);
  ChunkTokens::Released released = tokens.release(other);
  EXPECT_EQ(released.peer, 2u);
  released.done();
  EXPECT_EQ(done, 1);
  // Both of peer 1's tokens and peer 2's are free: three takes need no new one.
  EXPECT_LT(tokens.take(5, nullptr, nullptr, now), 3u);
  EXPECT_LT(tokens.take(5, nullptr, nullptr, now), 3u);
  EXPECT_LT(tokens.take(5, nullptr, nullptr, now), 3u);
  EXPECT_EQ(tokens.take(5, nullptr, nullptr, now), 3u);
}

}  // namespace
}  // namespace plexus::daemon
