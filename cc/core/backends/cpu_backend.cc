#include "backends/cpu_backend.h"

#include <chrono>
#include <cstring>
#include <string>

#include "backends/collective_layout.h"
#include "base/logging.h"
#include "base/reduce_kernels.h"
#include "base/timeline.h"
#include "collectives/algorithm.h"
#include "collectives/dispatch.h"
#include "control/tunables.h"
#include "transport/cma.h"
#include "transport/communicator.h"

namespace tfring {

using Clock = std::chrono::steady_clock;

CpuBackend::CpuBackend(const BackendContext& context)
    : ctx_(context),
      in_place_min_bytes_(context.config != nullptr ? context.config->settings().fusion_in_place_bytes : -1) {
  if (context.config != nullptr) settings_ = AlgorithmSettings::FromSettings(context.config->settings());
  if (context.comm != nullptr) world_layout_ = HostLayoutOf(Group(*context.comm));
  if (context.rank != 0 || context.comm == nullptr) return;
  if (world_layout_ != nullptr) {
    std::string ops;
    for (const auto& [on, name] : {std::pair<bool, const char*>{settings_.hierarchical_allreduce, "allreduce"},
                                   {settings_.hierarchical_allgather, "allgather"},
                                   {settings_.hierarchical_broadcast, "broadcast"},
                                   {settings_.hierarchical_reducescatter, "reducescatter"}}) {
      if (on) ops += std::string(ops.empty() ? "" : ", ") + name;
    }
    TFRING_LOG(LogLevel::kInfo, "cpu", "hierarchical across " << world_layout_->cross.size() << " hosts x "
                                           << world_layout_->local.size() << " ranks: "
                                           << (ops.empty() ? "none" : ops)
                                           << " (TFRING_HIERARCHICAL_ALLREDUCE/_ALLGATHER/_BROADCAST/_REDUCESCATTER)");
  }
  const Topology world = Group(*context.comm).WithHostLayout(world_layout_).topology();
  for (const auto& [op, algorithm] : settings_.pinned) {
    if (algorithm != Algorithm::kAuto && ChooseAlgorithm(op, SIZE_MAX / 2, world, settings_) != algorithm) {
      TFRING_LOG(LogLevel::kWarning, "cpu", "TFRING_ALGORITHM pins " << OpTypeName(op) << " to "
                                               << AlgorithmName(algorithm) << ", which cannot run on this job ("
                                               << (algorithm == Algorithm::kHierarchical && world_layout_ == nullptr
                                                       ? "not several hosts of equal rank counts, "
                                                       : "")
                                               << world.ranks << " ranks): the table chooses instead");
    }
  }
}

void CpuBackend::Retune(const std::vector<double>& values) {
  ApplyTunedValues(values, ctx_.config, &settings_);
  ctx_.chunk_bytes = static_cast<size_t>(settings_.chunk_bytes);
}

Group CpuBackend::WithHostLayout(const Group& g, const std::vector<int32_t>& members) {
  if (members.empty()) return g.WithHostLayout(world_layout_);
  auto [it, added] = set_layouts_.try_emplace(members);
  if (added) it->second = HostLayoutOf(g);
  return g.WithHostLayout(it->second);
}

Status CpuBackend::Execute(const Response& r, const std::vector<Submission*>& group,
                           ExecutionTimings* timings) {
  const Group g = WithHostLayout(r.members.empty() ? Group(*ctx_.comm) : Group(*ctx_.comm, r.members), r.members);
  if (g.rank() < 0) {
    return Status::Internal("rank " + std::to_string(ctx_.rank) + " was asked to run '" + r.tensors[0].name +
                            "' of process set " + std::to_string(r.attrs.process_set_id) + ", which it is not in");
  }
  switch (r.attrs.op) {
    case OpType::kAllreduce: return Allreduce(g, r, group, timings);
    case OpType::kAllgather: return Allgather(g, r, *group[0]);
    case OpType::kBroadcast: return Broadcast(g, r, *group[0]);
    case OpType::kAlltoall: return Alltoall(g, r, *group[0]);
    case OpType::kReducescatter: return Reducescatter(g, r, *group[0]);
    case OpType::kBarrier: return Status::OK();  // negotiation itself was the barrier
    case OpType::kJoin:  // negotiation was the work; the answer is the last rank to join
      for (auto* s : group) *static_cast<int32_t*>(s->output) = r.attrs.root;
      return Status::OK();
  }
  return Status::Internal("unknown collective " + std::to_string(static_cast<int>(r.attrs.op)));
}

// With single-copy peers the buffer's new pages are asked to be huge before their first
// touch (cma.h: ~2x faster reads).
char* CpuBackend::FusionBuffer(size_t bytes) {
  if (fusion_buffer_.size() < bytes) {
    std::vector<char>().swap(fusion_buffer_);
    fusion_buffer_.reserve(bytes);
    if (ctx_.comm->cma_peers() > 0) AdviseHugePages(fusion_buffer_.data(), bytes);
    fusion_buffer_.resize(bytes);
  }
  return fusion_buffer_.data();
}

// The smallest tensor of a fused group that is reduced where it is (its own allreduce) rather
// than copied into the fusion buffer and back (TFRING_FUSION_IN_PLACE_BYTES, which init
// checks is the same on every rank). Every member computes the same automatic value: it
// asks whether ALL the group's members are on this host with shared memory on (from the
// job's layout, not from the links: lazily, a link's rings exist only once used), not just
// its ring neighbours, which differ by rank.
size_t CpuBackend::InPlaceMinBytes(const Group& g) const {
  if (in_place_min_bytes_ >= 0) return static_cast<size_t>(in_place_min_bytes_);
  if (g.size() < 2) return 0;
  // A ring's start-up costs ~2(n-1) hand-offs: a few us each over shared memory (copying
  // 256 KiB in and out costs ~50 us), tens of us over TCP. Contract for callers of the
  // backend: no tensor's output may overlap another tensor's input (an in-place tensor's
  // output is written before later tensors' inputs are read).
  bool all_shm = g.topology().shm_inside_hosts;
  for (int i = 0; i < g.size() && all_shm; ++i) all_shm = g.host_id(i) == g.host_id(g.rank());
  return all_shm ? (256u << 10) : (4u << 20);
}

// Allreduce of a response's tensors, in response order (the same on every rank):
//  * a tensor alone, or one of at least InPlaceMinBytes: its own allreduce, which reads the
//    input where it is and writes the output (out of place; in place when TF forwarded the
//    input), so no byte is copied;
//  * the smaller ones of a group: packed into the fusion buffer, reduced once, unpacked.
// Adasum (adasum.h) works in place in the output or the fusion buffer, each tensor with
// its own coefficients, so it is always packed.
Status CpuBackend::Allreduce(const Group& comm, const Response& r, const std::vector<Submission*>& group,
                             ExecutionTimings* timings) {
  double transfer_s = 0;
  if (r.attrs.reduce_op == ReduceOp::kAdasum) {
    TFRING_RETURN_IF_ERROR(AllreducePacked(comm, r, group, &transfer_s, &timings->fusion_copied_bytes));
  } else {
    const size_t in_place_min = group.size() == 1 ? 0 : InPlaceMinBytes(comm);
    std::vector<Submission*> packed;
    for (auto* s : group) {
      if (s->request.Bytes() >= in_place_min) {
        TFRING_RETURN_IF_ERROR(AllreduceOne(comm, r, *s, &transfer_s));
      } else {
        packed.push_back(s);
      }
    }
    if (packed.size() == 1) {
      TFRING_RETURN_IF_ERROR(AllreduceOne(comm, r, *packed[0], &transfer_s));
    } else if (!packed.empty()) {
      TFRING_RETURN_IF_ERROR(AllreducePacked(comm, r, packed, &transfer_s, &timings->fusion_copied_bytes));
    }
  }
  timings->transfer_s = transfer_s;
  return Status::OK();
}

// One tensor, no copy: the algorithm reads the input in place and writes the output, or works
// in the output when input and output are one buffer or a prescale needs a scaled copy.
Status CpuBackend::AllreduceOne(const Group& comm, const Response& r, Submission& s, double* transfer_s) {
  const DataType dtype = r.attrs.dtype;
  const size_t count = static_cast<size_t>(s.request.NumElements());
  const size_t bytes = count * DataTypeSize(dtype);
  char* out = static_cast<char*>(s.output);
  const char* input = nullptr;  // set: the algorithm reads it and writes `out` (out of place)
  if (count > 0 && s.input != s.output) {
    if (ctx_.comm->cma_peers() > 0) AdviseHugePages(out, bytes);  // before the first touch
    if (r.attrs.prescale == 1.0) {
      input = static_cast<const char*>(s.input);  // saves a full copy (~1 ms per 16 MiB)
    } else {
      std::memcpy(out, s.input, bytes);
    }
  }
  const auto start = Clock::now();
  const double postscale = r.EffectivePostscale(comm.size());
  if (input != nullptr) {
    TFRING_RETURN_IF_ERROR(Allreduce(comm, input, out, count, dtype, r.attrs.reduce_op, postscale));
  } else {
    ScaleInPlace(out, count, dtype, r.attrs.prescale);
    TFRING_RETURN_IF_ERROR(Allreduce(comm, out, out, count, dtype, r.attrs.reduce_op, postscale));
  }
  const auto end = Clock::now();
  *transfer_s += std::chrono::duration<double>(end - start).count();
  ctx_.timeline->Span(s.request.name, "TRANSFER", start, end);
  return Status::OK();
}

// The one dispatch site: the selection table's algorithm for `op` on `bytes` over the
// arguments' group (an Adasum allreduce: Adasum, which its reduce op fixes), run through
// the dispatch table (collectives/dispatch.h).
Status CpuBackend::Run(OpType op, size_t bytes, CollectiveArgs args) const {
  args.chunk_bytes = ctx_.chunk_bytes;
  args.block_bytes = static_cast<size_t>(settings_.hierarchical_block_bytes);
  const Algorithm algorithm = op == OpType::kAllreduce && args.op == ReduceOp::kAdasum
                                  ? Algorithm::kAdasum
                                  : ChooseAlgorithm(op, bytes, args.group->topology(), settings_);
  return RunCollective(op, algorithm, args);
}

Status CpuBackend::Allreduce(const Group& comm, const void* input, void* output, size_t count, DataType dtype,
                             ReduceOp op, double postscale, const std::vector<size_t>* tensor_counts) {
  CollectiveArgs args(comm);
  args.input = input;
  args.output = output;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  args.postscale = postscale;
  args.tensor_counts = tensor_counts;
  return Run(OpType::kAllreduce, count * DataTypeSize(dtype), args);
}

// Several tensors packed into the fusion buffer, reduced once, unpacked.
Status CpuBackend::AllreducePacked(const Group& comm, const Response& r, const std::vector<Submission*>& group,
                                   double* transfer_s, size_t* copied_bytes) {
  const DataType dtype = r.attrs.dtype;
  const size_t es = DataTypeSize(dtype);
  size_t total = 0;
  for (auto* s : group) total += static_cast<size_t>(s->request.NumElements());
  const auto copy_in_start = Clock::now();
  // One tensor (Adasum): in its output, no unpacking.
  const bool alone = group.size() == 1;
  char* buf = alone ? static_cast<char*>(group[0]->output) : FusionBuffer(total * es);
  if (alone && total > 0 && group[0]->input != buf && ctx_.comm->cma_peers() > 0) {
    AdviseHugePages(buf, total * es);  // before the first touch, as AllreduceOne does
  }
  size_t offset = 0;
  for (auto* s : group) {
    const size_t bytes = s->request.Bytes();
    if (bytes && s->input != buf + offset) std::memcpy(buf + offset, s->input, bytes);
    offset += bytes;
  }
  const std::string& first = group[0]->request.name;
  const auto transfer_start = Clock::now();
  if (!alone) ctx_.timeline->Span(first, "FUSION_COPY_IN", copy_in_start, transfer_start);
  ScaleInPlace(buf, total, dtype, r.attrs.prescale);
  std::vector<size_t> counts;  // Adasum's: each tensor combined with its own coefficients
  if (r.attrs.reduce_op == ReduceOp::kAdasum) {
    for (auto* s : group) counts.push_back(static_cast<size_t>(s->request.NumElements()));
  }
  TFRING_RETURN_IF_ERROR(Allreduce(comm, buf, buf, total, dtype, r.attrs.reduce_op, r.EffectivePostscale(comm.size()),
                                   &counts));
  const auto transfer_end = Clock::now();
  *transfer_s += std::chrono::duration<double>(transfer_end - transfer_start).count();
  ctx_.timeline->Span(first, "TRANSFER", transfer_start, transfer_end);
  if (alone) return Status::OK();
  *copied_bytes += total * es;
  offset = 0;
  for (auto* s : group) {
    const size_t bytes = s->request.Bytes();
    if (bytes) std::memcpy(s->output, buf + offset, bytes);
    offset += bytes;
  }
  ctx_.timeline->Span(first, "FUSION_COPY_OUT", transfer_end, Clock::now());
  return Status::OK();
}

Status CpuBackend::Allgather(const Group& g, const Response& r, Submission& s) {
  const GatherLayout layout = AllgatherLayout(r, s.request, g.size());
  void* out = nullptr;
  TFRING_RETURN_IF_ERROR(layout.AllocateOutput(s, &out));
  CollectiveArgs args(g);
  args.input = s.input;
  args.output = out;
  args.recv_bytes = &layout.recv.bytes;
  return Run(OpType::kAllgather, layout.recv.total, args);
}

// root is a global rank; the algorithm runs over the group's indices.
Status CpuBackend::Broadcast(const Group& g, const Response& r, Submission& s) {
  const size_t bytes = s.request.Bytes();
  if (ctx_.rank == r.attrs.root && bytes > 0 && s.input != s.output) std::memcpy(s.output, s.input, bytes);
  CollectiveArgs args(g);
  args.output = s.output;
  args.bytes = bytes;
  args.root = g.local_index(r.attrs.root);
  return Run(OpType::kBroadcast, bytes, args);
}

Status CpuBackend::Alltoall(const Group& g, const Response& r, Submission& s) {
  const GatherLayout layout = AlltoallLayout(r, s.request, g.size(), g.rank());
  void* out = nullptr;
  TFRING_RETURN_IF_ERROR(layout.AllocateOutput(s, &out));
  CollectiveArgs args(g);
  args.input = s.input;
  args.send_bytes = &layout.send.bytes;
  args.output = out;
  args.recv_bytes = &layout.recv.bytes;
  return Run(OpType::kAlltoall, layout.send.total, args);
}

Status CpuBackend::Reducescatter(const Group& g, const Response& r, Submission& s) {
  const size_t bytes = s.request.Bytes();
  const size_t es = DataTypeSize(r.attrs.dtype);
  const size_t row_elements = s.request.RowBytes() / es;
  std::vector<size_t> rows(g.size());
  for (int p = 0; p < g.size(); ++p) {
    rows[p] = static_cast<size_t>(ReducescatterRows(s.request.shape[0], g.size(), p));
  }
  char* buf = FusionBuffer(bytes);
  // Without a prescale the algorithm reads the input where it is; with one, a scaled copy.
  const char* input = static_cast<const char*>(s.input);
  if (r.attrs.prescale != 1.0) {
    if (bytes) std::memcpy(buf, s.input, bytes);
    ScaleInPlace(buf, bytes / es, r.attrs.dtype, r.attrs.prescale);
    input = nullptr;
  }
  CollectiveArgs args(g);
  args.work = buf;
  args.input = input;
  args.rows_per_rank = &rows;
  args.row_elements = row_elements;
  args.dtype = r.attrs.dtype;
  args.op = r.attrs.reduce_op;
  args.output = s.output;
  TFRING_RETURN_IF_ERROR(Run(OpType::kReducescatter, bytes, args));
  ScaleInPlace(s.output, rows[g.rank()] * row_elements, r.attrs.dtype, r.EffectivePostscale(g.size()));
  return Status::OK();
}

}  // namespace tfring
