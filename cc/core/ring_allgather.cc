// Ring allgather with a per-rank size (allgatherv).
//
// Steps: rank r first copies its own block into place; then for s = 0..n-2 it sends block
// (r - s) to its right neighbour and receives block (r - s - 1) from its left one, straight
// into the output. Bytes on the wire per rank: total - own block.
#include <cstring>

#include "collectives.h"

namespace tfring {

Status RingAllgatherv(const Group& comm, const void* input, void* output,
                      const std::vector<size_t>& bytes_per_rank) {
  const int n = comm.size(), r = comm.rank();
  std::vector<size_t> offsets(n, 0);
  for (int p = 1; p < n; ++p) offsets[p] = offsets[p - 1] + bytes_per_rank[p - 1];
  char* out = static_cast<char*>(output);
  if (bytes_per_rank[r] > 0 && out + offsets[r] != input) {
    std::memmove(out + offsets[r], input, bytes_per_rank[r]);
  }
  Link& right = comm.data(comm.right());
  Link& left = comm.data(comm.left());
  for (int s = 0; s < n - 1; ++s) {
    int send = ((r - s) % n + n) % n;
    int recv = ((r - s - 1) % n + n) % n;
    TFRING_RETURN_IF_ERROR(Transfer(right, out + offsets[send], bytes_per_rank[send], left,
                                    out + offsets[recv], bytes_per_rank[recv],
                                    comm.TransferDeadline(), comm.abort_flag()));
  }
  return Status::OK();
}

}  // namespace tfring
