// Shared pieces of tfring's TensorFlow kernels: dtype and status mapping between TF and the
// core, and CollectiveKernel, the base of every tfring AsyncOpKernel.
//
// Blocking: none. ComputeAsync() validates, allocates what it can, enqueues into the core
// (Runtime::Global(), the same runtime the pybind module uses) and returns at once; the
// core calls the Submission's `done` later on its background thread, which sets the op's
// status and calls TF's DoneCallback exactly once.
//
// Ownership: the `done` lambdas capture tensorflow::Tensor copies (reference-counted
// buffers) of every input and preallocated output, so the memory the core reads and writes
// stays alive until the collective completes, whatever TF does with the op meanwhile.
// The OpKernelContext itself stays valid until DoneCallback runs (TF's contract), which is
// what lets allgather/alltoall allocate their outputs from the background thread.
#pragma once

#include <string>
#include <vector>

#include "../core/runtime.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tfring {
namespace tf_ops {

// TF dtype -> core dtype. Returns false for a dtype the core has no wire value for.
bool ToCoreDataType(tensorflow::DataType tf_dtype, DataType* out);

// Core status -> TF status (ARCHITECTURE.md section 3):
//   kInvalidArgument -> InvalidArgument; kMismatch, kPrecondition -> FailedPrecondition;
//   kPeerLost -> Unavailable; kTimeout -> DeadlineExceeded; kUnimplemented -> Unimplemented;
//   kAborted -> Aborted; kInternal -> Internal.
absl::Status ToTfStatus(const Status& status);

// Shape of a TF tensor as the core's vector of dims.
std::vector<int64_t> ShapeOf(const tensorflow::Tensor& t);

// Builds a TensorShape from core dims (checked: never aborts the process).
absl::Status MakeShape(const std::vector<int64_t>& dims, tensorflow::TensorShape* out);

// Raw data pointers (nullptr for an empty tensor is fine for the core).
const void* DataOf(const tensorflow::Tensor& t);
void* MutableDataOf(tensorflow::Tensor* t);

// A `done` for a Submission: sets the TF status from the core's and calls TF's callback.
// `keep_alive` tensors are held until then.
std::function<void(const Status&)> MakeDone(tensorflow::OpKernelContext* ctx,
                                            tensorflow::AsyncOpKernel::DoneCallback done,
                                            std::vector<tensorflow::Tensor> keep_alive);

// Base of tfring's kernels: reads the `tensor_name` attr (the negotiation key, chosen by
// the Python wrapper so that it is equal on every rank) and, where the op has it, the
// `process_set_id` attr, and builds Requests.
class CollectiveKernel : public tensorflow::AsyncOpKernel {
 public:
  explicit CollectiveKernel(tensorflow::OpKernelConstruction* ctx, bool has_tensor_name = true);

 protected:
  // A Request for `op` on `input` with this kernel's name; fails (on ctx) for an
  // unsupported dtype. `device` is -1 (host memory); PlacedKernel (collective_kernels.h)
  // sets its placement's.
  bool FillRequest(tensorflow::OpKernelContext* ctx, OpType op, const tensorflow::Tensor& input,
                   const std::string& name, Request* request);
  // Enqueues; on an immediate core error sets it on ctx and calls done (so callers just
  // return afterwards).
  void EnqueueOrFail(tensorflow::OpKernelContext* ctx, Submission submission,
                     const DoneCallback& done);

  const std::string& tensor_name() const { return tensor_name_; }
  int32_t process_set_id() const { return process_set_id_; }

 private:
  std::string tensor_name_;
  int32_t process_set_id_ = 0;
};

// Reads the reduce attrs shared by allreduce-like ops (reduce_op, prescale_factor,
// postscale_factor) at construction.
struct ReduceAttrs {
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  absl::Status Read(tensorflow::OpKernelConstruction* ctx);
  void ApplyTo(Request* r) const {
    r->reduce_op = reduce_op;
    r->prescale = prescale;
    r->postscale = postscale;
  }
};

}  // namespace tf_ops
}  // namespace tfring
