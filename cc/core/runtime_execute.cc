// Executing one Response on the background thread: the same response, in the same order,
// on every rank. Transfer errors are returned (the loop turns them into a job failure);
// per-tensor errors decided by rank 0 complete just those tensors.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "cma.h"
#include "collectives.h"
#include "reduce_kernels.h"
#include "runtime_state.h"

namespace tfring {
namespace {

size_t RowBytes(const Request& r) {
  size_t n = DataTypeSize(r.dtype);
  for (size_t i = 1; i < r.shape.size(); ++i) n *= static_cast<size_t>(r.shape[i]);
  return n;
}

size_t Bytes(const Request& r) {
  return static_cast<size_t>(r.NumElements()) * DataTypeSize(r.dtype);
}

double PostScale(const Response& r, int size) {
  return r.postscale * (r.reduce_op == ReduceOp::kAverage ? 1.0 / size : 1.0);
}

// Grows the fusion buffer to `bytes` (its contents are scratch). With single-copy peers its
// new pages are asked to be huge before their first touch (cma.h: ~2x faster reads).
void GrowFusionBuffer(std::vector<char>* buf, size_t bytes, bool huge_pages) {
  if (buf->size() >= bytes) return;
  std::vector<char>().swap(*buf);
  buf->reserve(bytes);
  if (huge_pages) AdviseHugePages(buf->data(), bytes);
  buf->resize(bytes);
}

}  // namespace

void Runtime::State::Complete(const std::string& name, const Status& status) {
  auto it = entries.find(name);
  if (it == entries.end()) return;
  auto done = std::move(it->second.submission.done);
  entries.erase(it);
  {
    std::lock_guard<std::mutex> lock(mu);
    in_flight.erase(name);
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    ++stats.tensors;
  }
  if (done) done(status);
}

Status Runtime::State::Execute(const Response& r, Clock::time_point scheduled) {
  if (r.kind == Response::Kind::kError) {
    for (const auto& name : r.names) Complete(name, Status(r.error_code, r.error_message));
    return Status::OK();
  }
  std::vector<Entry*> group;
  for (const auto& name : r.names) {
    auto it = entries.find(name);
    if (it == entries.end()) {
      return Status::Internal("rank 0 scheduled tensor '" + name + "' which rank " +
                              std::to_string(rank) + " never submitted");
    }
    group.push_back(&it->second);
  }
  // New cache ids: remember this rank's request under each (before Complete drops it).
  int64_t cached = 0;
  for (size_t i = 0; i < r.names.size(); ++i) {
    const int32_t id = CacheIdAt(r, i);
    if (id < 0) continue;
    if (i < r.cache_id_is_new.size() && r.cache_id_is_new[i]) {
      TFRING_RETURN_IF_ERROR(request_cache.Remember(id, group[i]->submission.request));
    } else {
      ++cached;
    }
  }
  if (cached > 0) {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.cached_tensors += cached;
  }
  auto start = Clock::now();
  last_transport_s = -1;
  const uint64_t sent_before = comm ? comm->bytes_sent() : 0;
  Status st;
  if (r.device >= 0) {
    st = ExecuteOnGpu(r, group);
  } else {
    switch (r.op) {
      case OpType::kAllreduce: st = ExecuteAllreduce(r, group); break;
      case OpType::kAllgather: st = ExecuteAllgather(r, *group[0]); break;
      case OpType::kBroadcast: st = ExecuteBroadcast(r, *group[0]); break;
      case OpType::kAlltoall: st = ExecuteAlltoall(r, *group[0]); break;
      case OpType::kReducescatter: st = ExecuteReducescatter(r, *group[0]); break;
      case OpType::kBarrier: st = Status::OK(); break;  // negotiation itself was the barrier
    }
  }
  if (!st.ok()) return st.WithContext(std::string(OpTypeName(r.op)) + " of '" + r.names[0] + "'" +
                                      (r.names.size() > 1 ? " (fused with " + std::to_string(r.names.size() - 1) + " more)" : ""));
  if (timeline.active()) {
    auto end = Clock::now();
    size_t bytes = 0;
    for (auto* e : group) {
      bytes += Bytes(e->submission.request);
      timeline.Span(e->submission.request.name, "NEGOTIATE", e->enqueued, scheduled);
      if (start > scheduled) timeline.Span(e->submission.request.name, "QUEUE", scheduled, start);
    }
    const uint64_t sent = comm ? comm->bytes_sent() - sent_before : 0;
    std::string args = "{\"bytes\":" + std::to_string(bytes) + ",\"bytes_sent\":" + std::to_string(sent) +
                       ",\"dtype\":\"" + DataTypeName(r.dtype) + "\",\"tensors\":" + std::to_string(group.size()) + "}";
    std::string op = OpTypeName(r.op);
    for (auto& c : op) c = static_cast<char>(std::toupper(c));
    timeline.Span(r.names[0], op.c_str(), start, end, args);
  }
  RecordStats(r, group, scheduled, start);
  for (const auto& name : r.names) Complete(name, Status::OK());
  return Status::OK();
}

// Counters of one executed collective (RuntimeStats; definitions in docs/monitoring.md).
void Runtime::State::RecordStats(const Response& r, const std::vector<Entry*>& group,
                                 Clock::time_point scheduled, Clock::time_point start) {
  auto seconds = [](Clock::duration d) { return std::max(0.0, std::chrono::duration<double>(d).count()); };
  const double execute = seconds(Clock::now() - start);
  const double transport = last_transport_s >= 0 ? last_transport_s : execute;
  double negotiation = 0, queued = 0;
  for (auto* e : group) {
    negotiation += seconds(scheduled - e->enqueued);
    queued += seconds(start - scheduled);
  }
  const double slowest = static_cast<size_t>(rank) < r.ready_wait_s.size() ? r.ready_wait_s[rank] : 0.0;
  const int64_t sent = comm ? static_cast<int64_t>(comm->bytes_sent()) : 0;
  const int64_t received = comm ? static_cast<int64_t>(comm->bytes_received()) : 0;
  std::lock_guard<std::mutex> lock(stats_mu);
  ++stats.collectives;
  if (r.names.size() > 1) stats.fused_tensors += static_cast<int64_t>(r.names.size());
  stats.negotiation_seconds += negotiation;
  stats.wait_for_slowest_seconds += slowest;
  stats.queue_seconds += queued;
  stats.transfer_seconds += transport;
  if (r.op == OpType::kAllreduce) stats.allreduce_transfer_seconds += transport;
  stats.execute_seconds += execute;
  stats.bytes_sent = sent;
  stats.bytes_received = received;
}

Status Runtime::State::ExecuteAllreduce(const Response& r, std::vector<Entry*>& group) {
  const DataType dtype = r.dtype;
  const size_t es = DataTypeSize(dtype);
  size_t total = 0;
  for (auto* e : group) total += static_cast<size_t>(e->submission.request.NumElements());
  char* buf;
  const char* input = nullptr;  // set: the ring reads it and writes `buf` (out of place)
  Clock::time_point copy_in_start{};
  if (group.size() == 1) {
    Submission& s = group[0]->submission;
    buf = static_cast<char*>(s.output);
    if (total > 0 && s.input != s.output) {
      if (comm->cma_peers() > 0) AdviseHugePages(buf, total * es);  // before the first touch
      if (r.prescale == 1.0) {
        input = static_cast<const char*>(s.input);  // saves a full copy (~1 ms per 16 MiB)
      } else {
        std::memcpy(buf, s.input, total * es);
      }
    }
  } else {
    copy_in_start = Clock::now();
    GrowFusionBuffer(&fusion_buffer, total * es, comm->cma_peers() > 0);
    buf = fusion_buffer.data();
    size_t offset = 0;
    for (auto* e : group) {
      size_t bytes = Bytes(e->submission.request);
      if (bytes) std::memcpy(buf + offset, e->submission.input, bytes);
      offset += bytes;
    }
  }
  auto transfer_start = Clock::now();
  if (group.size() > 1) timeline.Span(r.names[0], "FUSION_COPY_IN", copy_in_start, transfer_start);
  if (input != nullptr) {
    TFRING_RETURN_IF_ERROR(RingAllreduce(*comm, input, buf, total, dtype, r.reduce_op, chunk_bytes));
  } else {
    ScaleInPlace(buf, total, dtype, r.prescale);
    TFRING_RETURN_IF_ERROR(RingAllreduce(*comm, buf, total, dtype, r.reduce_op, chunk_bytes));
  }
  ScaleInPlace(buf, total, dtype, PostScale(r, size));
  auto transfer_end = Clock::now();
  last_transport_s = std::chrono::duration<double>(transfer_end - transfer_start).count();
  timeline.Span(r.names[0], "TRANSFER", transfer_start, transfer_end);
  if (group.size() > 1) {
    size_t offset = 0;
    for (auto* e : group) {
      size_t bytes = Bytes(e->submission.request);
      if (bytes) std::memcpy(e->submission.output, buf + offset, bytes);
      offset += bytes;
    }
    timeline.Span(r.names[0], "FUSION_COPY_OUT", transfer_end, Clock::now());
  }
  std::lock_guard<std::mutex> lock(stats_mu);
  stats.bytes_reduced += static_cast<int64_t>(total * es);
  return Status::OK();
}

// GPU tensors go to the registered GPU backend (backend.h), created on first use with this
// runtime's store, timeouts and abort flag. Every rank reaches this at the same response.
Status Runtime::State::ExecuteOnGpu(const Response& r, std::vector<Entry*>& group) {
  if (!gpu_backend) {
    GpuSupport* gpu = GetGpuSupport();
    if (gpu == nullptr) return Status::Unimplemented("this build of tfring has no GPU backend");
    BackendContext ctx;
    ctx.rank = rank;
    ctx.size = size;
    ctx.store = store.get();
    ctx.key_prefix = config.String("TFRING_JOB_ID") + "/nccl/";
    ctx.timeout_s = timeout_s;
    ctx.start_timeout_s = config.Float("TFRING_START_TIMEOUT_S");
    ctx.abort = comm->abort_flag();
    ctx.config = &config;
    TFRING_RETURN_IF_ERROR(gpu->CreateBackend(ctx, &gpu_backend));
  }
  std::vector<Submission*> submissions;
  for (auto* e : group) submissions.push_back(&e->submission);
  TFRING_RETURN_IF_ERROR(gpu_backend->Execute(r, submissions));
  if (r.op == OpType::kAllreduce) {
    int64_t bytes = 0;
    for (auto* e : group) bytes += static_cast<int64_t>(Bytes(e->submission.request));
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.bytes_reduced += bytes;
  }
  return Status::OK();
}

Status Runtime::State::ExecuteAllgather(const Response& r, Entry& e) {
  Submission& s = e.submission;
  const size_t row = RowBytes(s.request);
  std::vector<size_t> bytes(size);
  std::vector<int64_t> out_shape = s.request.shape;
  out_shape[0] = 0;
  for (int p = 0; p < size; ++p) {
    bytes[p] = static_cast<size_t>(r.sizes[p]) * row;
    out_shape[0] += r.sizes[p];
  }
  void* out = nullptr;
  TFRING_RETURN_IF_ERROR(s.allocate_output(out_shape, &out));
  return RingAllgatherv(*comm, s.input, out, bytes);
}

Status Runtime::State::ExecuteBroadcast(const Response& r, Entry& e) {
  Submission& s = e.submission;
  size_t bytes = Bytes(s.request);
  if (rank == r.root && bytes > 0 && s.input != s.output) std::memcpy(s.output, s.input, bytes);
  return ChainBroadcast(*comm, s.output, bytes, r.root, chunk_bytes);
}

Status Runtime::State::ExecuteAlltoall(const Response& r, Entry& e) {
  Submission& s = e.submission;
  const size_t row = RowBytes(s.request);
  std::vector<size_t> send(size), recv(size);
  std::vector<int64_t> received(size);
  std::vector<int64_t> out_shape = s.request.shape;
  out_shape[0] = 0;
  for (int p = 0; p < size; ++p) {
    send[p] = static_cast<size_t>(r.sizes[rank * size + p]) * row;
    received[p] = r.sizes[p * size + rank];
    recv[p] = static_cast<size_t>(received[p]) * row;
    out_shape[0] += received[p];
  }
  void* out = nullptr;
  TFRING_RETURN_IF_ERROR(s.allocate_output(out_shape, &out));
  if (s.on_received_splits) s.on_received_splits(received);
  return PairwiseAlltoallv(*comm, s.input, send, out, recv);
}

Status Runtime::State::ExecuteReducescatter(const Response& r, Entry& e) {
  Submission& s = e.submission;
  const size_t bytes = Bytes(s.request);
  const size_t es = DataTypeSize(r.dtype);
  const size_t row_elements = RowBytes(s.request) / es;
  std::vector<size_t> rows(size);
  for (int p = 0; p < size; ++p) {
    rows[p] = static_cast<size_t>(ReducescatterRows(s.request.shape[0], size, p));
  }
  GrowFusionBuffer(&fusion_buffer, bytes, comm->cma_peers() > 0);
  char* buf = fusion_buffer.data();
  // Without a prescale the ring reads the input where it is; with one, a scaled copy.
  const char* input = static_cast<const char*>(s.input);
  if (r.prescale != 1.0) {
    if (bytes) std::memcpy(buf, s.input, bytes);
    ScaleInPlace(buf, bytes / es, r.dtype, r.prescale);
    input = nullptr;
  }
  TFRING_RETURN_IF_ERROR(RingReducescatter(*comm, buf, rows, row_elements, r.dtype, r.reduce_op,
                                           chunk_bytes, s.output, input));
  ScaleInPlace(s.output, rows[rank] * row_elements, r.dtype, PostScale(r, size));
  return Status::OK();
}

}  // namespace tfring
