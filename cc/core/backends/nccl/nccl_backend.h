// NcclBackend: runs responses whose tensors live on a GPU, with NCCL, on tfring's own
// CUDA stream. Inputs must be ready when a request is enqueued (the TF GPU kernels order
// themselves after TF's compute stream first; the Python bindings synchronize the array's
// stream), or the submission carries a ready event that the stream waits on (XLA's CUDA
// handler); `done` is called only after the results are complete on the device. A
// submission's done event is recorded after the collective and announced (on_enqueued)
// before that host-side wait, so another stream can wait on the device instead.
//
// Per collective (n ranks, B bytes per rank):
//   allreduce      ncclAllReduce; several tensors are fused: device-to-device copies into a
//                  persistent buffer, one ncclAllReduce, copies back (all on tfring's stream)
//   allgather(v)   equal first dimensions: ncclAllGather; unequal: n grouped ncclBroadcast,
//                  one per rank, straight into the output (no padding, no extra memory)
//   broadcast      ncclBroadcast
//   reducescatter  rows split as on the CPU (first dim0 % n ranks get one more row): equal
//                  counts: ncclReduceScatter; unequal: n grouped ncclReduce, one per root
//   alltoall(v)    grouped ncclSend/ncclRecv with every peer; the block to self is a copy
// Reductions: Average is ncclAvg (integers: sum then truncating division, as on the CPU);
// prescale/postscale on floating types fold into one ncclRedOpCreatePreMulSum factor;
// bool is uint8 with Max (Sum/Max = OR) or Min (Min/Product = AND).
//
// Communicators are created lazily, one per GPU label (the device number every rank agreed
// on), on the CUDA device that holds the tensors, and cached until shutdown.
// Thread-safety: background thread only.
#pragma once

#include <map>
#include <memory>

#include "backends/backend.h"
#include "backends/nccl/gpu_libraries.h"
#include "backends/nccl/nccl_comm.h"

namespace tfring {
namespace gpu {

struct NcclReduction {
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  bool premul = false;  // use ncclRedOpCreatePreMulSum(scalar)
  double scalar = 1.0;
  // A premultiplied sum on one rank: NCCL runs it in its one-rank kernel, whose calls must
  // be split exactly (nccl_backend.cc, ForEachExactPiece).
  bool one_rank_kernel = false;
};

// How NCCL computes `op` over `dtype` with the given factors among `size` ranks;
// kUnimplemented for what the NCCL backend cannot do (the message says what to do instead).
Status MapReduction(DataType dtype, ReduceOp op, double prescale, double postscale, int size,
                    NcclReduction* out);
// The NCCL type that moves `dtype` (bool travels as uint8).
ncclDataType_t NcclType(DataType dtype);

class NcclBackend : public Backend {
 public:
  NcclBackend(const BackendContext& context, const CudaApi& cuda, const NcclApi& nccl,
              int64_t generation);
  const char* name() const override { return "nccl"; }
  Status Execute(const Response& response, const std::vector<Submission*>& group,
                 ExecutionTimings* timings) override;
  // Clean: every communicator is finalized and destroyed (NcclComm::Close, bounded by half of
  // TFRING_SHUTDOWN_TIMEOUT_S in all); otherwise, or where that fails, aborted.
  void Close(bool clean) override;

 private:
  Status GetComm(const Response& r, const std::vector<Submission*>& group, NcclComm** out);
  Status Allreduce(NcclComm& c, const Response& r, const std::vector<Submission*>& group);
  Status Allgather(NcclComm& c, const Response& r, Submission& s);
  Status Broadcast(NcclComm& c, const Response& r, Submission& s);
  Status Alltoall(NcclComm& c, const Response& r, Submission& s);
  Status Reducescatter(NcclComm& c, const Response& r, Submission& s);
  // Runs `calls` between ncclGroupStart/End and checks the group.
  template <typename Calls>
  Status Grouped(NcclComm& c, const char* what, Calls calls);
  // The reduction op for a call; destroy it with ReleaseOp once the call returned.
  Status AcquireOp(NcclComm& c, const NcclReduction& red, ncclRedOp_t* op);
  void ReleaseOp(NcclComm& c, const NcclReduction& red, ncclRedOp_t op);

  BackendContext ctx_;
  const CudaApi& cuda_;
  const NcclApi& nccl_;
  int64_t generation_;
  int comms_created_ = 0;
  std::map<int32_t, std::unique_ptr<NcclComm>> comms_;  // by agreed GPU label
};

}  // namespace gpu
}  // namespace tfring
