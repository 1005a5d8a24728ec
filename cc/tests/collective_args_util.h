// CollectiveArgs (collectives/collective_args.h) for the tests that call an algorithm's
// entry point directly, one builder per operation with the fields that operation reads, in
// the order the entry points took them one by one before they took CollectiveArgs.
//
// The result points at `g` and the vectors passed in: use it within the same full
// expression (e.g. RingAllreduce(AllreduceArgs(comm, ...))) when either is a temporary.
#pragma once

#include <cstddef>
#include <numeric>
#include <vector>

#include "collectives/collective_args.h"

namespace tfring {
namespace testing_util {

// The fields every reduction reads.
inline CollectiveArgs ReductionArgs(const Group& g, DataType dtype, ReduceOp op, size_t chunk_bytes) {
  CollectiveArgs a(g);
  a.dtype = dtype;
  a.op = op;
  a.chunk_bytes = chunk_bytes;
  return a;
}

inline CollectiveArgs AllreduceArgs(const Group& g, const void* input, void* output, size_t count, DataType dtype,
                                    ReduceOp op, size_t chunk_bytes, double postscale = 1.0,
                                    size_t block_bytes = 0) {
  CollectiveArgs a = ReductionArgs(g, dtype, op, chunk_bytes);
  a.input = input;
  a.output = output;
  a.count = count;
  a.postscale = postscale;
  a.block_bytes = block_bytes;
  return a;
}

// In place in `buf`: tensor_counts.size() tensors back to back (adasum.h).
inline CollectiveArgs AdasumArgs(const Group& g, char* buf, const std::vector<size_t>& tensor_counts,
                                 DataType dtype) {
  CollectiveArgs a(g);
  a.input = buf;
  a.output = buf;
  a.count = std::accumulate(tensor_counts.begin(), tensor_counts.end(), size_t{0});
  a.dtype = dtype;
  a.op = ReduceOp::kAdasum;
  a.tensor_counts = &tensor_counts;
  return a;
}

inline CollectiveArgs AllgatherArgs(const Group& g, const void* input, void* output,
                                    const std::vector<size_t>& bytes_per_rank) {
  CollectiveArgs a(g);
  a.input = input;
  a.output = output;
  a.recv_bytes = &bytes_per_rank;
  return a;
}

inline CollectiveArgs BroadcastArgs(const Group& g, void* buf, size_t bytes, int root, size_t chunk_bytes) {
  CollectiveArgs a(g);
  a.output = buf;
  a.bytes = bytes;
  a.root = root;
  a.chunk_bytes = chunk_bytes;
  return a;
}

inline CollectiveArgs AlltoallArgs(const Group& g, const void* input, const std::vector<size_t>& send_bytes,
                                   void* output, const std::vector<size_t>& recv_bytes) {
  CollectiveArgs a(g);
  a.input = input;
  a.send_bytes = &send_bytes;
  a.output = output;
  a.recv_bytes = &recv_bytes;
  return a;
}

inline CollectiveArgs ReducescatterArgs(const Group& g, char* work, const std::vector<size_t>& rows_per_rank,
                                        size_t row_elements, DataType dtype, ReduceOp op, size_t chunk_bytes,
                                        void* output, const char* input = nullptr) {
  CollectiveArgs a = ReductionArgs(g, dtype, op, chunk_bytes);
  a.work = work;
  a.rows_per_rank = &rows_per_rank;
  a.row_elements = row_elements;
  a.output = output;
  a.input = input;
  return a;
}

}  // namespace testing_util
}  // namespace tfring
