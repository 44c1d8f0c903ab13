// A communicator's successor (daemon/control/comm_successor.h): the same token from the
// same parent and exclude list on every daemon, another for another list; dense new ranks;
// exclude lists that cannot be, named; who must join and where they meet.
#include "daemon/control/comm_successor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace plexus::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Ranks 0,1 on node a (0xA), 2 on b (0xB), 3,4 on c (0xC).
std::shared_ptr<Comm> five_ranks_on_three_nodes() {
  NodeSpan span;
  span.topology.node_names = {"a", "b", "c"};
  span.topology.rank_node = {0, 0, 1, 2, 2};
  span.topology.finish();
  span.node_ids = {0xA, 0xB, 0xC};
  span.node_addresses = {{"a:1"}, {"b:1"}, {"c:1"}};
  return std::make_shared<Comm>(CommToken{9, 8, 7}, std::vector<Comm::Member>(5), span);
}

TEST(CommSuccessorTest, TheTokenFollowsFromTheParentAndTheExcludedRanksAlone) {
  const CommToken parent{1, 2, 3};
  EXPECT_EQ(successor_token(parent, {2}), successor_token(parent, {2}));
  EXPECT_NE(successor_token(parent, {2}), successor_token(parent, {3}));
  EXPECT_NE(successor_token(parent, {2}), successor_token(parent, {2, 3}));
  EXPECT_NE(successor_token(parent, {}), parent);
  EXPECT_NE(successor_token(parent, {2}), successor_token(CommToken{1, 2, 4}, {2}));
  // The successor's successor is another communicator again.
  EXPECT_NE(successor_token(successor_token(parent, {}), {}), successor_token(parent, {}));
}

TEST(CommSuccessorTest, EachGrowthHasATokenOfItsOwnThatNoShrinkHas) {
  const CommToken parent{1, 2, 3};
  EXPECT_EQ(growth_token(parent, 0), growth_token(parent, 0));
  EXPECT_NE(growth_token(parent, 0), growth_token(parent, 1));
  EXPECT_NE(growth_token(parent, 0), successor_token(parent, {}));
  EXPECT_NE(growth_token(parent, 0), growth_token(CommToken{1, 2, 4}, 0));
}

TEST(CommSuccessorTest, RanksAreRenumberedDenselyInTheirOrder) {
  const std::vector<int> excluded = {1, 3};
  EXPECT_EQ(successor_rank(excluded, 0), 0);
  EXPECT_EQ(successor_rank(excluded, 2), 1);
  EXPECT_EQ(successor_rank(excluded, 4), 2);
  EXPECT_EQ(successor_rank({}, 4), 4);
}

TEST(CommSuccessorTest, ExcludeListsThatCannotBeAreNamed) {
  EXPECT_EQ(exclude_problem({1, 3}, 5, 0), "");
  EXPECT_THAT(exclude_problem({0, 1, 2}, 3, -1), HasSubstr("none would be left"));
  EXPECT_THAT(exclude_problem({5}, 5, 0), HasSubstr("outside 0..4"));
  EXPECT_THAT(exclude_problem({-1}, 5, 0), HasSubstr("outside 0..4"));
  EXPECT_THAT(exclude_problem({3, 1}, 5, 0), HasSubstr("ascending"));
  EXPECT_THAT(exclude_problem({1, 1}, 5, 0), HasSubstr("distinct"));
  EXPECT_THAT(exclude_problem({2}, 5, 2), HasSubstr("excludes itself"));
}

TEST(CommSuccessorTest, EveryNodeWithAKeptRankMustJoinAndTheyMeetAtTheLowestKeptRanksNode) {
  auto parent = five_ranks_on_three_nodes();
  auto successor = successor_of(*parent, {0, 1, 3});
  EXPECT_EQ(successor.parent, parent->token());
  ASSERT_EQ(successor.expected.size(), 2u) << "node a keeps no rank";
  EXPECT_EQ(successor.expected.at(0xB).name, "b");
  EXPECT_THAT(successor.expected.at(0xB).parent_ranks, ElementsAre(2));
  EXPECT_THAT(successor.expected.at(0xC).parent_ranks, ElementsAre(4));
  EXPECT_EQ(successor_root(*parent, {0, 1, 3}), 1u) << "rank 2's node, b";
  EXPECT_EQ(successor_root(*parent, {}), 0u);
  EXPECT_EQ(successor_root(*parent, {0, 1, 2}), 2u);
}

}  // namespace
}  // namespace plexus::daemon
