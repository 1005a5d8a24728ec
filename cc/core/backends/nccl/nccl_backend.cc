#include "backends/nccl/nccl_backend.h"

#include <algorithm>
#include <cstdint>

#include "backends/collective_layout.h"
#include "base/logging.h"
#include "base/reduce_kernels.h"

namespace tfring {
namespace gpu {
namespace {

bool IsInteger(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}

// The premultiplier as the tensor's own type (NCCL reads it with that type).
union Scalar {
  float f32;
  double f64;
  uint16_t f16;
};

Scalar MakeScalar(ncclDataType_t t, double v) {
  Scalar s;
  s.f64 = 0;
  if (t == ncclFloat32) s.f32 = static_cast<float>(v);
  if (t == ncclFloat64) s.f64 = v;
  if (t == ncclFloat16) s.f16 = FloatToHalf(static_cast<float>(v));
  if (t == ncclBfloat16) s.f16 = FloatToBFloat16(static_cast<float>(v));
  return s;
}

// NCCL's one-rank reduction kernel (oneRankReduce: premultiplied sums and averages on a
// communicator of one rank; seen with NCCL 2.28.9 on an H200) gives each of its
// min(32, ceil(bytes / 16 KiB)) blocks floor(n / blocks) elements rounded up to 16 bytes and
// never writes the tail past blocks * that share: up to 31 elements of the result kept
// whatever the output held. A call of under 16 KiB, or of a whole number of 16 KiB, is
// shared out exactly, so such a reduction is issued as at most two calls: the largest whole
// number of 16 KiB, then the rest. `call(offset, count)` (in elements) issues one call.
template <typename Call>
Status ForEachExactPiece(size_t elements, size_t element_size, const NcclReduction& red, Call call) {
  constexpr size_t kPieceBytes = 16u << 10;
  const size_t bytes = elements * element_size;
  if (!red.one_rank_kernel || bytes < kPieceBytes || bytes % kPieceBytes == 0) return call(0, elements);
  const size_t head = bytes / kPieceBytes * kPieceBytes / element_size;  // element sizes divide 16 KiB
  TFRING_RETURN_IF_ERROR(call(0, head));
  return call(head, elements - head);
}

}  // namespace

ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt8: return ncclInt8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kBool: return ncclUint8;
    case DataType::kInt16:
    case DataType::kUInt16: return ncclUint8;  // never used: CheckRequest refuses them (NCCL has no 16-bit ints)
  }
  return ncclUint8;
}

Status MapReduction(DataType dtype, ReduceOp op, double prescale, double postscale, int size,
                    NcclReduction* out) {
  NcclReduction red;
  red.dtype = NcclType(dtype);
  const bool scaled = prescale != 1.0 || postscale != 1.0;
  if (op == ReduceOp::kAdasum) {
    return Status::Unimplemented("op=Adasum is implemented for host (CPU) tensors only, not by the NCCL "
                                 "backend; place the tensor on the CPU (with tf.device('/CPU:0')) or use "
                                 "op=Average");
  }
  if (dtype == DataType::kBool) {
    if (op == ReduceOp::kAverage || scaled) {
      return Status::Unimplemented("Average and scale factors are not defined for bool tensors");
    }
    red.op = (op == ReduceOp::kSum || op == ReduceOp::kMax) ? ncclMax : ncclMin;
  } else if (op == ReduceOp::kMin || op == ReduceOp::kMax || op == ReduceOp::kProduct) {
    if (scaled) {
      return Status::Unimplemented(std::string(ReduceOpName(op)) +
                                   " with prescale/postscale factors is not supported on GPU by the "
                                   "NCCL backend; scale the tensor yourself or use Sum/Average");
    }
    red.op = op == ReduceOp::kMin ? ncclMin : op == ReduceOp::kMax ? ncclMax : ncclProd;
  } else if (IsInteger(dtype)) {
    if (scaled) {
      return Status::Unimplemented("prescale/postscale factors on " + std::string(DataTypeName(dtype)) +
                                   " GPU tensors are not supported by the NCCL backend; use a floating "
                                   "type or reduce on the CPU");
    }
    // ncclAvg: sum, then divide (truncates). Over one rank it is the identity: a plain sum
    // (NCCL's one-rank averaging kernel drops tail elements: see ForEachExactPiece).
    red.op = op == ReduceOp::kAverage && size > 1 ? ncclAvg : ncclSum;
  } else {
    double factor = prescale * postscale * (op == ReduceOp::kAverage ? 1.0 / size : 1.0);
    if (op == ReduceOp::kAverage && !scaled) {
      red.op = size > 1 ? ncclAvg : ncclSum;  // over one rank: the identity, as above
    } else if (factor == 1.0) {
      red.op = ncclSum;
    } else {
      red.op = ncclSum;
      red.premul = true;  // sum(factor * x_i) == factor * sum(x_i)
      red.scalar = factor;
      red.one_rank_kernel = size == 1;
    }
  }
  *out = red;
  return Status::OK();
}

NcclBackend::NcclBackend(const BackendContext& context, const CudaApi& cuda, const NcclApi& nccl,
                         int64_t generation)
    : ctx_(context), cuda_(cuda), nccl_(nccl), generation_(generation) {}

Status NcclBackend::GetComm(const Response& r, const std::vector<Submission*>& group, NcclComm** out) {
  // The CUDA device is the one that holds the tensors (a framework's device number need not
  // be the CUDA ordinal, e.g. after tf.config.set_visible_devices).
  int device = -1;
  for (Submission* s : group) {
    const void* p = s->input != nullptr ? s->input : s->output;
    if (p == nullptr) continue;
    cudaPointerAttributes attr;
    cudaError_t e = cuda_.cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess || (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
      cuda_.cudaGetLastError();
      return Status::InvalidArgument("tensor '" + s->request.name + "' was submitted as GPU:" +
                                     std::to_string(s->request.attrs.device) +
                                     " but its memory is not GPU memory (" +
                                     (e != cudaSuccess ? CudaErrorText(cuda_, e) : "host memory") + ")");
    }
    device = attr.device;
    break;
  }
  auto it = comms_.find(r.attrs.device);
  if (it != comms_.end()) {
    if (device >= 0 && device != it->second->device()) {
      return Status::InvalidArgument(
          "tensor '" + r.tensors[0].name + "' is on CUDA device " + std::to_string(device) + " but earlier GPU:" +
          std::to_string(r.attrs.device) + " tensors of this process were on CUDA device " +
          std::to_string(it->second->device()) + "; tfring drives one GPU per device number per process");
    }
    *out = it->second.get();
    return Status::OK();
  }
  NcclCommOptions o;
  o.rank = ctx_.rank;
  o.size = ctx_.size;
  o.device = device >= 0 ? device : r.attrs.device;
  o.store = ctx_.store;
  o.id_key = ctx_.key_prefix + "g" + std::to_string(generation_) + "/comm" + std::to_string(comms_created_++) + "/id";
  o.start_timeout_s = ctx_.start_timeout_s;
  o.timeout_s = ctx_.timeout_s;
  o.abort = ctx_.abort;
  std::unique_ptr<NcclComm> comm;
  TFRING_RETURN_IF_ERROR(NcclComm::Create(cuda_, nccl_, o, &comm));
  *out = comm.get();
  comms_[r.attrs.device] = std::move(comm);
  return Status::OK();
}

void NcclBackend::Close(bool clean) {
  if (clean) {
    const Deadline deadline = Deadline::After(ctx_.shutdown_timeout_s / 2);
    for (auto& [label, comm] : comms_) {
      Status st = comm->Close(std::max(0.0, deadline.SecondsLeft()));
      if (!st.ok()) {
        TFRING_LOG(LogLevel::kWarning, "nccl", "the NCCL communicator of GPU:"
                                                   << label << " could not be closed cleanly, aborted it: "
                                                   << st.message());
      }
    }
  }
  comms_.clear();  // the destructors abort what was not closed
}

Status NcclBackend::Execute(const Response& r, const std::vector<Submission*>& group,
                            ExecutionTimings* /*timings: the whole call counts*/) {
  if (r.attrs.op == OpType::kBarrier) return Status::OK();  // negotiation itself was the barrier
  NcclComm* c = nullptr;
  TFRING_RETURN_IF_ERROR(GetComm(r, group, &c));
  Status st = c->Activate();
  // Event ordering (Submission::ready_event): the stream waits for the producer's stream,
  // on the device; no host wait.
  const void* waited = nullptr;  // the members of one start call share their ready event
  for (Submission* s : group) {
    if (!st.ok() || s->ready_event == nullptr || s->ready_event == waited) continue;
    waited = s->ready_event;
    st = c->CheckCuda(cuda_.cudaStreamWaitEvent(c->stream(), static_cast<cudaEvent_t>(s->ready_event), 0),
                      "cudaStreamWaitEvent (the inputs' ready event)");
  }
  if (st.ok()) {
    switch (r.attrs.op) {
      case OpType::kAllreduce: st = Allreduce(*c, r, group); break;
      case OpType::kAllgather: st = Allgather(*c, r, *group[0]); break;
      case OpType::kBroadcast: st = Broadcast(*c, r, *group[0]); break;
      case OpType::kAlltoall: st = Alltoall(*c, r, *group[0]); break;
      case OpType::kReducescatter: st = Reducescatter(*c, r, *group[0]); break;
      case OpType::kBarrier: break;
      case OpType::kJoin: break;  // joins are host-only (refused at enqueue with device >= 0)
    }
  }
  // Submission::done_event: published as soon as the work is on the stream; the caller's
  // stream may wait on it while this thread confirms completion below.
  for (Submission* s : group) {
    if (!st.ok() || s->done_event == nullptr) continue;
    st = c->CheckCuda(cuda_.cudaEventRecord(static_cast<cudaEvent_t>(s->done_event), c->stream()),
                      "cudaEventRecord (the collective's done event)");
    if (st.ok() && s->on_enqueued) s->on_enqueued();
  }
  if (st.ok()) st = c->Synchronize(std::string("NCCL ") + OpTypeName(r.attrs.op));
  if (!st.ok() && c->aborted()) comms_.erase(r.attrs.device);  // unusable; the job fails anyway
  return st;
}

Status NcclBackend::AcquireOp(NcclComm& c, const NcclReduction& red, ncclRedOp_t* op) {
  *op = red.op;
  if (!red.premul) return Status::OK();
  Scalar scalar = MakeScalar(red.dtype, red.scalar);
  return c.Check(nccl_.ncclRedOpCreatePreMulSum(op, &scalar, red.dtype, ncclScalarHostImmediate, c.comm()),
                 "ncclRedOpCreatePreMulSum");
}

void NcclBackend::ReleaseOp(NcclComm& c, const NcclReduction& red, ncclRedOp_t op) {
  if (red.premul) nccl_.ncclRedOpDestroy(op, c.comm());  // allowed once the last call using it returned
}

template <typename Calls>
Status NcclBackend::Grouped(NcclComm& c, const char* what, Calls calls) {
  TFRING_RETURN_IF_ERROR(c.Check(nccl_.ncclGroupStart(), "ncclGroupStart"));
  Status st = calls();
  Status end = c.Check(nccl_.ncclGroupEnd(), what);
  return st.ok() ? end : st;
}

Status NcclBackend::Allreduce(NcclComm& c, const Response& r, const std::vector<Submission*>& group) {
  const size_t es = DataTypeSize(r.attrs.dtype);
  size_t total = 0;
  for (Submission* s : group) total += static_cast<size_t>(s->request.NumElements());
  if (total == 0) return Status::OK();
  NcclReduction red;
  TFRING_RETURN_IF_ERROR(MapReduction(r.attrs.dtype, r.attrs.reduce_op, r.attrs.prescale, r.attrs.postscale, ctx_.size, &red));
  ncclRedOp_t op;
  TFRING_RETURN_IF_ERROR(AcquireOp(c, red, &op));
  auto all_reduce = [&](const void* in, void* out) {
    return ForEachExactPiece(total, es, red, [&](size_t offset, size_t count) {
      return c.Check(nccl_.ncclAllReduce(static_cast<const char*>(in) + offset * es,
                                         static_cast<char*>(out) + offset * es, count, red.dtype, op, c.comm(),
                                         c.stream()),
                     "ncclAllReduce");
    });
  };
  Status st;
  if (group.size() == 1) {
    st = all_reduce(group[0]->input, group[0]->output);
  } else {
    char* buf = nullptr;
    st = c.FusionBuffer(total * es, &buf);
    size_t offset = 0;
    for (Submission* s : group) {
      if (!st.ok()) break;
      size_t bytes = s->request.Bytes();
      st = c.CopyAsync(buf + offset, s->input, bytes);
      offset += bytes;
    }
    if (st.ok()) st = all_reduce(buf, buf);
    offset = 0;
    for (Submission* s : group) {
      if (!st.ok()) break;
      size_t bytes = s->request.Bytes();
      st = c.CopyAsync(s->output, buf + offset, bytes);
      offset += bytes;
    }
  }
  ReleaseOp(c, red, op);
  return st;
}

Status NcclBackend::Allgather(NcclComm& c, const Response& r, Submission& s) {
  const int n = ctx_.size;
  const GatherLayout layout = AllgatherLayout(r, s.request, n);
  const std::vector<size_t>& bytes = layout.recv.bytes;
  const std::vector<size_t>& offsets = layout.recv.offsets;
  void* out = nullptr;
  TFRING_RETURN_IF_ERROR(layout.AllocateOutput(s, &out));
  if (layout.recv.total == 0) return Status::OK();
  char* dst = static_cast<char*>(out);
  if (layout.recv.Equal()) {
    return c.Check(nccl_.ncclAllGather(s.input, dst, bytes[0], ncclUint8, c.comm(), c.stream()), "ncclAllGather");
  }
  return Grouped(c, "ncclGroupEnd (allgather as grouped ncclBroadcast)", [&]() -> Status {
    for (int p = 0; p < n; ++p) {
      if (bytes[p] == 0) continue;  // every rank skips the same roots
      TFRING_RETURN_IF_ERROR(c.Check(
          nccl_.ncclBroadcast(s.input, dst + offsets[p], bytes[p], ncclUint8, p, c.comm(), c.stream()),
          "ncclBroadcast"));
    }
    return Status::OK();
  });
}

Status NcclBackend::Broadcast(NcclComm& c, const Response& r, Submission& s) {
  size_t bytes = s.request.Bytes();
  if (bytes == 0) return Status::OK();
  return c.Check(nccl_.ncclBroadcast(s.input, s.output, bytes, ncclUint8, r.attrs.root, c.comm(), c.stream()),
                 "ncclBroadcast");
}

Status NcclBackend::Alltoall(NcclComm& c, const Response& r, Submission& s) {
  const int n = ctx_.size, me = ctx_.rank;
  const GatherLayout layout = AlltoallLayout(r, s.request, n, me);
  const std::vector<size_t>& send = layout.send.bytes;
  const std::vector<size_t>& send_off = layout.send.offsets;
  const std::vector<size_t>& recv = layout.recv.bytes;
  const std::vector<size_t>& recv_off = layout.recv.offsets;
  void* out = nullptr;
  TFRING_RETURN_IF_ERROR(layout.AllocateOutput(s, &out));
  const char* in = static_cast<const char*>(s.input);
  char* dst = static_cast<char*>(out);
  TFRING_RETURN_IF_ERROR(c.CopyAsync(dst + recv_off[me], in + send_off[me], send[me]));
  if (n == 1) return Status::OK();
  return Grouped(c, "ncclGroupEnd (alltoall as grouped ncclSend/ncclRecv)", [&]() -> Status {
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      if (send[p] > 0) {
        TFRING_RETURN_IF_ERROR(
            c.Check(nccl_.ncclSend(in + send_off[p], send[p], ncclUint8, p, c.comm(), c.stream()), "ncclSend"));
      }
      if (recv[p] > 0) {
        TFRING_RETURN_IF_ERROR(
            c.Check(nccl_.ncclRecv(dst + recv_off[p], recv[p], ncclUint8, p, c.comm(), c.stream()), "ncclRecv"));
      }
    }
    return Status::OK();
  });
}

Status NcclBackend::Reducescatter(NcclComm& c, const Response& r, Submission& s) {
  const int n = ctx_.size;
  const size_t es = DataTypeSize(r.attrs.dtype);
  const size_t row_elements = s.request.RowBytes() / es;
  std::vector<size_t> counts(n), offsets(n);
  bool equal = true;
  size_t total = 0;
  for (int p = 0; p < n; ++p) {
    counts[p] = static_cast<size_t>(ReducescatterRows(s.request.shape[0], n, p)) * row_elements;
    offsets[p] = total;
    total += counts[p];
    equal = equal && counts[p] == counts[0];
  }
  if (total == 0) return Status::OK();
  NcclReduction red;
  TFRING_RETURN_IF_ERROR(MapReduction(r.attrs.dtype, r.attrs.reduce_op, r.attrs.prescale, r.attrs.postscale, n, &red));
  ncclRedOp_t op;
  TFRING_RETURN_IF_ERROR(AcquireOp(c, red, &op));
  Status st;
  const char* in = static_cast<const char*>(s.input);
  if (equal) {
    st = ForEachExactPiece(counts[0], es, red, [&](size_t offset, size_t count) {
      return c.Check(nccl_.ncclReduceScatter(in + offset * es, static_cast<char*>(s.output) + offset * es, count,
                                             red.dtype, op, c.comm(), c.stream()),
                     "ncclReduceScatter");
    });
  } else {
    st = Grouped(c, "ncclGroupEnd (reducescatter as grouped ncclReduce)", [&]() -> Status {
      for (int p = 0; p < n; ++p) {
        if (counts[p] == 0) continue;
        TFRING_RETURN_IF_ERROR(c.Check(nccl_.ncclReduce(in + offsets[p] * es, s.output, counts[p], red.dtype, op, p,
                                                        c.comm(), c.stream()),
                                       "ncclReduce"));
      }
      return Status::OK();
    });
  }
  ReleaseOp(c, red, op);
  return st;
}

}  // namespace gpu
}  // namespace tfring
