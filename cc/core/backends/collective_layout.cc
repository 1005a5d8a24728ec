#include "backends/collective_layout.h"

namespace tfring {

void BlockLayout::Add(int64_t rows, size_t row_bytes) {
  const size_t b = static_cast<size_t>(rows) * row_bytes;
  offsets.push_back(total);
  bytes.push_back(b);
  total += b;
}

bool BlockLayout::Equal() const {
  for (size_t b : bytes) {
    if (b != bytes.front()) return false;
  }
  return true;
}

Status GatherLayout::AllocateOutput(Submission& s, void** out) const {
  TFRING_RETURN_IF_ERROR(s.allocate_output(output_shape, out));
  if (!received_rows.empty() && s.on_received_splits) s.on_received_splits(received_rows);
  return Status::OK();
}

GatherLayout AllgatherLayout(const Response& r, const Request& mine, int set_size) {
  GatherLayout l;
  const size_t row = mine.RowBytes();
  l.output_shape = mine.shape;
  l.output_shape[0] = 0;
  for (int p = 0; p < set_size; ++p) {
    l.recv.Add(r.AllgatherRows(p), row);
    l.output_shape[0] += r.AllgatherRows(p);
  }
  return l;
}

GatherLayout AlltoallLayout(const Response& r, const Request& mine, int set_size, int set_rank) {
  GatherLayout l;
  const size_t row = mine.RowBytes();
  l.output_shape = mine.shape;
  l.output_shape[0] = 0;
  for (int p = 0; p < set_size; ++p) {
    const int64_t received = r.AlltoallRows(p, set_rank, set_size);
    l.send.Add(r.AlltoallRows(set_rank, p, set_size), row);
    l.recv.Add(received, row);
    l.received_rows.push_back(received);
    l.output_shape[0] += received;
  }
  return l;
}

}  // namespace tfring
