#include "runtime/negotiator.h"

#include <algorithm>

#include "base/timeline.h"

namespace tfring {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Negotiator::Negotiator(const Wiring& wiring, std::unique_ptr<Coordinator> coordinator,
                       std::unique_ptr<StallInspector> stall_inspector, std::unique_ptr<Autotuner> autotuner)
    : w_(wiring),
      coordinator_(std::move(coordinator)),
      stall_inspector_(std::move(stall_inspector)),
      autotuner_(std::move(autotuner)),
      pacer_(wiring.control_hold_s, wiring.control_hold_max_s),
      cycle_s_(wiring.cycle_s) {
  if (w_.config != nullptr) tuned_ = w_.config->settings();
  if (w_.tree == nullptr || w_.tree->size() == 1) return;
  if (w_.rank == 0) {
    for (int c : w_.tree->children()) subtree_of_child_[c] = w_.tree->SubtreeOf(c);
  } else {
    relay_ = std::make_unique<RequestRelay>(*w_.tree, w_.relay_detail_after_s,
                                            [this](int32_t id) { return request_cache_.NameOf(id); });
  }
}

void Negotiator::Announce(std::deque<Submission> batch) {
  if (batch.empty()) return;
  const auto now = Clock::now();
  for (auto& s : batch) {
    if (w_.rank == 0) {
      w_.timeline->Mark(s.request.name, "RANK_READY 0", now);
      coordinator_->Add(0, s.request, now);
    } else if (relay_ != nullptr) {
      const int32_t id = request_cache_.Lookup(s.request);
      if (id >= 0) {
        relay_->AddOwnCached(id, now);
      } else {
        relay_->AddOwn(s.request);
      }
    }
    w_.executor->Add(std::move(s), now);
  }
  FlushRelay();
}

void Negotiator::FlushRelay() {
  if (relay_ == nullptr || !relay_->HasMessage()) return;
  const auto now = Clock::now();
  if (!pacer_.MaySend(now)) return;  // held: goes with the parent's answer or when the hold ends
  pacer_.Sent(now);
  Status st = w_.control->SendToParent(relay_->TakeMessage());
  if (!st.ok()) w_.events->FailTransfer(st);
}

void Negotiator::Negotiate() {
  Status st = w_.control->Receive(0, [this](int from, ControlMessage& m) { return HandleControl(from, m); });
  if (!st.ok()) {
    w_.events->Fail(st);
    return;
  }
  if (w_.events->broken()) return;
  if (w_.rank != 0) {
    if (relay_ != nullptr) relay_->Age(Clock::now());
    FlushRelay();
    return;
  }
  MaybeRespond();
  if (w_.events->broken()) return;
  st = stall_inspector_->Inspect(*coordinator_);
  if (!st.ok()) w_.events->Fail(st);
}

Status Negotiator::HandleControl(int from, ControlMessage& msg) {
  const auto received = Clock::now();
  switch (msg.kind) {
    case ControlKind::kRequests:
      if (w_.rank == 0) return AddRequests(from, msg);
      if (relay_ == nullptr) break;
      return relay_->AddFromChild(from, msg, received);
    case ControlKind::kShutdown:  // a neighbour's departure: the abort that stands for it
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
      if (w_.rank == 0 || from != w_.control->parent()) break;
      return TakeResponses(msg);
    case ControlKind::kHello:  // consumed by Init (ControlChannel::Greet)
      break;
  }
  return Status::Internal("unexpected control message kind " + std::to_string(int(msg.kind)) +
                          " from rank " + std::to_string(from));
}

Status Negotiator::AddRequests(int child, const ControlMessage& msg) {
  auto subtree = subtree_of_child_.find(child);
  if (subtree == subtree_of_child_.end()) {
    return Status::Internal("rank 0 got requests from rank " + std::to_string(child) +
                            ", which is not its child in the control tree");
  }
  const std::vector<int>& ranks = subtree->second;
  auto add = [&](int origin, const std::vector<Request>& requests, const std::vector<int32_t>& cached) -> Status {
    for (const auto& r : requests) {
      const auto now = Clock::now();
      if (w_.timeline->active()) w_.timeline->Mark(r.name, "RANK_READY " + std::to_string(origin), now);
      coordinator_->Add(origin, r, now);
    }
    for (int32_t id : cached) TFRING_RETURN_IF_ERROR(coordinator_->AddCached(origin, id));
    return Status::OK();
  };
  TFRING_RETURN_IF_ERROR(CheckRelayedRanks(child, msg, ranks));
  TFRING_RETURN_IF_ERROR(add(child, msg.requests, msg.cached_requests));
  for (const auto& from : msg.relayed) TFRING_RETURN_IF_ERROR(add(from.rank, from.requests, from.cached));
  for (int32_t id : msg.subtree_cached) {
    for (int r : ranks) TFRING_RETURN_IF_ERROR(coordinator_->AddCached(r, id));
  }
  return Status::OK();
}

Status Negotiator::TakeResponses(ControlMessage& msg) {
  const auto received = Clock::now();
  pacer_.Answered();  // what this rank holds goes up after this message (Negotiate)
  Status st = w_.control->SendToChildren(msg);  // before scheduling: the children start sooner
  if (!st.ok()) {
    w_.events->FailTransfer(st);
    return st;
  }
  for (auto& r : msg.responses) {
    if (relay_ != nullptr) {
      if (r.kind == Response::Kind::kCollective && r.attrs.op == OpType::kJoin) relay_->JoinEnded();
      for (const auto& t : r.tensors) {
        if (!t.name.empty()) relay_->Answered(t.name);  // a name sent as an id was not sent in full
      }
    }
    TFRING_RETURN_IF_ERROR(Schedule(std::move(r), received));
  }
  if (!msg.tuning.empty()) ApplyTuning(msg.tuning);
  return Status::OK();
}

void Negotiator::MaybeRespond() {
  if (!coordinator_->HasReady()) return;
  auto now = Clock::now();
  if (first_ready_at_ == Clock::time_point{}) first_ready_at_ = now;
  if (coordinator_->HasPartial() && SecondsSince(first_ready_at_) < cycle_s_) return;
  first_ready_at_ = Clock::time_point{};
  ControlMessage msg;
  msg.kind = ControlKind::kResponses;
  msg.responses = coordinator_->TakeReady();
  const auto decided = Clock::now();
  if (autotuner_ != nullptr) {
    if (auto values = autotuner_->Observe(msg.responses, decided)) msg.tuning = std::move(*values);
  }
  Status st = w_.control->SendToChildren(msg);
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
  if (!msg.tuning.empty()) ApplyTuning(msg.tuning);
}

void Negotiator::ApplyTuning(const std::vector<double>& values) {
  ApplyTunedValues(values, w_.config, &tuned_);
  if (coordinator_ != nullptr) coordinator_->set_fusion_threshold(tuned_.fusion_threshold);
  cycle_s_ = tuned_.cycle_time_ms / 1000.0;
  if (w_.rank != 0) pacer_.SetFirstHold(tuned_.control_hold_us / 1e6);
  w_.executor->ScheduleTuning(values, responses_seen_);
}

int64_t Negotiator::MicrosUntilDue() const {
  if (relay_ != nullptr) {
    const auto now = Clock::now();
    const int aging_ms = relay_->MillisUntilAging(now);
    int64_t due = aging_ms < 0 ? -1 : int64_t{aging_ms} * 1000;
    if (relay_->HasMessage()) {
      const int64_t send = pacer_.MicrosUntilSend(now);
      if (due < 0 || send < due) due = send;
    }
    return due;
  }
  if (w_.rank != 0 || !coordinator_->HasReady() || first_ready_at_ == Clock::time_point{}) return -1;
  const double left = cycle_s_ - SecondsSince(first_ready_at_);
  return left <= 0 ? 0 : std::max<int64_t>(1, static_cast<int64_t>(left * 1e6));
}

Status Negotiator::Schedule(Response r, Clock::time_point at) {
  ++responses_seen_;
  for (auto& t : r.tensors) {
    if (!t.name.empty()) continue;
    const std::string* name = request_cache_.NameOf(t.cache_id);
    if (name == nullptr) {
      return Status::Internal("rank 0 named a tensor by cache id " + std::to_string(t.cache_id) +
                              ", which rank " + std::to_string(w_.rank) + " was never told about");
    }
    t.name = *name;
  }
  // A process set this rank is not in: nothing of it to check or run here (Execute skips it).
  if (r.kind == Response::Kind::kCollective && r.attrs.process_set_id != 0 && !r.Includes(w_.rank)) return Status::OK();
  if (r.kind == Response::Kind::kCollective) {
    int64_t cached = 0;
    for (size_t i = 0; i < r.tensors.size(); ++i) {
      const Response::Tensor& t = r.tensors[i];
      const Request* request = w_.executor->EntryFor(r, i);
      if (request == nullptr) {
        return Status::Internal("rank 0 scheduled tensor '" + t.name + "' which rank " +
                                std::to_string(w_.rank) + " never submitted");
      }
      if (t.cache_id < 0) continue;
      if (t.cache_id_is_new) {
        TFRING_RETURN_IF_ERROR(request_cache_.Remember(t.cache_id, *request));
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
