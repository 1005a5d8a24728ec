// Ring allgather with a per-rank size (allgatherv), and its general form over blocks made
// of several pieces (the hierarchical allgather's phase inside a host).
//
// Steps: rank r first copies its own block into place; then for s = 0..n-2 it sends block
// (r - s) to its right neighbour and receives block (r - s - 1) from its left one, straight
// into the output. Bytes on the wire per rank: total - own block.
// A block of several pieces moves piece by piece, one Transfer per piece index: the sender
// and the receiver of a block walk its pieces in the same order, so their transfer
// boundaries agree (shared-memory links need that, link.h).
#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"

namespace tfring {

Status RingAllgatherPieces(const Group& comm, char* out, const std::vector<std::vector<Segment>>& blocks) {
  const int n = comm.size(), r = comm.rank();
  Link& right = comm.data(comm.right());
  Link& left = comm.data(comm.left());
  for (int s = 0; s < n - 1; ++s) {
    const std::vector<Segment>& send = blocks[static_cast<size_t>(((r - s) % n + n) % n)];
    const std::vector<Segment>& recv = blocks[static_cast<size_t>(((r - s - 1) % n + n) % n)];
    for (size_t k = 0; k < std::max(send.size(), recv.size()); ++k) {
      const Segment none;
      const Segment& out_piece = k < send.size() ? send[k] : none;
      const Segment& in_piece = k < recv.size() ? recv[k] : none;
      if (out_piece.count == 0 && in_piece.count == 0) continue;
      TFRING_RETURN_IF_ERROR(Transfer(right, out + out_piece.offset, out_piece.count, left, out + in_piece.offset,
                                      in_piece.count, comm.TransferDeadline(), comm.abort_flag()));
    }
  }
  return Status::OK();
}

Status RingAllgatherv(const CollectiveArgs& args) {
  const Group& comm = *args.group;
  const std::vector<size_t>& bytes_per_rank = *args.recv_bytes;
  const void* input = args.input;
  const int n = comm.size(), r = comm.rank();
  std::vector<std::vector<Segment>> blocks(static_cast<size_t>(n));
  size_t offset = 0;
  for (int p = 0; p < n; ++p) {
    blocks[static_cast<size_t>(p)] = {Segment{offset, bytes_per_rank[static_cast<size_t>(p)]}};
    offset += bytes_per_rank[static_cast<size_t>(p)];
  }
  char* out = static_cast<char*>(args.output);
  const Segment& mine = blocks[static_cast<size_t>(r)][0];
  if (mine.count > 0 && out + mine.offset != input) std::memmove(out + mine.offset, input, mine.count);
  return RingAllgatherPieces(comm, out, blocks);
}

}  // namespace tfring
