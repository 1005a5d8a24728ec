// The background thread: negotiation with rank 0, failure handling, orderly stop.
//
// Every rank: drain newly enqueued requests (rank 0 records them in its Coordinator, the
// others send them up the control channel), read control messages, and sleep in poll()
// until new work, a control message, or a timer (fusion cycle, stall inspection) wakes it.
// Rank 0 answers every rank with the same ordered ResponseList as soon as tensors are
// ready (waiting at most TFRING_CYCLE_TIME_MS to fuse more while others are still
// arriving), then executes it itself.
#include <poll.h>
#include <unistd.h>

#include "logging.h"
#include "runtime_state.h"

namespace tfring {
namespace {

constexpr size_t kMaxControlMessage = 256u << 20;
constexpr double kTellPeersTimeoutS = 1.0;
constexpr double kRefineCauseWindowS = 0.3;
constexpr double kStallCheckPeriodS = 1.0;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void Runtime::State::Loop() {
  while (!stop_requested.load()) {
    bool is_broken;
    Status lost;
    {
      std::lock_guard<std::mutex> lock(mu);
      is_broken = broken;
      lost = peer_lost;
    }
    if (!is_broken && !lost.ok()) {
      Fail(lost);
      is_broken = true;
    }
    if (!is_broken) {
      DrainQueue();
      Status st = ReadControl(0);
      if (!st.ok()) Fail(st);
      if (rank == 0 && !broken) {
        MaybeRespond();
        InspectStalls();
      }
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

void Runtime::State::DrainQueue() {
  std::deque<Submission> batch;
  {
    std::lock_guard<std::mutex> lock(mu);
    batch.swap(queue);
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
    std::string name = s.request.name;  // C++17: the right side of = is evaluated first
    entries[name] = Entry{std::move(s), now};
  }
  if (rank == 0) return;
  std::string bytes = EncodeControl(msg);
  CountControlBytes(bytes.size(), 1);
  Status st = comm->control_to_root().SendMessage(bytes, Deadline::After(timeout_s), comm->abort_flag());
  if (!st.ok()) Fail(RefineCause(st));
}

Status Runtime::State::ReadControl(int wait_ms) {
  if (size == 1) return Status::OK();
  std::vector<int> peers;
  if (rank == 0) {
    for (int p = 1; p < size; ++p) peers.push_back(p);
  } else {
    peers.push_back(0);
  }
  std::vector<pollfd> fds;
  for (int p : peers) {
    Socket& s = rank == 0 ? comm->control_from(p) : comm->control_to_root();
    fds.push_back(pollfd{s.fd(), POLLIN, 0});
  }
  if (poll(fds.data(), fds.size(), wait_ms) <= 0) return Status::OK();
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    int p = peers[i];
    Socket& s = rank == 0 ? comm->control_from(p) : comm->control_to_root();
    std::string bytes;
    Status st = s.RecvMessage(&bytes, kMaxControlMessage, Deadline::After(timeout_s),
                              comm->abort_flag());
    if (!st.ok()) {
      if (st.code() == ErrorCode::kPeerLost) {
        return Status::PeerLost("rank " + std::to_string(p) +
                                " is gone: its connection closed (the process exited, crashed "
                                "or was killed). Collectives need every rank.");
      }
      return st;
    }
    TFRING_RETURN_IF_ERROR(HandleControl(p, bytes));
    std::lock_guard<std::mutex> lock(mu);
    if (broken) return Status::OK();
  }
  return Status::OK();
}

Status Runtime::State::HandleControl(int from, const std::string& bytes) {
  const auto scheduled = Clock::now();  // for responses: when this rank got them
  ControlMessage msg;
  Status st = DecodeControl(bytes, size, &msg);
  if (!st.ok()) return Status::Internal("corrupt control message from rank " + std::to_string(from) + ": " + st.message());
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
    case ControlKind::kShutdown:
      if (rank != 0) break;
      return Status::Precondition("rank " + std::to_string(from) +
                                  " has shut down (it called shutdown() or its script ended); "
                                  "collectives need every rank");
    case ControlKind::kAbort:
      if (rank == 0 && from != 0 && msg.abort_message.rfind("rank " + std::to_string(from) + " ", 0) != 0) {
        return Status(msg.abort_code, "rank " + std::to_string(from) + " failed: " + msg.abort_message);
      }
      return Status(msg.abort_code, msg.abort_message);
    case ControlKind::kResponses:
      if (rank == 0) break;
      for (auto& r : msg.responses) {
        TFRING_RETURN_IF_ERROR(ResolveCachedNames(&r));
        Status ex = Execute(r, scheduled);
        if (!ex.ok()) return RefineCause(ex);
      }
      return Status::OK();
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
  const auto scheduled = Clock::now();
  if (size > 1) {
    std::string bytes = EncodeControl(msg);
    CountControlBytes(bytes.size() * static_cast<size_t>(size - 1), static_cast<size_t>(size - 1));
    for (int p = 1; p < size; ++p) {
      Status st = comm->control_from(p).SendMessage(bytes, Deadline::After(timeout_s),
                                                    comm->abort_flag());
      if (!st.ok()) {
        Fail(RefineCause(st));
        return;
      }
    }
  }
  for (const auto& r : msg.responses) {
    Status st = Execute(r, scheduled);
    if (!st.ok()) {
      Fail(RefineCause(st));
      return;
    }
  }
}

Status Runtime::State::ResolveCachedNames(Response* r) const {
  for (size_t i = 0; i < r->names.size(); ++i) {
    if (!r->names[i].empty()) continue;
    const std::string* name = request_cache.NameOf(CacheIdAt(*r, i));
    if (name == nullptr) {
      return Status::Internal("rank 0 named a tensor by cache id " + std::to_string(CacheIdAt(*r, i)) +
                              ", which rank " + std::to_string(rank) + " was never told about");
    }
    r->names[i] = *name;
  }
  return Status::OK();
}

void Runtime::State::CountControlBytes(size_t bytes, size_t messages) {
  std::lock_guard<std::mutex> lock(stats_mu);
  stats.control_bytes_sent += static_cast<int64_t>(bytes);
  stats.control_messages_sent += static_cast<int64_t>(messages);
}

void Runtime::State::InspectStalls() {
  if (SecondsSince(last_stall_check) < kStallCheckPeriodS) return;
  last_stall_check = Clock::now();
  if (stall_warning_s <= 0 && stall_shutdown_s <= 0) return;
  // Inspect from the smaller enabled limit: a shutdown limit below the warning one fires.
  double threshold = stall_warning_s > 0 ? stall_warning_s : stall_shutdown_s;
  if (stall_shutdown_s > 0 && stall_shutdown_s < threshold) threshold = stall_shutdown_s;
  std::set<std::string> still;
  std::string fatal_list;
  for (const auto& s : coordinator->Stalled(threshold)) {
    const bool warn = stall_warning_s > 0 && s.waited_s >= stall_warning_s;
    if (warn) still.insert(s.name);
    if (warn && !stall_warned.count(s.name)) {
      {
        std::lock_guard<std::mutex> lock(stats_mu);
        ++stats.stall_warnings;
      }
      TFRING_LOG(LogLevel::kWarning, "stall",
                 "tensor " << DescribeStall(s)
                           << ". Ranks are running different code, or one is stuck or slow. "
                              "(TFRING_STALL_WARNING_S; TFRING_STALL_SHUTDOWN_S turns this into an error)");
    }
    if (stall_shutdown_s > 0 && s.waited_s >= stall_shutdown_s) {
      fatal_list += (fatal_list.empty() ? "" : "; ") + DescribeStall(s);
    }
  }
  stall_warned.swap(still);
  if (!fatal_list.empty()) {
    Fail(Status::Timeout("stalled longer than TFRING_STALL_SHUTDOWN_S=" +
                         std::to_string(stall_shutdown_s) + " s: " + fatal_list));
  }
}

void Runtime::State::WaitForWork() {
  std::vector<pollfd> fds;
  fds.push_back(pollfd{wake_fd, POLLIN, 0});
  bool is_broken;
  {
    std::lock_guard<std::mutex> lock(mu);
    is_broken = broken;
  }
  if (!is_broken && size > 1) {
    if (rank == 0) {
      for (int p = 1; p < size; ++p) fds.push_back(pollfd{comm->control_from(p).fd(), POLLIN, 0});
    } else {
      fds.push_back(pollfd{comm->control_to_root().fd(), POLLIN, 0});
    }
  }
  int timeout_ms = static_cast<int>(kStallCheckPeriodS * 1000);
  if (rank == 0 && !is_broken && coordinator->HasReady() && first_ready_at != Clock::time_point{}) {
    double left = cycle_s - SecondsSince(first_ready_at);
    timeout_ms = left <= 0 ? 0 : std::max(1, static_cast<int>(left * 1000));
  }
  // A short spin catches work that arrives within microseconds (a blocked thread takes
  // 30-120 us to wake on these machines).
  int rc = 0;
  auto spin_until = Clock::now() + std::chrono::microseconds(spin_us);
  do {
    rc = poll(fds.data(), fds.size(), 0);
  } while (rc == 0 && Clock::now() < spin_until && !stop_requested.load());
  if (rc == 0 && timeout_ms > 0) rc = poll(fds.data(), fds.size(), timeout_ms);
  if (rc > 0 && (fds[0].revents & POLLIN)) {
    uint64_t value;
    ssize_t ignored = ::read(wake_fd, &value, sizeof(value));
    (void)ignored;
  }
}

Status Runtime::State::RefineCause(const Status& status) {
  // A transfer failed. If a peer failed first, it (or rank 0 relaying for it) says why on
  // the control channel: prefer that root cause over "connection closed".
  // A local abort (shutdown() gave up waiting) has no remote cause to look for.
  if (size == 1 || comm->aborted() ||
      (status.code() != ErrorCode::kPeerLost && status.code() != ErrorCode::kAborted)) {
    return status;
  }
  Deadline window = Deadline::After(kRefineCauseWindowS);
  std::vector<int> peers;
  if (rank == 0) {
    for (int p = 1; p < size; ++p) peers.push_back(p);
  } else {
    peers.push_back(0);
  }
  std::string dead;
  while (!window.expired()) {
    std::vector<pollfd> fds;
    for (int p : peers) {
      Socket& s = rank == 0 ? comm->control_from(p) : comm->control_to_root();
      fds.push_back(pollfd{s.fd(), POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), window.MillisLeft(50)) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Socket& s = rank == 0 ? comm->control_from(peers[i]) : comm->control_to_root();
      std::string bytes;
      if (!s.RecvMessage(&bytes, kMaxControlMessage, window).ok()) {
        if (dead.empty()) dead = "rank " + std::to_string(peers[i]);
        peers.erase(peers.begin() + i);
        break;
      }
      ControlMessage msg;
      if (DecodeControl(bytes, size, &msg).ok() && msg.kind == ControlKind::kAbort) {
        std::string who = rank == 0 ? "rank " + std::to_string(peers[i]) + " failed: " : "";
        return Status(msg.abort_code, who + msg.abort_message);
      }
    }
    if (peers.empty()) break;
  }
  if (!dead.empty()) {
    return Status::PeerLost(dead + " is gone (its connection closed: the process exited, "
                            "crashed or was killed); while " + status.message());
  }
  return status;
}

void Runtime::State::Fail(const Status& failure) {
  Status status = failure;
  Status cause;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (broken) return;
    broken = true;
    // A lost peer is the root cause of whatever its silence made fail here (an aborted
    // transfer, a timeout).
    if (!peer_lost.ok()) status = peer_lost;
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
    ControlMessage abort;
    abort.kind = ControlKind::kAbort;
    abort.abort_code = status.code();
    abort.abort_message = status.message();
    std::string bytes = EncodeControl(abort);
    if (rank == 0) {
      for (int p = 1; p < size; ++p) {
        comm->control_from(p).SendMessage(bytes, Deadline::After(kTellPeersTimeoutS));
      }
    } else {
      comm->control_to_root().SendMessage(bytes, Deadline::After(kTellPeersTimeoutS));
    }
    if (liveness) liveness->Stop();  // the peers learn of the failure on the control channel
    comm->Abort();
  }
  FailAllPending(cause);
}

void Runtime::State::FailAllPending(const Status& status) {
  std::deque<Submission> queued;
  {
    std::lock_guard<std::mutex> lock(mu);
    queued.swap(queue);
  }
  for (auto& s : queued) {
    std::string name = s.request.name;
    entries[name] = Entry{std::move(s), Clock::now()};
  }
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
  if (!was_broken && size > 1 && !reason.empty()) {
    // Leaving because of an error: every other rank fails with this cause.
    ControlMessage msg;
    msg.kind = ControlKind::kAbort;
    msg.abort_code = ErrorCode::kAborted;
    msg.abort_message = "rank " + std::to_string(rank) + " exited: " + reason;
    std::string bytes = EncodeControl(msg);
    if (rank == 0) {
      for (int p = 1; p < size; ++p) {
        comm->control_from(p).SendMessage(bytes, Deadline::After(kTellPeersTimeoutS));
      }
    } else {
      comm->control_to_root().SendMessage(bytes, Deadline::After(kTellPeersTimeoutS));
    }
  } else if (!was_broken && size > 1) {
    ControlMessage msg;
    if (rank == 0) {
      msg.kind = ControlKind::kAbort;
      msg.abort_code = ErrorCode::kPrecondition;
      msg.abort_message = "rank 0 has shut down (it called shutdown() or its script ended); "
                          "collectives need every rank";
      std::string bytes = EncodeControl(msg);
      for (int p = 1; p < size; ++p) {
        comm->control_from(p).SendMessage(bytes, Deadline::After(kTellPeersTimeoutS));
      }
    } else {
      msg.kind = ControlKind::kShutdown;
      comm->control_to_root().SendMessage(EncodeControl(msg), Deadline::After(kTellPeersTimeoutS));
    }
  }
  if (liveness) liveness->Stop();
  if (comm) comm->Abort();
  FailAllPending(Status::Precondition("tfring was shut down on rank " + std::to_string(rank) +
                                      " while this collective was pending"));
}

}  // namespace tfring
