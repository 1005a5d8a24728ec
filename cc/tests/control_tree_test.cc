#include "transport/control_tree.h"

#include <gtest/gtest.h>

#include <set>

namespace tfring {
namespace {

TEST(ControlTreeTest, FanoutZeroOrLargeIsTheStarAroundRankZero) {
  for (int fanout : {0, 5, 100}) {
    ControlTree root(0, 6, fanout);
    EXPECT_EQ(root.children(), (std::vector<int>{1, 2, 3, 4, 5})) << fanout;
    EXPECT_EQ(ControlTree(4, 6, fanout).neighbours(), (std::vector<int>{0})) << fanout;
    EXPECT_EQ(root.depth(), 1);
  }
  EXPECT_TRUE(ControlTree(0, 1, 4).neighbours().empty());
  EXPECT_EQ(ControlTree(0, 1, 4).depth(), 0);
}

TEST(ControlTreeTest, AFanoutOfTwoIsABinaryHeap) {
  ControlTree t(1, 7, 2);
  EXPECT_EQ(t.parent(), 0);
  EXPECT_EQ(t.children(), (std::vector<int>{3, 4}));
  EXPECT_EQ(t.neighbours(), (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(t.SubtreeOf(1), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(t.SubtreeOf(2), (std::vector<int>{2, 5, 6}));
  EXPECT_EQ(t.ParentOf(6), 2);
  EXPECT_TRUE(t.IsNeighbour(0));
  EXPECT_TRUE(t.IsNeighbour(4));
  EXPECT_FALSE(t.IsNeighbour(2));
  EXPECT_FALSE(t.IsNeighbour(1));
  EXPECT_EQ(t.depth(), 2);
  EXPECT_EQ(ControlTree(0, 3, 1).SubtreeOf(1), (std::vector<int>{1, 2})) << "fanout 1: a chain";
}

// For every size and fanout: each rank but 0 has one parent that lists it as a child, the
// subtrees of rank 0's children split the other ranks between them, and rank 0 has at
// most `fanout` children.
TEST(ControlTreeTest, EveryRankHasOneParentAndTheSubtreesPartitionTheJob) {
  for (int size : {2, 3, 5, 8, 17, 64, 100}) {
    for (int fanout : {1, 2, 3, 4, 8}) {
      ControlTree root(0, size, fanout);
      std::multiset<int> covered;
      for (int c : root.children()) {
        for (int r : root.SubtreeOf(c)) covered.insert(r);
      }
      EXPECT_EQ(covered.size(), static_cast<size_t>(size - 1)) << size << "/" << fanout;
      EXPECT_EQ(std::set<int>(covered.begin(), covered.end()).size(), covered.size());
      EXPECT_LE(root.children().size(), static_cast<size_t>(fanout));
      for (int r = 1; r < size; ++r) {
        ControlTree t(r, size, fanout);
        const std::vector<int> siblings = t.ChildrenOf(t.parent());
        EXPECT_EQ(std::count(siblings.begin(), siblings.end(), r), 1) << r;
        EXPECT_TRUE(ControlTree(t.parent(), size, fanout).IsNeighbour(r));
      }
    }
  }
}

TEST(ControlTreeTest, DepthGrowsAsTheLogarithmOfTheSize) {
  EXPECT_EQ(ControlTree(0, 5, 4).depth(), 1);
  EXPECT_EQ(ControlTree(0, 6, 4).depth(), 2);
  EXPECT_EQ(ControlTree(0, 21, 4).depth(), 2);
  EXPECT_EQ(ControlTree(0, 22, 4).depth(), 3);
  EXPECT_EQ(ControlTree(0, 1024, 4).depth(), 5);
  EXPECT_EQ(ControlTree(0, 1024, 2).depth(), 10);  // 1,023 ranks fill levels 0-9
}

}  // namespace
}  // namespace tfring
