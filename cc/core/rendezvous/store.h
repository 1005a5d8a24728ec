// Store: the small key-value rendezvous every rank shares (modelled on gloo / c10d).
//
//   Set(key, value)            publish bytes under key (overwrites)
//   Get(key, timeout)          block until key exists, return its value
//   Add(key, delta)            atomic counter, returns the new value
//   Wait(keys, timeout)        block until all keys exist
//
// Every blocking call takes a timeout and returns kTimeout naming the missing keys.
// Implementations are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfring {

class Store {
 public:
  virtual ~Store() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  virtual Status Get(const std::string& key, double timeout_s, std::string* value) = 0;
  virtual Status Add(const std::string& key, int64_t delta, int64_t* result) = 0;
  virtual Status Wait(const std::vector<std::string>& keys, double timeout_s) = 0;
};

// Prepends a fixed prefix to every key (namespaces one job or one phase in a shared store).
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  Status Set(const std::string& key, const std::string& value) override {
    return inner_->Set(prefix_ + key, value);
  }
  Status Get(const std::string& key, double timeout_s, std::string* value) override {
    return inner_->Get(prefix_ + key, timeout_s, value);
  }
  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    return inner_->Add(prefix_ + key, delta, result);
  }
  Status Wait(const std::vector<std::string>& keys, double timeout_s) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    return inner_->Wait(full, timeout_s);
  }

 private:
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace tfring
