// The XLA FFI handlers of tfring's custom calls for XLA:CPU (platform "Host"), registered
// with the XLA runtime inside TF's libtensorflow_cc.so.2 when the op library loads.
//
//   start: builds one Submission per tensor (the core's Request from the call's attributes,
//          the dtype and shape of XLA's buffers) and submits them as one group
//          (InflightTable::Start -> Runtime::EnqueueGroup): the same queue, negotiation,
//          fusion and response cache as the TF kernels. Returns at once.
//   done:  returns an FFI Future that the group's completion fulfils (InflightTable::Await):
//          no XLA thread waits; XLA runs whatever does not depend on the result meanwhile.
//
// Buffers: the core reads the start call's operands and writes its results until the group
// completes. The done call takes both as operands, so XLA keeps them alive (and unchanged)
// until then, and its results alias the start call's (output i = operand i): no copy.
// Errors: a core Status becomes an FFI error with the same canonical code and message.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "call_attrs.h"
#include "control/collective_attrs.h"
#include "control/messages.h"
#include "control/submission.h"
#include "inflight.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wreturn-type"  // api.h's operator<< for XLA_FFI_DataType
#include "xla/ffi/api/ffi.h"
#pragma GCC diagnostic pop

namespace xla {
namespace ffi {
const XLA_FFI_Api* GetXlaFfiApi();  // exported by libtensorflow_cc.so.2 (ffi_api.h)
}  // namespace ffi
}  // namespace xla

namespace tfring {
namespace tf_ops {
namespace {

namespace ffi = ::xla::ffi;
using xla_calls::SplitNames;

ffi::Error ToFfiError(const Status& st) {
  if (st.ok()) return ffi::Error::Success();
  return ffi::Error(static_cast<ffi::ErrorCode>(CanonicalCode(st.code())), st.message());
}

// How long a failing start call waits for the collectives earlier start calls submitted
// (InflightTable::WaitUntilIdle); the core ends them sooner on a broken job.
constexpr double kIdleWaitS = 600;

// A start call's error, returned once no collective of this process still writes into
// XLA's buffers (XLA frees them when the call fails).
ffi::Error StartError(ffi::Error error) {
  InflightTable::Global().WaitUntilIdle(kIdleWaitS);
  return error;
}

bool ToCoreType(ffi::DataType t, DataType* out) {
  switch (t) {
    case ffi::DataType::U8: *out = DataType::kUInt8; return true;
    case ffi::DataType::S8: *out = DataType::kInt8; return true;
    case ffi::DataType::S16: *out = DataType::kInt16; return true;
    case ffi::DataType::U16: *out = DataType::kUInt16; return true;
    case ffi::DataType::S32: *out = DataType::kInt32; return true;
    case ffi::DataType::S64: *out = DataType::kInt64; return true;
    case ffi::DataType::F16: *out = DataType::kFloat16; return true;
    case ffi::DataType::BF16: *out = DataType::kBFloat16; return true;
    case ffi::DataType::F32: *out = DataType::kFloat32; return true;
    case ffi::DataType::F64: *out = DataType::kFloat64; return true;
    case ffi::DataType::PRED: *out = DataType::kBool; return true;
    default: return false;
  }
}

std::vector<int64_t> DimsOf(const ffi::AnyBuffer& b) {
  auto d = b.dimensions();
  return std::vector<int64_t>(d.begin(), d.end());
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// allgather/alltoall: the core asks for the output once every rank's rows are agreed; XLA
// allocated it at compile time from this rank's shape, assuming equal shapes everywhere.
// When the agreed shape differs, the collective still runs (into scratch memory, so that
// no rank is left waiting for this one) and the member then fails, naming the tensor.
struct CompiledOutput {
  std::string name;
  OpType op;
  std::vector<int64_t> expected;
  void* data;
  size_t element_size;
  std::shared_ptr<Status> error = std::make_shared<Status>();

  Status operator()(const std::vector<int64_t>& dims, void** out) {
    if (dims == expected) {
      *out = data;
      return Status::OK();
    }
    *error = Status::InvalidArgument(
        std::string(OpTypeName(op)) + " of tensor '" + name + "' inside an XLA-compiled function: the output is " +
        ShapeString(dims) + " but XLA compiled it as " + ShapeString(expected) +
        ", which assumes that every rank passes the same first dimension" +
        (op == OpType::kAlltoall ? " and splits evenly" : "") +
        ". Fix: pass equal shapes on every rank, or run this collective outside the jit_compile=True function");
    size_t n = element_size;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    auto scratch = std::make_shared<std::vector<char>>(n);
    scratch_ = scratch;  // freed with the Submission, after the core is done with it
    *out = n ? scratch->data() : nullptr;
    return Status::OK();
  }
  // The member's status: the core's, else the shape error.
  Status Finish(const Status& core) const { return core.ok() ? *error : core; }

  std::shared_ptr<std::vector<char>> scratch_;
};

ffi::Error StartImpl(std::string_view names, int32_t op, int32_t reduce_op, double prescale, double postscale,
                     int32_t root, int32_t process_set_id, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  std::vector<std::string> keys = SplitNames(std::string(names));
  if (args.size() != keys.size() || rets.size() != keys.size()) {
    return StartError(ffi::Error::Internal("tfring XLA start call with " + std::to_string(args.size()) +
                                           " operands, " + std::to_string(rets.size()) + " results and " +
                                           std::to_string(keys.size()) + " names (a tfring bug)"));
  }
  CollectiveAttrs attrs;
  attrs.op = static_cast<OpType>(op);
  Status st = attrs.SetReduceOp(reduce_op);
  if (!st.ok()) return StartError(ToFfiError(st));
  attrs.prescale = prescale;
  attrs.postscale = postscale;
  attrs.root = root;
  attrs.process_set_id = process_set_id;
  std::vector<Submission> group(keys.size());
  std::vector<InflightTable::Finish> finish(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto in = args.get<ffi::AnyBuffer>(i);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (!in.has_value() || !out.has_value()) {
      return StartError(ffi::Error::Internal("tfring XLA start: bad buffer (a tfring bug)"));
    }
    DataType dtype;
    if (!ToCoreType(in->element_type(), &dtype)) {
      return StartError(ffi::Error(ffi::ErrorCode::kUnimplemented,
                                   std::string(OpTypeName(attrs.op)) + " of tensor '" + keys[i] +
                                       "': tfring does not support this XLA element type"));
    }
    Submission& s = group[i];
    s.request = attrs.MakeRequest(keys[i], dtype, DimsOf(*in));
    s.input = in->element_count() ? in->untyped_data() : nullptr;
    void* out_data = (*out)->element_count() ? (*out)->untyped_data() : nullptr;
    if (attrs.op == OpType::kAllgather || attrs.op == OpType::kAlltoall) {
      auto output = std::make_shared<CompiledOutput>(
          CompiledOutput{keys[i], attrs.op, DimsOf(**out), out_data, DataTypeSize(dtype)});
      s.allocate_output = [output](const std::vector<int64_t>& dims, void** data) { return (*output)(dims, data); };
      if (attrs.op == OpType::kAlltoall) s.on_received_splits = [](const std::vector<int64_t>&) {};
      finish[i] = [output](const Status& st) { return output->Finish(st); };
    } else {
      s.output = out_data;
    }
  }
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

// Both calls carry every attribute of call_attrs.h (FFI decodes all of them, in order).
auto BindAttrs() {
  return ffi::Ffi::Bind()
      .Attr<std::string_view>("names")
      .Attr<int32_t>("op")
      .Attr<int32_t>("reduce_op")
      .Attr<double>("prescale")
      .Attr<double>("postscale")
      .Attr<int32_t>("root")
      .Attr<int32_t>("process_set_id");
}

XLA_FFI_DEFINE_HANDLER(kStart, StartImpl, BindAttrs().RemainingArgs().RemainingRets());
XLA_FFI_DEFINE_HANDLER(kDone, DoneImpl, BindAttrs().RemainingArgs().RemainingRets());

XLA_FFI_REGISTER_HANDLER(::xla::ffi::GetXlaFfiApi(), xla_calls::kStartTarget, "Host", kStart);
XLA_FFI_REGISTER_HANDLER(::xla::ffi::GetXlaFfiApi(), xla_calls::kDoneTarget, "Host", kDone);

}  // namespace
}  // namespace tf_ops
}  // namespace tfring
