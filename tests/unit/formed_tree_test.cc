// The tree a communicator's topology goes down (daemon/control/formed_tree.h): every node is
// reached exactly once whatever the root's place, also from a root that holds no rank; no node
// sends to more than `fanout`; the depth is log_fanout N; and each node's ancestors are the
// chain of parents up to the root.
#include "daemon/control/formed_tree.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <deque>
#include <vector>

namespace plexus::daemon {
namespace {

// Walks the tree from the root: how many times each node is reached, and the deepest level.
struct Walk {
  std::vector<int> reached;
  int depth = 0;
};
Walk walk(size_t nodes, size_t root, uint32_t fanout) {
  Walk w{std::vector<int>(root == nodes ? nodes + 1 : nodes, 0), 0};
  std::deque<std::pair<size_t, int>> queue{{root, 0}};
  w.reached[root] = 1;
  while (!queue.empty()) {
    auto [node, level] = queue.front();
    queue.pop_front();
    w.depth = std::max(w.depth, level);
    for (size_t child : formed_children(nodes, root, node, fanout)) {
      ++w.reached[child];
      queue.push_back({child, level + 1});
    }
  }
  return w;
}

TEST(FormedTreeTest, EveryNodeIsReachedOnceWhereverTheRootIs) {
  for (size_t nodes : {1u, 2u, 3u, 8u, 9u, 64u, 100u, 4096u}) {
    // The root among the nodes, or not listed (index `nodes`: it holds no rank).
    for (size_t root : {size_t{0}, nodes / 2, nodes - 1, nodes}) {
      const size_t everyone = root == nodes ? nodes + 1 : nodes;
      const Walk w = walk(nodes, root, kFormedFanout);
      for (size_t n = 0; n < everyone; ++n) {
        EXPECT_EQ(w.reached[n], 1) << nodes << " nodes, root " << root << ", node " << n;
        EXPECT_LE(formed_children(nodes, root, n, kFormedFanout).size(), kFormedFanout);
      }
    }
  }
}

TEST(FormedTreeTest, TheDepthIsLogOfTheFanout) {
  EXPECT_EQ(walk(8, 0, 8).depth, 1);
  EXPECT_EQ(walk(9, 3, 8).depth, 1) << "the root and 8 below it";
  EXPECT_EQ(walk(10, 3, 8).depth, 2);
  EXPECT_EQ(walk(64, 0, 8).depth, 2);
  EXPECT_EQ(walk(4096, 17, 8).depth, 4);
}

TEST(FormedTreeTest, AncestorsAreTheParentsUpToTheRoot) {
  // 10 nodes, root at index 4, fanout 2: places 0:4 1:0 2:1 3:2 4:3 5:5 ... (index by place).
  EXPECT_EQ(formed_children(10, 4, 4, 2), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(formed_children(10, 4, 0, 2), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(formed_ancestors(10, 4, 3, 2), (std::vector<size_t>{0, 4}));
  EXPECT_EQ(formed_ancestors(10, 4, 0, 2), (std::vector<size_t>{4}));
  EXPECT_TRUE(formed_ancestors(10, 4, 4, 2).empty()) << "the root has none";
  EXPECT_TRUE(formed_children(4, 7, 1, 8).empty()) << "a root past the end: nothing";
  EXPECT_TRUE(formed_children(4, 2, 1, 0).empty()) << "no fanout: nothing";
}

}  // namespace
}  // namespace plexus::daemon
