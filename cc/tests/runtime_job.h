// A job of several tfring::Runtime objects in one process (ranks as threads) rendezvousing
// through a TcpStoreServer, and small helpers to submit float32 allreduces to it. Shared by
// the runtime and stats tests.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rendezvous/auth.h"
#include "runtime/runtime.h"
#include "rendezvous/tcp_store.h"
#include "test_util.h"

namespace tfring {
namespace testing_util {

inline constexpr double kOpTimeoutS = 15;  // generous bound on any one completion

inline std::atomic<int> g_job_counter{0};

// How a multi-rank test job carries its traffic: shared memory or TCP, and the control
// tree's fanout (control_tree.h; 0: the star around rank 0; 1: a chain, in which every
// rank passes on the requests and responses of the ranks after it).
// And when data connections are made (TFRING_DATA_CONNECTIONS: a full mesh, or lazily).
struct JobSetup {
  bool shm = false;
  int control_fanout = 0;
  bool lazy = false;
};
inline std::map<std::string, std::string> SetupOverrides(const JobSetup& setup) {
  return {{"TFRING_SHM", setup.shm ? "1" : "0"},
          {"TFRING_CONTROL_FANOUT", std::to_string(setup.control_fanout)},
          {"TFRING_DATA_CONNECTIONS", setup.lazy ? "lazy" : "all"}};
}
inline std::string SetupName(const ::testing::TestParamInfo<JobSetup>& info) {
  return std::string(info.param.shm ? "shm" : "tcp") + (info.param.control_fanout == 1 ? "_chain" : "") +
         (info.param.lazy ? "_lazy" : "");
}
// TCP and shared memory with the star and a full mesh; both with the chain and lazy data
// connections.
inline auto JobSetups() {
  return ::testing::Values(JobSetup{false, 0, false}, JobSetup{true, 0, false}, JobSetup{false, 1, true},
                           JobSetup{true, 1, true});
}

// A job of `size` Runtime objects. Buffers handed to the runtime are owned by the ThreadedJob and
// freed only after every rank has shut down (so a failing test never leaves the background
// thread writing into freed memory).
class ThreadedJob {
 public:
  explicit ThreadedJob(int size, std::map<std::string, std::string> extra = {},
               std::function<void(int, std::map<std::string, std::string>&)> per_rank = nullptr)
      : size_(size), extra_(std::move(extra)), per_rank_(std::move(per_rank)) {
    secret_ = RandomHex(16);
    Status st = server_.Start("127.0.0.1", 0, secret_);
    EXPECT_TRUE(st.ok()) << st.ToString();
    for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Runtime>());
    job_id_ = "job" + std::to_string(g_job_counter.fetch_add(1));
  }
  ~ThreadedJob() {
    ShutdownAll();
    server_.Stop();
  }

  std::map<std::string, std::string> Overrides(int r) const {
    std::map<std::string, std::string> o = {
        {"TFRING_RANK", std::to_string(r)},
        {"TFRING_SIZE", std::to_string(size_)},
        {"TFRING_STORE_ADDR", "127.0.0.1:" + std::to_string(server_.port())},
        {"TFRING_SECRET", secret_},
        {"TFRING_JOB_ID", job_id_},
        {"TFRING_TIMEOUT_S", "5"},
        {"TFRING_START_TIMEOUT_S", "10"},
        {"TFRING_SHUTDOWN_TIMEOUT_S", "3"},
        {"TFRING_SPIN_US", "0"},  // ranks share 2 cores: never spin
        {"TFRING_SHM_RING_BYTES", "65536"},
        {"TFRING_LOG_LEVEL", "error"},
    };
    for (const auto& kv : extra_) o[kv.first] = kv.second;
    if (per_rank_) per_rank_(r, o);
    return o;
  }

  // Initializes every rank (each Init blocks until the rendezvous completes).
  Status InitAll() {
    auto statuses = RunRanks(size_, 30, [&](int r) { return ranks_[r]->Init(Overrides(r), false); });
    for (int r = 0; r < size_; ++r) {
      if (!statuses[r].ok()) return statuses[r].WithContext("init of rank " + std::to_string(r));
    }
    return Status::OK();
  }
  void ShutdownAll() {
    RunRanks(size_, 30, [&](int r) { return ranks_[r] ? ranks_[r]->Shutdown() : Status::OK(); });
  }
  // Destroys rank r's Runtime object (its destructor shuts it down).
  void Destroy(int r) { ranks_[r].reset(); }

  int size() const { return size_; }
  Runtime& operator[](int r) { return *ranks_[r]; }

  template <typename T>
  T* Alloc(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.emplace_back(n * sizeof(T) + 16);
    return reinterpret_cast<T*>(buffers_.back().data());
  }

 private:
  int size_;
  std::map<std::string, std::string> extra_;
  std::function<void(int, std::map<std::string, std::string>&)> per_rank_;
  std::string secret_, job_id_;
  TcpStoreServer server_;
  std::mutex mu_;
  std::deque<std::vector<char>> buffers_;
  std::vector<std::unique_ptr<Runtime>> ranks_;  // destroyed (shut down) before the buffers
};

// Enqueues and returns a Completion; when Enqueue refuses, the Completion holds that error.
inline Completion Submit(Runtime& rt, Submission s) {
  Completion c;
  s.done = c.Callback();
  Status st = rt.Enqueue(std::move(s));
  if (!st.ok()) c.Refused(st);
  return c;
}

// Enqueues `group` as one group, appending one Completion per submission to `done`.
inline Status SubmitGroup(Runtime& rt, std::vector<Submission> group, std::vector<Completion>* done) {
  for (auto& s : group) {
    done->emplace_back();
    s.done = done->back().Callback();
  }
  return rt.EnqueueGroup(std::move(group));
}

inline Submission Allreduce(const std::string& name, const float* in, float* out, int64_t n,
                     ReduceOp op = ReduceOp::kSum) {
  Submission s;
  s.request.name = name;
  s.request.attrs.op = OpType::kAllreduce;
  s.request.attrs.dtype = DataType::kFloat32;
  s.request.attrs.reduce_op = op;
  s.request.shape = {n};
  s.input = in;
  s.output = out;
  return s;
}

inline float Input(int rank, int64_t i) { return static_cast<float>((rank + 1) * (i % 7 + 1)); }

// Sum over ranks of Input(r, i).
inline float SumOfInputs(int size, int64_t i) { return static_cast<float>(size * (size + 1) / 2 * (i % 7 + 1)); }

inline float* FilledInput(ThreadedJob& job, int rank, int64_t n) {
  float* in = job.Alloc<float>(n);
  for (int64_t i = 0; i < n; ++i) in[i] = Input(rank, i);
  return in;
}

// Runs one float32 allreduce named `name` on every rank and checks the result.
inline void ExpectAllreduceWorks(ThreadedJob& job, const std::string& name, int64_t n = 10) {
  std::vector<Completion> done;
  std::vector<float*> outs;
  for (int r = 0; r < job.size(); ++r) {
    outs.push_back(job.Alloc<float>(n));
    done.push_back(Submit(job[r], Allreduce(name, FilledInput(job, r, n), outs[r], n)));
  }
  for (int r = 0; r < job.size(); ++r) {
    Status st = done[r].Wait(kOpTimeoutS);
    ASSERT_TRUE(st.ok()) << name << " on rank " << r << ": " << st.ToString();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(outs[r][i], SumOfInputs(job.size(), i)) << name << " " << i;
  }
}

}  // namespace testing_util
}  // namespace tfring
