// The nodes' speed agreement (daemon/engine/speed_agreement.h): a change proposed by the
// leader only for a steady, large enough difference; every node holds until it is
// committed; it applies from an op no node had started, the same op on every node; and
// messages out of protocol are refused with a reason.
#include "daemon/engine/speed_agreement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace plexus::daemon {
namespace {

using Kind = SpeedAgreement::Kind;
using Message = SpeedAgreement::Message;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

const std::vector<std::string> kNames = {"n0", "n1", "n2"};
const SpeedAgreement::Settings kSettings{};

SpeedAgreement::TimePoint at(int ms) {
  return SpeedAgreement::TimePoint{} + milliseconds(1000 + ms);
}

// The messages `from` sends, as their receivers see them.
Message arriving(Message m, int from) {
  m.node = from;
  return m;
}

TEST(SpeedAgreementTest, AlikeNodesAndNoiseProposeNothing) {
  SpeedAgreement leader(3, 0, kSettings);
  EXPECT_TRUE(leader.leader());
  // Within 25 % of the median (and unknown ones) are alike.
  for (int t = 0; t < 2000; t += 100) {
    EXPECT_TRUE(leader.measured(std::vector<double>{100, 80, 0}, kNames, 0, at(t)).empty());
  }
  EXPECT_TRUE(leader.may_start());
  EXPECT_TRUE(leader.speeds_for(0).empty());
  EXPECT_TRUE(leader.speeds_of(std::vector<double>{0, 0, 0}).empty());
  // Speeds are of the median node's figure; slow ones snap to 64ths, exact on every node.
  EXPECT_EQ(leader.speeds_of(std::vector<double>{100, 104, 26}),
            (std::vector<double>{1.0, 1.0, 16.0 / 64}));
  EXPECT_EQ(leader.speeds_of(std::vector<double>{100, 50, 26}),
            (std::vector<double>{1.0, 1.0, 33.0 / 64}));
  // One node reading high makes no other node slow (against the fastest, all three would be).
  EXPECT_DOUBLE_EQ(SpeedAgreement::reference_of(std::vector<double>{100, 170, 96, 0, 98}), 100);
  EXPECT_TRUE(leader.speeds_of(std::vector<double>{100, 170, 96}).empty());
}

TEST(SpeedAgreementTest, ASteadyChangeIsCommittedFromAnOpNoNodeStartedTheSameOnEveryNode) {
  SpeedAgreement leader(3, 0, kSettings);
  SpeedAgreement n1(3, 1, kSettings);
  SpeedAgreement n2(3, 2, kSettings);
  const std::vector<double> bw = {100, 100, 50};
  // Seen once: not yet (the measure must hold for steady_for).
  EXPECT_TRUE(leader.measured(bw, kNames, 4, at(0)).empty());
  const int steady = static_cast<int>(kSettings.steady_for.count());
  EXPECT_TRUE(leader.measured(bw, kNames, 4, at(steady - 1)).empty());
  const auto proposals = leader.measured(bw, kNames, 4, at(steady));
  ASSERT_EQ(proposals.size(), 2u);
  EXPECT_EQ(proposals[0].kind, Kind::kPropose);
  EXPECT_EQ(proposals[0].node, 1);
  EXPECT_EQ(proposals[1].node, 2);
  EXPECT_FALSE(leader.may_start());  // the leader holds too
  EXPECT_EQ(leader.waiting_for(), (std::vector<int>{1, 2}));
  // Bandwidths for the wrong number of nodes: nothing.
  EXPECT_TRUE(
      SpeedAgreement(3, 0, kSettings).measured(std::vector<double>{1}, kNames, 0, at(0)).empty());
  // Node 1 is ahead (its first op not started is 6), node 2 behind (3).
  const auto ready1 = n1.receive(arriving(proposals[0], 0), 6);
  ASSERT_EQ(ready1.error(), "");
  ASSERT_EQ(ready1->size(), 1u);
  EXPECT_EQ((*ready1)[0].kind, Kind::kReady);
  EXPECT_EQ((*ready1)[0].seq, 6u);
  EXPECT_FALSE(n1.may_start());
  const auto ready2 = n2.receive(arriving(proposals[1], 0), 3);
  ASSERT_EQ(ready2.error(), "");
  EXPECT_FALSE(n2.may_start());
  const auto answered = leader.receive(arriving((*ready1)[0], 1), 4);
  ASSERT_EQ(answered.error(), "");
  EXPECT_TRUE(answered->empty());  // one answer of two
  EXPECT_EQ(leader.waiting_for(), (std::vector<int>{2}));
  EXPECT_EQ(n1.waiting_for(), (std::vector<int>{0}));
  EXPECT_FALSE(leader.may_start());
  const auto commits = leader.receive(arriving((*ready2)[0], 2), 4);
  ASSERT_EQ(commits.error(), "");
  ASSERT_EQ(commits->size(), 2u);
  EXPECT_EQ((*commits)[0].kind, Kind::kCommit);
  EXPECT_EQ((*commits)[0].seq, 6u);  // the largest first-unstarted op
  EXPECT_TRUE(leader.may_start());
  const auto event = leader.take_committed();
  ASSERT_TRUE(event.has_value());
  EXPECT_THAT(event->reason, HasSubstr("node n2 runs at"));
  EXPECT_FALSE(leader.take_committed().has_value());  // taken once
  const auto committed1 = n1.receive(arriving((*commits)[0], 0), 6);
  ASSERT_EQ(committed1.error(), "");
  EXPECT_TRUE(committed1->empty());
  const auto committed2 = n2.receive(arriving((*commits)[1], 0), 3);
  ASSERT_EQ(committed2.error(), "");
  EXPECT_TRUE(committed2->empty());
  EXPECT_TRUE(n1.may_start());
  EXPECT_TRUE(n2.may_start());
  ASSERT_TRUE(n2.take_committed().has_value());
  // Every node: ops before 6 alike, from 6 on node 2 at half speed.
  for (SpeedAgreement* node : {&leader, &n1, &n2}) {
    if (node != &n1) {
      EXPECT_TRUE(node->speeds_for(4).empty());
    }
    EXPECT_EQ(node->speeds_for(6), (std::vector<double>{1.0, 1.0, 0.5}));
    EXPECT_EQ(node->speeds_for(9), (std::vector<double>{1.0, 1.0, 0.5}));
  }
  // Steady again: nothing more. Alike again, steadily: a change back.
  EXPECT_TRUE(leader.measured(bw, kNames, 10, at(5000)).empty());
  // Agreed slow, a node is alike again only above recovered_above (0.9 for 0.75): at 0.8 it
  // is still slow, at its new speed.
  EXPECT_DOUBLE_EQ(leader.recovered_above(), 0.9);
  EXPECT_EQ(leader.speeds_of(std::vector<double>{100, 100, 80}),
            (std::vector<double>{1.0, 1.0, 51.0 / 64}));
  EXPECT_TRUE(leader.speeds_of(std::vector<double>{100, 100, 92}).empty());
  EXPECT_TRUE(leader.measured(std::vector<double>{100, 100, 95}, kNames, 10, at(6000)).empty());
  const auto back =
      leader.measured(std::vector<double>{100, 100, 95}, kNames, 10, at(6000 + steady));
  EXPECT_EQ(back.size(), 2u);
}

TEST(SpeedAgreementTest, AFlickerShorterThanSteadyForProposesNothing) {
  SpeedAgreement leader(2, 0, kSettings);
  for (int t = 0; t < 10000; t += 100) {
    // Slow every other look: never steady.
    const double b = (t / 100) % 2 == 0 ? 40 : 100;
    EXPECT_TRUE(leader.measured(std::vector<double>{100, b}, kNames, 0, at(t)).empty()) << t;
  }
}

TEST(SpeedAgreementTest, MessagesOutOfProtocolAreRefusedWithAReason) {
  SpeedAgreement leader(3, 0, kSettings);
  SpeedAgreement n1(3, 1, kSettings);
  // An answer to no proposal.
  EXPECT_THAT(leader.receive(Message{1, Kind::kReady, 1, 0, {}, {}}, 0).error(),
              HasSubstr("no speed proposal"));
  // A commit nobody asked about.
  EXPECT_THAT(n1.receive(Message{0, Kind::kCommit, 1, 0, {1.0, 0.5, 1.0}, "x"}, 0).error(),
              HasSubstr("not asked"));
  // A proposal from a node that does not lead.
  EXPECT_THAT(n1.receive(Message{2, Kind::kPropose, 1, 0, {}, {}}, 0).error(),
              HasSubstr("does not lead"));
  // A commit from before an op this node started, with bad speeds, for too many nodes.
  const auto ready = n1.receive(Message{0, Kind::kPropose, 7, 0, {}, {}}, 5);
  ASSERT_EQ(ready.error(), "");
  ASSERT_EQ(ready->size(), 1u);
  EXPECT_THAT(n1.receive(Message{0, Kind::kCommit, 7, 4, {1.0, 0.5, 1.0}, "x"}, 5).error(),
              HasSubstr("already started"));
  EXPECT_THAT(n1.receive(Message{0, Kind::kCommit, 7, 5, {1.0, 1.5, 1.0}, "x"}, 5).error(),
              HasSubstr("outside (0, 1]"));
  EXPECT_THAT(n1.receive(Message{0, Kind::kCommit, 7, 5, {1.0, 1.0, 1.0, 0.5}, "x"}, 5).error(),
              HasSubstr("for 4 nodes"));
  EXPECT_THAT(n1.receive(Message{0, Kind::kCommit, 8, 5, {1.0, 0.5, 1.0}, "x"}, 5).error(),
              HasSubstr("not asked"));  // another generation
  EXPECT_THAT(n1.receive(Message{0, Kind::kCommit, 7, 5, {1.0, 0.5, 1.0}, "x", 1e300}, 5).error(),
              HasSubstr("bandwidth outside"));
  EXPECT_THAT(n1.receive(Message{0, static_cast<Kind>(9), 7, 5, {}, {}}, 5).error(),
              HasSubstr("unknown kind 9"));
  EXPECT_FALSE(n1.may_start());  // still held: the valid commit has not come
}

}  // namespace
}  // namespace plexus::daemon
