// Pairwise-exchange alltoall(v).
//
// Steps: rank r copies its own block locally, then for d = 1..n-1 sends its block for rank
// (r + d) while receiving the block from rank (r - d) — at each step every rank sends to
// one peer and receives from another, so all links carry traffic at once. Bytes on the
// wire per rank: everything not addressed to itself.
#include <cstring>

#include "collectives/collectives.h"

namespace tfring {

Status PairwiseAlltoallv(const CollectiveArgs& args) {
  const Group& comm = *args.group;
  const std::vector<size_t>& send_bytes = *args.send_bytes;
  const std::vector<size_t>& recv_bytes = *args.recv_bytes;
  const int n = comm.size(), r = comm.rank();
  std::vector<size_t> send_off(n, 0), recv_off(n, 0);
  for (int p = 1; p < n; ++p) {
    send_off[p] = send_off[p - 1] + send_bytes[p - 1];
    recv_off[p] = recv_off[p - 1] + recv_bytes[p - 1];
  }
  const char* in = static_cast<const char*>(args.input);
  char* out = static_cast<char*>(args.output);
  if (recv_bytes[r] > 0) std::memcpy(out + recv_off[r], in + send_off[r], recv_bytes[r]);
  for (int d = 1; d < n; ++d) {
    int to = (r + d) % n;
    int from = (r - d + n) % n;
    TFRING_RETURN_IF_ERROR(Transfer(comm.data(to), in + send_off[to], send_bytes[to],
                                    comm.data(from), out + recv_off[from], recv_bytes[from],
                                    comm.TransferDeadline(), comm.abort_flag()));
  }
  return Status::OK();
}

}  // namespace tfring
