// What both platforms' FFI handlers of tfring's custom calls share (host_handlers.cc for
// XLA:CPU, cc/tf_gpu/xla_cuda_handlers.cc for XLA:GPU): decoding a start call into the
// core's Submissions, and mapping a core Status to an FFI error.
//
// Buffers: the Submissions point into XLA's operand and result buffers (no copy); see the
// handlers for how each platform keeps them alive until the core is done.
// Thread-safety: plain functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "control/submission.h"
#include "inflight.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wreturn-type"  // api.h's operator<< for XLA_FFI_DataType
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "xla/ffi/api/ffi.h"
#pragma GCC diagnostic pop

namespace xla {
namespace ffi {
const XLA_FFI_Api* GetXlaFfiApi();  // exported by libtensorflow_cc.so.2 (ffi_api.h)
}  // namespace ffi
}  // namespace xla

namespace tfring {
namespace tf_ops {
namespace xla_calls {

// A core Status as an FFI error with the same canonical code and message (OK: success).
::xla::ffi::Error ToFfiError(const Status& st);

// One start call, decoded: a Submission per tensor (Request from the call's attributes and
// XLA's buffer types and shapes; input/output pointing into XLA's buffers) and each
// member's Finish (allgather/alltoall: the output shape XLA compiled must be the agreed
// one). `device`: -1 for host buffers, else the GPU ordinal. The group's key is keys[0].
// An FFI error (naming the tensor) for a malformed call or an element type tfring lacks.
::xla::ffi::Error BuildGroup(std::string_view names, int32_t op, int32_t reduce_op, double prescale,
                             double postscale, int32_t root, int32_t process_set_id, ::xla::ffi::RemainingArgs args,
                             ::xla::ffi::RemainingRets rets, int32_t device, std::vector<std::string>* keys,
                             std::vector<Submission>* group, std::vector<InflightTable::Finish>* finish);

// Both calls carry every attribute of call_attrs.h (FFI decodes all of them, in order).
inline auto BindAttrs() {
  return ::xla::ffi::Ffi::Bind()
      .Attr<std::string_view>("names")
      .Attr<int32_t>("op")
      .Attr<int32_t>("reduce_op")
      .Attr<double>("prescale")
      .Attr<double>("postscale")
      .Attr<int32_t>("root")
      .Attr<int32_t>("process_set_id");
}

}  // namespace xla_calls
}  // namespace tf_ops
}  // namespace tfring
