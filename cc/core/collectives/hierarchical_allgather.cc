// Hierarchical allgather across hosts (Horovod's HOROVOD_HIERARCHICAL_ALLGATHER, Open MPI's
// HAN split the work the same way).
//
// Steps, for H hosts of L ranks each (HostLayout), every rank's block at its place in the
// output (sizes may differ per rank):
//   1. across hosts: the H ranks of each local index l allgather their own blocks (a ring
//      over the network); L such rings run at once.
//   2. inside each host: local rank l now holds the blocks of local index l of every host
//      (H pieces, not contiguous in the output); the host's ring allgathers those bundles
//      (shared memory).
// Bytes on each host's network link, each way: the other hosts' blocks, (H-1)/H x S of an
// output of S (each of the L rings carries its index's share), against (N-1)/N x S for one
// flat ring over all N = H x L ranks (each host's one ring edge out carries every block but
// the next rank's): at 2 hosts x 4 ranks 0.5 S against 0.875 S, so the flat ring reaches at
// most 57% of what the links allow. Sequential steps: (H-1) + (L-1) against N-1. A copy:
// every rank ends with the same bytes.
#include <cstring>

#include "collectives/collectives.h"

namespace tfring {

Status HierarchicalAllgatherv(const CollectiveArgs& args) {
  const Group& group = *args.group;
  const HostLayout* layout = group.host_layout();
  const std::vector<size_t>& bytes_per_rank = *args.recv_bytes;
  const void* input = args.input;
  const size_t n = static_cast<size_t>(group.size());
  std::vector<size_t> offsets(n, 0);
  for (size_t p = 1; p < n; ++p) offsets[p] = offsets[p - 1] + bytes_per_rank[p - 1];
  char* out = static_cast<char*>(args.output);
  const size_t me = static_cast<size_t>(group.rank());
  if (bytes_per_rank[me] > 0 && out + offsets[me] != input) std::memmove(out + offsets[me], input, bytes_per_rank[me]);
  auto block = [&](int32_t rank) { return Segment{offsets[static_cast<size_t>(rank)], bytes_per_rank[static_cast<size_t>(rank)]}; };
  const Group cross = group.Cross(), local = group.Local();
  std::vector<std::vector<Segment>> own(layout->cross.size());
  for (size_t h = 0; h < layout->cross.size(); ++h) own[h] = {block(layout->cross[h])};
  TFRING_RETURN_IF_ERROR(RingAllgatherPieces(cross, out, own));
  std::vector<std::vector<Segment>> bundles(layout->local.size());
  for (size_t l = 0; l < layout->local.size(); ++l) {
    for (const auto& host : layout->hosts) bundles[l].push_back(block(host[l]));
  }
  return RingAllgatherPieces(local, out, bundles);
}

}  // namespace tfring
