// Collective algorithms on host memory over a Communicator's data connections.
//
// Contract for every function here:
//   * Called on the runtime's background thread, by every rank of the group, in the same
//     order (the coordinator guarantees it). Blocking; each transfer is bounded by
//     comm.TransferDeadline() and wakes on comm.Abort().
//   * A dead peer yields kPeerLost naming it. Buffers are host memory owned by the caller.
//   * Sizes may be 0 and need not divide by the world size; world size 1 is a local copy.
// The algorithms' entry points take one CollectiveArgs (collective_args.h: which fields
// each operation reads) and expect them as RunCollective (dispatch.h) checks them: root in
// range, per-rank vectors present with one entry per rank, a host layout for the
// hierarchical ones. The building blocks below them (phases, pieces, folds) take their
// arguments one by one.
#pragma once

#include <cstddef>
#include <vector>

#include "base/data_type.h"
#include "collectives/collective_args.h"
#include "transport/communicator.h"

namespace tfring {

struct Segment {
  size_t offset = 0;  // elements
  size_t count = 0;   // elements
};

// Splits `count` elements into `parts` contiguous segments whose sizes differ by at most 1
// (the first `count % parts` segments get one more).
std::vector<Segment> EvenSegments(size_t count, int parts);

// A reduce-scatter's blocks (args.rows_per_rank, args.row_elements): rank p's
// rows_per_rank[p] rows of `row_elements` elements each, one after another from offset 0.
std::vector<Segment> RowBlocks(const CollectiveArgs& args);

// Allreduce of `count` elements by one ring (see ring_allreduce.cc for the algorithm):
// `output` gets the reduction of every rank's `input`, which is only read; no copy of
// `input` into `output` is made (input == output is in place). Partial results pass
// through `output`, so the two must not overlap otherwise. The result is multiplied by
// `postscale` (ScaleInPlace rules; 1.0: untouched), each element once by the rank that
// owns its segment, so every rank ends with the same bits.
Status RingAllreduce(const CollectiveArgs& args);

// Groups whose size is not a power of two, for the algorithms that pair ranks by XOR
// (recursive doubling, Rabenseifner): the ranks from p on (p: the largest power of two <= n)
// hand their buffer to rank r - p, which reduces it into its own before the algorithm runs
// on ranks 0..p-1 and sends it the result afterwards (recursive_doubling.cc).
int LargestPowerOfTwo(int n);
// A rank r >= p: its whole part (sends `bytes` of `buf`, receives the result into it).
Status FoldAsExtraRank(const Group& comm, int p, char* buf, size_t bytes);
// A rank r < n - p, after the algorithm: rank r + p's result. Nothing for the others.
Status SendResultToExtraRank(const Group& comm, int p, const char* buf, size_t bytes);

// Out-of-place (input == output: in place) allreduce by recursive doubling: log2 n steps
// (+2 off a power of two) instead of the ring's 2(n-1), each moving the whole buffer: for
// small buffers (see recursive_doubling.cc). Every rank ends with the same bits; the result
// is multiplied by `postscale` as RingAllreduce's is. `input` is only read.
Status RecursiveDoublingAllreduce(const CollectiveArgs& args);

// Out-of-place (input == output: in place) allreduce by Rabenseifner's algorithm: reduce-scatter
// by recursive halving, allgather by recursive doubling, 2 log2 n steps (+2 off a power of
// two) moving the ring's bytes (see rabenseifner.cc): for medium buffers. Same bits on every
// rank and `postscale` as RingAllreduce; `input` is only read.
Status RabenseifnerAllreduce(const CollectiveArgs& args);

// The hierarchical algorithms below run on a group that carries its HostLayout
// (Group::host_layout(), transport/host_layout.h: the whole job or a process set, in the
// group's indices); RunCollective refuses a group without one (kInternal).

// Allreduce over every rank of the group in three phases: reduce-scatter inside each host,
// allreduce of each local rank's share across hosts, allgather inside each host (see
// hierarchical_allreduce.cc). In or out of place and postscale as RingAllreduce. Buffers of
// at least 2 x `block_bytes` (0: never) are pipelined in HierarchicalAllreduceBlocks()
// blocks, the cross-host phase on a helper thread that is joined before return.
Status HierarchicalAllreduce(const CollectiveArgs& args);
// How many blocks HierarchicalAllreduce pipelines a buffer of `bytes` in (1: not pipelined).
size_t HierarchicalAllreduceBlocks(size_t bytes, size_t block_bytes);

// Allreduce for small buffers over every rank of the group: binomial reduce to each host's
// first rank, recursive doubling among those, binomial broadcast inside each host (see
// hierarchical_doubling.cc). In or out of place and postscale as RecursiveDoublingAllreduce.
Status HierarchicalDoublingAllreduce(const CollectiveArgs& args);

// Allgather with a per-rank byte count (as RingAllgatherv) over every rank of the group, in
// two phases: across hosts among the ranks of each local index, then inside each host (see
// hierarchical_allgather.cc). `input` may be this rank's block inside `output`.
Status HierarchicalAllgatherv(const CollectiveArgs& args);

// Broadcast of `bytes` bytes of `output` from `root` (an index of the group) over every
// rank of it: scatter inside the root's host, L chains across hosts each on 1/L of the
// buffer, allgather inside each host (see hierarchical_broadcast.cc).
Status HierarchicalBroadcast(const CollectiveArgs& args);

// Reduce-scatter (as RingReducescatter) over every rank of the group, in two phases: inside
// each host, local rank l ending with the blocks of local index l of every host reduced
// over its host; then across hosts among the ranks of each local index (see
// hierarchical_reducescatter.cc).
Status HierarchicalReducescatter(const CollectiveArgs& args);

// Ring reduce-scatter phase over caller-chosen segments (one per rank). On return rank r
// holds the fully reduced segments[(r + 1) % size] in `buf`; other segments are partial.
// `input` (null: in place) holds this rank's data; `buf` is then only written, never read
// before it is written, and segments[r] of `buf` is left untouched. `scratch` (null:
// comm.Scratch()) holds the largest segment: a thread other than the background thread
// passes its own (comm.Scratch() belongs to the background thread).
Status RingReduceScatterPhase(const Group& comm, char* buf, const std::vector<Segment>& segments,
                              DataType dtype, ReduceOp op, size_t chunk_bytes,
                              const char* input = nullptr, char* scratch = nullptr);

// The same over segments made of pieces (element offsets and counts in `buf`, walked in
// order by sender and receiver alike): rank r ends with segments[(r + 1) % size] reduced.
Status RingReduceScatterPieces(const Group& comm, char* buf, const std::vector<std::vector<Segment>>& segments,
                               DataType dtype, ReduceOp op, size_t chunk_bytes, const char* input = nullptr,
                               char* scratch = nullptr);

// Ring allgather phase over the same segments: on entry rank r holds segments[(r+1) % size];
// on return every rank holds all of them.
Status RingAllgatherPhase(const Group& comm, char* buf, const std::vector<Segment>& segments,
                          size_t element_size);

// Allgather with a different byte count per rank: rank r's `input` (recv_bytes[r] bytes)
// lands at offset sum(recv_bytes[0..r)) of `output` on every rank.
Status RingAllgatherv(const CollectiveArgs& args);

// Ring allgather of blocks made of pieces (byte offsets and counts in `out`): on entry
// rank r holds blocks[r] in place; on return every rank holds every block. Every rank
// passes the same `blocks` (see ring_allgather.cc).
Status RingAllgatherPieces(const Group& comm, char* out, const std::vector<std::vector<Segment>>& blocks);

// Pipelined chain broadcast of `bytes` bytes of `output` from `root` along the ring, in
// chunks of chunk_bytes rounded up to a multiple of 8 (see chain_broadcast.cc).
Status ChainBroadcast(const CollectiveArgs& args);

// Alltoall with per-peer byte counts: send_bytes[p] bytes (at their prefix-sum offset in
// `input`) go to rank p; recv_bytes[p] bytes from rank p land at their offset in `output`.
Status PairwiseAlltoallv(const CollectiveArgs& args);

// Reduce-scatter of `work` in place: rank p's result is the reduced rows_per_rank[p] rows
// (each `row_elements` elements) at their prefix-sum offset; written to `output`.
// With `input`, this rank's data is read from there and `work` is scratch of the same size
// (its contents on entry do not matter).
Status RingReducescatter(const CollectiveArgs& args);

}  // namespace tfring
