// tfring's TF kernels, each written once. A kernel reads its inputs, allocates what it
// can, builds Submissions and hands them to the core; a Placement says what differs
// between devices:
//
//   struct Placement {
//     // The Request's device: -1 for host memory, else the GPU ordinal.
//     static int Device(OpKernelContext* ctx);
//     // Hands `subs` to the core, all or nothing (Runtime::EnqueueGroup). On an immediate
//     // error the core took none of them: set it on ctx and call `done`.
//     static void Enqueue(OpKernelContext* ctx, std::vector<Submission> subs, DoneCallback done);
//     // allocate_output for an output sized after negotiation (called on the core's
//     // background thread; TF keeps ctx valid until `done`).
//     static AllocateFn AllocateLater(OpKernelContext* ctx, int index, const std::string& name);
//   };
//
// HostPlacement (here) serves the CPU library (cc/tf/cpu_kernels.cc); GpuPlacement
// (cc/tf_gpu/gpu_kernels.cc) orders the work after TF's compute stream. Never blocks a TF
// thread; ownership of the tensors is as kernel_common.h says.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernel_common.h"

namespace tfring {
namespace tf_ops {

using AllocateFn = std::function<Status(const std::vector<int64_t>&, void**)>;

struct HostPlacement {
  static int Device(tensorflow::OpKernelContext*) { return -1; }
  static void Enqueue(tensorflow::OpKernelContext* ctx, std::vector<Submission> subs,
                      tensorflow::AsyncOpKernel::DoneCallback done);
  static AllocateFn AllocateLater(tensorflow::OpKernelContext* ctx, int index, const std::string& name);
};

// A CollectiveKernel whose requests carry the placement's device.
template <typename Placement>
class PlacedKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  bool Fill(tensorflow::OpKernelContext* ctx, const tensorflow::Tensor& input, const std::string& name,
            Request* r) {
    if (!FillRequest(ctx, input, name, r)) return false;
    r->attrs.device = Placement::Device(ctx);
    return true;
  }
  // One submission with the common fields; the caller adds op-specific ones.
  static void Enqueue(tensorflow::OpKernelContext* ctx, Submission s, DoneCallback done) {
    std::vector<Submission> subs;
    subs.push_back(std::move(s));
    Placement::Enqueue(ctx, std::move(subs), std::move(done));
  }
};

// TfringAllreduce and TfringBroadcast: the output has the input's shape and forwards the
// input buffer when TF allows it (the core then works in place).
template <typename Placement, OpType kOp>
class SameShapeKernel : public PlacedKernel<Placement> {
 public:
  explicit SameShapeKernel(tensorflow::OpKernelConstruction* ctx) : PlacedKernel<Placement>(ctx, kOp) {}

  void ComputeAsync(tensorflow::OpKernelContext* ctx, CollectiveKernel::DoneCallback done) override {
    const tensorflow::Tensor& input = ctx->input(0);
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, input.shape(), &output), done);
    Submission s;
    if (!this->Fill(ctx, input, this->tensor_name(), &s.request)) return done();
    s.input = DataOf(input);
    s.output = MutableDataOf(output);
    s.done = MakeDone(ctx, done, {input, *output});
    this->Enqueue(ctx, std::move(s), done);
  }
};

template <typename Placement>
using AllreduceKernel = SameShapeKernel<Placement, OpType::kAllreduce>;
// The root's tensor to every rank (root_rank: attrs().root, a global rank).
template <typename Placement>
using BroadcastKernel = SameShapeKernel<Placement, OpType::kBroadcast>;

// Completion of a group: TF's callback runs once, after the last member, with the first
// error any member reported. Thread-safe (members complete on the core's thread).
struct GroupCompletion {
  explicit GroupCompletion(int n) : remaining(n) {}
  std::atomic<int> remaining;
  std::mutex mu;
  absl::Status first_error;
};

// TfringGroupedAllreduce: N tensors in one EnqueueGroup, so they negotiate together and fuse.
template <typename Placement>
class GroupedAllreduceKernel : public PlacedKernel<Placement> {
 public:
  explicit GroupedAllreduceKernel(tensorflow::OpKernelConstruction* ctx)
      : PlacedKernel<Placement>(ctx, OpType::kAllreduce, /*has_tensor_name=*/false) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("tensor_names", &names_));
  }

  void ComputeAsync(tensorflow::OpKernelContext* ctx, CollectiveKernel::DoneCallback done) override {
    const int n = ctx->num_inputs();
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(names_.size()) == n,
                      absl::InvalidArgumentError("grouped allreduce got " + std::to_string(n) +
                                                 " tensors but " + std::to_string(names_.size()) +
                                                 " tensor_names"),
                      done);
    auto group = std::make_shared<GroupCompletion>(n);
    std::vector<Submission> subs(n);
    for (int i = 0; i < n; ++i) {
      const tensorflow::Tensor& input = ctx->input(i);
      tensorflow::Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({i}, i, input.shape(), &output), done);
      Submission& s = subs[i];
      if (!this->Fill(ctx, input, names_[i], &s.request)) return done();
      s.input = DataOf(input);
      s.output = MutableDataOf(output);
      s.done = [ctx, done, group, keep = std::vector<tensorflow::Tensor>{input, *output}](const Status& st) mutable {
        std::vector<tensorflow::Tensor>().swap(keep);  // released before `done` (kernel_common.h, MakeDone)
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(group->mu);
          if (group->first_error.ok()) group->first_error = ToTfStatus(st);
        }
        if (group->remaining.fetch_sub(1) == 1) {
          if (!group->first_error.ok()) ctx->SetStatus(group->first_error);
          done();
        }
      };
    }
    Placement::Enqueue(ctx, std::move(subs), done);
  }

 private:
  std::vector<std::string> names_;
};

// TfringReducescatter: this rank's rows of the reduction (ReducescatterRows), by its index
// in the op's process set. Outside the set, or for an unknown set, it allocates no rows and
// the core's enqueue check fails the op with the full message.
template <typename Placement>
class ReducescatterKernel : public PlacedKernel<Placement> {
 public:
  explicit ReducescatterKernel(tensorflow::OpKernelConstruction* ctx)
      : PlacedKernel<Placement>(ctx, OpType::kReducescatter) {}

  void ComputeAsync(tensorflow::OpKernelContext* ctx, CollectiveKernel::DoneCallback done) override {
    const tensorflow::Tensor& input = ctx->input(0);
    const std::string& name = this->tensor_name();
    OP_REQUIRES_ASYNC(ctx, input.dims() >= 1,
                      absl::InvalidArgumentError("reducescatter of tensor '" + name +
                                                 "' needs at least one dimension (got a scalar)"),
                      done);
    int rank = -1, size = 0;
    Status position = Runtime::Global().ProcessSetPosition(this->attrs().process_set_id, &rank, &size);
    OP_REQUIRES_ASYNC(ctx, position.code() != ErrorCode::kPrecondition,
                      absl::FailedPreconditionError("tfring is not initialized: call hvd.init() before "
                                                    "reducescatter of '" + name + "'"),
                      done);
    tensorflow::TensorShape shape = input.shape();
    shape.set_dim(0, rank < 0 ? 0 : ReducescatterRows(input.dim_size(0), size, rank));
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, shape, &output), done);
    Submission s;
    if (!this->Fill(ctx, input, name, &s.request)) return done();
    s.input = DataOf(input);
    s.output = MutableDataOf(output);
    s.done = MakeDone(ctx, done, {input, *output});
    this->Enqueue(ctx, std::move(s), done);
  }
};

// TfringAllgather: the output's first dimension is known only after negotiation.
template <typename Placement>
class AllgatherKernel : public PlacedKernel<Placement> {
 public:
  explicit AllgatherKernel(tensorflow::OpKernelConstruction* ctx)
      : PlacedKernel<Placement>(ctx, OpType::kAllgather) {}

  void ComputeAsync(tensorflow::OpKernelContext* ctx, CollectiveKernel::DoneCallback done) override {
    const tensorflow::Tensor& input = ctx->input(0);
    Submission s;
    if (!this->Fill(ctx, input, this->tensor_name(), &s.request)) return done();
    s.input = DataOf(input);
    s.allocate_output = Placement::AllocateLater(ctx, 0, this->tensor_name());
    s.done = MakeDone(ctx, done, {input});
    this->Enqueue(ctx, std::move(s), done);
  }
};

// TfringAlltoall: `splits` and `received_splits` live in host memory on every device.
template <typename Placement>
class AlltoallKernel : public PlacedKernel<Placement> {
 public:
  explicit AlltoallKernel(tensorflow::OpKernelConstruction* ctx) : PlacedKernel<Placement>(ctx, OpType::kAlltoall) {}

  void ComputeAsync(tensorflow::OpKernelContext* ctx, CollectiveKernel::DoneCallback done) override {
    const tensorflow::Tensor& input = ctx->input(0);
    const tensorflow::Tensor& splits = ctx->input(1);
    OP_REQUIRES_ASYNC(ctx, tensorflow::TensorShapeUtils::IsVector(splits.shape()),
                      absl::InvalidArgumentError("alltoall of tensor '" + this->tensor_name() +
                                                 "': splits must be a vector, got shape " +
                                                 splits.shape().DebugString()),
                      done);
    Submission s;
    if (!this->Fill(ctx, input, this->tensor_name(), &s.request)) return done();
    auto flat = splits.flat<int32_t>();
    s.request.splits.assign(flat.data(), flat.data() + flat.size());  // empty: divide evenly
    s.input = DataOf(input);
    s.allocate_output = Placement::AllocateLater(ctx, 0, this->tensor_name());
    s.on_received_splits = [ctx](const std::vector<int64_t>& received) {
      tensorflow::Tensor* out = nullptr;
      absl::Status st =
          ctx->allocate_output(1, tensorflow::TensorShape({static_cast<int64_t>(received.size())}), &out);
      if (!st.ok()) {
        ctx->SetStatus(st);
        return;
      }
      auto o = out->flat<int32_t>();
      for (size_t i = 0; i < received.size(); ++i) o(i) = static_cast<int32_t>(received[i]);
    };
    s.done = MakeDone(ctx, done, {input});
    this->Enqueue(ctx, std::move(s), done);
  }
};

// TfringBarrier: negotiation alone, done once every rank has submitted it. No tensors, so
// the same on every device (registered on GPU too, so a barrier placed there needs no host
// round trip) and never ordered after a stream.
class BarrierKernel : public CollectiveKernel {
 public:
  explicit BarrierKernel(tensorflow::OpKernelConstruction* ctx) : CollectiveKernel(ctx, OpType::kBarrier) {}

  void ComputeAsync(tensorflow::OpKernelContext* ctx, DoneCallback done) override {
    Submission s;
    s.request = attrs().MakeRequest(tensor_name(), DataType::kUInt8, {});
    s.done = MakeDone(ctx, done, {});
    EnqueueOrFail(ctx, std::move(s), done);
  }
};

// TfringJoin: this rank has no more data; completes once every rank joined, with the last
// rank to join. Host memory only (the output is a host int32 scalar on every device).
class JoinKernel : public CollectiveKernel {
 public:
  explicit JoinKernel(tensorflow::OpKernelConstruction* ctx) : CollectiveKernel(ctx, OpType::kJoin) {}

  void ComputeAsync(tensorflow::OpKernelContext* ctx, DoneCallback done) override {
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, tensorflow::TensorShape({}), &output), done);
    Submission s;
    s.request = attrs().MakeRequest(tensor_name(), DataType::kInt32, {});
    s.output = MutableDataOf(output);
    s.done = MakeDone(ctx, done, {*output});
    EnqueueOrFail(ctx, std::move(s), done);
  }
};

}  // namespace tf_ops
}  // namespace tfring
