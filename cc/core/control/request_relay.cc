#include "control/request_relay.h"

#include <algorithm>

namespace tfring {

Status CheckRelayedRanks(int child, const ControlMessage& message, const std::vector<int>& subtree) {
  for (const auto& from : message.relayed) {
    if (from.rank == child || !std::binary_search(subtree.begin(), subtree.end(), from.rank)) {
      return Status::Internal("rank " + std::to_string(child) + " passed on requests of rank " +
                              std::to_string(from.rank) + ", which is not below it in the control tree");
    }
  }
  return Status::OK();
}

RequestRelay::RequestRelay(const ControlTree& tree, double detail_after_s, NameOf name_of)
    : rank_(tree.rank()),
      detail_after_s_(detail_after_s),
      name_of_(std::move(name_of)),
      subtree_(tree.SubtreeOf(tree.rank())) {
  for (size_t i = 0; i < subtree_.size(); ++i) index_[subtree_[i]] = static_cast<int>(i);
  for (int c : tree.children()) below_[c] = tree.SubtreeOf(c);
  out_.kind = ControlKind::kRequests;
}

void RequestRelay::AddOwnCached(int32_t id, Clock::time_point now) { AddCached(rank_, id, now); }

Status RequestRelay::AddFromChild(int child, const ControlMessage& m, Clock::time_point now) {
  auto below = below_.find(child);
  if (below == below_.end()) {
    return Status::Internal("rank " + std::to_string(rank_) + " got requests from rank " + std::to_string(child) +
                            ", which is not its child in the control tree");
  }
  const std::vector<int>& ranks = below->second;
  TFRING_RETURN_IF_ERROR(CheckRelayedRanks(child, m, ranks));
  for (const auto& r : m.requests) AddRequest(child, r);
  for (int32_t id : m.cached_requests) AddCached(child, id, now);
  for (const auto& from : m.relayed) {
    for (const auto& r : from.requests) AddRequest(from.rank, r);
    for (int32_t id : from.cached) AddCached(from.rank, id, now);
  }
  for (int32_t id : m.subtree_cached) {
    for (int r : ranks) AddCached(r, id, now);
  }
  return Status::OK();
}

void RequestRelay::AddRequest(int origin, const Request& request) {
  if (request.attrs.op == OpType::kJoin && !joined_) {
    joined_ = true;
    for (auto& [id, p] : partial_) ToDetail(id, p);
  }
  if (sent_in_full_.insert(request.name).second) {
    for (auto& [id, p] : partial_) {
      if (SentInFull(id)) ToDetail(id, p);
    }
  }
  if (origin == rank_) {
    out_.requests.push_back(request);
  } else {
    RelayedFor(origin).requests.push_back(request);
  }
  has_message_ = true;
}

void RequestRelay::AddCached(int origin, int32_t id, Clock::time_point now) {
  if (subtree_.size() == 1 && !joined_ && !SentInFull(id)) {  // a leaf: complete at once (every step at np=2)
    // A second report of an id the message already carries (a message held back by the
    // pacer gathers several batches) goes up as it is: the wire's bit vector would merge
    // the two, and rank 0 must see the duplicate to name it.
    if (std::find(out_.subtree_cached.begin(), out_.subtree_cached.end(), id) != out_.subtree_cached.end()) {
      ReportRank(origin, id);
    } else {
      out_.subtree_cached.push_back(id);
    }
    has_message_ = true;
    return;
  }
  auto [it, inserted] = partial_.try_emplace(id);
  Partial& p = it->second;
  if (inserted) {
    p.has.assign(subtree_.size(), 0);
    p.first = now;
    p.detail = joined_ || SentInFull(id);
  }
  uint8_t& has = p.has[static_cast<size_t>(index_.at(origin))];
  if (has || p.detail) {  // a second report while pending goes up as it is: rank 0 says why
    ReportRank(origin, id);
    if (has) return;
  }
  has = 1;
  if (++p.count < static_cast<int>(subtree_.size())) return;
  if (!p.detail) {
    out_.subtree_cached.push_back(id);
    has_message_ = true;
  }
  partial_.erase(it);
}

void RequestRelay::ReportRank(int origin, int32_t id) {
  if (origin == rank_) {
    out_.cached_requests.push_back(id);
  } else {
    RelayedFor(origin).cached.push_back(id);
  }
  has_message_ = true;
}

void RequestRelay::ToDetail(int32_t id, Partial& p) {
  if (p.detail) return;
  p.detail = true;
  for (size_t i = 0; i < subtree_.size(); ++i) {
    if (p.has[i]) ReportRank(subtree_[i], id);
  }
}

void RequestRelay::Answered(const std::string& name) {
  if (sent_in_full_.empty() || !sent_in_full_.count(name)) return;
  for (auto it = partial_.begin(); it != partial_.end();) {
    const std::string* n = name_of_ ? name_of_(it->first) : nullptr;
    it = n != nullptr && *n == name ? partial_.erase(it) : std::next(it);
  }
  sent_in_full_.erase(name);
}

bool RequestRelay::SentInFull(int32_t id) const {
  if (sent_in_full_.empty()) return false;
  const std::string* name = name_of_ ? name_of_(id) : nullptr;
  return name != nullptr && sent_in_full_.count(*name) > 0;
}

void RequestRelay::Age(Clock::time_point now) {
  for (auto& [id, p] : partial_) {
    if (!p.detail && std::chrono::duration<double>(now - p.first).count() >= detail_after_s_) ToDetail(id, p);
  }
}

int RequestRelay::MillisUntilAging(Clock::time_point now) const {
  double soonest = -1;
  for (const auto& [id, p] : partial_) {
    if (p.detail) continue;
    const double left = detail_after_s_ - std::chrono::duration<double>(now - p.first).count();
    if (soonest < 0 || left < soonest) soonest = std::max(0.0, left);
  }
  return soonest < 0 ? -1 : static_cast<int>(soonest * 1000) + 1;
}

RankRequests& RequestRelay::RelayedFor(int origin) {
  auto [it, inserted] = relayed_at_.try_emplace(origin, out_.relayed.size());
  if (inserted) {
    out_.relayed.emplace_back();
    out_.relayed.back().rank = origin;
  }
  return out_.relayed[it->second];
}

ControlMessage RequestRelay::TakeMessage() {
  ControlMessage m = std::move(out_);
  out_ = ControlMessage();
  out_.kind = ControlKind::kRequests;
  relayed_at_.clear();
  has_message_ = false;
  // The wire sends cache ids as bit vectors: increasing, each once.
  auto sorted = [](std::vector<int32_t>* ids) { std::sort(ids->begin(), ids->end()); };
  sorted(&m.cached_requests);
  sorted(&m.subtree_cached);
  for (auto& from : m.relayed) sorted(&from.cached);
  return m;
}

}  // namespace tfring
