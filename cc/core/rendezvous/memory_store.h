// MemoryStore: an in-process Store for tests that run ranks as threads.
// Thread-safe (one mutex + condition variable).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "rendezvous/store.h"

namespace tfring {

class MemoryStore : public Store {
 public:
  Status Set(const std::string& key, const std::string& value) override;
  Status Get(const std::string& key, double timeout_s, std::string* value) override;
  Status Add(const std::string& key, int64_t delta, int64_t* result) override;
  Status Wait(const std::vector<std::string>& keys, double timeout_s) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
};

// Shared by MemoryStore and the TCP store server: waits on `cv` (with `lock` held on the
// mutex that guards `data`) until every key exists or the timeout passes.
Status WaitForKeys(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                   const std::map<std::string, std::string>& data,
                   const std::vector<std::string>& keys, double timeout_s,
                   const bool* stopping = nullptr);

}  // namespace tfring
