// CollectiveAttrs: what a caller says about a collective besides its tensor -- the op and
// the attributes every rank must agree on -- in one struct for every entry point (the
// pybind module, the TF kernels). ApplyTo copies them into the Request the core negotiates.
//
// Values from outside (a Python int, a TF attr) enter through the Set* checks below, which
// fail with kInvalidArgument naming every valid value from the core's own tables.
// A plain value: copy it freely between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data_type.h"
#include "messages.h"
#include "status.h"

namespace tfring {

struct CollectiveAttrs {
  OpType op = OpType::kAllreduce;
  ReduceOp reduce_op = ReduceOp::kSum;  // allreduce, reducescatter
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root = 0;             // broadcast: a global rank (range-checked at enqueue)
  int32_t process_set_id = 0;   // 0: every rank
  int32_t device = -1;          // -1: host memory, >= 0: GPU ordinal
  std::vector<int64_t> splits;  // alltoall: rows to each rank; empty: divide evenly

  // Sets reduce_op from a caller's integer; kInvalidArgument listing ReduceOpList() otherwise.
  Status SetReduceOp(int value);
  // Copies every attribute into `r` (name, dtype and shape are the tensor's: untouched).
  void ApplyTo(Request* r) const;
  // A Request for tensor `name` of `dtype` and `shape` with these attributes.
  Request MakeRequest(const std::string& name, DataType dtype, std::vector<int64_t> shape) const;
};

// "Sum(0), Average(1), ..." from the core's table, for messages.
std::string ReduceOpList();

}  // namespace tfring
