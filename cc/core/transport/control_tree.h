// ControlTree: the shape of the control plane, a tree rooted at rank 0.
//
// Requests go up the tree and responses down it (negotiator.h); aborts and departures are
// passed on to every tree neighbour (control_channel.h). Rank r's children are the ranks
// r*F+1 .. r*F+F (those below the job's size) and its parent is (r-1)/F, F being the fanout
// (TFRING_CONTROL_FANOUT). Rank 0 thus holds F control connections and handles F messages
// each way per negotiation round, whatever the job's size; a message travels
// ceil(log_F(n(F-1)+1)) - 1 hops at most. A fanout of 0 (or >= n-1) is the star: every
// rank is a child of rank 0, as before the tree (one hop, n-1 connections at rank 0).
// Launchers number ranks host by host, so a rank's small subtrees tend to stay on its host.
//
// Pure arithmetic; any thread.
#pragma once

#include <vector>

namespace tfring {

class ControlTree {
 public:
  // fanout <= 0 or >= size-1: the star.
  ControlTree(int rank, int size, int fanout);

  int rank() const { return rank_; }
  int size() const { return size_; }
  // -1 on rank 0.
  int parent() const { return ParentOf(rank_); }
  // Increasing order.
  std::vector<int> children() const { return ChildrenOf(rank_); }
  // Parent (if any) first, then the children: every rank this one exchanges control
  // messages with.
  std::vector<int> neighbours() const;
  bool IsNeighbour(int peer) const;
  int ParentOf(int rank) const;
  std::vector<int> ChildrenOf(int rank) const;
  // `rank` and every rank below it, in increasing order.
  std::vector<int> SubtreeOf(int rank) const;
  // The longest path from rank 0 to a leaf, in hops.
  int depth() const;

 private:
  int rank_;
  int size_;
  int fanout_;  // normalised: size-1 for the star (>= 1 whenever size >= 2)
};

}  // namespace tfring
