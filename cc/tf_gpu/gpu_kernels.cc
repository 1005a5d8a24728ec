// The GPU library's kernels: every op's kernel (cc/tf/collective_kernels.h, the same code
// the CPU library registers) with GpuPlacement. Loaded after the CPU library, and only
// when TensorFlow sees a GPU. What differs from host memory:
//   * requests carry device = TF's GPU index, so the core runs them with NCCL;
//   * they enqueue from DeviceContext::ThenExecute, i.e. once TF's compute stream has
//     produced the inputs, and outputs allocated later wait for that stream too
//     (stream_order.h). The core calls done() only when the results are on the device.
// Never blocks a TF thread.
#include "../tf/collective_kernels.h"
#include "stream_order.h"

namespace tfring {
namespace tf_gpu {
namespace {

using tensorflow::OpKernelContext;
using tf_ops::AllocateFn;

constexpr double kStreamWaitS = 300;  // a compute stream that does not drain in 5 min is stuck

struct GpuPlacement {
  static int Device(OpKernelContext* ctx) { return TfGpuIndex(ctx); }

  // Enqueues once the compute stream has run everything before this op.
  static void Enqueue(OpKernelContext* ctx, std::vector<Submission> subs,
                      tensorflow::AsyncOpKernel::DoneCallback done) {
    auto pending = std::make_shared<std::vector<Submission>>(std::move(subs));
    absl::Status st = ThenOnComputeStream(ctx, [ctx, pending, done] {
      Status s = Runtime::Global().EnqueueGroup(std::move(*pending));
      if (!s.ok()) {
        ctx->SetStatus(tf_ops::ToTfStatus(s));
        done();
      }
    });
    if (!st.ok()) {
      ctx->SetStatus(st);
      done();
    }
  }

  // The output is written only after the compute stream drained (its memory may still be
  // in use by kernels queued before the allocation).
  static AllocateFn AllocateLater(OpKernelContext* ctx, int index, const std::string& name) {
    return [ctx, index, name](const std::vector<int64_t>& dims, void** data) {
      tensorflow::TensorShape shape;
      absl::Status st = tf_ops::MakeShape(dims, &shape);
      tensorflow::Tensor* out = nullptr;
      if (st.ok()) st = ctx->allocate_output(index, shape, &out);
      if (!st.ok()) {
        return Status::Internal("allocating the GPU output of '" + name + "' failed: " + std::string(st.message()));
      }
      TFRING_RETURN_IF_ERROR(WaitForComputeStream(ctx, kStreamWaitS));
      *data = tf_ops::MutableDataOf(out);
      return Status::OK();
    };
  }
};

using tensorflow::DEVICE_GPU;
using namespace tf_ops;  // the kernel templates
REGISTER_KERNEL_BUILDER(Name("TfringAllreduce").Device(DEVICE_GPU), AllreduceKernel<GpuPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringGroupedAllreduce").Device(DEVICE_GPU), GroupedAllreduceKernel<GpuPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringReducescatter").Device(DEVICE_GPU), ReducescatterKernel<GpuPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringAllgather").Device(DEVICE_GPU), AllgatherKernel<GpuPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringAlltoall").Device(DEVICE_GPU).HostMemory("splits").HostMemory("received_splits"),
                        AlltoallKernel<GpuPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringBroadcast").Device(DEVICE_GPU), BroadcastKernel<GpuPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringBarrier").Device(DEVICE_GPU), BarrierKernel);
REGISTER_KERNEL_BUILDER(Name("TfringJoin").Device(DEVICE_GPU).HostMemory("last_joined_rank"), JoinKernel);

}  // namespace
}  // namespace tf_gpu
}  // namespace tfring
