// Helpers shared by the core's GoogleTest suites: ranks as threads with bounded waits,
// an in-process Communicator mesh over 127.0.0.1, status matchers, a scoped env var.
//
// Every wait here is bounded: a rank that does not finish in time fails the test, the
// caller's `on_timeout` (e.g. aborting every communicator) unblocks it, and if even that
// does not help the process aborts with a message instead of hanging CI.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/auth.h"
#include "transport/communicator.h"
#include "rendezvous/memory_store.h"
#include "control/messages.h"
#include "base/status.h"

namespace tfring {
namespace testing_util {

// A response's tensors, field by field, for comparisons.
inline std::vector<std::string> NamesOf(const Response& r) {
  std::vector<std::string> out;
  for (const auto& t : r.tensors) out.push_back(t.name);
  return out;
}
inline std::vector<int32_t> CacheIdsOf(const Response& r) {
  std::vector<int32_t> out;
  for (const auto& t : r.tensors) out.push_back(t.cache_id);
  return out;
}
inline std::vector<bool> NewCacheIdsOf(const Response& r) {
  std::vector<bool> out;
  for (const auto& t : r.tensors) out.push_back(t.cache_id_is_new);
  return out;
}

// gtest printing of a Status in failure messages.
inline std::string Show(const Status& st) { return st.ToString(); }

#define TFRING_EXPECT_OK(expr)                              \
  do {                                                      \
    ::tfring::Status _s = (expr);                           \
    EXPECT_TRUE(_s.ok()) << #expr << " -> " << _s.ToString(); \
  } while (0)
#define TFRING_ASSERT_OK(expr)                              \
  do {                                                      \
    ::tfring::Status _s = (expr);                           \
    ASSERT_TRUE(_s.ok()) << #expr << " -> " << _s.ToString(); \
  } while (0)

// Expects `st` to carry `code` and every one of `parts` in its message.
inline ::testing::AssertionResult HasError(const Status& st, ErrorCode code,
                                           const std::vector<std::string>& parts) {
  if (st.code() != code) {
    return ::testing::AssertionFailure()
           << "expected " << ErrorCodeName(code) << ", got " << st.ToString();
  }
  for (const auto& p : parts) {
    if (st.message().find(p) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message lacks '" << p << "': " << st.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Runs fn(rank) for rank in [0, size) on one thread each and returns every rank's Status.
// A rank still running after `timeout_s` fails the test; `on_timeout` is then called once
// so the stuck ranks can return (their Status reads "test: timed out").
inline std::vector<Status> RunRanks(int size, double timeout_s,
                                    const std::function<Status(int)>& fn,
                                    const std::function<void()>& on_timeout = nullptr) {
  std::vector<std::future<Status>> futures;
  for (int r = 0; r < size; ++r) futures.push_back(std::async(std::launch::async, fn, r));
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(timeout_s));
  std::vector<Status> out(size);
  bool timed_out = false;
  for (int r = 0; r < size; ++r) {
    if (futures[r].wait_until(deadline) != std::future_status::ready) {
      timed_out = true;
      break;
    }
  }
  if (timed_out) {
    ADD_FAILURE() << "ranks did not finish within " << timeout_s << " s (hang)";
    if (on_timeout) on_timeout();
    auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    for (auto& f : futures) {
      if (f.wait_until(grace) != std::future_status::ready) {
        std::fprintf(stderr, "FATAL: a rank thread is still stuck after abort; giving up\n");
        std::abort();
      }
    }
  }
  for (int r = 0; r < size; ++r) {
    out[r] = futures[r].get();
    if (timed_out && out[r].ok()) out[r] = Status::Timeout("test: timed out");
  }
  return out;
}

// Fails the test for every rank whose status is not OK.
inline void ExpectAllOk(const std::vector<Status>& statuses, const std::string& what) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << what << ": rank " << r << ": " << statuses[r].ToString();
  }
}

// A full mesh of Communicators, one per rank, built over a MemoryStore by rank threads.
struct Mesh {
  std::vector<std::unique_ptr<Communicator>> comms;
  int size() const { return static_cast<int>(comms.size()); }
  Communicator& operator[](int r) { return *comms[r]; }
  void AbortAll() {
    for (auto& c : comms) {
      if (c) c->Abort();
    }
  }
};

struct MeshOptions {
  int size = 2;
  bool shm = false;
  size_t shm_ring_bytes = 1 << 16;
  bool shm_control = true;
  int control_fanout = 4;  // CommunicatorOptions::control_fanout
  bool lazy_data = false;  // CommunicatorOptions::lazy_data
  double timeout_s = 10;
  double start_timeout_s = 10;
  CmaMode cma = CmaMode::kOff;  // single-copy sends (shm only)
  size_t cma_min_bytes = 1 << 20;
  // Per-rank override of `cma` (mixed settings across ranks); empty: `cma` everywhere.
  std::vector<CmaMode> cma_per_rank;
  // Emulated hosts: ranks r / ranks_per_host share a host id (0: every rank on one host);
  // with interleave_hosts, ranks r % (size / ranks_per_host) do (host 0: ranks 0, H, 2H...).
  int ranks_per_host = 0;
  bool interleave_hosts = false;
  // Hostnames: "host<host index>" as on real hosts (every rank of a host has its name),
  // else "host<rank>" (messages then tell the ranks of one host apart).
  bool hostnames_by_host = false;
  // The rendezvous store (e.g. one that counts requests); null: a fresh MemoryStore.
  std::shared_ptr<Store> store;
  // Per rank, the store that rank uses instead (views of one store, e.g. counting one rank's
  // reads); empty: `store` everywhere.
  std::vector<std::shared_ptr<Store>> rank_stores;
};

inline Status MakeMesh(const MeshOptions& o, Mesh* mesh) {
  std::shared_ptr<Store> store = o.store ? o.store : std::make_shared<MemoryStore>();
  std::string secret = RandomHex(16);
  mesh->comms.clear();
  mesh->comms.resize(o.size);
  auto statuses = RunRanks(o.size, o.start_timeout_s + 10, [&](int r) {
    CommunicatorOptions opt;
    opt.rank = r;
    opt.size = o.size;
    opt.secret = secret;
    opt.start_timeout_s = o.start_timeout_s;
    opt.timeout_s = o.timeout_s;
    opt.shm = o.shm;
    opt.shm_ring_bytes = o.shm_ring_bytes;
    opt.shm_control = o.shm_control;
    opt.control_fanout = o.control_fanout;
    opt.lazy_data = o.lazy_data;
    const int host = o.interleave_hosts ? r % (o.size / o.ranks_per_host) : r / std::max(o.ranks_per_host, 1);
    opt.host_id = o.ranks_per_host > 0 ? "test-host-" + std::to_string(host) : "test-host";
    opt.hostname = "host" + std::to_string(o.hostnames_by_host ? host : r);
    opt.cma = o.cma_per_rank.empty() ? o.cma : o.cma_per_rank[r];
    opt.cma_min_bytes = o.cma_min_bytes;
    return Communicator::Create(opt, o.rank_stores.empty() ? store : o.rank_stores[r], &mesh->comms[r]);
  });
  for (int r = 0; r < o.size; ++r) {
    if (!statuses[r].ok()) return statuses[r].WithContext("mesh rank " + std::to_string(r));
  }
  return Status::OK();
}

// Sets (or unsets, with nullopt) an environment variable for the scope; restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A completion callback whose result can be awaited with a bound. Records (and fails the
// test on) a second call, which would break the "done exactly once" contract.
class Completion {
 public:
  Completion() : state_(std::make_shared<State>()) {}
  std::function<void(const Status&)> Callback() {
    auto s = state_;
    return [s](const Status& st) {
      std::lock_guard<std::mutex> lock(s->mu);
      if (++s->calls == 1) s->status = st;
      s->cv.notify_all();
    };
  }
  // Sets the result directly (Enqueue refused the op, so `done` will never run).
  void Refused(const Status& st) { Callback()(st); }
  // The status, or kInternal "test: no completion" after `timeout_s`.
  Status Wait(double timeout_s) {
    std::unique_lock<std::mutex> lock(state_->mu);
    bool done = state_->cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                    [&] { return state_->calls > 0; });
    if (!done) return Status::Internal("test: no completion within " + std::to_string(timeout_s) + " s");
    return state_->status;
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->calls;
  }

 private:
  struct State {
    mutable std::mutex mu;
    std::condition_variable cv;
    int calls = 0;
    Status status;
  };
  std::shared_ptr<State> state_;
};

}  // namespace testing_util
}  // namespace tfring
