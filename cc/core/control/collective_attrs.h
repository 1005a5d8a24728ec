// CollectiveAttrs: what every rank must agree on about one collective, besides its name and
// shape -- the op, the dtype, the reduction and its scale factors, the root, host memory or
// GPU, the process set. One struct for every place that names a collective: the entry
// points (the pybind module, the TF kernels) fill it, a Request (messages.h) carries it to
// rank 0, which checks that the ranks agree on it and sends it back in the Response every
// rank executes. Encoded and decoded once (messages.cc).
//
// Entry points fill op, reduce_op, the scales, root and process_set_id from the call's
// arguments; dtype and device describe the tensor (MakeRequest, the array's device).
// Values from outside (a Python int, a TF attr) enter through the Set* checks below, which
// fail with kInvalidArgument naming every valid value from the core's own tables.
// A plain value: copy it freely between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/data_type.h"
#include "base/status.h"

namespace tfring {

struct Request;

struct CollectiveAttrs {
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;  // allreduce, reducescatter
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root = 0;            // broadcast: a global rank (range-checked at enqueue)
  int32_t device = -1;         // -1: host memory, >= 0: GPU ordinal
  int32_t process_set_id = 0;  // process_sets.h; 0: every rank

  // Sets reduce_op from a caller's integer; kInvalidArgument listing ReduceOpList() otherwise.
  Status SetReduceOp(int value);
  // A Request for tensor `name` of `dtype` and `shape` with these attributes (the
  // tensor's dtype replaces this one's).
  Request MakeRequest(const std::string& name, DataType dtype, std::vector<int64_t> shape) const;
};

// Every field equal.
bool operator==(const CollectiveAttrs& a, const CollectiveAttrs& b);
inline bool operator!=(const CollectiveAttrs& a, const CollectiveAttrs& b) { return !(a == b); }

// "Sum(0), Average(1), ..." from the core's table, for messages.
std::string ReduceOpList();

}  // namespace tfring
