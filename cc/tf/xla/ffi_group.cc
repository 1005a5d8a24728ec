// Decoding a start call into the core's Submissions (see ffi_group.h).
#include "ffi_group.h"

#include <cstring>
#include <memory>

#include "call_attrs.h"
#include "control/collective_attrs.h"
#include "control/messages.h"

namespace tfring {
namespace tf_ops {
namespace xla_calls {
namespace {

namespace ffi = ::xla::ffi;

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
  bool on_gpu;  // no host scratch for device collectives: the member fails instead
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
    // GPU: no device scratch here; this rank fails the collective, and the peers that
    // started it end within TFRING_TIMEOUT_S with a timeout.
    if (on_gpu) return *error;
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

}  // namespace

ffi::Error ToFfiError(const Status& st) {
  if (st.ok()) return ffi::Error::Success();
  return ffi::Error(static_cast<ffi::ErrorCode>(CanonicalCode(st.code())), st.message());
}

ffi::Error BuildGroup(std::string_view names, int32_t op, int32_t reduce_op, double prescale, double postscale,
                      int32_t root, int32_t process_set_id, ffi::RemainingArgs args, ffi::RemainingRets rets,
                      int32_t device, std::vector<std::string>* keys_out, std::vector<Submission>* group_out,
                      std::vector<InflightTable::Finish>* finish_out) {
  std::vector<std::string>& keys = *keys_out;
  keys = SplitNames(std::string(names));
  if (args.size() != keys.size() || rets.size() != keys.size()) {
    return ffi::Error::Internal("tfring XLA start call with " + std::to_string(args.size()) + " operands, " +
                                std::to_string(rets.size()) + " results and " + std::to_string(keys.size()) +
                                " names (a tfring bug)");
  }
  CollectiveAttrs attrs;
  attrs.op = static_cast<OpType>(op);
  Status st = attrs.SetReduceOp(reduce_op);
  if (!st.ok()) return ToFfiError(st);
  attrs.prescale = prescale;
  attrs.postscale = postscale;
  attrs.root = root;
  attrs.process_set_id = process_set_id;
  attrs.device = device;
  std::vector<Submission>& group = *group_out;
  std::vector<InflightTable::Finish>& finish = *finish_out;
  group.assign(keys.size(), Submission());
  finish.assign(keys.size(), InflightTable::Finish());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto in = args.get<ffi::AnyBuffer>(i);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (!in.has_value() || !out.has_value()) {
      return ffi::Error::Internal("tfring XLA start: bad buffer (a tfring bug)");
    }
    DataType dtype;
    if (!ToCoreType(in->element_type(), &dtype)) {
      return ffi::Error(ffi::ErrorCode::kUnimplemented, std::string(OpTypeName(attrs.op)) + " of tensor '" + keys[i] +
                                                            "': tfring does not support this XLA element type");
    }
    Submission& s = group[i];
    s.request = attrs.MakeRequest(keys[i], dtype, DimsOf(*in));
    s.input = in->element_count() ? in->untyped_data() : nullptr;
    void* out_data = (*out)->element_count() ? (*out)->untyped_data() : nullptr;
    if (attrs.op == OpType::kAllgather || attrs.op == OpType::kAlltoall) {
      auto output = std::make_shared<CompiledOutput>(
          CompiledOutput{keys[i], attrs.op, DimsOf(**out), out_data, DataTypeSize(dtype), device >= 0});
      s.allocate_output = [output](const std::vector<int64_t>& dims, void** data) { return (*output)(dims, data); };
      if (attrs.op == OpType::kAlltoall) s.on_received_splits = [](const std::vector<int64_t>&) {};
      finish[i] = [output](const Status& st) { return output->Finish(st); };
    } else {
      s.output = out_data;
    }
  }
  return ffi::Error::Success();
}
}  // namespace xla_calls
}  // namespace tf_ops
}  // namespace tfring
