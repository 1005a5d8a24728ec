// Execution: the background thread runs every scheduled response, in order, on its backend
// (CpuBackend for host memory, the GPU backend for device >= 0). The same responses run in
// the same order on every rank. Transfer errors fail the job (with the root cause a peer
// reports); per-tensor errors decided by rank 0 complete just those tensors.
#include <algorithm>
#include <cctype>

#include "cpu_backend.h"
#include "runtime_state.h"

namespace tfring {

void Runtime::State::ExecuteScheduled() {
  while (!scheduled.empty() && !IsBroken()) {
    Scheduled next = std::move(scheduled.front());
    scheduled.pop_front();
    Status st = Execute(next.response, next.at);
    if (!st.ok()) {
      FailTransfer(st);
      return;
    }
  }
}

void Runtime::State::Complete(const std::string& name, const Status& status) {
  auto it = entries.find(name);
  if (it == entries.end()) return;
  auto done = std::move(it->second.submission.done);
  entries.erase(it);
  {
    std::lock_guard<std::mutex> lock(mu);
    in_flight.erase(name);
  }
  stats.Update([](RuntimeStats& s) { ++s.tensors; });
  if (done) done(status);
}

BackendContext Runtime::State::MakeBackendContext() {
  BackendContext ctx;
  ctx.rank = rank;
  ctx.size = size;
  ctx.store = store.get();
  ctx.timeout_s = timeout_s;
  ctx.start_timeout_s = config.Float("TFRING_START_TIMEOUT_S");
  ctx.abort = comm->abort_flag();
  ctx.config = &config;
  ctx.comm = comm.get();
  ctx.chunk_bytes = static_cast<size_t>(config.Int("TFRING_CHUNK_BYTES"));
  ctx.timeline = &timeline;
  return ctx;
}

// GPU tensors go to the registered GPU backend (backend.h), created on first use with this
// runtime's store, timeouts and abort flag. Every rank reaches this at the same response.
Status Runtime::State::BackendFor(const Response& r, Backend** backend) {
  if (r.device < 0) {
    *backend = cpu_backend.get();
    return Status::OK();
  }
  if (!gpu_backend) {
    GpuSupport* gpu = GetGpuSupport();
    if (gpu == nullptr) return Status::Unimplemented("this build of tfring has no GPU backend");
    BackendContext ctx = MakeBackendContext();
    ctx.key_prefix = config.String("TFRING_JOB_ID") + "/nccl/";
    TFRING_RETURN_IF_ERROR(gpu->CreateBackend(ctx, &gpu_backend));
  }
  *backend = gpu_backend.get();
  return Status::OK();
}

Status Runtime::State::Execute(const Response& r, Clock::time_point scheduled_at) {
  if (r.kind == Response::Kind::kError) {
    for (const auto& name : r.names) {
      auto it = entries.find(name);  // disjoint sets may use one name: fail only this set's
      if (it != entries.end() && it->second.submission.request.process_set_id == r.process_set_id) {
        Complete(name, Status(r.error_code, r.error_message));
      }
    }
    return Status::OK();
  }
  // A process set this rank is not in: it submitted nothing, and its links are not used.
  if (r.process_set_id != 0 && !r.Includes(rank)) return Status::OK();
  std::vector<Entry*> group;
  std::vector<Submission*> submissions;
  for (const auto& name : r.names) {
    auto it = entries.find(name);
    if (it == entries.end()) return Status::Internal("tensor '" + name + "' was scheduled twice");
    group.push_back(&it->second);
    submissions.push_back(&it->second.submission);
  }
  const auto start = Clock::now();
  const uint64_t sent_before = comm ? comm->bytes_sent() : 0;
  Backend* backend = nullptr;
  ExecutionTimings timings;
  Status st = BackendFor(r, &backend);
  if (st.ok()) st = backend->Execute(r, submissions, &timings);
  if (!st.ok()) return st.WithContext(std::string(OpTypeName(r.op)) + " of '" + r.names[0] + "'" +
                                      (r.names.size() > 1 ? " (fused with " + std::to_string(r.names.size() - 1) + " more)" : ""));
  if (timeline.active()) {
    auto end = Clock::now();
    size_t bytes = 0;
    for (auto* e : group) {
      bytes += e->submission.request.Bytes();
      timeline.Span(e->submission.request.name, "NEGOTIATE", e->enqueued, scheduled_at);
      if (start > scheduled_at) timeline.Span(e->submission.request.name, "QUEUE", scheduled_at, start);
    }
    const uint64_t sent = comm ? comm->bytes_sent() - sent_before : 0;
    std::string args = "{\"bytes\":" + std::to_string(bytes) + ",\"bytes_sent\":" + std::to_string(sent) +
                       ",\"dtype\":\"" + DataTypeName(r.dtype) + "\",\"tensors\":" + std::to_string(group.size()) + "}";
    std::string op = OpTypeName(r.op);
    for (auto& c : op) c = static_cast<char>(std::toupper(c));
    timeline.Span(r.names[0], op.c_str(), start, end, args);
  }
  RecordStats(r, group, scheduled_at, start, timings);
  if (r.op == OpType::kJoin) joined = false;  // every rank joined: the job is whole again
  for (const auto& name : r.names) Complete(name, Status::OK());
  return Status::OK();
}

// Counters of one executed collective (RuntimeStats; definitions in docs/monitoring.md).
void Runtime::State::RecordStats(const Response& r, const std::vector<Entry*>& group,
                                 Clock::time_point scheduled_at, Clock::time_point start,
                                 const ExecutionTimings& timings) {
  auto seconds = [](Clock::duration d) { return std::max(0.0, std::chrono::duration<double>(d).count()); };
  const double execute = seconds(Clock::now() - start);
  const double transport = timings.transfer_s >= 0 ? timings.transfer_s : execute;
  double negotiation = 0, queued = 0;
  int64_t reduced = 0;
  for (auto* e : group) {
    negotiation += seconds(scheduled_at - e->enqueued);
    queued += seconds(start - scheduled_at);
    if (r.op == OpType::kAllreduce) reduced += static_cast<int64_t>(e->submission.request.Bytes());
  }
  const double slowest = static_cast<size_t>(rank) < r.ready_wait_s.size() ? r.ready_wait_s[rank] : 0.0;
  const int64_t sent = comm ? static_cast<int64_t>(comm->bytes_sent()) : 0;
  const int64_t received = comm ? static_cast<int64_t>(comm->bytes_received()) : 0;
  stats.Update([&](RuntimeStats& s) {
    ++s.collectives;
    if (r.names.size() > 1) s.fused_tensors += static_cast<int64_t>(r.names.size());
    s.bytes_reduced += reduced;
    s.fusion_copied_bytes += static_cast<int64_t>(timings.fusion_copied_bytes);
    s.negotiation_seconds += negotiation;
    s.wait_for_slowest_seconds += slowest;
    s.queue_seconds += queued;
    s.transfer_seconds += transport;
    if (r.op == OpType::kAllreduce) s.allreduce_transfer_seconds += transport;
    s.execute_seconds += execute;
    s.bytes_sent = sent;
    s.bytes_received = received;
  });
}

}  // namespace tfring
