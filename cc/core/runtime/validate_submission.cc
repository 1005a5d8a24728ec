// Local argument checks at enqueue time: fail fast on this rank, before any negotiation,
// with a message that names the tensor and the fix.
#include <algorithm>
#include <numeric>

#include "collectives/adasum.h"
#include "backends/backend.h"
#include "control/process_sets.h"
#include "base/reduce_kernels.h"
#include "runtime/validate_submission.h"

namespace tfring {
namespace {

constexpr size_t kMaxNameBytes = 4096;
constexpr size_t kMaxDims = 64;

// One submission under check: its request, this rank, and the group it runs on (the job,
// or a process set: `rank` and `size` are then this rank's index in the set and the set's
// size, `members` the set's sorted global ranks).
struct Check {
  Submission& s;
  Request& r;
  int global_rank;
  int rank;
  int size;
  std::vector<int32_t> members;  // empty for the global set

  Status Bad(const std::string& why) const {
    return Status::InvalidArgument(std::string(OpTypeName(r.attrs.op)) + " of tensor '" + r.name + "' on rank " +
                                   std::to_string(global_rank) + ": " + why);
  }
  std::string Context() const {
    return std::string(OpTypeName(r.attrs.op)) + " of tensor '" + r.name + "' on rank " + std::to_string(global_rank);
  }
};

// A process set other than the global one: registered, this rank and the root among its
// members, an op that runs on sets, host memory. Narrows `rank` and `size` to the set.
Status CheckProcessSet(Check& c, const ProcessSetTable& sets) {
  const Request& r = c.r;
  if (r.attrs.process_set_id < 0 || !sets.Members(r.attrs.process_set_id, &c.members)) {
    return c.Bad("process set id " + std::to_string(r.attrs.process_set_id) +
                 " is not registered on this rank (removed, or never added); add it with "
                 "add_process_set() on every rank first");
  }
  const auto me = std::find(c.members.begin(), c.members.end(), c.rank);
  if (me == c.members.end()) {
    return c.Bad("this rank is not a member of process set " + std::to_string(r.attrs.process_set_id) + " " +
                 RanksList(c.members) + "; only its members may call collectives on it");
  }
  if (r.attrs.device >= 0) {
    return Status::Unimplemented(c.Context() + ": GPU tensors in process sets other than the global one are not "
                                 "supported yet; copy the tensor to the CPU (tf.device('/cpu:0')) or use the global set");
  }
  if (r.attrs.op == OpType::kJoin || r.attrs.op == OpType::kBarrier) {
    return c.Bad(std::string(OpTypeName(r.attrs.op)) + " runs on the global process set only");
  }
  if (r.attrs.op == OpType::kBroadcast && std::find(c.members.begin(), c.members.end(), r.attrs.root) == c.members.end()) {
    return c.Bad("root_rank=" + std::to_string(r.attrs.root) + " is not a member of process set " +
                 std::to_string(r.attrs.process_set_id) + " " + RanksList(c.members) +
                 "; root_rank is a global rank and must be in the set");
  }
  c.rank = static_cast<int>(me - c.members.begin());
  c.size = static_cast<int>(c.members.size());
  return Status::OK();
}

// What every op needs: a sane name and shape, a reduction the backend supports (Adasum
// first: its message is the clearer), a loadable GPU backend for device tensors, a
// completion callback, rows where the op splits them, an input buffer.
Status CheckCommon(const Check& c, int64_t bytes) {
  const Request& r = c.r;
  if (r.name.size() > kMaxNameBytes) return c.Bad("name longer than 4096 bytes");
  if (r.shape.size() > kMaxDims) return c.Bad("more than 64 dimensions");
  for (int64_t d : r.shape) {
    if (d < 0) return c.Bad("negative dimension in the shape");
  }
  if ((r.attrs.op == OpType::kAllreduce || r.attrs.op == OpType::kReducescatter) && r.attrs.reduce_op == ReduceOp::kAdasum) {
    TFRING_RETURN_IF_ERROR(CheckAdasum(r.attrs.op, r.attrs.dtype, c.size, r.attrs.device >= 0).WithContext(c.Context()));
  }
  if (r.attrs.device >= 0) TFRING_RETURN_IF_ERROR(CheckGpuRequest(r));
  if (!c.s.done) return c.Bad("no completion callback");
  const bool needs_rows = r.attrs.op == OpType::kAllgather || r.attrs.op == OpType::kAlltoall || r.attrs.op == OpType::kReducescatter;
  if (needs_rows && r.shape.empty()) {
    return c.Bad("needs a tensor with at least one dimension (got a scalar); reshape it to [1]");
  }
  if (bytes > 0 && c.s.input == nullptr && r.attrs.op != OpType::kBarrier && r.attrs.op != OpType::kJoin) {
    return c.Bad("null input buffer");
  }
  return Status::OK();
}

// An alltoall's splits: one entry per rank of the group, none negative, summing to the
// first dimension; an even split when none are given.
Status CheckSplits(Check& c) {
  Request& r = c.r;
  if (r.splits.empty()) {
    if (r.shape[0] % c.size != 0) {
      return c.Bad("first dimension " + std::to_string(r.shape[0]) + " does not divide evenly among " +
                   std::to_string(c.size) + " ranks; pass splits=[rows for each rank]");
    }
    r.splits.assign(c.size, r.shape[0] / c.size);
  }
  if (static_cast<int>(r.splits.size()) != c.size) {
    return c.Bad("splits has " + std::to_string(r.splits.size()) + " entries but " +
                 (c.members.empty() ? std::string("the job") : "process set " + std::to_string(r.attrs.process_set_id)) +
                 " has " + std::to_string(c.size) + " ranks; give one entry per rank");
  }
  int64_t total = 0;
  for (int64_t v : r.splits) {
    if (v < 0) return c.Bad("splits contains a negative value " + std::to_string(v));
    total += v;
  }
  if (total != r.shape[0]) {
    return c.Bad("splits sum to " + std::to_string(total) + " but the first dimension is " +
                 std::to_string(r.shape[0]) + "; they must be equal");
  }
  return Status::OK();
}

// What each op needs of its own: output buffers or allocators, a root in range, splits,
// a join's scalar.
Status CheckOp(Check& c, int64_t bytes) {
  const Request& r = c.r;
  const Submission& s = c.s;
  switch (r.attrs.op) {
    case OpType::kAllreduce:
    case OpType::kReducescatter: {
      TFRING_RETURN_IF_ERROR(CheckReduceSupported(r.attrs.dtype, r.attrs.reduce_op, r.attrs.prescale, r.attrs.postscale)
                                 .WithContext(std::string(OpTypeName(r.attrs.op)) + " of tensor '" + r.name + "'"));
      // A reducescatter output holds only this rank's rows, which may be none.
      const int64_t out_bytes = r.attrs.op == OpType::kAllreduce || r.shape[0] == 0
                                    ? bytes
                                    : bytes / r.shape[0] * ReducescatterRows(r.shape[0], c.size, c.rank);
      if (out_bytes > 0 && s.output == nullptr) return c.Bad("null output buffer");
      return Status::OK();
    }
    case OpType::kBroadcast:
      if (c.members.empty() && (r.attrs.root < 0 || r.attrs.root >= c.size)) {
        return c.Bad("root_rank=" + std::to_string(r.attrs.root) + " is out of range for a job of " +
                     std::to_string(c.size) + " rank(s) (valid: 0.." + std::to_string(c.size - 1) + ")");
      }
      if (bytes > 0 && s.output == nullptr) return c.Bad("null output buffer");
      return Status::OK();
    case OpType::kAllgather:
      if (!s.allocate_output) return c.Bad("no output allocator");
      return Status::OK();
    case OpType::kAlltoall:
      if (!s.allocate_output) return c.Bad("no output allocator");
      return CheckSplits(c);
    case OpType::kBarrier:
      return Status::OK();
    case OpType::kJoin:  // the output is the last rank to join (int32)
      if (r.attrs.dtype != DataType::kInt32 || r.NumElements() != 1 || s.output == nullptr || r.attrs.device >= 0) {
        return c.Bad("a join takes a host int32 scalar output for the last rank to join");
      }
      return Status::OK();
  }
  return Status::OK();
}

}  // namespace

Status ValidateSubmission(Submission& s, int rank, int size, const ProcessSetTable& sets) {
  Request& r = s.request;
  if (r.name.empty()) return Status::InvalidArgument("a collective needs a non-empty name");
  Check c{s, r, rank, rank, size, {}};
  if (r.attrs.process_set_id != 0) TFRING_RETURN_IF_ERROR(CheckProcessSet(c, sets));
  const int64_t bytes = r.NumElements() * static_cast<int64_t>(DataTypeSize(r.attrs.dtype));
  TFRING_RETURN_IF_ERROR(CheckCommon(c, bytes));
  TFRING_RETURN_IF_ERROR(CheckOp(c, bytes));
  if (r.attrs.op != OpType::kBroadcast) r.attrs.root = 0;  // irrelevant; keep it valid on the wire
  return Status::OK();
}

}  // namespace tfring
