#include "control/response_cache.h"

namespace tfring {

bool SameRequest(const Request& a, const Request& b) {
  // attrs include the process set: a set's tensor is never a cached global one
  return a.name == b.name && a.attrs == b.attrs && a.shape == b.shape && a.splits == b.splits;
}

int32_t CacheAssigner::Assign(const std::string& name, const std::vector<Request>& by_rank,
                              bool* is_new) {
  *is_new = false;
  auto it = newest_.find(name);
  if (it != newest_.end()) {
    const auto& cached = by_id_[it->second];
    bool same = cached.size() == by_rank.size();
    for (size_t r = 0; same && r < by_rank.size(); ++r) same = SameRequest(cached[r], by_rank[r]);
    if (same) return it->second;
  }
  if (by_id_.size() >= capacity_) return -1;
  const int32_t id = static_cast<int32_t>(by_id_.size());
  by_id_.push_back(by_rank);
  newest_[name] = id;
  *is_new = true;
  return id;
}

const Request* CacheAssigner::Expand(int32_t id, int rank) const {
  if (id < 0 || static_cast<size_t>(id) >= by_id_.size()) return nullptr;
  const auto& requests = by_id_[id];
  if (rank < 0 || static_cast<size_t>(rank) >= requests.size()) return nullptr;
  return &requests[rank];
}

int32_t RequestCache::Lookup(const Request& request) const {
  auto it = newest_.find(request.name);
  if (it == newest_.end()) return -1;
  return SameRequest(by_id_[it->second], request) ? it->second : -1;
}

Status RequestCache::Remember(int32_t id, const Request& request) {
  if (id < 0) return Status::Internal("negative cache id " + std::to_string(id));
  if (static_cast<size_t>(id) >= by_id_.size()) by_id_.resize(static_cast<size_t>(id) + 1);
  Request& slot = by_id_[id];
  if (!slot.name.empty() && !SameRequest(slot, request)) {
    return Status::Internal("rank 0 announced cache id " + std::to_string(id) + " for '" + request.name +
                            "' but this rank already knows it as '" + slot.name + "'");
  }
  slot = request;
  newest_[request.name] = id;
  return Status::OK();
}

const std::string* RequestCache::NameOf(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= by_id_.size() || by_id_[id].name.empty()) return nullptr;
  return &by_id_[id].name;
}

}  // namespace tfring
