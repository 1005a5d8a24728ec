// The XLA FFI handlers of tfring's custom calls for XLA:GPU (platform "CUDA"), and the
// lowerings' registration for XLA's GPU device (XLA_GPU_JIT). Part of the GPU library
// (loaded only where TF sees a GPU); the XLA:CPU ones are cc/tf/xla/host_handlers.cc.
//
//   start(ctx: XLA's cudaStream_t, device ordinal): ffi_group.h decodes the call into
//          Submissions on that device; xla_cuda::Start records the inputs' ready event on
//          XLA's stream and submits. Returns at once.
//   done:  xla_cuda::Done: XLA's stream waits on the collective's done events (on the
//          device); the host thread waits only until the core has put the work on the NCCL
//          stream. Errors as FFI errors with the core's canonical code.
//
// Registration: the platform name is "CUDA", as XLA's own GPU handlers register; TF 2.21
// canonicalizes it with PlatformUtil::CanonicalPlatformName ("cuda"). ("gpu" would mean
// ROCm on a ROCm build, where this CUDA code must not run.) The handlers have no
// command-buffer trait, so XLA never captures them into a CUDA graph. The registration's
// result is kept and reported by tfring_xla_cuda_registration() (tfring._tensorflow.xla
// reads it); the GPU lowerings are registered only when both handlers registered.
//
// Buffers: as on the host, the done call takes the start call's results and inputs as
// operands, so XLA keeps them until done; XLA's stream waits on the done event before any
// later kernel can reuse them.
#include <string>
#include <vector>

#include "../tf/xla/call_attrs.h"
#include "../tf/xla/ffi_group.h"
#include "../tf/xla/lowerings.h"
#include "backends/nccl/gpu_abi.h"
#include "xla_cuda_calls.h"

namespace tfring {
namespace tf_gpu {
namespace {

namespace ffi = ::xla::ffi;
using gpu::cudaStream_t;
using tf_ops::InflightTable;
using tf_ops::xla_calls::BindAttrs;
using tf_ops::xla_calls::SplitNames;
using tf_ops::xla_calls::ToFfiError;

// A start call's error, returned once no collective of this process still uses XLA's
// buffers (XLA frees them when the call fails); as host_handlers.cc.
ffi::Error StartError(ffi::Error error) {
  InflightTable::Global().WaitUntilIdle(xla_cuda::kEnqueueWaitS);
  return error;
}

ffi::Error StartImpl(std::string_view names, int32_t op, int32_t reduce_op, double prescale, double postscale,
                     int32_t root, int32_t process_set_id, cudaStream_t stream, int32_t device,
                     ffi::RemainingArgs args, ffi::RemainingRets rets) {
  std::vector<std::string> keys;
  std::vector<Submission> group;
  std::vector<InflightTable::Finish> finish;
  ffi::Error built = tf_ops::xla_calls::BuildGroup(names, op, reduce_op, prescale, postscale, root, process_set_id,
                                                   args, rets, device, &keys, &group, &finish);
  if (built.failure()) return StartError(std::move(built));
  Status st = xla_cuda::Start(keys[0], stream, device, std::move(group), std::move(finish));
  return st.ok() ? ffi::Error::Success() : StartError(ToFfiError(st));
}

ffi::Error DoneImpl(std::string_view names, int32_t, int32_t, double, double, int32_t, int32_t, cudaStream_t stream,
                    ffi::RemainingArgs, ffi::RemainingRets) {
  return ToFfiError(xla_cuda::Done(SplitNames(std::string(names))[0], stream));
}

XLA_FFI_DEFINE_HANDLER(kCudaStart, StartImpl,
                       BindAttrs()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Ctx<ffi::DeviceOrdinal>()
                           .RemainingArgs()
                           .RemainingRets());
XLA_FFI_DEFINE_HANDLER(kCudaDone, DoneImpl,
                       BindAttrs().Ctx<ffi::PlatformStream<cudaStream_t>>().RemainingArgs().RemainingRets());

constexpr char kPlatform[] = "CUDA";

// "" once both handlers and the GPU lowerings are registered, else why not.
std::string Register() {
  const XLA_FFI_Api* api = ::xla::ffi::GetXlaFfiApi();
  for (auto [target, handler] : {std::pair<const char*, XLA_FFI_Handler*>{tf_ops::xla_calls::kStartTarget, kCudaStart},
                                 {tf_ops::xla_calls::kDoneTarget, kCudaDone}}) {
    if (XLA_FFI_Error* error = ffi::Ffi::RegisterStaticHandler(api, target, kPlatform, handler)) {
      std::string message = std::string("registering the XLA FFI handler ") + target + " for platform " +
                            kPlatform + " failed: " + ffi::internal::GetErrorMessage(api, error);
      ffi::internal::DestroyError(api, error);
      return message;
    }
  }
  tf_ops::RegisterXlaGpuLowerings();
  return "";
}

const std::string& Registration() {
  static const std::string* result = new std::string(Register());
  return *result;
}

[[maybe_unused]] const bool kRegistered = (Registration(), true);  // when the library loads

}  // namespace
}  // namespace tf_gpu
}  // namespace tfring

// For tfring._tensorflow.xla (ctypes): "" when tfring's collectives compile for XLA:GPU here,
// else why not.
extern "C" __attribute__((visibility("default"))) const char* tfring_xla_cuda_registration() {
  return tfring::tf_gpu::Registration().c_str();
}
