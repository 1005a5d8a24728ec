// Hierarchical allreduce across hosts (NCCL's rings and trees, Horovod's
// HOROVOD_HIERARCHICAL_ALLREDUCE and Open MPI's HAN split the work the same way).
//
// Steps, for H hosts of L ranks each and a buffer split into L segments:
//   1. reduce-scatter inside each host (the ring over the host's L ranks, shared memory):
//      local rank l ends with segment (l + 1) % L reduced over its host.
//   2. allreduce of that segment across hosts, among the H ranks of local index l (a ring
//      over the network): L such rings run at once, each on 1/L of the buffer.
//   3. allgather inside each host.
// Bytes on each host's network link: 2(H-1)/H x S (each of the L cross-host rings moves
// 2(H-1)/H x S/L), against 2(N-1)/N x S for one flat ring over all N = H x L ranks: at
// 2 hosts x 4 ranks 1.0 S against 1.75 S. Every rank ends with the same bits: each element
// is reduced in one order inside its host, then in one order across hosts, and copied out.
//
// Pipelined (buffers of at least two `block_bytes`): the buffer is cut into K blocks (at
// most kMaxBlocks) and each goes through the three steps; step 2 of every block runs on a
// helper thread (the cross-host links only, its own scratch) while this thread runs steps 1
// and 3 of the other blocks on the local links: this thread reduce-scatters blocks 0..K-1
// inside the host, handing each to the helper as it is done, then allgathers each block as
// the helper finishes it. The network link then idles only during the first block's step 1
// and the last block's step 3 (lab/records/scaling.md: with the phases one after the other, 2 x 4
// hosts at 300 Mbit/s reached 84% of the link-bound limit). Same bytes on every link; every
// rank still ends with the same bits (each block as above). The helper is joined before
// return, also on errors; each of its transfers is bounded by the transfer deadline and
// wakes on Abort(), so are this thread's waits for it.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "base/thread_name.h"
#include "collectives/collectives.h"
#include "base/reduce_kernels.h"

namespace tfring {

namespace {

constexpr size_t kMaxBlocks = 16;

// The segments of `block` (element offsets in the whole buffer), one per local rank.
std::vector<Segment> BlockSegments(const Segment& block, int parts) {
  std::vector<Segment> segments = EvenSegments(block.count, parts);
  for (Segment& s : segments) s.offset += block.offset;
  return segments;
}

// Ring allreduce of `count` elements at `data` over `cross`, with `scratch` (the largest
// ring segment) instead of the communicator's: for the helper thread.
Status AllreduceAcross(const Group& cross, char* data, size_t count, DataType dtype, ReduceOp op, size_t chunk_bytes,
                       double postscale, char* scratch) {
  if (count == 0) return Status::OK();
  const size_t es = DataTypeSize(dtype);
  const std::vector<Segment> segments = EvenSegments(count, cross.size());
  TFRING_RETURN_IF_ERROR(RingReduceScatterPhase(cross, data, segments, dtype, op, chunk_bytes, nullptr, scratch));
  const Segment& owned = segments[static_cast<size_t>((cross.rank() + 1) % cross.size())];
  ScaleInPlace(data + owned.offset * es, owned.count, dtype, postscale);
  return RingAllgatherPhase(cross, data, segments, es);
}

// Hand-over between this thread (blocks reduced inside the host: `ready`) and the helper
// (blocks reduced across hosts: `done`, or its error).
struct Pipeline {
  std::mutex mu;
  std::condition_variable cv;
  size_t ready = 0;
  size_t done = 0;
  bool stop = false;  // this thread failed: the helper returns
  Status helper_status;

  // Waits until pred() holds, or the abort flag is set (kAborted).
  template <typename Pred>
  Status Wait(std::unique_lock<std::mutex>& lock, const std::atomic<bool>* abort, Pred pred) {
    while (!pred()) {
      if (abort != nullptr && abort->load()) return Status::Aborted("hierarchical allreduce aborted");
      cv.wait_for(lock, std::chrono::milliseconds(10));
    }
    return Status::OK();
  }
};

Status PipelinedAllreduce(const Group& local, const Group& cross, const char* input, char* data, size_t count,
                          DataType dtype, ReduceOp op, size_t chunk_bytes, double postscale, size_t blocks) {
  const size_t es = DataTypeSize(dtype);
  const std::vector<Segment> block = EvenSegments(count, static_cast<int>(blocks));
  const size_t owned_index = static_cast<size_t>((local.rank() + 1) % local.size());
  std::vector<Segment> owned(blocks);
  size_t largest = 0;
  for (size_t b = 0; b < blocks; ++b) {
    owned[b] = BlockSegments(block[b], local.size())[owned_index];
    largest = std::max(largest, (owned[b].count + static_cast<size_t>(cross.size()) - 1) / cross.size());
  }
  std::vector<char> scratch(std::max<size_t>(largest, 1) * es);
  Pipeline p;
  auto across = [&] {
    for (size_t b = 0; b < blocks; ++b) {
      {
        std::unique_lock<std::mutex> lock(p.mu);
        Status st = p.Wait(lock, cross.abort_flag(), [&] { return p.ready > b || p.stop; });
        if (!st.ok() || p.stop) {
          p.helper_status = st;
          p.cv.notify_all();
          return;
        }
      }
      Status st = AllreduceAcross(cross, data + owned[b].offset * es, owned[b].count, dtype, op, chunk_bytes,
                                  postscale, scratch.data());
      std::lock_guard<std::mutex> lock(p.mu);
      if (!st.ok()) p.helper_status = st;
      p.done = st.ok() ? b + 1 : blocks + 1;  // blocks + 1: failed
      p.cv.notify_all();
      if (!st.ok()) return;
    }
  };
  // The helper's ring links, made here if they are lazy (Communicator::data() connects on
  // the background thread only): the helper then only transfers on them.
  cross.data(cross.left());
  cross.data(cross.right());
  std::thread helper;
  try {
    helper = std::thread([&across] {
      NameThisThread("tfring-hier");
      across();
    });
  } catch (const std::system_error& e) {  // no fallback: every rank must cut the buffer alike
    return Status::Internal(std::string("hierarchical allreduce: cannot start its helper thread: ") + e.what());
  }
  auto finish = [&](Status st) {
    {
      std::lock_guard<std::mutex> lock(p.mu);
      p.stop = true;
      p.cv.notify_all();
    }
    helper.join();
    return st;
  };
  for (size_t b = 0; b < blocks; ++b) {
    Status st =
        RingReduceScatterPhase(local, data, BlockSegments(block[b], local.size()), dtype, op, chunk_bytes, input);
    if (!st.ok()) return finish(st);
    std::lock_guard<std::mutex> lock(p.mu);
    p.ready = b + 1;
    p.cv.notify_all();
  }
  for (size_t b = 0; b < blocks; ++b) {
    {
      std::unique_lock<std::mutex> lock(p.mu);
      Status st = p.Wait(lock, local.abort_flag(), [&] { return p.done > b; });
      if (!st.ok()) {
        lock.unlock();
        return finish(st);
      }
      if (p.done > blocks) {
        st = p.helper_status;
        lock.unlock();
        return finish(st);
      }
    }
    Status st = RingAllgatherPhase(local, data, BlockSegments(block[b], local.size()), es);
    if (!st.ok()) return finish(st);
  }
  return finish(Status::OK());
}

}  // namespace

size_t HierarchicalAllreduceBlocks(size_t bytes, size_t block_bytes) {
  if (block_bytes == 0 || bytes < 2 * block_bytes) return 1;
  return std::min(kMaxBlocks, bytes / block_bytes);
}

Status HierarchicalAllreduce(const CollectiveArgs& args) {
  const size_t count = args.count, chunk_bytes = args.chunk_bytes;
  const DataType dtype = args.dtype;
  const ReduceOp op = args.op;
  if (count == 0) return Status::OK();
  const Group local = args.group->Local(), cross = args.group->Cross();
  const size_t es = DataTypeSize(dtype);
  char* data = static_cast<char*>(args.output);
  const char* separate_input = args.input != args.output ? static_cast<const char*>(args.input) : nullptr;
  const size_t blocks = HierarchicalAllreduceBlocks(count * es, args.block_bytes);
  if (blocks > 1) {
    return PipelinedAllreduce(local, cross, separate_input, data, count, dtype, op, chunk_bytes, args.postscale,
                              blocks);
  }
  std::vector<Segment> segments = EvenSegments(count, local.size());
  TFRING_RETURN_IF_ERROR(RingReduceScatterPhase(local, data, segments, dtype, op, chunk_bytes, separate_input));
  const Segment& owned = segments[static_cast<size_t>((local.rank() + 1) % local.size())];
  CollectiveArgs across = args.On(cross);
  across.output = data + owned.offset * es;
  across.input = across.output;
  across.count = owned.count;
  TFRING_RETURN_IF_ERROR(RingAllreduce(across));
  return RingAllgatherPhase(local, data, segments, es);
}

}  // namespace tfring
