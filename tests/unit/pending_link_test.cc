// Paths on first use (PeerLinks::want): a link made before it has a path holds what is sent
// to it until the first path comes, then delivers it, with channel acknowledgements on or off;
// with no path by its deadline, or when its connection cannot be opened, it is lost naming
// why; and a link that exists is not made again.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "daemon/links/message_sender.h"
#include "tests/unit/peer_links_pair.h"
#include "tests/unit/sender_side.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {
namespace {

using Clock = transports::ReliableChannel::Clock;
namespace wire = transports::wire;
constexpr uint32_t kChunk = test::SenderSide::kChunk;
using Side = test::SenderSide;

void sent_before_the_path_arrives_after_it(bool reliable) {
  Side a(reliable);
  Side b(reliable);
  ASSERT_TRUE(a.links.want(2, "b", Clock::now() + std::chrono::seconds(30)));
  EXPECT_FALSE(a.links.want(2, "b", Clock::now() + std::chrono::seconds(30)));  // one link
  std::vector<std::byte> data(2 * kChunk + 100, std::byte{3});
  int done = 0;
  ASSERT_TRUE(a.sender.send_message(2, 7, 4, 9, data, nullptr, [&done] { ++done; }));
  ASSERT_TRUE(a.sender.send_marker(2, 7, 4, 10, 0, 0, nullptr));
  for (int i = 0; i < 3; ++i) {  // no path: nothing moves, nothing is lost
    a.links.tick(Clock::now());
    a.links.poll(1);
  }
  EXPECT_EQ(done, 0);
  EXPECT_TRUE(a.lost.empty());
  test::connect_pair(a, b);  // the first path joins the waiting link
  ASSERT_TRUE(test::pump_pair(a, b, [&] { return done > 0 && b.frames.size() == 4; }));
  EXPECT_EQ(done, 1);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(b.frames[i].offset, uint64_t{i} * kChunk);
  EXPECT_EQ(b.frames[3].step, 10u);
  EXPECT_TRUE(a.lost.empty());
  EXPECT_TRUE(b.lost.empty());
}

TEST(PendingLinkTest, WhatIsSentBeforeThePathArrivesAfterIt) {
  sent_before_the_path_arrives_after_it(true);
}

TEST(PendingLinkTest, WhatIsSentBeforeThePathArrivesAfterItWithoutAcknowledgements) {
  sent_before_the_path_arrives_after_it(false);
}

TEST(PendingLinkTest, NoPathByTheDeadlineLosesTheLink) {
  Side a;
  const auto now = Clock::now();
  ASSERT_TRUE(a.links.want(2, "b", now + std::chrono::milliseconds(100)));
  a.links.tick(now + std::chrono::milliseconds(99));
  EXPECT_TRUE(a.lost.empty());
  EXPECT_TRUE(a.links.has(2));
  a.links.tick(now + std::chrono::milliseconds(100));
  ASSERT_EQ(a.lost.size(), 1u);
  EXPECT_EQ(a.lost[0], "2: no data connection to node b opened in time");
  EXPECT_FALSE(a.links.has(2));
}

TEST(PendingLinkTest, AConnectionThatCannotBeOpenedLosesTheWaitingLinkOnly) {
  Side a;
  Side b;
  ASSERT_TRUE(a.links.want(3, "c", Clock::now() + std::chrono::seconds(30)));
  a.links.open_failed(3, "connect to 198.18.0.3:7355: refused");
  ASSERT_EQ(a.lost.size(), 1u);
  EXPECT_EQ(a.lost[0],
            "3: cannot open a data connection to node c: connect to 198.18.0.3:7355: refused");
  // A link with a path keeps its own watch: a failed extra dial does not lose it.
  test::connect_pair(a, b);
  a.links.open_failed(2, "connect to 198.18.0.2:7355: refused");
  EXPECT_TRUE(a.links.has(2));
  EXPECT_EQ(a.lost.size(), 1u);
}

}  // namespace
}  // namespace plexus::daemon
