// Coordinator messages and their wire format.
//
// Requests flow up the control tree (control_tree.h) to rank 0, each rank passing on its
// subtree's; rank 0 answers every rank, down the same tree, with the same ordered
// responses, which every rank executes in that order.
// Decode* never trusts its input (it is fuzzed): a malformed buffer yields kInvalidArgument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/collective_attrs.h"
#include "base/data_type.h"
#include "base/status.h"

namespace tfring {

// One collective as this rank asked for it.
struct Request {
  std::string name;  // negotiation key; equal on every rank, unique while in flight
  // What the ranks must agree on. Only the process set's members submit it; root stays a
  // global rank.
  CollectiveAttrs attrs;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall: rows to each rank (size == the set's size)

  int64_t NumElements() const;
  size_t Bytes() const;     // payload bytes: NumElements() x the dtype's size
  size_t RowBytes() const;  // bytes of one row of the first dimension (all of a scalar)
  std::string Describe() const;  // "allreduce float32[2,3] Sum" for messages
};

// Rows of the first dimension that `rank` keeps after a reducescatter of `dim0` rows
// (the first dim0 % size ranks keep one more).
int64_t ReducescatterRows(int64_t dim0, int size, int rank);

// What every rank must do next, decided by rank 0.
struct Response {
  enum class Kind : uint8_t { kCollective = 0, kError = 1 };
  // One tensor the response runs, named in full or by its cache id (response_cache.h). On
  // the wire a tensor with an id that is not new travels as the id alone: decoding leaves
  // its name empty, and the receiving rank fills it in from its RequestCache.
  struct Tensor {
    std::string name;
    int32_t cache_id = -1;         // -1: none
    bool cache_id_is_new = false;  // announces cache_id for name
  };
  Kind kind = Kind::kCollective;
  std::vector<Tensor> tensors;  // > 1 only for a fused allreduce
  // What the ranks agreed on: the first submitting rank's (its GPU ordinal is only a label;
  // each rank drives its own). process_set_id: the set; errors carry it too: a rank fails
  // only its tensors of that name submitted on that set.
  CollectiveAttrs attrs;
  // The process set's sorted global ranks (none for the global set, and possibly none in
  // an error for an unknown set), told by rank 0 so that no rank needs its table to
  // execute: a rank not in `members` skips the response (it submitted nothing for it).
  std::vector<int32_t> members;
  // Per op (read it through the accessors below), n = the set's size and ranks as indices
  // into the set (global ranks for the global set):
  //   allreduce: payload bytes of each of `tensors` (fusion adds them up);
  //   allgather: first dimension of every rank's tensor (size n);
  //   alltoall: row-major n x n matrix, sizes[i * n + j] = rows rank i sends to rank j.
  std::vector<int64_t> sizes;
  // Monitoring: for each rank (size n, or empty), seconds from its request reaching rank 0
  // until the last rank's did, summed over `tensors` (rank 0's clock): how long that rank
  // waited for the slowest one. Finite and >= 0.
  std::vector<double> ready_wait_s;
  ErrorCode error_code = ErrorCode::kOk;
  std::string error_message;

  int64_t AllgatherRows(int rank) const { return sizes[static_cast<size_t>(rank)]; }
  int64_t AlltoallRows(int from, int to, int world_size) const {
    return sizes[static_cast<size_t>(from) * static_cast<size_t>(world_size) + static_cast<size_t>(to)];
  }
  // Whether global rank `rank` takes part (every rank for the global set).
  bool Includes(int rank) const;
  // The factor applied after the reduction: postscale, with Average's 1/world_size folded in
  // (world_size: the set's size).
  double EffectivePostscale(int world_size) const {
    return attrs.postscale * (attrs.reduce_op == ReduceOp::kAverage ? 1.0 / world_size : 1.0);
  }
};

// Control-channel message kinds.
enum class ControlKind : uint8_t {
  // Up and down the control tree (transport/control_tree.h): a child sends to its parent
  // what it and the ranks below it submitted; rank 0, the root, answers, and each parent
  // passes the answer down.
  kRequests = 1,   // child -> parent: newly submitted requests (its own and its subtree's)
  kResponses = 2,  // parent -> child: what to run next (decided by rank 0)
  kShutdown = 3,   // child -> parent: this rank (or its subtree) called shutdown()
  kAbort = 4,      // either way: the job is broken; carries the cause
  kHello = 5,      // child -> parent, once, last step of init: connected and done with the store
};

// kRequests: what one rank below the sender in the control tree submitted, passed on.
struct RankRequests {
  int32_t rank = 0;
  std::vector<Request> requests;
  std::vector<int32_t> cached;  // cache ids, increasing (a bit vector on the wire)
};

struct ControlMessage {
  ControlKind kind = ControlKind::kRequests;
  // kRequests: the sender's own requests, in full ...
  std::vector<Request> requests;
  // ... and sent as cache ids (response_cache.h), reported one by one (a cache id is
  // normally reported in subtree_cached instead); a bit vector on the wire, so they decode
  // in increasing order.
  std::vector<int32_t> cached_requests;
  // kRequests: the same for ranks below the sender, which it passes on (request_relay.h).
  std::vector<RankRequests> relayed;
  // kRequests: cache ids that every rank of the sender's subtree (the sender included)
  // has submitted and that were not reported rank by rank: one bit each, however many
  // ranks lie below. Increasing.
  std::vector<int32_t> subtree_cached;
  std::vector<Response> responses;
  // kResponses: empty, or the autotuner's new settings (control/tunables.h: one value per
  // Tunables() entry), which every rank uses from the response after these on. Empty costs
  // no byte on the wire.
  std::vector<double> tuning;
  // kAbort: the rank whose failure broke the job (relays keep it), and the cause as that
  // rank states it, the sentence every rank fails with ("rank 2 failed: ..." -- a rank
  // other than 0 names itself; rank 0's own causes are sent as they are).
  int32_t abort_origin = -1;
  ErrorCode abort_code = ErrorCode::kOk;
  std::string abort_message;
};

// A kAbort message: `origin` broke the job, for `message` (see ControlMessage::abort_*).
ControlMessage AbortMessage(int origin, ErrorCode code, const std::string& message);
// The abort that stands for `rank`'s orderly shutdown (kPrecondition, the only abort with
// that code: a receiver lets collectives agreed before it run first).
ControlMessage DepartureMessage(int rank);

std::string EncodeControl(const ControlMessage& message);
Status DecodeControl(const std::string& bytes, int world_size, ControlMessage* message);

}  // namespace tfring
