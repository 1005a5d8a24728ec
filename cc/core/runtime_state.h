// Runtime::State: everything one initialized tfring instance owns. Internal to the core.
//
// Threads: user threads call Submit()/RequestStop(); the background thread runs Loop()
// (runtime_loop.cc) and Execute() (runtime_execute.cc) and alone touches `entries`,
// `coordinator`, `fusion_buffer` and the sockets. `mu` guards the queue, the in-flight
// names and the fatal status.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "backend.h"
#include "communicator.h"
#include "coordinator.h"
#include "liveness.h"
#include "response_cache.h"
#include "runtime.h"
#include "tcp_store.h"
#include "timeline.h"

namespace tfring {

struct Runtime::State {
  using Clock = std::chrono::steady_clock;

  // --- fixed after Init ---
  Config config;
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  double timeout_s = 30, cycle_s = 0.001, stall_warning_s = 60, stall_shutdown_s = 0;
  int64_t fusion_threshold = 0;
  size_t chunk_bytes = 1 << 18;
  int spin_us = 0;
  std::unique_ptr<TcpStoreServer> store_server;  // rank 0 with TFRING_STORE_SERVE=1
  std::unique_ptr<TcpStoreClient> store;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<PeerLiveness> liveness;  // started by Init, stopped by Fail/Stop
  int wake_fd = -1;

  // --- shared, guarded by mu ---
  std::mutex mu;
  std::deque<Submission> queue;
  std::set<std::string> in_flight;
  bool broken = false;  // a fatal error happened; every later op fails with `fatal`
  Status fatal;
  Status peer_lost;  // set by the liveness thread; the background thread fails with it
  std::atomic<bool> stop_requested{false};
  std::string stop_reason;  // why this rank leaves (empty: orderly end of the script)
  std::atomic<bool> stopped{false};
  std::condition_variable stopped_cv;

  Timeline timeline;  // rank 0 only; thread-safe

  // --- stats: written by the background thread only, read by any thread, under stats_mu ---
  mutable std::mutex stats_mu;
  RuntimeStats stats;

  // --- background thread only ---
  struct Entry {
    Submission submission;
    Clock::time_point enqueued;
  };
  double last_transport_s = -1;  // set by an Execute* that times its own transport phase
  std::map<std::string, Entry> entries;
  std::unique_ptr<Coordinator> coordinator;  // rank 0
  RequestCache request_cache;                // this rank's requests under rank 0's cache ids
  Clock::time_point first_ready_at{};        // rank 0: when the oldest unsent ready tensor appeared
  Clock::time_point last_stall_check{};
  std::set<std::string> stall_warned;
  std::vector<char> fusion_buffer;
  std::unique_ptr<Backend> gpu_backend;  // created at the first GPU response (device >= 0)
  std::thread thread;

  ~State();

  // user threads
  Status Submit(std::vector<Submission> group);
  void RequestStop();
  void Wake();

  // liveness thread
  void OnPeerLost(const Status& status);

  // background thread (runtime_loop.cc)
  void Loop();
  void DrainQueue();
  Status ReadControl(int wait_ms_hint);
  Status HandleControl(int from_rank, const std::string& bytes);
  Status ResolveCachedNames(Response* response) const;  // fills names sent as cache ids
  void CountControlBytes(size_t bytes, size_t messages);
  void MaybeRespond();
  void InspectStalls();
  void WaitForWork();
  void Fail(const Status& status);  // fatal: tell peers, fail everything, become broken
  void Stop();                      // orderly end of the loop
  void FailAllPending(const Status& status);
  Status RefineCause(const Status& status);

  // background thread (runtime_execute.cc)
  // `scheduled`: when this rank got the response (rank 0: when it decided it).
  Status Execute(const Response& response, Clock::time_point scheduled);
  void Complete(const std::string& name, const Status& status);
  void RecordStats(const Response& r, const std::vector<Entry*>& group, Clock::time_point scheduled,
                   Clock::time_point start);
  Status ExecuteAllreduce(const Response& r, std::vector<Entry*>& entries);
  Status ExecuteAllgather(const Response& r, Entry& e);
  Status ExecuteBroadcast(const Response& r, Entry& e);
  Status ExecuteAlltoall(const Response& r, Entry& e);
  Status ExecuteReducescatter(const Response& r, Entry& e);
  Status ExecuteOnGpu(const Response& r, std::vector<Entry*>& entries);  // device >= 0
};

// Local checks done at enqueue time (runtime_validate.cc).
Status ValidateSubmission(Submission& s, int rank, int size);

}  // namespace tfring
