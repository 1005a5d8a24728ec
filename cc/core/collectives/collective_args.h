// CollectiveArgs: one collective's arguments as one value, the one parameter of every
// collective algorithm's entry point (collectives.h, adasum.h) and of RunCollective
// (dispatch.h), which checks them against what the algorithm requires before it runs.
//
// Only points at the caller's group, buffers and counts, which must outlive every use of
// the value (a temporary Group cannot be bound: the constructor refuses rvalues). Cheap to
// copy; On() makes a copy over another group (a hierarchical algorithm's phase).
#pragma once

#include <cstddef>
#include <vector>

#include "base/data_type.h"
#include "transport/communicator.h"

namespace tfring {

// What an algorithm reads, by operation (fields an operation does not name are ignored):
//   allreduce:     input (== output: in place), output, count, dtype, op, postscale,
//                  chunk_bytes, block_bytes (hierarchical's pipeline; 0: none)
//   adasum:        output (in place: input null or == output), count, dtype, postscale,
//                  tensor_counts (the fused tensors' element counts, summing to count)
//   allgather:     input (this rank's block; may lie inside output), output, recv_bytes
//                  (bytes per rank)
//   broadcast:     output (the buffer, in place), bytes, root (an index of the group),
//                  chunk_bytes
//   alltoall:      input, send_bytes (to each rank), output, recv_bytes (from each rank)
//   reducescatter: work (a buffer of the input's size), input (null: this rank's data is in
//                  work), rows_per_rank, row_elements, dtype, op, chunk_bytes, output
struct CollectiveArgs {
  explicit CollectiveArgs(const Group& g) : group(&g) {}
  explicit CollectiveArgs(Group&&) = delete;  // would point at a temporary

  // A copy of these arguments over `g` (which must outlive it).
  CollectiveArgs On(const Group& g) const {
    CollectiveArgs a = *this;
    a.group = &g;
    return a;
  }
  CollectiveArgs On(Group&&) const = delete;

  const Group* group;
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // elements
  size_t bytes = 0;
  DataType dtype = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  double postscale = 1.0;
  int root = 0;
  size_t chunk_bytes = 0;
  size_t block_bytes = 0;
  const std::vector<size_t>* send_bytes = nullptr;
  const std::vector<size_t>* recv_bytes = nullptr;
  const std::vector<size_t>* rows_per_rank = nullptr;
  size_t row_elements = 0;
  char* work = nullptr;
  const std::vector<size_t>* tensor_counts = nullptr;
};

}  // namespace tfring
