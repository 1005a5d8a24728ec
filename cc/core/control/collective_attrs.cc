#include "control/collective_attrs.h"

#include <utility>

#include "control/messages.h"

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

Request CollectiveAttrs::MakeRequest(const std::string& name, DataType dtype, std::vector<int64_t> shape) const {
  Request r;
  r.name = name;
  r.attrs = *this;
  r.attrs.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

bool operator==(const CollectiveAttrs& a, const CollectiveAttrs& b) {
  return a.op == b.op && a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.root == b.root && a.device == b.device &&
         a.process_set_id == b.process_set_id;
}

}  // namespace tfring
