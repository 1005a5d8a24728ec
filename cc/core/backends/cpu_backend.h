// CpuBackend: collectives on host memory (device == -1), over the Communicator's links
// (shared-memory rings with local peers, TCP otherwise): allreduce with fusion (large
// tensors of a fused group reduced where they are; Adasum: adasum.h, always packed, each
// tensor combined on its own), allgatherv, broadcast, pairwise alltoallv, reduce-scatter.
// Which algorithm runs each (ring or chain, recursive doubling, Rabenseifner, hierarchical
// across hosts) is the selection table's choice (algorithm.h), run from one dispatch site
// (Run: collectives/dispatch.h). A response on a process set (Response::members) runs on a
// Group of the members' links carrying the members' own host layout (communicator.h), so
// the hierarchical algorithms run there too; the runtime calls Execute on members only.
//
// Threads: the runtime's background thread only. Owns the fusion buffer (scratch, grown
// to the largest fused group and kept).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "collectives/algorithm.h"
#include "collectives/collective_args.h"
#include "transport/communicator.h"

namespace tfring {

class CpuBackend : public Backend {
 public:
  // Uses context.comm, rank, size, chunk_bytes and timeline; they must outlive the backend.
  explicit CpuBackend(const BackendContext& context);
  const char* name() const override { return "cpu"; }
  // TFRING_CHUNK_BYTES, TFRING_RECURSIVE_DOUBLING_BYTES and TFRING_HIERARCHICAL_BLOCK_BYTES
  // from here on (a per-rank setting this rank set explicitly stays).
  void Retune(const std::vector<double>& values) override;
  Status Execute(const Response& response, const std::vector<Submission*>& group,
                 ExecutionTimings* timings) override;

 private:
  Status Allreduce(const Group& g, const Response& r, const std::vector<Submission*>& group,
                   ExecutionTimings* timings);
  Status AllreduceOne(const Group& g, const Response& r, Submission& s, double* transfer_s);
  // One host-memory allreduce of `count` elements (input == output: in place), by the
  // algorithm the selection table (algorithm.h) picks for it, or Adasum for its reduce op
  // (Run; `tensor_counts`: the fused tensors' counts, which Adasum reads).
  Status Allreduce(const Group& g, const void* input, void* output, size_t count, DataType dtype,
                   ReduceOp op, double postscale, const std::vector<size_t>* tensor_counts = nullptr);
  Status AllreducePacked(const Group& g, const Response& r, const std::vector<Submission*>& group,
                         double* transfer_s, size_t* copied_bytes);
  size_t InPlaceMinBytes(const Group& g) const;
  // Every operation's one way to its algorithm: the selection table's choice for `op` of
  // `bytes` over args.group (Adasum for an Adasum allreduce: its reduce op fixes it), run by
  // RunCollective (collectives/dispatch.h) with this backend's chunk and block sizes filled in.
  Status Run(OpType op, size_t bytes, CollectiveArgs args) const;
  Status Allgather(const Group& g, const Response& r, Submission& s);
  Status Broadcast(const Group& g, const Response& r, Submission& s);
  Status Alltoall(const Group& g, const Response& r, Submission& s);
  Status Reducescatter(const Group& g, const Response& r, Submission& s);
  // The fusion buffer with at least `bytes` (contents are scratch).
  char* FusionBuffer(size_t bytes);

  BackendContext ctx_;
  std::vector<char> fusion_buffer_;
  int64_t in_place_min_bytes_;  // TFRING_FUSION_IN_PLACE_BYTES (-1: by transport)
  // `g` carrying its host layout: the job's, or the process set's (made once per member
  // list); the selection reads the group's topology() from it.
  Group WithHostLayout(const Group& g, const std::vector<int32_t>& members);
  // The settings the selection table (algorithm.h) reads, fixed at construction (defaults
  // without a config: the ring and the chain).
  AlgorithmSettings settings_;
  std::shared_ptr<const HostLayout> world_layout_;  // null: no hierarchical algorithm on the job
  std::map<std::vector<int32_t>, std::shared_ptr<const HostLayout>> set_layouts_;  // by members
};

}  // namespace tfring
