#include "collectives/dispatch.h"

#include <numeric>
#include <string>
#include <vector>

#include "collectives/adasum.h"
#include "collectives/collectives.h"

namespace tfring {
namespace {

// What an algorithm requires of its arguments beyond collective_args.h's fields (bits).
enum Needs : unsigned {
  kNone = 0,
  kHostLayout = 1 << 0,    // the group carries its HostLayout
  kRoot = 1 << 1,          // root is an index of the group
  kSendBytes = 1 << 2,     // send_bytes: one entry per rank
  kRecvBytes = 1 << 3,     // recv_bytes: one entry per rank
  kRowsPerRank = 1 << 4,   // rows_per_rank: one entry per rank
  kTensorCounts = 1 << 5,  // tensor_counts summing to count, in place
};

struct Entry {
  OpType op;
  Algorithm algorithm;
  Status (*run)(const CollectiveArgs& args);
  unsigned needs;
};

// Every (operation, algorithm) row of the selection table (algorithm.cc), once, and Adasum.
const Entry kAlgorithms[] = {
    {OpType::kAllreduce, Algorithm::kRing, RingAllreduce, kNone},
    {OpType::kAllreduce, Algorithm::kRecursiveDoubling, RecursiveDoublingAllreduce, kNone},
    {OpType::kAllreduce, Algorithm::kRabenseifner, RabenseifnerAllreduce, kNone},
    {OpType::kAllreduce, Algorithm::kHierarchicalDoubling, HierarchicalDoublingAllreduce, kHostLayout},
    {OpType::kAllreduce, Algorithm::kHierarchical, HierarchicalAllreduce, kHostLayout},
    {OpType::kAllreduce, Algorithm::kAdasum, AdasumAllreduce, kTensorCounts},
    {OpType::kAllgather, Algorithm::kRing, RingAllgatherv, kRecvBytes},
    {OpType::kAllgather, Algorithm::kHierarchical, HierarchicalAllgatherv, kRecvBytes | kHostLayout},
    {OpType::kBroadcast, Algorithm::kChain, ChainBroadcast, kRoot},
    {OpType::kBroadcast, Algorithm::kHierarchical, HierarchicalBroadcast, kRoot | kHostLayout},
    {OpType::kAlltoall, Algorithm::kPairwise, PairwiseAlltoallv, kSendBytes | kRecvBytes},
    {OpType::kReducescatter, Algorithm::kRing, RingReducescatter, kRowsPerRank},
    {OpType::kReducescatter, Algorithm::kHierarchical, HierarchicalReducescatter, kRowsPerRank | kHostLayout},
};

// "<algorithm> <operation>", e.g. "hierarchical broadcast".
std::string Name(const Entry& e) { return std::string(AlgorithmName(e.algorithm)) + " " + OpTypeName(e.op); }

// OK when `args` hold what `e`'s algorithm reads (Needs); the error names the algorithm.
Status Check(const Entry& e, const CollectiveArgs& args) {
  const Group& g = *args.group;
  const size_t n = static_cast<size_t>(g.size());
  if ((e.needs & kHostLayout) && g.host_layout() == nullptr) {
    return Status::Internal(Name(e) + " was chosen for a group of " + std::to_string(n) +
                            " ranks that carries no host layout");
  }
  if ((e.needs & kRoot) && (args.root < 0 || args.root >= g.size())) {
    return Status::InvalidArgument(Name(e) + ": root " + std::to_string(args.root) +
                                   " is not an index of the group's " + std::to_string(n) + " ranks");
  }
  struct PerRank {
    unsigned need;
    const char* name;
    const std::vector<size_t>* values;
  };
  for (const PerRank& v : {PerRank{kSendBytes, "send_bytes", args.send_bytes},
                           PerRank{kRecvBytes, "recv_bytes", args.recv_bytes},
                           PerRank{kRowsPerRank, "rows_per_rank", args.rows_per_rank}}) {
    if (!(e.needs & v.need) || (v.values != nullptr && v.values->size() == n)) continue;
    return Status::InvalidArgument(Name(e) + ": " + v.name + " needs one entry per rank of the group (" +
                                   std::to_string(n) + "), got " +
                                   (v.values == nullptr ? std::string("none") : std::to_string(v.values->size())));
  }
  if (e.needs & kTensorCounts) {
    if (args.tensor_counts == nullptr ||
        std::accumulate(args.tensor_counts->begin(), args.tensor_counts->end(), size_t{0}) != args.count) {
      return Status::InvalidArgument(Name(e) + ": tensor_counts must be given and sum to count (" +
                                     std::to_string(args.count) + ")");
    }
    if (args.input != nullptr && args.input != args.output) {
      return Status::InvalidArgument(Name(e) + " works in place: input must be null or output");
    }
  }
  return Status::OK();
}

}  // namespace

Status RunCollective(OpType op, Algorithm algorithm, const CollectiveArgs& args) {
  for (const Entry& e : kAlgorithms) {
    if (e.op != op || e.algorithm != algorithm) continue;
    TFRING_RETURN_IF_ERROR(Check(e, args));
    return e.run(args);
  }
  return Status::Internal(std::string("no ") + AlgorithmName(algorithm) + " algorithm for " + OpTypeName(op));
}

}  // namespace tfring
