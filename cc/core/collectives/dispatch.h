// One collective's arguments as one value (CollectiveArgs), and the one place that runs a
// host-memory collective by its algorithm id (RunCollective): a table from (operation,
// algorithm) to the function in collectives.h that implements it. The selection table
// (algorithm.h) says which id runs; the CPU backend fills the arguments and calls
// RunCollective, whatever the operation.
//
// Contract: that of collectives.h (background thread, every rank of the group in the same
// order, blocking with each transfer bounded by the group's deadline and its abort flag).
// The arguments only point at the caller's buffers and counts, which must outlive the call.
#pragma once

#include <cstddef>
#include <vector>

#include "base/data_type.h"
#include "base/status.h"
#include "collectives/algorithm.h"
#include "transport/communicator.h"

namespace tfring {

// What an algorithm reads, by operation (fields an operation does not name are ignored):
//   allreduce:     input (== output: in place), output, count, dtype, op, postscale,
//                  chunk_bytes, block_bytes (hierarchical's pipeline; 0: none)
//   allgather:     input (this rank's block; may lie inside output), output, recv_bytes
//                  (bytes per rank)
//   broadcast:     output (the buffer, in place), bytes, root (an index of the group),
//                  chunk_bytes
//   alltoall:      input, send_bytes (to each rank), output, recv_bytes (from each rank)
//   reducescatter: work (a buffer of the input's size), input (null: this rank's data is in
//                  work), rows_per_rank, row_elements, dtype, op, chunk_bytes, output
struct CollectiveArgs {
  explicit CollectiveArgs(const Group& g) : group(&g) {}

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
};

// Runs `op` by `algorithm` (a row of the selection table for `op`); kInternal for a pair
// the table never chooses.
Status RunCollective(OpType op, Algorithm algorithm, const CollectiveArgs& args);

}  // namespace tfring
