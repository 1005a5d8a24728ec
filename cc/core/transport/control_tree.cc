#include "transport/control_tree.h"

#include <algorithm>

namespace tfring {

ControlTree::ControlTree(int rank, int size, int fanout) : rank_(rank), size_(size) {
  const int star = std::max(1, size - 1);
  fanout_ = fanout <= 0 || fanout > star ? star : fanout;
}

int ControlTree::ParentOf(int rank) const { return rank <= 0 ? -1 : (rank - 1) / fanout_; }

std::vector<int> ControlTree::ChildrenOf(int rank) const {
  std::vector<int> out;
  const long first = static_cast<long>(rank) * fanout_ + 1;
  for (long c = first; c < first + fanout_ && c < size_; ++c) out.push_back(static_cast<int>(c));
  return out;
}

std::vector<int> ControlTree::neighbours() const {
  std::vector<int> out;
  if (rank_ > 0) out.push_back(parent());
  for (int c : children()) out.push_back(c);
  return out;
}

bool ControlTree::IsNeighbour(int peer) const {
  return peer >= 0 && peer < size_ && peer != rank_ && (ParentOf(peer) == rank_ || ParentOf(rank_) == peer);
}

std::vector<int> ControlTree::SubtreeOf(int rank) const {
  // Level by level: the ranks below `rank` at each depth form one contiguous range.
  std::vector<int> out;
  long lo = rank, hi = rank;  // this level's range, inclusive
  while (lo < size_) {
    for (long r = lo; r <= std::min<long>(hi, size_ - 1); ++r) out.push_back(static_cast<int>(r));
    lo = lo * fanout_ + 1;
    hi = hi * fanout_ + fanout_;
  }
  return out;
}

int ControlTree::depth() const {
  int hops = 0;
  for (int r = size_ - 1; r > 0; r = ParentOf(r)) ++hops;  // the last rank is on the deepest level
  return hops;
}

}  // namespace tfring
