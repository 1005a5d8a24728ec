#include "collective_attrs.h"

#include <utility>

namespace tfring {

std::string ReduceOpList() {
  std::string out;
  for (int op = 0; op < kNumReduceOps; ++op) {
    out += (op ? ", " : "") + std::string(ReduceOpName(static_cast<ReduceOp>(op))) + "(" +
           std::to_string(op) + ")";
  }
  return out;
}

Status CollectiveAttrs::SetReduceOp(int value) {
  if (!IsValidReduceOp(value)) {
    return Status::InvalidArgument("reduce_op=" + std::to_string(value) + " is not one of " + ReduceOpList());
  }
  reduce_op = static_cast<ReduceOp>(value);
  return Status::OK();
}

void CollectiveAttrs::ApplyTo(Request* r) const {
  r->op = op;
  r->reduce_op = reduce_op;
  r->prescale = prescale;
  r->postscale = postscale;
  r->root = root;
  r->process_set_id = process_set_id;
  r->device = device;
  r->splits = splits;
}

Request CollectiveAttrs::MakeRequest(const std::string& name, DataType dtype, std::vector<int64_t> shape) const {
  Request r;
  r.name = name;
  r.dtype = dtype;
  r.shape = std::move(shape);
  ApplyTo(&r);
  return r;
}

}  // namespace tfring
