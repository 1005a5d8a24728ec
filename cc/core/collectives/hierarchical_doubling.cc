// Hierarchical allreduce for small buffers: the latency of a few sequential steps, with
// only one rank per host on the network.
//
// Steps, for H hosts of L ranks each (local index i, the host's leader i = 0):
//   1. binomial reduce to the leader inside each host (ceil(log2 L) steps, shared memory):
//      in step d = 1, 2, 4... a rank with bit d set sends its buffer to i - d and is done;
//      i + d (when it exists) is received and reduced by rank i.
//   2. recursive doubling among the H leaders (recursive_doubling.cc: log2 H steps, +2 off
//      a power of two), which applies the postscale: every leader holds the same bits.
//   3. binomial broadcast from the leader inside each host (ceil(log2 L) steps).
// Sequential steps: 2 ceil(log2 L) + log2 H, against log2 N for recursive doubling over
// all N ranks; but during step 2 only the H leaders run and use the network, where flat
// recursive doubling makes all N ranks (N processes, N flows) cross hosts at once: on a
// host with fewer cores than ranks each flat step costs wake-ups of every rank.
// Bytes: the whole buffer per step, as recursive doubling (for small buffers only; the
// selection table never chooses it, TFRING_ALGORITHM pins it: algorithm.cc). Every rank
// ends with its leader's bits.
#include <cstring>

#include "collectives/collectives.h"
#include "base/reduce_kernels.h"

namespace tfring {

Status HierarchicalDoublingAllreduce(const CollectiveArgs& args) {
  const Group& group = *args.group;
  const size_t count = args.count;
  const DataType dtype = args.dtype;
  const ReduceOp op = args.op;
  if (count == 0) return Status::OK();
  const size_t bytes = count * DataTypeSize(dtype);
  char* buf = static_cast<char*>(args.output);
  if (args.input != args.output) std::memcpy(buf, args.input, bytes);
  const Group local = group.Local();
  const int n = local.size(), i = local.rank();
  int top = 1;  // the smallest power of two >= n
  while (top < n) top *= 2;
  // 1. reduce to local index 0.
  for (int d = 1; d < top; d *= 2) {
    if (i & d) {
      Link& parent = local.data(i - d);
      TFRING_RETURN_IF_ERROR(
          Transfer(parent, buf, bytes, parent, nullptr, 0, local.TransferDeadline(), local.abort_flag()));
      break;
    }
    if (i + d < n) {
      Link& child = local.data(i + d);
      char* incoming = local.Scratch(bytes);
      TFRING_RETURN_IF_ERROR(
          Transfer(child, nullptr, 0, child, incoming, bytes, local.TransferDeadline(), local.abort_flag()));
      ReduceTo(buf, buf, incoming, count, dtype, op);
    }
  }
  // 2. across hosts, leaders only.
  if (i == 0) {
    const Group leaders = group.Leaders();
    CollectiveArgs across = args.On(leaders);
    across.input = buf;
    across.output = buf;
    TFRING_RETURN_IF_ERROR(RecursiveDoublingAllreduce(across));
  }
  // 3. broadcast from local index 0: a rank receives at the step of its lowest set bit,
  // then forwards to i + d for every smaller d.
  for (int d = top / 2; d >= 1; d /= 2) {
    if (i % (2 * d) == 0 && i + d < n) {
      Link& child = local.data(i + d);
      TFRING_RETURN_IF_ERROR(
          Transfer(child, buf, bytes, child, nullptr, 0, local.TransferDeadline(), local.abort_flag()));
    } else if (i % (2 * d) == d) {
      Link& parent = local.data(i - d);
      TFRING_RETURN_IF_ERROR(
          Transfer(parent, nullptr, 0, parent, buf, bytes, local.TransferDeadline(), local.abort_flag()));
    }
  }
  return Status::OK();
}

}  // namespace tfring
