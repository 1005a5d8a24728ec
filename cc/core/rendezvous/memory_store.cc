#include "rendezvous/memory_store.h"

#include <chrono>
#include <cstdlib>

#include "base/deadline.h"

namespace tfring {

Status WaitForKeys(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                   const std::map<std::string, std::string>& data,
                   const std::vector<std::string>& keys, double timeout_s, const bool* stopping) {
  Deadline deadline = Deadline::After(timeout_s);
  for (;;) {
    std::string missing;
    for (const auto& k : keys) {
      if (data.find(k) == data.end()) missing += (missing.empty() ? "" : ", ") + k;
    }
    if (missing.empty()) return Status::OK();
    if (stopping && *stopping) return Status::Aborted("store is shutting down");
    if (deadline.expired()) {
      return Status::Timeout("store keys not set within " + std::to_string(timeout_s) +
                             " s: " + missing);
    }
    cv.wait_until(lock, deadline.when());
  }
}

Status MemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
  return Status::OK();
}

Status MemoryStore::Get(const std::string& key, double timeout_s, std::string* value) {
  std::unique_lock<std::mutex> lock(mu_);
  TFRING_RETURN_IF_ERROR(WaitForKeys(lock, cv_, data_, {key}, timeout_s));
  *value = data_[key];
  return Status::OK();
}

Status MemoryStore::Add(const std::string& key, int64_t delta, int64_t* result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t current = 0;
    auto it = data_.find(key);
    if (it != data_.end()) current = std::strtoll(it->second.c_str(), nullptr, 10);
    current += delta;
    data_[key] = std::to_string(current);
    *result = current;
  }
  cv_.notify_all();
  return Status::OK();
}

Status MemoryStore::Wait(const std::vector<std::string>& keys, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return WaitForKeys(lock, cv_, data_, keys, timeout_s);
}

}  // namespace tfring
