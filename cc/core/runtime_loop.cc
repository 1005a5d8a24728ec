// The background thread: its loop, negotiation with rank 0, failure handling, orderly stop.
//
// Every turn: drain newly enqueued requests (rank 0 records them in its Coordinator, the
// others send them up the control channel), negotiate (read control messages; rank 0
// answers every rank with the same ordered ResponseList as soon as tensors are ready,
// waiting at most TFRING_CYCLE_TIME_MS to fuse more while others are still arriving),
// execute what was scheduled (runtime_execute.cc), then sleep in poll() until new work, a
// control message (on TCP, or in shared memory: control_channel.h), or a timer (fusion
// cycle, stall inspection) wakes it.
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include "logging.h"
#include "runtime_state.h"

namespace tfring {
namespace {

constexpr double kRefineCauseWindowS = 0.3;
constexpr double kIdleWakeS = 1.0;  // the stall inspector's period

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void Runtime::State::Loop() {
  while (!stop_requested.load()) {
    Status lost;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!broken) lost = peer_lost;
    }
    if (!lost.ok()) Fail(lost);
    if (!IsBroken()) {
      DrainQueue();
      Negotiate();
      ExecuteScheduled();
      if (!departure.ok()) Fail(departure, departure_origin);  // no-op if execution failed first
    }
    WaitForWork();
  }
  Stop();
  {
    std::lock_guard<std::mutex> lock(mu);
    stopped.store(true);
  }
  stopped_cv.notify_all();
}

bool Runtime::State::IsBroken() {
  std::lock_guard<std::mutex> lock(mu);
  return broken;
}

void Runtime::State::DrainQueue() {
  std::deque<Submission> batch;
  {
    std::lock_guard<std::mutex> lock(mu);
    batch.swap(queue);
    queued.store(0, std::memory_order_seq_cst);
  }
  if (batch.empty()) return;
  ControlMessage msg;
  msg.kind = ControlKind::kRequests;
  auto now = Clock::now();
  for (auto& s : batch) {
    if (rank == 0) {
      timeline.Mark(s.request.name, "RANK_READY 0", now);
      coordinator->Add(0, s.request, now);
    } else {
      const int32_t id = request_cache.Lookup(s.request);
      if (id >= 0) {
        msg.cached_requests.push_back(id);
      } else {
        msg.requests.push_back(s.request);
      }
    }
    if (s.request.op == OpType::kJoin) joined = true;
    std::string name = s.request.name;  // C++17: the right side of = is evaluated first
    entries[name] = Entry{std::move(s), now};
  }
  if (rank == 0) return;
  Status st = control->Send(msg);
  if (!st.ok()) FailTransfer(st);
}

void Runtime::State::Negotiate() {
  Status st = control->Receive(0, [this](int from, ControlMessage& m) { return HandleControl(from, m); });
  if (!st.ok()) {
    Fail(st);
    return;
  }
  if (rank != 0 || IsBroken()) return;
  MaybeRespond();
  if (IsBroken()) return;
  st = stall_inspector->Inspect(*coordinator);
  if (!st.ok()) Fail(st);
}

Status Runtime::State::HandleControl(int from, ControlMessage& msg) {
  const auto received = Clock::now();
  switch (msg.kind) {
    case ControlKind::kRequests:
      if (rank != 0) break;
      for (const auto& r : msg.requests) {
        auto now = Clock::now();
        timeline.Mark(r.name, "RANK_READY " + std::to_string(from), now);
        coordinator->Add(from, r, now);
      }
      for (int32_t id : msg.cached_requests) {
        TFRING_RETURN_IF_ERROR(coordinator->AddCached(from, id));
      }
      return Status::OK();
    case ControlKind::kShutdown:  // rank 0 hears of a departure: the abort that stands for it
      if (rank != 0) break;
      msg = DepartureMessage(from);
      [[fallthrough]];
    case ControlKind::kAbort: {
      Status cause(msg.abort_code, msg.abort_message);
      if (cause.code() == ErrorCode::kPrecondition && !scheduled.empty()) {
        departure = cause;  // run what was agreed before it first (Loop)
        departure_origin = msg.abort_origin;
        return Status::OK();
      }
      Fail(cause, msg.abort_origin);
      return cause;
    }
    case ControlKind::kResponses:
      if (rank == 0) break;
      for (auto& r : msg.responses) TFRING_RETURN_IF_ERROR(Schedule(std::move(r), received));
      return Status::OK();
    case ControlKind::kHello:  // consumed by Init (ControlChannel::Greet)
      break;
  }
  return Status::Internal("unexpected control message kind " + std::to_string(int(msg.kind)) +
                          " from rank " + std::to_string(from));
}

void Runtime::State::MaybeRespond() {
  if (!coordinator->HasReady()) return;
  auto now = Clock::now();
  if (first_ready_at == Clock::time_point{}) first_ready_at = now;
  if (coordinator->HasPartial() && SecondsSince(first_ready_at) < cycle_s) return;
  first_ready_at = Clock::time_point{};
  ControlMessage msg;
  msg.kind = ControlKind::kResponses;
  msg.responses = coordinator->TakeReady();
  const auto decided = Clock::now();
  Status st = control->Send(msg);
  if (!st.ok()) {
    FailTransfer(st);
    return;
  }
  for (auto& r : msg.responses) {
    st = Schedule(std::move(r), decided);
    if (!st.ok()) {
      Fail(st);
      return;
    }
  }
}

Status Runtime::State::Schedule(Response r, Clock::time_point at) {
  for (size_t i = 0; i < r.names.size(); ++i) {
    if (!r.names[i].empty()) continue;
    const std::string* name = request_cache.NameOf(CacheIdAt(r, i));
    if (name == nullptr) {
      return Status::Internal("rank 0 named a tensor by cache id " + std::to_string(CacheIdAt(r, i)) +
                              ", which rank " + std::to_string(rank) + " was never told about");
    }
    r.names[i] = *name;
  }
  // A process set this rank is not in: nothing of it to check or run here (Execute skips it).
  if (r.kind == Response::Kind::kCollective && r.process_set_id != 0 && !r.Includes(rank)) return Status::OK();
  if (r.kind == Response::Kind::kCollective) {
    int64_t cached = 0;
    for (size_t i = 0; i < r.names.size(); ++i) {
      auto it = entries.find(r.names[i]);
      if (it == entries.end() && joined && (r.op == OpType::kAllreduce || r.op == OpType::kBarrier)) {
        it = entries.emplace(r.names[i], JoinedContribution(r, i)).first;
      }
      if (it == entries.end()) {
        return Status::Internal("rank 0 scheduled tensor '" + r.names[i] + "' which rank " +
                                std::to_string(rank) + " never submitted");
      }
      const int32_t id = CacheIdAt(r, i);
      if (id < 0) continue;
      if (i < r.cache_id_is_new.size() && r.cache_id_is_new[i]) {
        TFRING_RETURN_IF_ERROR(request_cache.Remember(id, it->second.submission.request));
      } else {
        ++cached;
      }
    }
    if (cached > 0) stats.Update([&](RuntimeStats& s) { s.cached_tensors += cached; });
  }
  scheduled.push_back(Scheduled{std::move(r), at});
  return Status::OK();
}

Runtime::State::Entry Runtime::State::JoinedContribution(const Response& r, size_t i) {
  const size_t bytes = r.op == OpType::kAllreduce && i < r.sizes.size() ? static_cast<size_t>(r.sizes[i]) : 0;
  auto zeros = std::make_shared<std::vector<char>>(bytes, 0);
  Submission s;
  s.request.name = r.names[i];
  s.request.op = r.op;
  s.request.dtype = r.dtype;
  s.request.reduce_op = r.reduce_op;
  s.request.shape = {static_cast<int64_t>(bytes / DataTypeSize(r.dtype))};
  s.input = zeros->data();
  s.output = zeros->data();  // in place; the result is dropped with the buffer
  s.done = [zeros](const Status&) {};
  return Entry{std::move(s), Clock::now()};
}

void Runtime::State::WaitForWork() {
  std::vector<pollfd> fds;
  fds.push_back(pollfd{wake_fd, POLLIN, 0});
  const bool is_broken = IsBroken();
  if (!is_broken) control->AppendPollFds(&fds);
  int timeout_ms = static_cast<int>(kIdleWakeS * 1000);
  if (rank == 0 && !is_broken && coordinator->HasReady() && first_ready_at != Clock::time_point{}) {
    double left = cycle_s - SecondsSince(first_ready_at);
    timeout_ms = left <= 0 ? 0 : std::max(1, static_cast<int>(left * 1000));
  }
  // A short spin catches work that arrives within microseconds (a blocked thread takes
  // 30-120 us to wake on these machines). It yields between looks: the thread it waits for
  // (the caller, or TF's executor, bound to the same core) then runs at once instead of at
  // the end of this one's time slice (measured, np=2 bound, 8-byte allreduce: without the
  // yield a tenth of the calls slept and took ~100 us).
  // Control messages in shared memory are invisible to poll(): looked at in the spin, and
  // announced sleeping around the blocking poll (the writer then rings on TCP).
  const bool watch_shm = !is_broken;
  auto work_pending = [&] {
    return queued.load(std::memory_order_seq_cst) > 0 || (watch_shm && control->ShmPending());
  };
  int rc = 0;
  auto spin_until = Clock::now() + std::chrono::microseconds(spin_us);
  if (spin_us > 0) spinning.store(true, std::memory_order_seq_cst);
  do {
    if (work_pending()) break;
    rc = poll(fds.data(), fds.size(), 0);
    if (rc == 0) sched_yield();
  } while (rc == 0 && Clock::now() < spin_until && !stop_requested.load());
  spinning.store(false, std::memory_order_seq_cst);
  if (work_pending()) return;  // a submission that saw `spinning` did not write wake_fd
  if (rc == 0 && timeout_ms > 0) {
    rc = watch_shm ? control->PollAsleep(&fds, timeout_ms) : poll(fds.data(), fds.size(), timeout_ms);
  }
  if (rc > 0 && (fds[0].revents & POLLIN)) {
    uint64_t value;
    ssize_t ignored = ::read(wake_fd, &value, sizeof(value));
    (void)ignored;
  }
}

void Runtime::State::FailTransfer(const Status& status) {
  int origin = -1;
  Status cause = RefineCause(status, &origin);
  Fail(cause, origin);
}

Status Runtime::State::RefineCause(const Status& status, int* origin) {
  // A transfer failed. If a peer failed first, it (or rank 0 relaying for it) says why on
  // the control channel: prefer that root cause over "connection closed".
  // A local abort (shutdown() gave up waiting) has no remote cause to look for.
  *origin = -1;
  if (size == 1 || comm->aborted() ||
      (status.code() != ErrorCode::kPeerLost && status.code() != ErrorCode::kAborted)) {
    return status;
  }
  if (!departure.ok()) {  // a peer that shut down without doing its part: its notice says so
    *origin = departure_origin;
    return departure;
  }
  ControlMessage abort;
  int closed = -1;
  if (control->AwaitAbort(kRefineCauseWindowS, &abort, &closed)) {
    *origin = abort.abort_origin;
    return Status(abort.abort_code, abort.abort_message);
  }
  if (closed >= 0) {
    return Status::PeerLost("rank " + std::to_string(closed) + " is gone (its connection closed: the "
                            "process exited, crashed or was killed); while " + status.message());
  }
  return status;
}

void Runtime::State::Fail(const Status& failure, int origin) {
  Status status = failure;
  Status cause;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (broken) return;
    broken = true;
    // A lost peer is the root cause of whatever its silence made fail here (an aborted
    // transfer, a timeout).
    if (!peer_lost.ok()) {
      status = peer_lost;
      origin = -1;
    }
    failure_origin = origin >= 0 ? origin : rank;
    cause = status.WithContext("tfring rank " + std::to_string(rank));
    fatal = cause;
  }
  // A peer's orderly shutdown is how every job ends: not an error unless ops were pending.
  bool orderly = status.code() == ErrorCode::kPrecondition && entries.empty();
  if (orderly) {
    TFRING_LOG(LogLevel::kInfo, "runtime", cause.message());
  } else {
    std::string pending;
    for (const auto& kv : entries) {
      if (pending.size() > 200) { pending += ", ..."; break; }
      pending += (pending.empty() ? "" : ", ") + kv.first;
    }
    TFRING_LOG(LogLevel::kError, "runtime",
               cause.message() << (entries.empty() ? std::string(" [nothing pending on this rank]")
                                                   : " [" + std::to_string(entries.size()) +
                                                         " pending on this rank: " + pending + "]"));
  }
  if (size > 1) {
    // The abort states the cause as every rank reports it: a rank other than 0 names itself
    // when the failure is its own; relays keep the origin's words.
    const int from = failure_origin;
    const bool own = from == rank && rank != 0;
    control->Tell(AbortMessage(from, status.code(), (own ? "rank " + std::to_string(rank) + " failed: " : "") +
                                                  status.message()));
    if (liveness) liveness->Stop();  // the peers learn of the failure on the control channel
    comm->Abort();
  }
  FailAllPending(cause);
}

void Runtime::State::FailAllPending(const Status& status) {
  std::deque<Submission> unsent;
  {
    std::lock_guard<std::mutex> lock(mu);
    unsent.swap(queue);
    queued.store(0, std::memory_order_seq_cst);
  }
  for (auto& s : unsent) {
    std::string name = s.request.name;
    entries[name] = Entry{std::move(s), Clock::now()};
  }
  scheduled.clear();
  std::vector<std::string> names;
  for (const auto& kv : entries) names.push_back(kv.first);
  for (const auto& n : names) Complete(n, status);
}

void Runtime::State::Stop() {
  bool was_broken;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu);
    was_broken = broken;
    reason = stop_reason;
    broken = true;
    fatal = Status::Precondition("tfring has been shut down on rank " + std::to_string(rank));
  }
  if (!was_broken && size > 1) {
    if (!reason.empty()) {
      // Leaving because of an error: every other rank fails with this cause.
      control->Tell(AbortMessage(rank, ErrorCode::kAborted, "rank " + std::to_string(rank) + " exited: " + reason));
    } else if (rank == 0) {
      control->Tell(DepartureMessage(0));
    } else {
      ControlMessage bye;
      bye.kind = ControlKind::kShutdown;
      control->Tell(bye);
    }
  }
  if (liveness) liveness->Stop();
  if (comm) comm->Abort();
  FailAllPending(Status::Precondition("tfring was shut down on rank " + std::to_string(rank) +
                                      " while this collective was pending"));
}

}  // namespace tfring
