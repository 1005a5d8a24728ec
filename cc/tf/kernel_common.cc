// Helpers shared by every tfring TF kernel (see kernel_common.h).
#include "kernel_common.h"

#include "absl/status/status.h"

namespace tfring {
namespace tf_ops {

bool ToCoreDataType(tensorflow::DataType tf_dtype, DataType* out) {
  switch (tf_dtype) {
    case tensorflow::DT_UINT8: *out = DataType::kUInt8; return true;
    case tensorflow::DT_INT8: *out = DataType::kInt8; return true;
    case tensorflow::DT_INT32: *out = DataType::kInt32; return true;
    case tensorflow::DT_INT64: *out = DataType::kInt64; return true;
    case tensorflow::DT_HALF: *out = DataType::kFloat16; return true;
    case tensorflow::DT_BFLOAT16: *out = DataType::kBFloat16; return true;
    case tensorflow::DT_FLOAT: *out = DataType::kFloat32; return true;
    case tensorflow::DT_DOUBLE: *out = DataType::kFloat64; return true;
    case tensorflow::DT_BOOL: *out = DataType::kBool; return true;
    case tensorflow::DT_INT16: *out = DataType::kInt16; return true;
    case tensorflow::DT_UINT16: *out = DataType::kUInt16; return true;
    default: return false;
  }
}

absl::Status ToTfStatus(const Status& status) {
  const std::string& m = status.message();
  switch (status.code()) {
    case ErrorCode::kOk: return absl::OkStatus();
    case ErrorCode::kInvalidArgument: return absl::InvalidArgumentError(m);
    case ErrorCode::kMismatch: return absl::FailedPreconditionError(m);
    case ErrorCode::kPrecondition: return absl::FailedPreconditionError(m);
    case ErrorCode::kPeerLost: return absl::UnavailableError(m);
    case ErrorCode::kTimeout: return absl::DeadlineExceededError(m);
    case ErrorCode::kUnimplemented: return absl::UnimplementedError(m);
    case ErrorCode::kAborted: return absl::AbortedError(m);
    case ErrorCode::kInternal: return absl::InternalError(m);
  }
  return absl::InternalError("unknown tfring error code " + std::to_string(static_cast<int>(status.code())) +
                             ": " + m);
}

std::vector<int64_t> ShapeOf(const tensorflow::Tensor& t) {
  std::vector<int64_t> shape;
  shape.reserve(t.dims());
  for (int i = 0; i < t.dims(); ++i) shape.push_back(t.dim_size(i));
  return shape;
}

absl::Status MakeShape(const std::vector<int64_t>& dims, tensorflow::TensorShape* out) {
  return tensorflow::TensorShape::BuildTensorShape(dims, out);
}

const void* DataOf(const tensorflow::Tensor& t) {
  return t.NumElements() == 0 ? nullptr : static_cast<const void*>(t.tensor_data().data());
}

void* MutableDataOf(tensorflow::Tensor* t) {
  return t->NumElements() == 0 ? nullptr : const_cast<char*>(t->tensor_data().data());
}

std::function<void(const Status&)> MakeDone(tensorflow::OpKernelContext* ctx,
                                            tensorflow::AsyncOpKernel::DoneCallback done,
                                            std::vector<tensorflow::Tensor> keep_alive) {
  return [ctx, done = std::move(done), keep_alive = std::move(keep_alive)](const Status& st) {
    if (!st.ok()) ctx->SetStatus(ToTfStatus(st));
    done();
  };
}

CollectiveKernel::CollectiveKernel(tensorflow::OpKernelConstruction* ctx, bool has_tensor_name)
    : tensorflow::AsyncOpKernel(ctx) {
  if (has_tensor_name) OP_REQUIRES_OK(ctx, ctx->GetAttr("tensor_name", &tensor_name_));
  if (ctx->HasAttr("process_set_id")) {
    int32_t id = 0;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("process_set_id", &id));
    process_set_id_ = id;
  }
}

bool CollectiveKernel::FillRequest(tensorflow::OpKernelContext* ctx, OpType op,
                                   const tensorflow::Tensor& input, const std::string& name,
                                   Request* request) {
  request->name = name;
  request->op = op;
  request->device = -1;
  request->process_set_id = process_set_id_;
  request->shape = ShapeOf(input);
  if (!ToCoreDataType(input.dtype(), &request->dtype)) {
    std::string supported;
    for (int t = 0; t < kNumDataTypes; ++t) {
      supported += (t ? ", " : "") + std::string(DataTypeName(static_cast<DataType>(t)));
    }
    ctx->SetStatus(absl::UnimplementedError(std::string(OpTypeName(op)) + " of tensor '" + name +
                                            "': tfring does not support dtype " +
                                            tensorflow::DataTypeString(input.dtype()) + "; use one of " +
                                            supported));
    return false;
  }
  return true;
}

void CollectiveKernel::EnqueueOrFail(tensorflow::OpKernelContext* ctx, Submission submission,
                                     const DoneCallback& done) {
  Status st = Runtime::Global().Enqueue(std::move(submission));
  if (!st.ok()) {
    // The core did not take the submission: `done` inside it will never run.
    ctx->SetStatus(ToTfStatus(st));
    done();
  }
}

absl::Status ReduceAttrs::Read(tensorflow::OpKernelConstruction* ctx) {
  int op = 0;
  float pre = 1.0f, post = 1.0f;
  TF_RETURN_IF_ERROR(ctx->GetAttr("reduce_op", &op));
  TF_RETURN_IF_ERROR(ctx->GetAttr("prescale_factor", &pre));
  TF_RETURN_IF_ERROR(ctx->GetAttr("postscale_factor", &post));
  if (!IsValidReduceOp(op)) {
    return absl::InvalidArgumentError("reduce_op=" + std::to_string(op) +
                                      " is not one of Sum(0), Average(1), Min(2), Max(3), Product(4), Adasum(5)");
  }
  reduce_op = static_cast<ReduceOp>(op);
  prescale = pre;
  postscale = post;
  return absl::OkStatus();
}

}  // namespace tf_ops
}  // namespace tfring
