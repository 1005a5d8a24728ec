// Ordering tfring's GPU work after TensorFlow's compute stream without touching the raw
// stream: TF 2.21 wheels cannot compile xla/stream_executor/stream.h (missing headers), so
// tfring never calls se::Stream methods. It only passes the se::Stream* it gets from
// op_device_context()->stream() back to DeviceContext::ThenExecute, a virtual method TF has
// kept stable for years: the GPU device runs the callback on a host thread once all work
// already enqueued on that stream has finished (through its event manager).
//
//   * inputs:  a GPU kernel enqueues its request from ThenExecute's callback, so NCCL (on
//              tfring's own stream) reads inputs only after the kernels producing them ran;
//   * outputs: memory TF hands out may still be used by kernels queued on the compute
//              stream before the allocation (TF's allocator relies on stream order), so an
//              output allocated later, on tfring's background thread (allgather/alltoall),
//              is written only after WaitForComputeStream;
//   * done():  the core calls it after tfring's stream finished, so TF's later kernels see
//              complete outputs.
// Thread-safety: callable from any thread while the OpKernelContext is alive.
#pragma once

#include <functional>

#include "base/status.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfring {
namespace tf_gpu {

// Runs `fn` on a host thread once the op's compute stream has finished its queued work.
// Returns an error (and never runs `fn`) when the device has no stream or refuses.
absl::Status ThenOnComputeStream(tensorflow::OpKernelContext* ctx, std::function<void()> fn);

// Blocks until the op's compute stream has finished its queued work (bounded).
Status WaitForComputeStream(tensorflow::OpKernelContext* ctx, double timeout_s);

// The device number tfring reports for this op's tensors: TF's own GPU index (equal on
// every rank after pin_gpu(); the core finds the CUDA device from the pointers).
int TfGpuIndex(tensorflow::OpKernelContext* ctx);

}  // namespace tf_gpu
}  // namespace tfring
