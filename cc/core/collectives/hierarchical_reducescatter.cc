// Hierarchical reduce-scatter across hosts.
//
// Steps, for H hosts of L ranks each (HostLayout), rank p's result being the reduced block
// p (its rows, at their place in the buffer):
//   1. inside each host: a ring reduce-scatter whose L segments are bundles: local rank l's
//      is the blocks of local index l on every host (H pieces, not contiguous); local rank
//      l ends with them reduced over its host (shared memory).
//   2. across hosts: among the H ranks of each local index l, a ring reduce-scatter of those
//      H blocks, each rank ending with its own block reduced over every host (L rings at
//      once over the network).
// Bytes on each host's network link, each way: (H-1)/H x S (each of the L rings carries
// (H-1)/H of its index's share), against (N-1)/N x S for the flat ring over all N = H x L
// ranks. Each element is reduced in one order inside its host, then in one order across
// hosts: the result is exact wherever the flat ring's is (the same tolerance as the ring's
// for float sums, whose order differs).
#include <cstring>

#include "collectives/collectives.h"

namespace tfring {

Status HierarchicalReducescatter(const CollectiveArgs& args) {
  const Group& group = *args.group;
  const HostLayout* layout = group.host_layout();
  char* buf = args.work;
  const DataType dtype = args.dtype;
  const ReduceOp op = args.op;
  const size_t chunk_bytes = args.chunk_bytes;
  const size_t es = DataTypeSize(dtype);
  const std::vector<Segment> blocks = RowBlocks(args);
  const Group local = group.Local(), cross = group.Cross();
  const size_t L = layout->local.size(), H = layout->hosts.size();
  // The ring leaves rank r with segment (r + 1) % size: label segment (l + 1) with bundle l.
  std::vector<std::vector<Segment>> bundles(L);
  for (size_t l = 0; l < L; ++l) {
    for (const auto& host : layout->hosts) bundles[(l + 1) % L].push_back(blocks[static_cast<size_t>(host[l])]);
  }
  TFRING_RETURN_IF_ERROR(RingReduceScatterPieces(local, buf, bundles, dtype, op, chunk_bytes,
                                                 static_cast<const char*>(args.input)));
  std::vector<std::vector<Segment>> own(H);
  for (size_t h = 0; h < H; ++h) own[(h + 1) % H] = {blocks[static_cast<size_t>(layout->cross[h])]};
  TFRING_RETURN_IF_ERROR(RingReduceScatterPieces(cross, buf, own, dtype, op, chunk_bytes));
  const Segment& mine = blocks[static_cast<size_t>(group.rank())];
  if (mine.count > 0) std::memcpy(args.output, buf + mine.offset * es, mine.count * es);
  return Status::OK();
}

}  // namespace tfring
