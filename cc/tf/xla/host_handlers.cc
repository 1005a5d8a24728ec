// The XLA FFI handlers of tfring's custom calls for XLA:CPU (platform "Host"), registered
// with the XLA runtime inside TF's libtensorflow_cc.so.2 when the op library loads.
//
//   start: builds one Submission per tensor (ffi_group.h: the core's Request from the call's
//          attributes, the dtype and shape of XLA's buffers) and submits them as one group
//          (InflightTable::Start -> Runtime::EnqueueGroup): the same queue, negotiation,
//          fusion and response cache as the TF kernels. Returns at once.
//   done:  returns an FFI Future that the group's completion fulfils (InflightTable::Await):
//          no XLA thread waits; XLA runs whatever does not depend on the result meanwhile.
//
// Buffers: the core reads the start call's operands and writes its results until the group
// completes. The done call takes both as operands, so XLA keeps them alive (and unchanged)
// until then, and its results alias the start call's (output i = operand i): no copy.
// Errors: a core Status becomes an FFI error with the same canonical code and message.
#include <string>
#include <vector>

#include "call_attrs.h"
#include "ffi_group.h"

namespace tfring {
namespace tf_ops {
namespace {

namespace ffi = ::xla::ffi;
using xla_calls::BindAttrs;
using xla_calls::SplitNames;
using xla_calls::ToFfiError;

// How long a failing start call waits for the collectives earlier start calls submitted
// (InflightTable::WaitUntilIdle); the core ends them sooner on a broken job.
constexpr double kIdleWaitS = 600;

// A start call's error, returned once no collective of this process still writes into
// XLA's buffers (XLA frees them when the call fails).
ffi::Error StartError(ffi::Error error) {
  InflightTable::Global().WaitUntilIdle(kIdleWaitS);
  return error;
}

ffi::Error StartImpl(std::string_view names, int32_t op, int32_t reduce_op, double prescale, double postscale,
                     int32_t root, int32_t process_set_id, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  std::vector<std::string> keys;
  std::vector<Submission> group;
  std::vector<InflightTable::Finish> finish;
  ffi::Error built = xla_calls::BuildGroup(names, op, reduce_op, prescale, postscale, root, process_set_id, args, rets,
                                           /*device=*/-1, &keys, &group, &finish);
  if (built.failure()) return StartError(std::move(built));
  Status started = InflightTable::Global().Start(keys[0], std::move(group), std::move(finish));
  return started.ok() ? ffi::Error::Success() : StartError(ToFfiError(started));
}

ffi::Future DoneImpl(std::string_view names, int32_t, int32_t, double, double, int32_t, int32_t, ffi::RemainingArgs,
                     ffi::RemainingRets) {
  std::string key = SplitNames(std::string(names))[0];
  ffi::Promise promise;
  ffi::Future future(promise);
  InflightTable::Global().Await(key, [promise](const Status& st) mutable {
    if (st.ok()) {
      promise.SetAvailable();
    } else {
      promise.SetError(ToFfiError(st));
    }
  });
  return future;
}

XLA_FFI_DEFINE_HANDLER(kStart, StartImpl, BindAttrs().RemainingArgs().RemainingRets());
XLA_FFI_DEFINE_HANDLER(kDone, DoneImpl, BindAttrs().RemainingArgs().RemainingRets());

XLA_FFI_REGISTER_HANDLER(::xla::ffi::GetXlaFfiApi(), xla_calls::kStartTarget, "Host", kStart);
XLA_FFI_REGISTER_HANDLER(::xla::ffi::GetXlaFfiApi(), xla_calls::kDoneTarget, "Host", kDone);

}  // namespace
}  // namespace tf_ops
}  // namespace tfring
