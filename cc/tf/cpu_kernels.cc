// The CPU library's kernels: every op's kernel (collective_kernels.h) on host memory.
#include "collective_kernels.h"

namespace tfring {
namespace tf_ops {

void HostPlacement::Enqueue(tensorflow::OpKernelContext* ctx, std::vector<Submission> subs,
                            tensorflow::AsyncOpKernel::DoneCallback done) {
  Status st = Runtime::Global().EnqueueGroup(std::move(subs));
  if (!st.ok()) {  // the core took none of them: their own `done` will never run
    ctx->SetStatus(ToTfStatus(st));
    done();
  }
}

AllocateFn HostPlacement::AllocateLater(tensorflow::OpKernelContext* ctx, int index, const std::string& name) {
  return [ctx, index, name](const std::vector<int64_t>& dims, void** data) {
    tensorflow::TensorShape shape;
    absl::Status st = MakeShape(dims, &shape);
    if (st.ok()) {
      tensorflow::Tensor* out = nullptr;
      st = ctx->allocate_output(index, shape, &out);
      if (st.ok()) {
        *data = MutableDataOf(out);
        return Status::OK();
      }
    }
    return Status::Internal("allocating the output of '" + name + "' failed: " + std::string(st.message()));
  };
}

namespace {

using tensorflow::DEVICE_CPU;
REGISTER_KERNEL_BUILDER(Name("TfringAllreduce").Device(DEVICE_CPU), AllreduceKernel<HostPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringGroupedAllreduce").Device(DEVICE_CPU), GroupedAllreduceKernel<HostPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringReducescatter").Device(DEVICE_CPU), ReducescatterKernel<HostPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringAllgather").Device(DEVICE_CPU), AllgatherKernel<HostPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringAlltoall").Device(DEVICE_CPU).HostMemory("splits").HostMemory("received_splits"),
                        AlltoallKernel<HostPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringBroadcast").Device(DEVICE_CPU), BroadcastKernel<HostPlacement>);
REGISTER_KERNEL_BUILDER(Name("TfringBarrier").Device(DEVICE_CPU), BarrierKernel);
REGISTER_KERNEL_BUILDER(Name("TfringJoin").Device(DEVICE_CPU), JoinKernel);

}  // namespace
}  // namespace tf_ops
}  // namespace tfring
