// The XLA lowerings' registrations that are not made when the op library loads.
// xla_kernels.cc registers every lowering for XLA's CPU device (XLA_CPU_JIT) statically;
// the GPU library (cc/tf_gpu/xla_cuda_handlers.cc) calls RegisterXlaGpuLowerings() once
// its CUDA handlers are registered, so that XLA_GPU_JIT compiles tfring's ops only where
// a handler exists. Thread-safety: call once, while the GPU library loads.
#pragma once

namespace tfring {
namespace tf_ops {

// Registers every lowering of xla_kernels.cc for DEVICE_GPU_XLA_JIT (idempotent).
void RegisterXlaGpuLowerings();

}  // namespace tf_ops
}  // namespace tfring
