#include "runtime/executor.h"

#include <algorithm>
#include <cctype>

#include "transport/communicator.h"
#include "backends/cpu_backend.h"
#include "base/logging.h"
#include "control/tunables.h"
#include "base/timeline.h"

namespace tfring {

Executor::Executor(const Wiring& wiring) : w_(wiring) {
  cpu_backend_ = std::make_unique<CpuBackend>(MakeBackendContext());
  // One host: no link between hosts to judge, so no watch (and no store traffic).
  if (w_.store != nullptr && w_.size > 1 && w_.comm->host_count() > 1) {
    link_watch_ = std::make_unique<LinkWatch>(w_.rank, w_.size, w_.store, w_.comm, w_.stats);
  }
}

Executor::~Executor() = default;

void Executor::CloseBackends(bool clean) {
  if (cpu_backend_) cpu_backend_->Close(clean);
  if (gpu_backend_) gpu_backend_->Close(clean);
}

void Executor::Add(Submission s, Clock::time_point enqueued) {
  if (s.request.attrs.op == OpType::kJoin) joined_ = true;
  std::string name = s.request.name;  // C++17: the right side of = is evaluated first
  entries_[name] = Entry{std::move(s), enqueued};
}

const Request* Executor::EntryFor(const Response& r, size_t i) {
  auto it = entries_.find(r.tensors[i].name);
  if (it == entries_.end() && joined_ && (r.attrs.op == OpType::kAllreduce || r.attrs.op == OpType::kBarrier)) {
    it = entries_.emplace(r.tensors[i].name, JoinedContribution(r, i)).first;
  }
  return it == entries_.end() ? nullptr : &it->second.submission.request;
}

// What a joined rank contributes to tensors[i] of `r`, which it never submitted: zeros of
// the tensor's size (an allreduce), or nothing (a barrier).
Executor::Entry Executor::JoinedContribution(const Response& r, size_t i) const {
  const size_t bytes = r.attrs.op == OpType::kAllreduce && i < r.sizes.size() ? static_cast<size_t>(r.sizes[i]) : 0;
  auto zeros = std::make_shared<std::vector<char>>(bytes, 0);
  Submission s;
  s.request.name = r.tensors[i].name;
  s.request.attrs.op = r.attrs.op;
  s.request.attrs.dtype = r.attrs.dtype;
  s.request.attrs.reduce_op = r.attrs.reduce_op;
  s.request.shape = {static_cast<int64_t>(bytes / DataTypeSize(r.attrs.dtype))};
  s.input = zeros->data();
  s.output = zeros->data();  // in place; the result is dropped with the buffer
  s.done = [zeros](const Status&) {};
  return Entry{std::move(s), Clock::now()};
}

void Executor::Schedule(Response response, Clock::time_point at) {
  scheduled_.push_back(Scheduled{std::move(response), at});
}

void Executor::ScheduleTuning(std::vector<double> values, int64_t after_responses) {
  Scheduled s;
  s.tuning = std::move(values);
  s.after_responses = after_responses;
  scheduled_.push_back(std::move(s));
}

Status Executor::RunScheduled() {
  while (!scheduled_.empty() && !w_.events->broken()) {
    Scheduled next = std::move(scheduled_.front());
    scheduled_.pop_front();
    if (!next.tuning.empty()) {
      cpu_backend_->Retune(next.tuning);
      TFRING_LOG(LogLevel::kInfo, "runtime", "autotune: applied after response " << next.after_responses << ": "
                                                 << DescribeTunedValues(next.tuning));
      continue;
    }
    TFRING_RETURN_IF_ERROR(Execute(next.response, next.at));
  }
  return Status::OK();
}

std::string Executor::PendingSummary() const {
  if (entries_.empty()) return "[nothing pending on this rank]";
  std::string names;
  for (const auto& kv : entries_) {
    if (names.size() > 200) {
      names += ", ...";
      break;
    }
    names += (names.empty() ? "" : ", ") + kv.first;
  }
  return "[" + std::to_string(entries_.size()) + " pending on this rank: " + names + "]";
}

void Executor::FailAll(std::deque<Submission> unsent, const Status& status) {
  for (auto& s : unsent) {
    std::string name = s.request.name;
    entries_[name] = Entry{std::move(s), Clock::now()};
  }
  scheduled_.clear();
  std::vector<std::string> names;
  for (const auto& kv : entries_) names.push_back(kv.first);
  for (const auto& n : names) Complete(n, status);
}

void Executor::Complete(const std::string& name, const Status& status) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  auto done = std::move(it->second.submission.done);
  entries_.erase(it);
  w_.events->Released(name);
  w_.stats->Update([](RuntimeStats& s) { ++s.tensors; });
  if (done) done(status);
}

BackendContext Executor::MakeBackendContext() const {
  BackendContext ctx;
  ctx.rank = w_.rank;
  ctx.size = w_.size;
  ctx.store = w_.store;
  ctx.timeout_s = w_.config->settings().timeout_s;
  ctx.start_timeout_s = w_.config->settings().start_timeout_s;
  ctx.shutdown_timeout_s = w_.config->settings().shutdown_timeout_s;
  ctx.abort = w_.comm->abort_flag();
  ctx.config = w_.config;
  ctx.comm = w_.comm;
  ctx.chunk_bytes = static_cast<size_t>(w_.config->settings().chunk_bytes);
  ctx.timeline = w_.timeline;
  return ctx;
}

// GPU tensors go to the registered GPU backend (backend.h), created on first use with this
// job's store, timeouts and abort flag. Every rank reaches this at the same response.
Status Executor::BackendFor(const Response& r, Backend** backend) {
  if (r.attrs.device < 0) {
    *backend = cpu_backend_.get();
    return Status::OK();
  }
  if (!gpu_backend_) {
    GpuSupport* gpu = GetGpuSupport();
    if (gpu == nullptr) return Status::Unimplemented("this build of tfring has no GPU backend");
    BackendContext ctx = MakeBackendContext();
    ctx.key_prefix = w_.config->settings().job_id + "/nccl/";
    TFRING_RETURN_IF_ERROR(gpu->CreateBackend(ctx, &gpu_backend_));
  }
  *backend = gpu_backend_.get();
  return Status::OK();
}

// Transfer errors are returned (they fail the job, with the root cause a peer reports);
// per-tensor errors decided by rank 0 complete just those tensors.
Status Executor::Execute(const Response& r, Clock::time_point scheduled_at) {
  if (r.kind == Response::Kind::kError) {
    for (const auto& t : r.tensors) {
      auto it = entries_.find(t.name);  // disjoint sets may use one name: fail only this set's
      if (it != entries_.end() && it->second.submission.request.attrs.process_set_id == r.attrs.process_set_id) {
        Complete(t.name, Status(r.error_code, r.error_message));
      }
    }
    return Status::OK();
  }
  // A process set this rank is not in: it submitted nothing, and its links are not used.
  if (r.attrs.process_set_id != 0 && !r.Includes(w_.rank)) return Status::OK();
  std::vector<Entry*> group;
  std::vector<Submission*> submissions;
  for (const auto& t : r.tensors) {
    auto it = entries_.find(t.name);
    if (it == entries_.end()) return Status::Internal("tensor '" + t.name + "' was scheduled twice");
    group.push_back(&it->second);
    submissions.push_back(&it->second.submission);
  }
  const auto start = Clock::now();
  const uint64_t sent_before = w_.comm->bytes_sent();
  Backend* backend = nullptr;
  ExecutionTimings timings;
  Status st = BackendFor(r, &backend);
  if (st.ok()) st = backend->Execute(r, submissions, &timings);
  if (!st.ok()) return st.WithContext(std::string(OpTypeName(r.attrs.op)) + " of '" + r.tensors[0].name + "'" +
                                      (r.tensors.size() > 1 ? " (fused with " + std::to_string(r.tensors.size() - 1) + " more)" : ""));
  if (w_.timeline->active()) TraceSpans(r, group, scheduled_at, start, sent_before);
  RecordStats(r, group, scheduled_at, start, timings);
  if (link_watch_) link_watch_->Tick(Clock::now());
  if (r.attrs.op == OpType::kJoin) joined_ = false;  // every rank joined: the job is whole again
  for (const auto& t : r.tensors) Complete(t.name, Status::OK());
  return Status::OK();
}

// Rank 0's trace of one executed collective: each tensor's negotiation and queueing, then
// the collective itself with its bytes.
void Executor::TraceSpans(const Response& r, const std::vector<Entry*>& group, Clock::time_point scheduled_at,
                          Clock::time_point start, uint64_t sent_before) {
  const auto end = Clock::now();
  size_t bytes = 0;
  for (auto* e : group) {
    bytes += e->submission.request.Bytes();
    w_.timeline->Span(e->submission.request.name, "NEGOTIATE", e->enqueued, scheduled_at);
    if (start > scheduled_at) w_.timeline->Span(e->submission.request.name, "QUEUE", scheduled_at, start);
  }
  const uint64_t sent = w_.comm->bytes_sent() - sent_before;
  std::string args = "{\"bytes\":" + std::to_string(bytes) + ",\"bytes_sent\":" + std::to_string(sent) +
                     ",\"dtype\":\"" + DataTypeName(r.attrs.dtype) + "\",\"tensors\":" + std::to_string(group.size()) + "}";
  std::string op = OpTypeName(r.attrs.op);
  for (auto& c : op) c = static_cast<char>(std::toupper(c));
  w_.timeline->Span(r.tensors[0].name, op.c_str(), start, end, args);
}

// Counters of one executed collective (RuntimeStats; definitions in docs/monitoring.md).
void Executor::RecordStats(const Response& r, const std::vector<Entry*>& group, Clock::time_point scheduled_at,
                           Clock::time_point start, const ExecutionTimings& timings) {
  auto seconds = [](Clock::duration d) { return std::max(0.0, std::chrono::duration<double>(d).count()); };
  const double execute = seconds(Clock::now() - start);
  const double transport = timings.transfer_s >= 0 ? timings.transfer_s : execute;
  double negotiation = 0, queued = 0;
  int64_t reduced = 0;
  for (auto* e : group) {
    negotiation += seconds(scheduled_at - e->enqueued);
    queued += seconds(start - scheduled_at);
    if (r.attrs.op == OpType::kAllreduce) reduced += static_cast<int64_t>(e->submission.request.Bytes());
  }
  const double slowest = static_cast<size_t>(w_.rank) < r.ready_wait_s.size() ? r.ready_wait_s[w_.rank] : 0.0;
  const int64_t sent = static_cast<int64_t>(w_.comm->bytes_sent());
  const int64_t received = static_cast<int64_t>(w_.comm->bytes_received());
  w_.stats->Update([&](RuntimeStats& s) {
    ++s.collectives;
    if (r.tensors.size() > 1) s.fused_tensors += static_cast<int64_t>(r.tensors.size());
    s.bytes_reduced += reduced;
    s.fusion_copied_bytes += static_cast<int64_t>(timings.fusion_copied_bytes);
    s.negotiation_seconds += negotiation;
    s.wait_for_slowest_seconds += slowest;
    s.queue_seconds += queued;
    s.transfer_seconds += transport;
    if (r.attrs.op == OpType::kAllreduce) s.allreduce_transfer_seconds += transport;
    s.execute_seconds += execute;
    s.bytes_sent = sent;
    s.bytes_received = received;
    CopyLinkStats(&s.links);
  });
}

// Each link's counters (link.h) into `links`; hostnames once. Under the stats lock: the
// links are the background thread's, which is this one.
void Executor::CopyLinkStats(std::vector<LinkStats>* links) const {
  const int n = w_.comm->size();
  if (links->size() != static_cast<size_t>(n)) {
    links->assign(n, LinkStats{});
    for (int p = 0; p < n; ++p) {
      (*links)[p].host = w_.comm->hostname_of(p);
    }
  }
  for (int p = 0; p < n; ++p) {
    if (p == w_.rank) continue;
    const Link& link = w_.comm->peek(p);  // counters only: opens no lazy connection
    LinkStats& l = (*links)[p];
    l.shared_memory = link.shm();  // lazily: once a collective made the pair's rings
    l.bytes_sent = static_cast<int64_t>(link.bytes_sent());
    l.bytes_received = static_cast<int64_t>(link.bytes_received());
    l.single_copy_bytes_received = static_cast<int64_t>(link.cma_bytes_received());
    l.send_seconds = static_cast<double>(link.send_flow_ns()) * 1e-9;
    l.recv_seconds = static_cast<double>(link.recv_flow_ns()) * 1e-9;
  }
}

}  // namespace tfring
