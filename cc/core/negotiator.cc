#include "negotiator.h"

#include <algorithm>

#include "timeline.h"

namespace tfring {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Negotiator::Negotiator(const Wiring& wiring, std::unique_ptr<Coordinator> coordinator,
                       std::unique_ptr<StallInspector> stall_inspector)
    : w_(wiring), coordinator_(std::move(coordinator)), stall_inspector_(std::move(stall_inspector)) {}

void Negotiator::Announce(std::deque<Submission> batch) {
  if (batch.empty()) return;
  ControlMessage msg;
  msg.kind = ControlKind::kRequests;
  const auto now = Clock::now();
  for (auto& s : batch) {
    if (w_.rank == 0) {
      w_.timeline->Mark(s.request.name, "RANK_READY 0", now);
      coordinator_->Add(0, s.request, now);
    } else {
      const int32_t id = request_cache_.Lookup(s.request);
      if (id >= 0) {
        msg.cached_requests.push_back(id);
      } else {
        msg.requests.push_back(s.request);
      }
    }
    w_.executor->Add(std::move(s), now);
  }
  if (w_.rank == 0) return;
  Status st = w_.control->Send(msg);
  if (!st.ok()) w_.events->FailTransfer(st);
}

void Negotiator::Negotiate() {
  Status st = w_.control->Receive(0, [this](int from, ControlMessage& m) { return HandleControl(from, m); });
  if (!st.ok()) {
    w_.events->Fail(st);
    return;
  }
  if (w_.rank != 0 || w_.events->broken()) return;
  MaybeRespond();
  if (w_.events->broken()) return;
  st = stall_inspector_->Inspect(*coordinator_);
  if (!st.ok()) w_.events->Fail(st);
}

Status Negotiator::HandleControl(int from, ControlMessage& msg) {
  const auto received = Clock::now();
  switch (msg.kind) {
    case ControlKind::kRequests:
      if (w_.rank != 0) break;
      for (const auto& r : msg.requests) {
        auto now = Clock::now();
        w_.timeline->Mark(r.name, "RANK_READY " + std::to_string(from), now);
        coordinator_->Add(from, r, now);
      }
      for (int32_t id : msg.cached_requests) {
        TFRING_RETURN_IF_ERROR(coordinator_->AddCached(from, id));
      }
      return Status::OK();
    case ControlKind::kShutdown:  // rank 0 hears of a departure: the abort that stands for it
      if (w_.rank != 0) break;
      msg = DepartureMessage(from);
      [[fallthrough]];
    case ControlKind::kAbort: {
      Status cause(msg.abort_code, msg.abort_message);
      if (cause.code() == ErrorCode::kPrecondition && w_.executor->HasScheduled()) {
        departure_ = cause;  // run what was agreed before it first (the job's loop)
        departure_origin_ = msg.abort_origin;
        return Status::OK();
      }
      w_.events->Fail(cause, msg.abort_origin);
      return cause;
    }
    case ControlKind::kResponses:
      if (w_.rank == 0) break;
      for (auto& r : msg.responses) TFRING_RETURN_IF_ERROR(Schedule(std::move(r), received));
      return Status::OK();
    case ControlKind::kHello:  // consumed by Init (ControlChannel::Greet)
      break;
  }
  return Status::Internal("unexpected control message kind " + std::to_string(int(msg.kind)) +
                          " from rank " + std::to_string(from));
}

void Negotiator::MaybeRespond() {
  if (!coordinator_->HasReady()) return;
  auto now = Clock::now();
  if (first_ready_at_ == Clock::time_point{}) first_ready_at_ = now;
  if (coordinator_->HasPartial() && SecondsSince(first_ready_at_) < w_.cycle_s) return;
  first_ready_at_ = Clock::time_point{};
  ControlMessage msg;
  msg.kind = ControlKind::kResponses;
  msg.responses = coordinator_->TakeReady();
  const auto decided = Clock::now();
  Status st = w_.control->Send(msg);
  if (!st.ok()) {
    w_.events->FailTransfer(st);
    return;
  }
  for (auto& r : msg.responses) {
    st = Schedule(std::move(r), decided);
    if (!st.ok()) {
      w_.events->Fail(st);
      return;
    }
  }
}

int Negotiator::MillisUntilCycleEnds() const {
  if (w_.rank != 0 || !coordinator_->HasReady() || first_ready_at_ == Clock::time_point{}) return -1;
  const double left = w_.cycle_s - SecondsSince(first_ready_at_);
  return left <= 0 ? 0 : std::max(1, static_cast<int>(left * 1000));
}

Status Negotiator::Schedule(Response r, Clock::time_point at) {
  for (size_t i = 0; i < r.names.size(); ++i) {
    if (!r.names[i].empty()) continue;
    const std::string* name = request_cache_.NameOf(CacheIdAt(r, i));
    if (name == nullptr) {
      return Status::Internal("rank 0 named a tensor by cache id " + std::to_string(CacheIdAt(r, i)) +
                              ", which rank " + std::to_string(w_.rank) + " was never told about");
    }
    r.names[i] = *name;
  }
  // A process set this rank is not in: nothing of it to check or run here (Execute skips it).
  if (r.kind == Response::Kind::kCollective && r.process_set_id != 0 && !r.Includes(w_.rank)) return Status::OK();
  if (r.kind == Response::Kind::kCollective) {
    int64_t cached = 0;
    for (size_t i = 0; i < r.names.size(); ++i) {
      const Request* request = w_.executor->EntryFor(r, i);
      if (request == nullptr) {
        return Status::Internal("rank 0 scheduled tensor '" + r.names[i] + "' which rank " +
                                std::to_string(w_.rank) + " never submitted");
      }
      const int32_t id = CacheIdAt(r, i);
      if (id < 0) continue;
      if (i < r.cache_id_is_new.size() && r.cache_id_is_new[i]) {
        TFRING_RETURN_IF_ERROR(request_cache_.Remember(id, *request));
      } else {
        ++cached;
      }
    }
    if (cached > 0) w_.stats->Update([&](RuntimeStats& s) { s.cached_tensors += cached; });
  }
  w_.executor->Schedule(std::move(r), at);
  return Status::OK();
}

}  // namespace tfring
