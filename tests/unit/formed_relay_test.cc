// What a node keeps of the topologies it passed on (daemon/control/formed_relay.h): a node it
// sent one to that is lost has its children sent it from here, once, and theirs if one of them
// is lost too; a topology kept past its deadline, or one that never went to the lost node, is
// not sent; a token comes through once.
#include "daemon/control/formed_relay.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace plexus::daemon {
namespace {

using namespace std::chrono_literals;

// 20 nodes 0xA0.., root 0xA0 (index 0), fanout 2: index i at place i; children 2i+1, 2i+2.
TopologyMessage twenty() {
  TopologyMessage t;
  for (uint64_t n = 0; n < 20; ++n) t.formed.nodes.push_back({0xA0 + n, "n", {"x:1"}});
  t.root = 0xA0;
  t.fanout = 2;
  return t;
}

TEST(FormedRelayTest, ALostChildsChildrenAreSentItFromHereOnce) {
  FormedRelay relay;
  const CommToken token{1};
  const auto now = FormedRelay::Clock::now();
  relay.passed_on(token, twenty(), {1, 2}, now + 10s);  // the root sent it to 1 and 2
  EXPECT_TRUE(relay.lost(0xB3, now).empty()) << "never sent to index 19";
  auto first = relay.lost(0xA1, now);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].to, (std::vector<size_t>{3, 4}));
  EXPECT_TRUE(relay.lost(0xA1, now).empty()) << "once";
  auto deeper = relay.lost(0xA3, now);
  ASSERT_EQ(deeper.size(), 1u) << "3 was sent it from here: its children too";
  EXPECT_EQ(deeper[0].to, (std::vector<size_t>{7, 8}));
  EXPECT_EQ(deeper[0].message.formed.nodes.size(), 20u);
}

TEST(FormedRelayTest, AKeptTopologyGoesAtItsDeadlineAndATokenComesThroughOnce) {
  FormedRelay relay;
  const CommToken token{2};
  const auto now = FormedRelay::Clock::now();
  relay.passed_on(token, twenty(), {1, 2}, now + 1s);
  EXPECT_TRUE(relay.lost(0xA1, now + 2s).empty()) << "past its deadline";
  EXPECT_EQ(relay.kept(), 0u);
  EXPECT_FALSE(relay.seen_before(token));
  EXPECT_TRUE(relay.seen_before(token));
  for (size_t i = 0; i < FormedRelay::kSeen; ++i) {
    relay.seen_before(CommToken{3, static_cast<uint8_t>(i), static_cast<uint8_t>(i >> 8)});
  }
  EXPECT_FALSE(relay.seen_before(token)) << "the oldest of the bounded set went";
}

}  // namespace
}  // namespace plexus::daemon
