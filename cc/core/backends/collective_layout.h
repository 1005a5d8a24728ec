// Where each rank's rows go in an allgather or alltoall: byte counts and offsets per rank,
// the output's shape and the rows received, computed once from the rows rank 0 agreed
// (Response::sizes) for every backend (CpuBackend, NcclBackend).
//
// Ranks are indices into the collective's process set (global ranks for the global set),
// as in Response. Pure functions of their arguments; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "control/messages.h"
#include "base/status.h"
#include "control/submission.h"

namespace tfring {

// Consecutive blocks, one per rank: block p is bytes[p] bytes at offsets[p].
struct BlockLayout {
  std::vector<size_t> bytes;
  std::vector<size_t> offsets;  // exclusive prefix sums of `bytes`
  size_t total = 0;             // sum of `bytes`

  void Add(int64_t rows, size_t row_bytes);
  // Every block has the same size (a plain allgather needs no per-rank counts).
  bool Equal() const;
};

struct GatherLayout {
  BlockLayout send;  // alltoall: this rank's input, by destination; empty for allgather
  BlockLayout recv;  // the output, by source rank
  std::vector<int64_t> received_rows;  // alltoall: rows from each rank; empty for allgather
  std::vector<int64_t> output_shape;   // this rank's input shape, dim 0 = the rows received

  // Allocates the output through `s` (allocate_output) and reports the received rows
  // (on_received_splits, alltoall only) in that order, as the callers expect.
  Status AllocateOutput(Submission& s, void** out) const;
};

// Allgather of `mine` (this rank's request) over a set of `set_size` ranks.
GatherLayout AllgatherLayout(const Response& r, const Request& mine, int set_size);
// Alltoall of `mine` by the rank at index `set_rank` of a set of `set_size` ranks.
GatherLayout AlltoallLayout(const Response& r, const Request& mine, int set_size, int set_rank);

}  // namespace tfring
