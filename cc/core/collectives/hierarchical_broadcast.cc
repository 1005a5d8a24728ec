// Hierarchical broadcast across hosts (scatter + allgather, van de Geijn's long-message
// broadcast, with the scatter's and the allgather's halves inside hosts).
//
// Steps, for H hosts of L ranks each (HostLayout) and a buffer split into L segments, local
// index l owning segment (l + 1) % L (the ring allgather phase's convention):
//   1. inside the root's host: the root sends each local rank its segment (shared memory).
//   2. across hosts: for each local index l, a pipelined chain broadcast of segment
//      (l + 1) % L among the H ranks of index l, from the root host's one (the network; L
//      chains at once, each on 1/L of the buffer).
//   3. inside each host: the ring allgather of the L segments (shared memory).
// Bytes on each host's network link: S in (S out for a host that forwards), as for the flat
// chain, but carried by L connections at once in chains of H ranks instead of one chain of
// N = H x L; sequential steps (L-1) + (H-1) + (L-1), plus the chains' pipeline depth.
#include "collectives/collectives.h"

namespace tfring {

Status HierarchicalBroadcast(const CollectiveArgs& args) {
  const Group& group = *args.group;
  const HostLayout* layout = group.host_layout();
  const size_t bytes = args.bytes;
  const int root = args.root;
  if (bytes == 0) return Status::OK();
  const int L = static_cast<int>(layout->local.size());
  int root_host = -1, root_local = -1;
  for (size_t h = 0; h < layout->hosts.size() && root_host < 0; ++h) {
    for (size_t l = 0; l < layout->hosts[h].size(); ++l) {
      if (layout->hosts[h][l] == root) {
        root_host = static_cast<int>(h);
        root_local = static_cast<int>(l);
      }
    }
  }
  if (root_host < 0) return Status::Internal("broadcast root " + std::to_string(root) + " is on no host");
  const Group local = group.Local(), cross = group.Cross();
  const std::vector<Segment> segments = EvenSegments(bytes, L);
  auto owned = [&](int l) { return segments[static_cast<size_t>((l + 1) % L)]; };
  char* data = static_cast<char*>(args.output);
  const int me = local.rank();
  if (cross.rank() == root_host) {  // this rank is on the root's host
    if (me == root_local) {
      for (int l = 0; l < L; ++l) {
        if (l == me || owned(l).count == 0) continue;
        Link& to = local.data(l);
        TFRING_RETURN_IF_ERROR(Transfer(to, data + owned(l).offset, owned(l).count, to, nullptr, 0,
                                        group.TransferDeadline(), group.abort_flag()));
      }
    } else if (owned(me).count > 0) {
      Link& from = local.data(root_local);
      TFRING_RETURN_IF_ERROR(Transfer(from, nullptr, 0, from, data + owned(me).offset, owned(me).count,
                                      group.TransferDeadline(), group.abort_flag()));
    }
  }
  CollectiveArgs chain = args.On(cross);
  chain.output = data + owned(me).offset;
  chain.bytes = owned(me).count;
  chain.root = root_host;
  TFRING_RETURN_IF_ERROR(ChainBroadcast(chain));
  return RingAllgatherPhase(local, data, segments, 1);
}

}  // namespace tfring
