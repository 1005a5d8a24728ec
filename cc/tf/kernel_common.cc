// Helpers shared by every tfring TF kernel (see kernel_common.h).
#include "kernel_common.h"

#include "absl/status/status.h"

namespace tfring {
namespace tf_ops {

absl::Status ToTfStatus(const Status& status) {
  if (status.ok()) return absl::OkStatus();
  const std::string& m = status.message();
  if (std::string(ErrorCodeName(status.code())) == "UNKNOWN") {
    return absl::InternalError("unknown tfring error code " + std::to_string(static_cast<int>(status.code())) +
                               ": " + m);
  }
  return absl::Status(static_cast<absl::StatusCode>(CanonicalCode(status.code())), m);
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
  return [ctx, done = std::move(done), keep_alive = std::move(keep_alive)](const Status& st) mutable {
    if (!st.ok()) ctx->SetStatus(ToTfStatus(st));
    std::vector<tensorflow::Tensor>().swap(keep_alive);  // before `done`: see kernel_common.h
    done();
  };
}

absl::Status ReadCollectiveAttrs(tensorflow::OpKernelConstruction* ctx, OpType op, CollectiveAttrs* attrs) {
  attrs->op = op;
  if (ctx->HasAttr("process_set_id")) {
    int32_t id = 0;
    TF_RETURN_IF_ERROR(ctx->GetAttr("process_set_id", &id));
    attrs->process_set_id = id;
  }
  if (ctx->HasAttr("reduce_op")) {
    int reduce_op = 0;
    float pre = 1.0f, post = 1.0f;
    TF_RETURN_IF_ERROR(ctx->GetAttr("reduce_op", &reduce_op));
    TF_RETURN_IF_ERROR(ctx->GetAttr("prescale_factor", &pre));
    TF_RETURN_IF_ERROR(ctx->GetAttr("postscale_factor", &post));
    TF_RETURN_IF_ERROR(ToTfStatus(attrs->SetReduceOp(reduce_op)));
    attrs->prescale = pre;
    attrs->postscale = post;
  }
  if (ctx->HasAttr("root_rank")) {
    int root = 0;  // range-checked by the core against the job's size
    TF_RETURN_IF_ERROR(ctx->GetAttr("root_rank", &root));
    attrs->root = root;
  }
  return absl::OkStatus();
}

CollectiveKernel::CollectiveKernel(tensorflow::OpKernelConstruction* ctx, OpType op, bool has_tensor_name)
    : tensorflow::AsyncOpKernel(ctx) {
  if (has_tensor_name) OP_REQUIRES_OK(ctx, ctx->GetAttr("tensor_name", &tensor_name_));
  OP_REQUIRES_OK(ctx, ReadCollectiveAttrs(ctx, op, &attrs_));
}

bool CollectiveKernel::FillRequest(tensorflow::OpKernelContext* ctx, const tensorflow::Tensor& input,
                                   const std::string& name, Request* request) {
  DataType dtype = DataType::kFloat32;
  if (!ToCoreDataType(input.dtype(), &dtype)) {
    std::string supported;
    for (int t = 0; t < kNumDataTypes; ++t) {
      supported += (t ? ", " : "") + std::string(DataTypeName(static_cast<DataType>(t)));
    }
    ctx->SetStatus(absl::UnimplementedError(std::string(OpTypeName(attrs_.op)) + " of tensor '" + name +
                                            "': tfring does not support dtype " +
                                            tensorflow::DataTypeString(input.dtype()) + "; use one of " +
                                            supported));
    return false;
  }
  *request = attrs_.MakeRequest(name, dtype, ShapeOf(input));
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

}  // namespace tf_ops
}  // namespace tfring
