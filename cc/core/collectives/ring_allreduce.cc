// Ring allreduce (Patarasuk & Yuan; gloo's allreduce_ring.h is the model).
//
// Steps, for n ranks and a buffer split into n segments:
//   1. reduce-scatter, n-1 steps: at step s rank r sends segment (r - s) to its right
//      neighbour and receives segment (r - s - 1) from its left one, reducing it into its
//      own copy. After n-1 steps rank r holds the full reduction of segment (r + 1).
//   2. allgather, n-1 steps: at step s rank r sends segment (r + 1 - s) and receives
//      segment (r - s), overwriting its partial copy.
// Bytes on the wire per rank: 2 (n-1)/n x buffer size, the minimum for allreduce.
// Pipelining: each step's receive is reduced chunk by chunk while the rest of the segment
// (and the send of this step) is still in flight, so the reduction overlaps the transfer;
// over shared memory the reduction reads straight from the ring (no staging copy).
#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"
#include "base/reduce_kernels.h"

namespace tfring {

std::vector<Segment> EvenSegments(size_t count, int parts) {
  std::vector<Segment> segments(parts);
  size_t base = count / parts, extra = count % parts, offset = 0;
  for (int i = 0; i < parts; ++i) {
    segments[i].offset = offset;
    segments[i].count = base + (static_cast<size_t>(i) < extra ? 1 : 0);
    offset += segments[i].count;
  }
  return segments;
}

std::vector<Segment> RowBlocks(const CollectiveArgs& args) {
  std::vector<Segment> blocks(args.rows_per_rank->size());
  size_t offset = 0;
  for (size_t p = 0; p < blocks.size(); ++p) {
    blocks[p] = {offset, (*args.rows_per_rank)[p] * args.row_elements};
    offset += blocks[p].count;
  }
  return blocks;
}

Status RingReduceScatterPieces(const Group& comm, char* buf, const std::vector<std::vector<Segment>>& segments,
                               DataType dtype, ReduceOp op, size_t chunk_bytes, const char* input, char* scratch) {
  const int n = comm.size(), r = comm.rank();
  const size_t es = DataTypeSize(dtype);
  Link& right = comm.data(comm.right());
  Link& left = comm.data(comm.left());
  const Segment none;
  for (int s = 0; s < n - 1; ++s) {
    const std::vector<Segment>& send = segments[static_cast<size_t>(((r - s) % n + n) % n)];
    const std::vector<Segment>& recv = segments[static_cast<size_t>(((r - s - 1) % n + n) % n)];
    // Out of place, step 0 sends this rank's own data and every step reduces the incoming
    // segment with this rank's own (each segment arrives exactly once in this phase).
    const char* send_from = input != nullptr && s == 0 ? input : buf;
    for (size_t k = 0; k < std::max(send.size(), recv.size()); ++k) {  // a segment's pieces, in order
      const Segment& out = k < send.size() ? send[k] : none;
      const Segment& in = k < recv.size() ? recv[k] : none;
      if (out.count == 0 && in.count == 0) continue;
      const size_t recv_bytes = in.count * es;
      const char* own = input != nullptr ? input + in.offset * es : nullptr;
      TFRING_RETURN_IF_ERROR(TransferReduce(right, send_from + out.offset * es, out.count * es, left,
                                            buf + in.offset * es, recv_bytes, dtype, op,
                                            scratch != nullptr ? scratch : comm.Scratch(recv_bytes),
                                            chunk_bytes, comm.TransferDeadline(), comm.abort_flag(), own));
    }
  }
  return Status::OK();
}

Status RingReduceScatterPhase(const Group& comm, char* buf, const std::vector<Segment>& segments,
                              DataType dtype, ReduceOp op, size_t chunk_bytes, const char* input, char* scratch) {
  std::vector<std::vector<Segment>> pieces(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) pieces[i] = {segments[i]};
  return RingReduceScatterPieces(comm, buf, pieces, dtype, op, chunk_bytes, input, scratch);
}

Status RingAllgatherPhase(const Group& comm, char* buf, const std::vector<Segment>& segments,
                          size_t es) {
  const int n = comm.size(), r = comm.rank();
  Link& right = comm.data(comm.right());
  Link& left = comm.data(comm.left());
  for (int s = 0; s < n - 1; ++s) {
    const Segment& send = segments[((r + 1 - s) % n + n) % n];
    const Segment& recv = segments[((r - s) % n + n) % n];
    TFRING_RETURN_IF_ERROR(Transfer(right, buf + send.offset * es, send.count * es, left,
                                    buf + recv.offset * es, recv.count * es,
                                    comm.TransferDeadline(), comm.abort_flag()));
  }
  return Status::OK();
}

Status RingAllreduce(const CollectiveArgs& args) {
  const Group& comm = *args.group;
  const void* input = args.input;
  void* output = args.output;
  const size_t count = args.count;
  const DataType dtype = args.dtype;
  const double postscale = args.postscale;
  const size_t es = DataTypeSize(dtype);
  if (count == 0) return Status::OK();
  if (comm.size() == 1) {
    if (input != output) std::memcpy(output, input, count * es);
    ScaleInPlace(output, count, dtype, postscale);
    return Status::OK();
  }
  std::vector<Segment> segments = EvenSegments(count, comm.size());
  char* data = static_cast<char*>(output);
  // Every segment of `output` is written before it is read: rank r receives every segment
  // but segments[r] in the reduce-scatter phase and segments[r] in the allgather phase.
  const char* separate_input = input != output ? static_cast<const char*>(input) : nullptr;
  TFRING_RETURN_IF_ERROR(
      RingReduceScatterPhase(comm, data, segments, dtype, args.op, args.chunk_bytes, separate_input));
  // Each rank scales only the segment it owns, while it is still in cache; the allgather
  // then hands out scaled values (1/n of a separate pass over the buffer, and every rank
  // holds the same bits because each element was scaled once, by its owner).
  const Segment& owned = segments[(comm.rank() + 1) % comm.size()];
  ScaleInPlace(data + owned.offset * es, owned.count, dtype, postscale);
  return RingAllgatherPhase(comm, data, segments, es);
}

Status RingReducescatter(const CollectiveArgs& args) {
  const Group& comm = *args.group;
  char* buf = args.work;
  const char* input = static_cast<const char*>(args.input);
  const int n = comm.size(), r = comm.rank();
  const size_t es = DataTypeSize(args.dtype);
  const std::vector<Segment> blocks = RowBlocks(args);
  // The ring leaves rank r with segments[(r + 1) % n]; label segment (p + 1) with block p so
  // that rank r ends up holding its own block.
  std::vector<Segment> segments(n);
  for (int p = 0; p < n; ++p) segments[(p + 1) % n] = blocks[p];
  if (n > 1) {
    TFRING_RETURN_IF_ERROR(RingReduceScatterPhase(comm, buf, segments, args.dtype, args.op, args.chunk_bytes, input));
  }
  const char* result = n == 1 && input != nullptr ? input : buf;
  if (blocks[r].count > 0) std::memcpy(args.output, result + blocks[r].offset * es, blocks[r].count * es);
  return Status::OK();
}

}  // namespace tfring
