// The root daemon's multi-node rendezvous: forming, node order, conflicts, timeouts that
// name the missing ranks and the nodes that came, a node that goes away, a node that
// refuses its part (draining), each failure's code; and the code a peer's JoinFailed
// reaches the ranks with (join_failure.h).
#include "daemon/control/node_rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "daemon/control/join_failure.h"

namespace plexus::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using Clock = NodeRendezvous::Clock;

const CommToken kToken{1, 2, 3};

NodeRendezvous::Join join(uint64_t id, const char* name, std::vector<int> ranks,
                          Clock::time_point deadline = Clock::now() + std::chrono::hours(1)) {
  return {NodeInfo{id, name, {std::string(name) + ":7470"}}, std::move(ranks), deadline};
}

TEST(NodeRendezvousTest, FormsWhenEveryRankIsPresentAndNumbersNodesByLowestRank) {
  NodeRendezvous r;
  // Placement 2+1+3, interleaved, joining in a scrambled order and in several parts.
  EXPECT_EQ(r.join(kToken, 6, join(30, "c", {5})).outcome, NodeRendezvous::Result::kWaiting);
  EXPECT_EQ(r.join(kToken, 6, join(10, "a", {1, 3})).outcome, NodeRendezvous::Result::kWaiting);
  EXPECT_EQ(r.join(kToken, 6, join(30, "c", {2, 4})).outcome, NodeRendezvous::Result::kWaiting);
  auto result = r.join(kToken, 6, join(20, "b", {0}));
  ASSERT_EQ(result.outcome, NodeRendezvous::Result::kFormed) << result.error;
  ASSERT_EQ(result.formed.nodes.size(), 3u);
  EXPECT_EQ(result.formed.nodes[0].name, "b");  // holds rank 0
  EXPECT_EQ(result.formed.nodes[1].name, "a");  // rank 1
  EXPECT_EQ(result.formed.nodes[2].name, "c");  // rank 2
  EXPECT_THAT(result.formed.rank_node, ElementsAre(0, 1, 2, 1, 2, 2));
  EXPECT_THAT(result.notify, UnorderedElementsAre(10u, 20u, 30u));
  EXPECT_EQ(r.pending(), 0u);
}

TEST(NodeRendezvousTest, ConflictsRejectNamingNodesAndRanks) {
  NodeRendezvous r;
  r.join(kToken, 4, join(10, "a", {0, 1}));
  auto twice = r.join(kToken, 4, join(20, "b", {1}));
  EXPECT_EQ(twice.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_EQ(twice.error, "rank 1 joined twice: on node a and on node b");
  EXPECT_EQ(twice.code, PLEXUS_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(twice.notify, UnorderedElementsAre(10u, 20u));

  r.join(kToken, 4, join(10, "a", {0}));
  auto size = r.join(kToken, 8, join(20, "b", {2}));
  EXPECT_EQ(size.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_EQ(size.code, PLEXUS_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(size.error, HasSubstr("node b says the communicator has 8 ranks"));

  auto range = r.join(kToken, 4, join(20, "b", {4}));
  EXPECT_THAT(range.error, HasSubstr("registered rank 4, outside 0..3"));
  EXPECT_EQ(r.pending(), 0u);
}

TEST(NodeRendezvousTest, TimeoutNamesMissingRanksAndTheNodesThatJoined) {
  NodeRendezvous r;
  const auto now = Clock::now();
  r.join(kToken, 6, join(10, "a", {0, 1}, now + std::chrono::seconds(5)));
  r.join(kToken, 6, join(20, "b", {3}, now + std::chrono::seconds(2)));
  EXPECT_EQ(r.next_deadline(), now + std::chrono::seconds(2));
  EXPECT_TRUE(r.expire(now + std::chrono::seconds(1)).empty());
  auto failures = r.expire(now + std::chrono::seconds(2));
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].message,
            "communicator init timed out: rank(s) 2,4,5 of 6 never joined; joined: node a "
            "(rank(s) 0,1), node b (rank(s) 3)");
  EXPECT_EQ(failures[0].code, PLEXUS_ERR_TIMEOUT);
  EXPECT_THAT(failures[0].notify, UnorderedElementsAre(10u, 20u));
  EXPECT_EQ(r.pending(), 0u);
}

TEST(NodeRendezvousTest, ANodeThatGoesAwayFailsItsRendezvousForTheOthers) {
  NodeRendezvous r;
  r.join(kToken, 3, join(10, "a", {0}));
  r.join(kToken, 3, join(20, "b", {1}));
  const CommToken other{9};
  r.join(other, 2, join(10, "a", {0}));
  auto failures = r.drop_node(20);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].message, "node b went away while communicator init was under way");
  EXPECT_EQ(failures[0].code, PLEXUS_ERR_PEER_LOST);
  EXPECT_THAT(failures[0].notify, ElementsAre(10u));
  EXPECT_EQ(r.pending(), 1u);  // the other communicator is untouched
}

TEST(NodeRendezvousTest, ANodeThatRefusesItsPartFailsItForTheOthersAndForLaterJoins) {
  NodeRendezvous r;
  r.join(kToken, 3, join(10, "a", {0}));
  r.join(kToken, 3, join(20, "b", {1}));
  // Node c is draining: the nodes that joined fail at once, named by the message.
  auto failure = r.refuse(kToken, PLEXUS_ERR_DAEMON_UNAVAILABLE, "node c is draining");
  ASSERT_TRUE(failure.has_value());
  EXPECT_THAT(failure->notify, UnorderedElementsAre(10u, 20u));
  EXPECT_EQ(failure->message, "node c is draining");
  EXPECT_EQ(failure->code, PLEXUS_ERR_DAEMON_UNAVAILABLE);
  EXPECT_EQ(r.pending(), 0u);
  // A node joining after the refusal is refused too, not left to wait out its timeout.
  auto late = r.join(kToken, 3, join(10, "a", {2}));
  EXPECT_EQ(late.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_EQ(late.error, "node c is draining");
  EXPECT_EQ(late.code, PLEXUS_ERR_DAEMON_UNAVAILABLE);
  EXPECT_THAT(late.notify, ElementsAre(10u));
  // Refused before anyone joined: nothing to fail yet, the first join is refused.
  const CommToken other{9, 9, 9};
  EXPECT_FALSE(r.refuse(other, PLEXUS_ERR_DAEMON_UNAVAILABLE, "node d is draining").has_value());
  EXPECT_EQ(r.join(other, 2, join(10, "a", {0})).error, "node d is draining");
}

TEST(JoinFailureCodeTest, APeersCodeIsTakenOnlyWhenAFailedJoinCanMeanIt) {
  EXPECT_EQ(join_failure_code(PLEXUS_ERR_TIMEOUT, "x"), PLEXUS_ERR_TIMEOUT);
  EXPECT_EQ(join_failure_code(PLEXUS_ERR_PEER_LOST, "x"), PLEXUS_ERR_PEER_LOST);
  EXPECT_EQ(join_failure_code(PLEXUS_ERR_DAEMON_UNAVAILABLE, "x"), PLEXUS_ERR_DAEMON_UNAVAILABLE);
  EXPECT_EQ(join_failure_code(PLEXUS_ERR_MISMATCH, "x"), PLEXUS_ERR_MISMATCH);
  // Codes that would blame the rank's own daemon, and values no daemon sends: hostile.
  for (uint32_t wire :
       {uint32_t{PLEXUS_ERR_DAEMON_LOST}, uint32_t{PLEXUS_ERR_VERSION},
        uint32_t{PLEXUS_ERR_PROTOCOL}, uint32_t{PLEXUS_ERR_NO_MEMORY}, 13u, 0xffffffffu}) {
    EXPECT_EQ(join_failure_code(wire, "communicator init timed out"), PLEXUS_ERR_INVALID_ARGUMENT)
        << wire;
  }
  // 0: a daemon from before the field; its sentence says which.
  EXPECT_EQ(join_failure_code(0, "communicator init timed out: rank(s) 2 of 3 never joined"),
            PLEXUS_ERR_TIMEOUT);
  EXPECT_EQ(join_failure_code(0, "node b is draining (plexusctl node drain)"),
            PLEXUS_ERR_DAEMON_UNAVAILABLE);
  EXPECT_EQ(join_failure_code(0, "rank 1 joined twice"), PLEXUS_ERR_INVALID_ARGUMENT);
}

// A shrink's successor: of a parent with ranks 0 on node a (10), 1 on b (20), 2..3 on c (30)
// and 4 elsewhere, without `excluded`.
NodeRendezvous::Successor successor(std::vector<int> excluded) {
  NodeRendezvous::Successor s;
  s.parent = CommToken{7, 7};
  s.excluded = std::move(excluded);
  const std::vector<std::pair<uint64_t, int>> placed = {{10, 0}, {20, 1}, {30, 2}, {30, 3}};
  int next = 0;
  for (int r = 0; r < 5; ++r) {
    const bool kept = std::find(s.excluded.begin(), s.excluded.end(), r) == s.excluded.end();
    if (!kept) continue;
    for (const auto& [node, rank] : placed) {
      if (rank != r) continue;
      auto& entry = s.expected[node];
      entry.name = node == 10 ? "a" : node == 20 ? "b" : "c";
      entry.parent_ranks.push_back(r);
      entry.ranks.push_back(next);
    }
    ++next;
  }
  return s;
}

TEST(NodeRendezvousTest, ASuccessorFailsAtOnceWhenANodeItWaitsForIsLostEvenBeforeItJoined) {
  NodeRendezvous r;
  const auto s = successor({4});
  EXPECT_FALSE(r.involves(30));
  EXPECT_EQ(r.join(kToken, 4, join(10, "a", {0}), &s).outcome, NodeRendezvous::Result::kWaiting);
  EXPECT_TRUE(r.involves(30)) << "expected, so its control connection stays open";
  auto failures = r.drop_node(30);  // c never joined
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].code, PLEXUS_ERR_PEER_LOST);
  EXPECT_THAT(failures[0].message, HasSubstr("node c was lost during the shrink"));
  EXPECT_THAT(failures[0].message, HasSubstr("rank(s) 2,3"));
  EXPECT_THAT(failures[0].notify, ElementsAre(10u));
  // A node that joins it later hears the same at once, not at its timeout.
  auto late = r.join(kToken, 4, join(20, "b", {1}), &s);
  EXPECT_EQ(late.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_EQ(late.code, PLEXUS_ERR_PEER_LOST);
  EXPECT_THAT(late.error, HasSubstr("node c was lost"));
}

TEST(NodeRendezvousTest, TwoSuccessorsOfOneParentAtOnceFailBothAsAMismatchNamingTheLists) {
  NodeRendezvous r;
  const auto first = successor({4});
  const auto second = successor({1, 4});
  const CommToken other{5, 5};
  EXPECT_EQ(r.join(kToken, 4, join(20, "b", {1}), &first).outcome,
            NodeRendezvous::Result::kWaiting);
  auto result = r.join(other, 3, join(30, "c", {1, 2}), &second);
  ASSERT_EQ(result.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_EQ(result.code, PLEXUS_ERR_MISMATCH);
  EXPECT_THAT(result.error, HasSubstr("disagree on whom to exclude"));
  EXPECT_THAT(result.error, HasSubstr("[1,4]"));
  EXPECT_THAT(result.notify, ElementsAre(30u));
  ASSERT_TRUE(result.other.has_value());
  EXPECT_EQ(result.other->token, kToken);
  EXPECT_THAT(result.other->notify, ElementsAre(20u));
  EXPECT_EQ(r.pending(), 0u);
  // A rank still on its way with either list is refused at once, not left waiting for ranks
  // that heard.
  EXPECT_TRUE(r.refused(kToken));
  EXPECT_TRUE(r.refused(other));
  EXPECT_EQ(r.join(kToken, 4, join(10, "a", {0}), &first).code, PLEXUS_ERR_MISMATCH);
}

TEST(NodeRendezvousTest, ASuccessorThatTimedOutRefusesALateJoinAndANodeJoinsOnlyAsItsOwnRanks) {
  NodeRendezvous r;
  const auto s = successor({4});
  const auto soon = Clock::now() + std::chrono::milliseconds(10);
  EXPECT_EQ(r.join(kToken, 4, join(10, "a", {0}, soon), &s).outcome,
            NodeRendezvous::Result::kWaiting);
  auto wrong = r.join(kToken, 4, join(20, "b", {2}), &s);  // rank 2 is node c's
  EXPECT_EQ(wrong.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_THAT(wrong.error, HasSubstr("another node's"));
  EXPECT_EQ(r.join(kToken, 4, join(10, "a", {0}, soon), &s).outcome,
            NodeRendezvous::Result::kWaiting);
  auto expired = r.expire(soon + std::chrono::seconds(1));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].code, PLEXUS_ERR_TIMEOUT);
  auto late = r.join(kToken, 4, join(30, "c", {2, 3}), &s);
  EXPECT_EQ(late.outcome, NodeRendezvous::Result::kRejected) << "a straggler waits no more";
  EXPECT_EQ(late.code, PLEXUS_ERR_TIMEOUT);
}

TEST(NodeRendezvousTest, ANodeWithNoKeptRankOrAUniqueIdJoinInASuccessorIsRefused) {
  NodeRendezvous r;
  const auto s = successor({4});
  auto stranger = r.join(kToken, 4, join(40, "d", {0}), &s);
  EXPECT_EQ(stranger.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_THAT(stranger.error, HasSubstr("holds no rank the shrink"));
  EXPECT_EQ(r.join(kToken, 4, join(10, "a", {0}), &s).outcome, NodeRendezvous::Result::kWaiting);
  auto plain = r.join(kToken, 4, join(20, "b", {1}));
  EXPECT_EQ(plain.outcome, NodeRendezvous::Result::kRejected);
  EXPECT_THAT(plain.error, HasSubstr("with a unique id"));
}

}  // namespace
}  // namespace plexus::daemon
