// Local argument checks at enqueue time: fail fast on this rank, before any negotiation,
// with a message that names the tensor and the fix.
#include <algorithm>
#include <numeric>

#include "adasum.h"
#include "backend.h"
#include "process_sets.h"
#include "reduce_kernels.h"
#include "validate_submission.h"

namespace tfring {
namespace {

constexpr size_t kMaxNameBytes = 4096;
constexpr size_t kMaxDims = 64;

}  // namespace

Status ValidateSubmission(Submission& s, int rank, int size, const ProcessSetTable& sets) {
  Request& r = s.request;
  const int global_rank = rank;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(OpTypeName(r.op)) + " of tensor '" + r.name +
                                   "' on rank " + std::to_string(global_rank) + ": " + why);
  };
  if (r.name.empty()) return Status::InvalidArgument("a collective needs a non-empty name");
  std::vector<int32_t> members;  // of a process set other than the global one
  if (r.process_set_id != 0) {
    // From here on `rank` and `size` are this rank's index in the set and the set's size.
    if (r.process_set_id < 0 || !sets.Members(r.process_set_id, &members)) {
      return bad("process set id " + std::to_string(r.process_set_id) +
                 " is not registered on this rank (removed, or never added); add it with "
                 "add_process_set() on every rank first");
    }
    const auto me = std::find(members.begin(), members.end(), rank);
    if (me == members.end()) {
      return bad("this rank is not a member of process set " + std::to_string(r.process_set_id) + " " +
                 RanksList(members) + "; only its members may call collectives on it");
    }
    if (r.device >= 0) {
      return Status::Unimplemented(std::string(OpTypeName(r.op)) + " of tensor '" + r.name + "' on rank " +
                                   std::to_string(rank) + ": GPU tensors in process sets other than the "
                                   "global one are not supported yet; copy the tensor to the CPU (tf.device('/cpu:0')) "
                                   "or use the global set");
    }
    if (r.op == OpType::kJoin || r.op == OpType::kBarrier) {
      return bad(std::string(OpTypeName(r.op)) + " runs on the global process set only");
    }
    if (r.op == OpType::kBroadcast && std::find(members.begin(), members.end(), r.root) == members.end()) {
      return bad("root_rank=" + std::to_string(r.root) + " is not a member of process set " +
                 std::to_string(r.process_set_id) + " " + RanksList(members) +
                 "; root_rank is a global rank and must be in the set");
    }
    rank = static_cast<int>(me - members.begin());
    size = static_cast<int>(members.size());
  }
  if (r.name.size() > kMaxNameBytes) return bad("name longer than 4096 bytes");
  if (r.shape.size() > kMaxDims) return bad("more than 64 dimensions");
  for (int64_t d : r.shape) {
    if (d < 0) return bad("negative dimension in the shape");
  }
  if ((r.op == OpType::kAllreduce || r.op == OpType::kReducescatter) && r.reduce_op == ReduceOp::kAdasum) {
    Status st = CheckAdasum(r.op, r.dtype, size, r.device >= 0);  // before the GPU checks: clearer
    if (!st.ok()) {
      return st.WithContext(std::string(OpTypeName(r.op)) + " of tensor '" + r.name + "' on rank " +
                            std::to_string(global_rank));
    }
  }
  if (r.device >= 0) {
    // GPU: a backend must be built in and loadable, and support this op/dtype/scaling.
    TFRING_RETURN_IF_ERROR(CheckGpuRequest(r));
  }
  if (!s.done) return bad("no completion callback");
  const bool needs_rows = r.op == OpType::kAllgather || r.op == OpType::kAlltoall ||
                          r.op == OpType::kReducescatter;
  if (needs_rows && r.shape.empty()) {
    return bad("needs a tensor with at least one dimension (got a scalar); reshape it to [1]");
  }
  const int64_t bytes = r.NumElements() * static_cast<int64_t>(DataTypeSize(r.dtype));
  if (bytes > 0 && s.input == nullptr && r.op != OpType::kBarrier && r.op != OpType::kJoin) {
    return bad("null input buffer");
  }
  switch (r.op) {
    case OpType::kAllreduce:
    case OpType::kReducescatter: {
      Status st = CheckReduceSupported(r.dtype, r.reduce_op, r.prescale, r.postscale);
      if (!st.ok()) return st.WithContext(std::string(OpTypeName(r.op)) + " of tensor '" + r.name + "'");
      // A reducescatter output holds only this rank's rows, which may be none.
      const int64_t out_bytes =
          r.op == OpType::kAllreduce || r.shape[0] == 0
              ? bytes
              : bytes / r.shape[0] * ReducescatterRows(r.shape[0], size, rank);
      if (out_bytes > 0 && s.output == nullptr) return bad("null output buffer");
      break;
    }
    case OpType::kBroadcast:
      if (members.empty() && (r.root < 0 || r.root >= size)) {
        return bad("root_rank=" + std::to_string(r.root) + " is out of range for a job of " +
                   std::to_string(size) + " rank(s) (valid: 0.." + std::to_string(size - 1) + ")");
      }
      if (bytes > 0 && s.output == nullptr) return bad("null output buffer");
      break;
    case OpType::kAllgather:
      if (!s.allocate_output) return bad("no output allocator");
      break;
    case OpType::kAlltoall: {
      if (!s.allocate_output) return bad("no output allocator");
      if (r.splits.empty()) {
        if (r.shape[0] % size != 0) {
          return bad("first dimension " + std::to_string(r.shape[0]) +
                     " does not divide evenly among " + std::to_string(size) +
                     " ranks; pass splits=[rows for each rank]");
        }
        r.splits.assign(size, r.shape[0] / size);
      }
      if (static_cast<int>(r.splits.size()) != size) {
        return bad("splits has " + std::to_string(r.splits.size()) + " entries but " +
                   (members.empty() ? std::string("the job") : "process set " + std::to_string(r.process_set_id)) +
                   " has " + std::to_string(size) + " ranks; give one entry per rank");
      }
      int64_t total = 0;
      for (int64_t v : r.splits) {
        if (v < 0) return bad("splits contains a negative value " + std::to_string(v));
        total += v;
      }
      if (total != r.shape[0]) {
        return bad("splits sum to " + std::to_string(total) + " but the first dimension is " +
                   std::to_string(r.shape[0]) + "; they must be equal");
      }
      break;
    }
    case OpType::kBarrier:
      break;
    case OpType::kJoin:  // the output is the last rank to join (int32)
      if (r.dtype != DataType::kInt32 || r.NumElements() != 1 || s.output == nullptr || r.device >= 0) {
        return bad("a join takes a host int32 scalar output for the last rank to join");
      }
      break;
  }
  if (r.op != OpType::kBroadcast) r.root = 0;  // irrelevant; keep it valid on the wire
  return Status::OK();
}

}  // namespace tfring
