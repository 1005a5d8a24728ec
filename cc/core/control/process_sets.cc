#include "control/process_sets.h"

#include <algorithm>

namespace tfring {

std::string RanksList(const std::vector<int32_t>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

Status ProcessSetTable::Add(int32_t id, std::vector<int32_t> ranks, int world_size) {
  if (id <= 0) {
    return Status::InvalidArgument("process set id " + std::to_string(id) +
                                   " is invalid: id 0 is the global set and ids are positive");
  }
  if (ranks.empty()) return Status::InvalidArgument("a process set needs at least one rank");
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world_size) {
      return Status::InvalidArgument("process set " + RanksList(ranks) + " names rank " + std::to_string(ranks[i]) +
                                     ", outside the job's ranks 0.." + std::to_string(world_size - 1));
    }
    if (i > 0 && ranks[i] == ranks[i - 1]) {
      return Status::InvalidArgument("process set " + RanksList(ranks) + " names rank " + std::to_string(ranks[i]) +
                                     " twice");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (sets_.count(id)) {
    return Status::InvalidArgument("process set id " + std::to_string(id) + " is already registered as " +
                                   RanksList(sets_[id]));
  }
  sets_[id] = std::move(ranks);
  return Status::OK();
}

Status ProcessSetTable::Remove(int32_t id) {
  if (id == 0) return Status::InvalidArgument("the global process set (id 0) cannot be removed");
  std::lock_guard<std::mutex> lock(mu_);
  if (sets_.erase(id) == 0) {
    return Status::InvalidArgument("process set id " + std::to_string(id) + " is not registered");
  }
  return Status::OK();
}

bool ProcessSetTable::Members(int32_t id, std::vector<int32_t>* ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return false;
  *ranks = it->second;
  return true;
}

std::vector<int32_t> ProcessSetTable::Ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> ids;
  for (const auto& kv : sets_) ids.push_back(kv.first);
  return ids;
}

void ProcessSetTable::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  sets_.clear();
}

}  // namespace tfring
