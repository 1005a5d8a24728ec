// Pipelined chain broadcast.
//
// Ranks form a chain starting at the root and following the ring (root, root+1, ...).
// The root streams the buffer to its right neighbour; every middle rank receives chunk k
// from its left neighbour while forwarding chunk k-1 to its right one; the last rank only
// receives. With chunks, all links are busy at once: time ~ bytes/bandwidth + (n-2) chunks.
// The root and the last rank move the whole buffer in one Transfer while middle ranks move
// it chunk by chunk; over shared memory every Transfer starts at an 8-byte aligned stream
// position (link.h), so chunk boundaries must be multiples of 8 for both ends of a link to
// agree on where the data lies: chunk_bytes is rounded up to one.
#include <algorithm>

#include "collectives/collectives.h"

namespace tfring {

Status ChainBroadcast(const CollectiveArgs& args) {
  const Group& comm = *args.group;
  const size_t bytes = args.bytes;
  const int n = comm.size(), r = comm.rank();
  if (n == 1 || bytes == 0) return Status::OK();
  const size_t chunk_bytes = (std::max<size_t>(args.chunk_bytes, 1) + 7) & ~size_t{7};
  char* data = static_cast<char*>(args.output);
  const bool is_root = r == args.root;
  const bool is_last = comm.right() == args.root;
  Link& right = comm.data(comm.right());
  Link& left = comm.data(comm.left());
  if (is_root) return Transfer(right, data, bytes, left, nullptr, 0, comm.TransferDeadline(), comm.abort_flag());
  if (is_last) return Transfer(right, nullptr, 0, left, data, bytes, comm.TransferDeadline(), comm.abort_flag());
  const size_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  auto chunk_size = [&](size_t k) { return std::min(chunk_bytes, bytes - k * chunk_bytes); };
  for (size_t k = 0; k <= chunks; ++k) {
    // forward chunk k-1 while receiving chunk k
    const void* send = k > 0 ? data + (k - 1) * chunk_bytes : nullptr;
    size_t send_size = k > 0 ? chunk_size(k - 1) : 0;
    void* recv = k < chunks ? data + k * chunk_bytes : nullptr;
    size_t recv_size = k < chunks ? chunk_size(k) : 0;
    TFRING_RETURN_IF_ERROR(Transfer(right, send, send_size, left, recv, recv_size,
                                    comm.TransferDeadline(), comm.abort_flag()));
  }
  return Status::OK();
}

}  // namespace tfring
