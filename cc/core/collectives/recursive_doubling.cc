// Recursive-doubling allreduce, for buffers small enough that the number of sequential
// steps, not the bytes, decides the time (Thakur, Rabenseifner & Gropp, "Optimization of
// Collective Communication Operations in MPICH", 2005).
//
// Steps, for n ranks, p the largest power of two <= n and e = n - p:
//   1. fold: rank p + i (i < e) sends its buffer to rank i, which reduces it into its own.
//   2. log2 p rounds among ranks 0..p-1: in round k rank r exchanges its whole buffer with
//      rank r XOR 2^k and reduces the partner's into its own. The two partners reduce the
//      same two operands (a op b on one side, b op a on the other; every reduce op is
//      commutative bit for bit), so after each round both hold the same bits, and after
//      the last every rank 0..p-1 does.
//   3. unfold: rank i sends the (post-scaled) result to rank p + i.
// Sequential steps: log2 p, plus 2 when n is not a power of two, against the ring's
// 2(n-1). Bytes sent per rank: the whole buffer each step (log2 p x S against the ring's
// 2(n-1)/n x S), which is why it is only for small buffers (the selection table picks it up
// to TFRING_RECURSIVE_DOUBLING_BYTES: algorithm.cc).
#include <cstring>

#include "collectives/collectives.h"
#include "base/reduce_kernels.h"

namespace tfring {
namespace {

// Receives `peer`'s buffer, while sending this rank's `buf` when `send` (a round) and not
// (the fold), then reduces it into `buf`.
Status ReceiveAndReduce(const Group& comm, int peer, bool send, char* buf, size_t count, DataType dtype,
                        ReduceOp op) {
  const size_t bytes = count * DataTypeSize(dtype);
  char* incoming = comm.Scratch(bytes);
  Link& link = comm.data(peer);
  TFRING_RETURN_IF_ERROR(Transfer(link, buf, send ? bytes : 0, link, incoming, bytes, comm.TransferDeadline(),
                                  comm.abort_flag()));
  ReduceTo(buf, buf, incoming, count, dtype, op);
  return Status::OK();
}

}  // namespace

int LargestPowerOfTwo(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

Status FoldAsExtraRank(const Group& comm, int p, char* buf, size_t bytes) {
  Link& partner = comm.data(comm.rank() - p);
  TFRING_RETURN_IF_ERROR(Transfer(partner, buf, bytes, partner, nullptr, 0, comm.TransferDeadline(), comm.abort_flag()));
  return Transfer(partner, nullptr, 0, partner, buf, bytes, comm.TransferDeadline(), comm.abort_flag());
}

Status SendResultToExtraRank(const Group& comm, int p, const char* buf, size_t bytes) {
  if (comm.rank() + p >= comm.size()) return Status::OK();
  Link& extra = comm.data(comm.rank() + p);
  return Transfer(extra, buf, bytes, extra, nullptr, 0, comm.TransferDeadline(), comm.abort_flag());
}

Status RecursiveDoublingAllreduce(const CollectiveArgs& args) {
  const Group& comm = *args.group;
  const size_t count = args.count;
  const DataType dtype = args.dtype;
  const ReduceOp op = args.op;
  const size_t bytes = count * DataTypeSize(dtype);
  if (count == 0) return Status::OK();
  char* buf = static_cast<char*>(args.output);
  if (args.input != args.output) std::memcpy(buf, args.input, bytes);
  const int n = comm.size(), r = comm.rank(), p = LargestPowerOfTwo(n);
  if (r >= p) return FoldAsExtraRank(comm, p, buf, bytes);
  if (r + p < n) TFRING_RETURN_IF_ERROR(ReceiveAndReduce(comm, r + p, false, buf, count, dtype, op));
  for (int distance = 1; distance < p; distance *= 2) {
    TFRING_RETURN_IF_ERROR(ReceiveAndReduce(comm, r ^ distance, true, buf, count, dtype, op));
  }
  ScaleInPlace(buf, count, dtype, args.postscale);  // same bits in, same bits out, on every rank
  return SendResultToExtraRank(comm, p, buf, bytes);
}

}  // namespace tfring
