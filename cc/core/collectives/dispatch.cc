#include "collectives/dispatch.h"

#include <string>

#include "collectives/collectives.h"

namespace tfring {
namespace {

using Run = Status (*)(const CollectiveArgs& a);

struct Entry {
  OpType op;
  Algorithm algorithm;
  Run run;
};

// Every (operation, algorithm) row of the selection table (algorithm.cc), once.
const Entry kAlgorithms[] = {
    {OpType::kAllreduce, Algorithm::kRing,
     [](const CollectiveArgs& a) {
       return RingAllreduce(*a.group, a.input, a.output, a.count, a.dtype, a.op, a.chunk_bytes, a.postscale);
     }},
    {OpType::kAllreduce, Algorithm::kRecursiveDoubling,
     [](const CollectiveArgs& a) {
       return RecursiveDoublingAllreduce(*a.group, a.input, a.output, a.count, a.dtype, a.op, a.postscale);
     }},
    {OpType::kAllreduce, Algorithm::kRabenseifner,
     [](const CollectiveArgs& a) {
       return RabenseifnerAllreduce(*a.group, a.input, a.output, a.count, a.dtype, a.op, a.chunk_bytes, a.postscale);
     }},
    {OpType::kAllreduce, Algorithm::kHierarchicalDoubling,
     [](const CollectiveArgs& a) {
       return HierarchicalDoublingAllreduce(*a.group, a.input, a.output, a.count, a.dtype, a.op, a.postscale);
     }},
    {OpType::kAllreduce, Algorithm::kHierarchical,
     [](const CollectiveArgs& a) {
       return HierarchicalAllreduce(*a.group, a.input, a.output, a.count, a.dtype, a.op, a.chunk_bytes, a.postscale,
                                    a.block_bytes);
     }},
    {OpType::kAllgather, Algorithm::kRing,
     [](const CollectiveArgs& a) { return RingAllgatherv(*a.group, a.input, a.output, *a.recv_bytes); }},
    {OpType::kAllgather, Algorithm::kHierarchical,
     [](const CollectiveArgs& a) { return HierarchicalAllgatherv(*a.group, a.input, a.output, *a.recv_bytes); }},
    {OpType::kBroadcast, Algorithm::kChain,
     [](const CollectiveArgs& a) { return ChainBroadcast(*a.group, a.output, a.bytes, a.root, a.chunk_bytes); }},
    {OpType::kBroadcast, Algorithm::kHierarchical,
     [](const CollectiveArgs& a) {
       return HierarchicalBroadcast(*a.group, a.output, a.bytes, a.root, a.chunk_bytes);
     }},
    {OpType::kAlltoall, Algorithm::kPairwise,
     [](const CollectiveArgs& a) {
       return PairwiseAlltoallv(*a.group, a.input, *a.send_bytes, a.output, *a.recv_bytes);
     }},
    {OpType::kReducescatter, Algorithm::kRing,
     [](const CollectiveArgs& a) {
       return RingReducescatter(*a.group, a.work, *a.rows_per_rank, a.row_elements, a.dtype, a.op, a.chunk_bytes,
                                a.output, static_cast<const char*>(a.input));
     }},
    {OpType::kReducescatter, Algorithm::kHierarchical,
     [](const CollectiveArgs& a) {
       return HierarchicalReducescatter(*a.group, a.work, *a.rows_per_rank, a.row_elements, a.dtype, a.op,
                                        a.chunk_bytes, a.output, static_cast<const char*>(a.input));
     }},
};

}  // namespace

Status RunCollective(OpType op, Algorithm algorithm, const CollectiveArgs& args) {
  for (const Entry& e : kAlgorithms) {
    if (e.op == op && e.algorithm == algorithm) return e.run(args);
  }
  return Status::Internal(std::string("no ") + AlgorithmName(algorithm) + " algorithm for " + OpTypeName(op));
}

}  // namespace tfring
