// XLA lowerings of tfring's TF ops (ops.cc), so that tfring's collectives compile inside
// tf.function(jit_compile=True) and Keras' jit_compile=True steps.
//
// Each op becomes a pair of XLA custom calls (call_attrs.h; handlers: host_handlers.cc):
//   start = custom-call tfring_collective_start(inputs)              SCHEDULE_EARLIEST
//   done  = custom-call tfring_collective_done(start, inputs) -> start SCHEDULE_LATEST
// both with side effects (never removed, merged or hoisted), carrying the op's attributes
// and the same negotiation names as the TF kernels (the ops' tensor_name attrs, chosen at
// trace time by tfring.tensorflow). XLA may compute between the two: a gradient's
// allreduce runs while the backward pass of the layers before it does.
//
// Shapes are static under XLA. allreduce, grouped allreduce, broadcast: as the input.
// reducescatter: this rank's rows (its index in the process set, known at compile time).
// allgather: set size x the first dimension, which assumes every rank passes the same
// first dimension (checked at run time, where the core compares it with every rank's).
// alltoall: only even splits (empty, or `splits` a compile-time constant of equal values);
// anything else fails to compile, naming the tensor and the fix. Join and barrier have no
// lowering (tfring.tensorflow raises at trace time for them).
//
// Thread-safety: XLA compiles ops one at a time per graph; kernels hold only their attrs.
#include <string>
#include <vector>

#include "../kernel_common.h"
#include "call_attrs.h"
#include "lowerings.h"
#include "control/messages.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

namespace tfring {
namespace tf_ops {
namespace {

using tensorflow::XlaOpKernel;
using tensorflow::XlaOpKernelContext;

// Base of every lowering: the op's attrs as a CallAttrs, and Emit() for the call pair.
class CollectiveLowering : public XlaOpKernel {
 public:
  CollectiveLowering(tensorflow::OpKernelConstruction* ctx, OpType op, bool grouped = false) : XlaOpKernel(ctx) {
    CollectiveAttrs attrs;
    OP_REQUIRES_OK(ctx, ReadCollectiveAttrs(ctx, op, &attrs));
    if (grouped) {
      OP_REQUIRES_OK(ctx, ctx->GetAttr("tensor_names", &call_.names));
    } else {
      call_.names.emplace_back();
      OP_REQUIRES_OK(ctx, ctx->GetAttr("tensor_name", &call_.names[0]));
    }
    call_.op = static_cast<int32_t>(attrs.op);
    call_.reduce_op = static_cast<int32_t>(attrs.reduce_op);
    call_.prescale = attrs.prescale;
    call_.postscale = attrs.postscale;
    call_.root = attrs.root;
    call_.process_set_id = attrs.process_set_id;
  }

 protected:
  const std::string& name() const { return call_.names[0]; }
  const char* what() const { return OpTypeName(static_cast<OpType>(call_.op)); }

  // This rank's index in the op's process set and the set's size, or an error naming the
  // tensor (not initialized, unknown set, not a member).
  absl::Status Position(int* rank, int* size) const {
    Status st = Runtime::Global().ProcessSetPosition(call_.process_set_id, rank, size);
    if (!st.ok()) return ToTfStatus(st.WithContext(std::string(what()) + " of tensor '" + name() + "' (XLA)"));
    if (*rank < 0) {
      return absl::InvalidArgumentError(std::string(what()) + " of tensor '" + name() +
                                        "': this rank is not a member of process set " +
                                        std::to_string(call_.process_set_id));
    }
    return absl::OkStatus();
  }

  // For the ops that split or gather rows: this rank's position in the process set and
  // the input's first dimension (an error naming the tensor for a scalar).
  absl::Status RowsAndPosition(XlaOpKernelContext* ctx, int64_t* rows, int* rank, int* size) const {
    TF_RETURN_IF_ERROR(Position(rank, size));
    const tensorflow::TensorShape in = ctx->InputShape(0);
    if (in.dims() < 1) {
      return absl::InvalidArgumentError(std::string(what()) + " of tensor '" + name() +
                                        "' needs at least one dimension (got a scalar)");
    }
    *rows = in.dim_size(0);
    return absl::OkStatus();
  }

  // The start/done pair over `inputs`, whose results have `shapes`; the done call's results.
  std::vector<xla::XlaOp> Emit(XlaOpKernelContext* ctx, const std::vector<xla::XlaOp>& inputs,
                               const std::vector<xla::Shape>& shapes) const {
    const std::string config = xla_calls::EncodeBackendConfig(call_);
    const bool tuple = shapes.size() != 1;
    const xla::Shape shape = tuple ? xla::ShapeUtil::MakeTupleShape(shapes) : shapes[0];
    xla::XlaBuilder* b = ctx->builder();
    xla::XlaOp start = xla::CustomCall(b, xla_calls::kStartTarget, inputs, shape, config,
                                       /*has_side_effect=*/true, /*output_operand_aliasing=*/{}, nullptr,
                                       xla::CustomCallSchedule::SCHEDULE_EARLIEST,
                                       xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
    std::vector<xla::XlaOp> operands;
    std::vector<std::pair<xla::ShapeIndex, std::pair<int64_t, xla::ShapeIndex>>> aliasing;
    for (size_t i = 0; i < shapes.size(); ++i) {
      operands.push_back(tuple ? xla::GetTupleElement(start, i) : start);
      aliasing.push_back({tuple ? xla::ShapeIndex{static_cast<int64_t>(i)} : xla::ShapeIndex{},
                          {static_cast<int64_t>(i), xla::ShapeIndex{}}});
    }
    operands.insert(operands.end(), inputs.begin(), inputs.end());  // alive until done
    xla::XlaOp done = xla::CustomCall(b, xla_calls::kDoneTarget, operands, shape, config,
                                      /*has_side_effect=*/true, aliasing, nullptr,
                                      xla::CustomCallSchedule::SCHEDULE_LATEST,
                                      xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
    if (!tuple) return {done};
    std::vector<xla::XlaOp> out;
    for (size_t i = 0; i < shapes.size(); ++i) out.push_back(xla::GetTupleElement(done, i));
    return out;
  }

  // Input i's XLA shape with its first dimension set to `dim0`.
  static absl::Status ShapeWithDim0(XlaOpKernelContext* ctx, int i, int64_t dim0, xla::Shape* out) {
    auto shape = ctx->InputXlaShape(i);
    if (!shape.ok()) return shape.status();
    *out = *shape;
    out->set_dimensions(0, dim0);
    return absl::OkStatus();
  }

 private:
  xla_calls::CallAttrs call_;
};

// TfringAllreduce, TfringBroadcast: one tensor, the output shaped as the input.
template <OpType kOp>
class SameShapeLowering : public CollectiveLowering {
 public:
  explicit SameShapeLowering(tensorflow::OpKernelConstruction* ctx) : CollectiveLowering(ctx, kOp) {}
  void Compile(XlaOpKernelContext* ctx) override {
    auto shape = ctx->InputXlaShape(0);
    OP_REQUIRES_OK(ctx, shape.status());
    ctx->SetOutput(0, Emit(ctx, {ctx->Input(0)}, {*shape})[0]);
  }
};

// TfringGroupedAllreduce: every tensor in one start call (one group: negotiated and fused
// together, as the TF kernel's EnqueueGroup).
class GroupedAllreduceLowering : public CollectiveLowering {
 public:
  explicit GroupedAllreduceLowering(tensorflow::OpKernelConstruction* ctx)
      : CollectiveLowering(ctx, OpType::kAllreduce, /*grouped=*/true) {}
  void Compile(XlaOpKernelContext* ctx) override {
    std::vector<xla::XlaOp> inputs;
    std::vector<xla::Shape> shapes;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      auto shape = ctx->InputXlaShape(i);
      OP_REQUIRES_OK(ctx, shape.status());
      inputs.push_back(ctx->Input(i));
      shapes.push_back(*shape);
    }
    std::vector<xla::XlaOp> out = Emit(ctx, inputs, shapes);
    for (size_t i = 0; i < out.size(); ++i) ctx->SetOutput(static_cast<int>(i), out[i]);
  }
};

// TfringReducescatter (this rank's rows of the reduction) and TfringAllgather (set size x
// the rows): the output's first dimension follows from the process set's size and position.
template <OpType kOp>
class RowsLowering : public CollectiveLowering {
 public:
  explicit RowsLowering(tensorflow::OpKernelConstruction* ctx) : CollectiveLowering(ctx, kOp) {}
  void Compile(XlaOpKernelContext* ctx) override {
    int64_t rows = 0;
    int rank = 0, size = 0;
    OP_REQUIRES_OK(ctx, RowsAndPosition(ctx, &rows, &rank, &size));
    xla::Shape out;
    const int64_t out_rows = kOp == OpType::kReducescatter ? ReducescatterRows(rows, size, rank) : rows * size;
    OP_REQUIRES_OK(ctx, ShapeWithDim0(ctx, 0, out_rows, &out));
    ctx->SetOutput(0, Emit(ctx, {ctx->Input(0)}, {out})[0]);
  }
};

class AlltoallLowering : public CollectiveLowering {
 public:
  explicit AlltoallLowering(tensorflow::OpKernelConstruction* ctx) : CollectiveLowering(ctx, OpType::kAlltoall) {}
  void Compile(XlaOpKernelContext* ctx) override {
    int64_t rows = 0;
    int rank = 0, size = 0;
    OP_REQUIRES_OK(ctx, RowsAndPosition(ctx, &rows, &rank, &size));
    const std::string fix =
        " Fix: split evenly (splits=None, or equal splits as a constant) with the same first dimension on every "
        "rank, or run this alltoall outside the jit_compile=True function.";
    std::vector<int64_t> splits;
    if (ctx->InputShape(1).num_elements() > 0) {
      absl::Status st = ctx->ConstantInputAsIntVector(1, &splits);
      OP_REQUIRES(ctx, st.ok(),
                  absl::InvalidArgumentError(
                      "alltoall of tensor '" + name() +
                      "' inside an XLA-compiled function: its output shape depends on `splits`, which is not known "
                      "at trace time (" + std::string(st.message()) + ")." + fix));
    }
    bool even = rows % size == 0;
    for (int64_t s : splits) even = even && s == rows / size;
    OP_REQUIRES(ctx, even && (splits.empty() || static_cast<int>(splits.size()) == size),
                absl::InvalidArgumentError("alltoall of tensor '" + name() + "' inside an XLA-compiled function: " +
                                           std::to_string(rows) + " rows with splits of " +
                                           std::to_string(splits.size()) + " values over " + std::to_string(size) +
                                           " ranks: only an even split has a shape known at trace time." + fix));
    auto shape = ctx->InputXlaShape(0);
    OP_REQUIRES_OK(ctx, shape.status());
    ctx->SetOutput(0, Emit(ctx, {ctx->Input(0)}, {*shape})[0]);
    std::vector<int32_t> received(size, static_cast<int32_t>(rows / size));
    ctx->SetOutput(1, xla::ConstantR1<int32_t>(ctx->builder(), received));
  }
};

// XLA:CPU: registered when the op library loads (handlers: host_handlers.cc). XLA:GPU:
// RegisterXlaGpuLowerings(), called by the GPU library once its CUDA handlers registered
// (cc/tf_gpu/xla_cuda_handlers.cc); without it, TF's auto-clustering keeps tfring's ops out
// of GPU clusters, and tfring.tensorflow refuses them under jit_compile=True where TF sees
// a GPU, naming the fix (tfring/_tensorflow/xla.py).
using tensorflow::DEVICE_CPU_XLA_JIT;
REGISTER_XLA_OP(Name("TfringAllreduce").Device(DEVICE_CPU_XLA_JIT), SameShapeLowering<OpType::kAllreduce>);
REGISTER_XLA_OP(Name("TfringBroadcast").Device(DEVICE_CPU_XLA_JIT), SameShapeLowering<OpType::kBroadcast>);
REGISTER_XLA_OP(Name("TfringGroupedAllreduce").Device(DEVICE_CPU_XLA_JIT), GroupedAllreduceLowering);
REGISTER_XLA_OP(Name("TfringReducescatter").Device(DEVICE_CPU_XLA_JIT), RowsLowering<OpType::kReducescatter>);
REGISTER_XLA_OP(Name("TfringAllgather").Device(DEVICE_CPU_XLA_JIT), RowsLowering<OpType::kAllgather>);
REGISTER_XLA_OP(Name("TfringAlltoall").Device(DEVICE_CPU_XLA_JIT), AlltoallLowering);

template <typename Lowering>
void RegisterGpu(const char* op) {
  static_cast<void>(tensorflow::XlaOpRegistrar(
      tensorflow::XlaOpRegistrationBuilder::Name(op).Device(tensorflow::DEVICE_GPU_XLA_JIT).Build(
          [](tensorflow::OpKernelConstruction* ctx) -> tensorflow::OpKernel* { return new Lowering(ctx); })));
}

}  // namespace

void RegisterXlaGpuLowerings() {
  static const bool once = [] {
    RegisterGpu<SameShapeLowering<OpType::kAllreduce>>("TfringAllreduce");
    RegisterGpu<SameShapeLowering<OpType::kBroadcast>>("TfringBroadcast");
    RegisterGpu<GroupedAllreduceLowering>("TfringGroupedAllreduce");
    RegisterGpu<RowsLowering<OpType::kReducescatter>>("TfringReducescatter");
    RegisterGpu<RowsLowering<OpType::kAllgather>>("TfringAllgather");
    RegisterGpu<AlltoallLowering>("TfringAlltoall");
    return true;
  }();
  static_cast<void>(once);
}

}  // namespace tf_ops
}  // namespace tfring
