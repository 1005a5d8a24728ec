// Op registrations and shape functions of tfring's TF op library.
//
// Every op is stateful (never constant-folded, deduplicated or pruned by Grappler: two
// allreduces of the same value are two collectives) and carries `tensor_name`, the
// negotiation key chosen by tfring.tensorflow (see docs/tensorflow.md, "Names"). The data
// collectives also carry `process_set_id` (0: every rank; docs/tensorflow.md, "Process
// sets"); broadcast's root_rank stays a global rank. Kernels
// are CPU-only for now and have no XLA lowering.
#include "data_types.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfring {
namespace tf_ops {
namespace {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

// The element types the core can move, from the one TF <-> core table (data_types.h).
const std::string kTypes = TypeListAttr();

// [?, d1, d2, ...]: first dimension decided at run time, the others kept.
absl::Status UnknownFirstDim(InferenceContext* c) {
  ShapeHandle input;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &input));
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->ReplaceDim(input, 0, c->UnknownDim(), &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

absl::Status EachOutputLikeItsInput(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("TfringAllreduce")
    .Attr("T: " + kTypes)
    .Attr("tensor_name: string")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("sum: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()  // keeps UnavailableError (a lost peer) as is inside functions
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
Reduces `tensor` across every rank of the tfring job (element-wise `reduce_op`: 0 Sum,
1 Average, 2 Min, 3 Max, 4 Product; or 5 Adasum, Horovod's adaptive summation), scaling the input by `prescale_factor` before and the
result by `postscale_factor` after. Same shape and dtype on every rank.
)doc");

REGISTER_OP("TfringGroupedAllreduce")
    .Attr("T: list(" + kTypes + ") >= 1")
    .Attr("tensor_names: list(string)")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("process_set_id: int = 0")
    .Input("tensors: T")
    .Output("sums: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()  // keeps UnavailableError (a lost peer) as is inside functions
    .SetShapeFn(EachOutputLikeItsInput)
    .Doc(R"doc(
Allreduce of N tensors submitted together (one negotiation, fused by the core).
`tensor_names` holds the N negotiation keys.
)doc");

REGISTER_OP("TfringAllgather")
    .Attr("T: " + kTypes)
    .Attr("tensor_name: string")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()  // keeps UnavailableError (a lost peer) as is inside functions
    .SetShapeFn(UnknownFirstDim)
    .Doc(R"doc(
Concatenates every rank's `tensor` along the first dimension, in rank order. The first
dimension may differ between ranks; the others must match.
)doc");

REGISTER_OP("TfringBroadcast")
    .Attr("T: " + kTypes)
    .Attr("tensor_name: string")
    .Attr("root_rank: int")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()  // keeps UnavailableError (a lost peer) as is inside functions
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
Returns `root_rank`'s `tensor` on every rank (same shape and dtype on every rank).
)doc");

REGISTER_OP("TfringAlltoall")
    .Attr("T: " + kTypes)
    .Attr("tensor_name: string")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetIsStateful()
    .SetIsDistributedCommunication()  // keeps UnavailableError (a lost peer) as is inside functions
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(UnknownFirstDim(c));
      ShapeHandle splits;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &splits));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Sends `splits[j]` rows of `tensor` to rank j (an empty `splits` divides the first dimension
evenly) and returns the rows received from every rank, concatenated in rank order, and how
many came from each rank.
)doc");

REGISTER_OP("TfringReducescatter")
    .Attr("T: " + kTypes)
    .Attr("tensor_name: string")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()  // keeps UnavailableError (a lost peer) as is inside functions
    .SetShapeFn(UnknownFirstDim)
    .Doc(R"doc(
Reduces `tensor` across ranks and returns this rank's block of rows of the result: the
first dimension is split as evenly as possible, lower ranks getting one extra row.
)doc");

REGISTER_OP("TfringJoin")
    .Attr("tensor_name: string")
    .Output("last_joined_rank: int32")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
This rank has no more data: until every rank has joined, it adds zeros to the other ranks'
allreduces. Completes once every rank has joined, with the last rank to join.
)doc");

REGISTER_OP("TfringBarrier")
    .Attr("tensor_name: string")
    .SetIsStateful()
    .SetIsDistributedCommunication()  // keeps UnavailableError (a lost peer) as is inside functions
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc(R"doc(
Completes once every rank has reached the barrier of this name.
)doc");

}  // namespace tf_ops
}  // namespace tfring
