// A communicator's topology on the wire (daemon/control/formed_message.h): what the root or
// a node passing it on writes reads back the same at a member (from its parent, from a node
// further up, from a root that holds no rank), and every way a topology can be unusable is
// refused, saying which: to pass on, or only to this node's ranks.
#include "daemon/control/formed_message.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "daemon/control/formed_tree.h"

namespace plexus::daemon {
namespace {

TopologyMessage three_nodes() {
  TopologyMessage t;
  t.formed.nodes = {{0xA, "a", {"198.18.0.1:7355"}},
                    {0xB, "b", {"198.18.0.2:7355", "198.18.1.2:7355"}},
                    {0xC, "c", {"198.18.0.3:7355"}}};
  t.formed.rank_node = {0, 1, 1, 2};
  t.formed.algorithm = "ring";
  t.cost = algo::LinkCost{30e-6, 1e-9};
  t.root = 0xA;
  t.fanout = kFormedFanout;
  return t;
}

// `t` written, then read at node `me` as sent by `sender`.
common::Result<TopologyMessage> round_trip(const TopologyMessage& t, uint64_t me, uint64_t sender) {
  capnp::MallocMessageBuilder message;
  auto f = message.initRoot<node_control::Formed>();
  write_formed(f, t);
  return read_formed(f.asReader(), me, sender);
}

TEST(FormedMessageTest, WhatIsWrittenReadsBackTheSame) {
  const TopologyMessage t = three_nodes();
  auto got = round_trip(t, 0xC, 0xA);
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_EQ(local_problem(*got, 4), "");
  ASSERT_EQ(got->formed.nodes.size(), 3u);
  EXPECT_EQ(got->formed.nodes[1].name, "b");
  EXPECT_EQ(got->formed.nodes[1].addresses, t.formed.nodes[1].addresses);
  EXPECT_EQ(got->formed.rank_node, t.formed.rank_node);
  EXPECT_EQ(got->formed.algorithm, "ring");
  EXPECT_EQ(got->root, 0xAu);
  EXPECT_EQ(got->fanout, kFormedFanout);
  EXPECT_DOUBLE_EQ(got->cost.alpha_s, 30e-6);
}

TEST(FormedMessageTest, ItMayComeFromAnyNodeAboveAndFromARootThatHoldsNoRank) {
  // Ten nodes under root 0xA0 at fanout 2: place 1 is 0xA1, its children places 3 and 4.
  TopologyMessage t;
  for (uint64_t n = 0; n < 10; ++n) t.formed.nodes.push_back({0xA0 + n, "n", {"x:1"}});
  for (int n = 0; n < 10; ++n) t.formed.rank_node.push_back(n);
  t.root = 0xA0;
  t.fanout = 2;
  EXPECT_TRUE(round_trip(t, 0xA3, 0xA1).ok()) << "from its parent";
  EXPECT_TRUE(round_trip(t, 0xA3, 0xA0).ok()) << "from the root, which took a lost parent's place";
  auto sideways = round_trip(t, 0xA3, 0xA4);
  ASSERT_FALSE(sideways.ok()) << "from a node beside it";
  EXPECT_NE(sideways.error().find("not above this one"), std::string::npos) << sideways.error();
  t.root = 0xFF;  // a root that holds no rank: place 0, the listed nodes below it
  EXPECT_TRUE(round_trip(t, 0xA0, 0xFF).ok()) << "the first listed node is the root's child";
  EXPECT_TRUE(round_trip(t, 0xA3, 0xA0).ok()) << "0xA3 is at place 4 now, below 0xA0";
  EXPECT_FALSE(round_trip(t, 0xA1, 0xA0).ok()) << "0xA0 and 0xA1 are both the root's children";
}

TEST(FormedMessageTest, AnUnusableTopologyIsRefusedSayingWhy) {
  struct Case {
    const char* name;
    std::function<void(TopologyMessage&)> spoil;
    uint64_t me;
    uint64_t sender;
    const char* says;
  };
  const Case cases[] = {
      {"not for this node", [](TopologyMessage&) {}, 0xD, 0xA, "does not list this node"},
      {"a stranger sent it", [](TopologyMessage&) {}, 0xC, 0xF, "not above this one"},
      {"a node listed twice", [](TopologyMessage& t) { t.formed.nodes[1].instance_id = 0xC; }, 0xC,
       0xA, "lists a node twice"},
      {"fanout too wide", [](TopologyMessage& t) { t.fanout = kMaxFormedFanout + 1; }, 0xC, 0xA,
       "a fanout of 65"},
      {"fanout zero", [](TopologyMessage& t) { t.fanout = 0; }, 0xC, 0xA, "a fanout of 0"},
      {"a rank on no node", [](TopologyMessage& t) { t.formed.rank_node[3] = 7; }, 0xC, 0xA,
       "a rank on a node it does not list"},
      {"no ranks", [](TopologyMessage& t) { t.formed.rank_node.clear(); }, 0xC, 0xA,
       "places 0 ranks on 3 nodes"},
  };
  for (const Case& c : cases) {
    TopologyMessage t = three_nodes();
    c.spoil(t);
    auto got = round_trip(t, c.me, c.sender);
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_NE(got.error().find(c.says), std::string::npos) << c.name << ": " << got.error();
  }
}

TEST(FormedMessageTest, WhatOnlyThisNodesRanksRelyOnIsCheckedApart) {
  TopologyMessage t = three_nodes();
  t.formed.algorithm = "warp";
  auto got = round_trip(t, 0xC, 0xA);
  ASSERT_TRUE(got.ok()) << "passed on all the same: " << got.error();
  EXPECT_NE(local_problem(*got, std::nullopt).find("an unknown algorithm (warp)"),
            std::string::npos);
  EXPECT_EQ(local_problem(three_nodes(), 8), "it places 4 ranks, not 8");
  EXPECT_EQ(local_problem(three_nodes(), std::nullopt), "") << "no ranks of its own wait";
}

TEST(FormedMessageTest, ACostOutOfRangeIsReplacedByTheDefault) {
  TopologyMessage t = three_nodes();
  t.cost.beta_s_per_byte = -1;
  auto got = round_trip(t, 0xC, 0xA);
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_DOUBLE_EQ(got->cost.beta_s_per_byte, algo::LinkCost{}.beta_s_per_byte);
}

}  // namespace
}  // namespace plexus::daemon
