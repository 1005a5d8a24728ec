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

#include "control/collective_attrs.h"
#include "runtime/runtime.h"
#include "data_types.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tfring {
namespace tf_ops {

// Core status -> TF status with the core's canonical code (CanonicalCode, cc/core/base/status.h;
// the table in docs/core.md, "Errors"), the message unchanged.
absl::Status ToTfStatus(const Status& status);

// Shape of a TF tensor as the core's vector of dims.
std::vector<int64_t> ShapeOf(const tensorflow::Tensor& t);

// Builds a TensorShape from core dims (checked: never aborts the process).
absl::Status MakeShape(const std::vector<int64_t>& dims, tensorflow::TensorShape* out);

// Raw data pointers (nullptr for an empty tensor is fine for the core).
const void* DataOf(const tensorflow::Tensor& t);
void* MutableDataOf(tensorflow::Tensor* t);

// A `done` for a Submission: sets the TF status from the core's and calls TF's callback.
// `keep_alive` tensors are held until then, and released before the callback: TF's callback
// can run the caller's next step (the woken Python thread preempts the core's thread on a
// bound core), and a buffer still held here then cannot be reused, so a 16 MiB output
// alternated between two buffers, 0.8-1.0 ms per call (docs/benchmarks.md).
std::function<void(const Status&)> MakeDone(tensorflow::OpKernelContext* ctx,
                                            tensorflow::AsyncOpKernel::DoneCallback done,
                                            std::vector<tensorflow::Tensor> keep_alive);

// The CollectiveAttrs of `op` from the attrs its TF op has: process_set_id; reduce_op,
// prescale_factor, postscale_factor (reduce_op checked against the core's table); root_rank.
absl::Status ReadCollectiveAttrs(tensorflow::OpKernelConstruction* ctx, OpType op, CollectiveAttrs* attrs);

// Base of tfring's kernels: reads the `tensor_name` attr (the negotiation key, chosen by
// the Python wrapper so that it is equal on every rank) and the op's CollectiveAttrs, and
// builds Requests.
class CollectiveKernel : public tensorflow::AsyncOpKernel {
 public:
  CollectiveKernel(tensorflow::OpKernelConstruction* ctx, OpType op, bool has_tensor_name = true);

 protected:
  // A Request with attrs() on `input` under `name`; fails (on ctx) for an unsupported
  // dtype. `device` is -1 (host memory); PlacedKernel (collective_kernels.h) sets its
  // placement's.
  bool FillRequest(tensorflow::OpKernelContext* ctx, const tensorflow::Tensor& input, const std::string& name,
                   Request* request);
  // Enqueues; on an immediate core error sets it on ctx and calls done (so callers just
  // return afterwards).
  void EnqueueOrFail(tensorflow::OpKernelContext* ctx, Submission submission,
                     const DoneCallback& done);

  const std::string& tensor_name() const { return tensor_name_; }
  const CollectiveAttrs& attrs() const { return attrs_; }

 private:
  std::string tensor_name_;
  CollectiveAttrs attrs_;
};

}  // namespace tf_ops
}  // namespace tfring
