// Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather by
// recursive doubling (Thakur, Rabenseifner & Gropp, "Optimization of Collective
// Communication Operations in MPICH", 2005; gloo's allreduce_halving_doubling.h).
//
// Steps, for n ranks, p the largest power of two <= n, e = n - p, and the buffer cut into
// p segments (EvenSegments):
//   1. fold: rank p + i (i < e) sends its buffer to rank i, which reduces it into its own
//      (as recursive_doubling.cc).
//   2. recursive halving, log2 p steps among ranks 0..p-1: at distance d = p/2, p/4 ... 1,
//      rank r and r XOR d hold the same 2d segments; the one with bit d clear keeps the
//      lower d, the other the upper d; each sends the half it gives up and reduces the half
//      it keeps with what arrives. Rank r ends with segment r reduced over every rank.
//   3. the owner scales its segment (postscale, once per element).
//   4. recursive doubling, log2 p steps: at distance d = 1, 2 ... p/2, rank r and r XOR d
//      swap the d segments each holds; then every rank 0..p-1 holds every segment.
//   5. unfold: rank i sends the result to rank p + i.
// Sequential steps: 2 log2 p (+2 off a power of two), between recursive doubling's log2 p
// and the ring's 2(n-1); bytes sent per rank: 2 (p-1)/p x S (+S for the fold), the ring's
// 2(n-1)/n x S at a power of two, against recursive doubling's log2 p x S. Each element is
// reduced by one rank (its segment's owner), so every rank ends with the same bits.
#include <cstring>

#include "collectives/collectives.h"
#include "base/reduce_kernels.h"

namespace tfring {

Status RabenseifnerAllreduce(const CollectiveArgs& args) {
  const Group& comm = *args.group;
  const size_t count = args.count, chunk_bytes = args.chunk_bytes;
  const DataType dtype = args.dtype;
  const ReduceOp op = args.op;
  if (count == 0) return Status::OK();
  const size_t es = DataTypeSize(dtype), bytes = count * es;
  char* buf = static_cast<char*>(args.output);
  if (args.input != args.output) std::memcpy(buf, args.input, bytes);
  const int n = comm.size(), r = comm.rank(), p = LargestPowerOfTwo(n);
  if (r >= p) return FoldAsExtraRank(comm, p, buf, bytes);
  if (r + p < n) {
    Link& extra = comm.data(r + p);
    TFRING_RETURN_IF_ERROR(TransferReduce(extra, nullptr, 0, extra, buf, bytes, dtype, op, comm.Scratch(bytes),
                                          chunk_bytes, comm.TransferDeadline(), comm.abort_flag()));
  }
  const std::vector<Segment> segments = EvenSegments(count, p);
  // Segments [a, b) as one element range.
  auto span = [&](int a, int b) {
    const size_t begin = segments[static_cast<size_t>(a)].offset;
    const size_t end = b == p ? count : segments[static_cast<size_t>(b)].offset;
    return Segment{begin, end - begin};
  };
  int lo = 0, hi = p;  // the segments this rank is responsible for
  for (int d = p / 2; d >= 1; d /= 2) {
    const int mid = lo + d;
    const bool upper = (r & d) != 0;
    const Segment keep = upper ? span(mid, hi) : span(lo, mid);
    const Segment give = upper ? span(lo, mid) : span(mid, hi);
    Link& partner = comm.data(r ^ d);
    TFRING_RETURN_IF_ERROR(TransferReduce(partner, buf + give.offset * es, give.count * es, partner,
                                          buf + keep.offset * es, keep.count * es, dtype, op,
                                          comm.Scratch(keep.count * es), chunk_bytes, comm.TransferDeadline(),
                                          comm.abort_flag()));
    if (upper) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const Segment owned = span(r, r + 1);  // lo == r, hi == r + 1
  ScaleInPlace(buf + owned.offset * es, owned.count, dtype, args.postscale);
  for (int d = 1; d < p; d *= 2) {
    const bool upper = (r & d) != 0;
    const Segment mine = span(lo, hi);
    const Segment theirs = upper ? span(lo - d, lo) : span(hi, hi + d);
    Link& partner = comm.data(r ^ d);
    TFRING_RETURN_IF_ERROR(Transfer(partner, buf + mine.offset * es, mine.count * es, partner,
                                    buf + theirs.offset * es, theirs.count * es, comm.TransferDeadline(),
                                    comm.abort_flag()));
    if (upper) {
      lo -= d;
    } else {
      hi += d;
    }
  }
  return SendResultToExtraRank(comm, p, buf, bytes);
}

}  // namespace tfring
