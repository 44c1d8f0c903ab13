// A communicator's topology on the wire (daemon/control/formed_message.h): what the root or
// a node passing it on writes reads back the same at a member, and every way a topology can
// be unusable to the member reading it is refused, saying which.
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
common::Result<TopologyMessage> round_trip(const TopologyMessage& t, uint64_t me, uint64_t sender,
                                           std::optional<int> nranks = std::nullopt) {
  capnp::MallocMessageBuilder message;
  auto f = message.initRoot<node_control::Formed>();
  write_formed(f, t);
  return read_formed(f.asReader(), me, sender, nranks);
}

TEST(FormedMessageTest, WhatIsWrittenReadsBackTheSame) {
  const TopologyMessage t = three_nodes();
  auto got = round_trip(t, 0xC, 0xB, 4);
  ASSERT_TRUE(got.ok()) << got.error();
  ASSERT_EQ(got->formed.nodes.size(), 3u);
  EXPECT_EQ(got->formed.nodes[1].name, "b");
  EXPECT_EQ(got->formed.nodes[1].addresses, t.formed.nodes[1].addresses);
  EXPECT_EQ(got->formed.rank_node, t.formed.rank_node);
  EXPECT_EQ(got->formed.algorithm, "ring");
  EXPECT_EQ(got->root, 0xAu);
  EXPECT_EQ(got->fanout, kFormedFanout);
  EXPECT_DOUBLE_EQ(got->cost.alpha_s, 30e-6);
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
      {"not for this node", [](TopologyMessage&) {}, 0xD, 0xB, "does not list this node"},
      {"root not listed", [](TopologyMessage& t) { t.root = 0xE; }, 0xC, 0xB,
       "does not list its root"},
      {"sender not a member", [](TopologyMessage&) {}, 0xC, 0xF, "the node that sent it"},
      {"fanout too wide", [](TopologyMessage& t) { t.fanout = kMaxFormedFanout + 1; }, 0xC, 0xB,
       "a fanout of 65"},
      {"a rank on no node", [](TopologyMessage& t) { t.formed.rank_node[3] = 7; }, 0xC, 0xB,
       "a rank on a node it does not list"},
      {"no ranks", [](TopologyMessage& t) { t.formed.rank_node.clear(); }, 0xC, 0xB,
       "places 0 ranks on 3 nodes"},
      {"unknown algorithm", [](TopologyMessage& t) { t.formed.algorithm = "warp"; }, 0xC, 0xB,
       "an unknown algorithm"},
  };
  for (const Case& c : cases) {
    TopologyMessage t = three_nodes();
    c.spoil(t);
    auto got = round_trip(t, c.me, c.sender);
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_NE(got.error().find(c.says), std::string::npos) << c.name << ": " << got.error();
  }
  auto wrong_size = round_trip(three_nodes(), 0xC, 0xB, 8);
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_NE(wrong_size.error().find("places 4 ranks, not 8"), std::string::npos)
      << wrong_size.error();
}

TEST(FormedMessageTest, ACostOutOfRangeIsReplacedByTheDefault) {
  TopologyMessage t = three_nodes();
  t.cost.beta_s_per_byte = -1;
  auto got = round_trip(t, 0xC, 0xB);
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_DOUBLE_EQ(got->cost.beta_s_per_byte, algo::LinkCost{}.beta_s_per_byte);
}

}  // namespace
}  // namespace plexus::daemon
