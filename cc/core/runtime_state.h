// Runtime::State: everything one initialized tfring instance owns. Internal to the core.
//
// Threads: user threads call Submit()/RequestStop(); the liveness thread calls
// OnPeerLost(); the background thread runs Loop(), which alone touches the fields marked
// "background thread only". Each turn of the loop is three phases:
//   drain the queue -> negotiate (runtime_loop.cc) -> execute (runtime_execute.cc).
// Negotiation turns requests into Responses (rank 0 decides, every rank receives them in
// the same order) and schedules them; execution runs the scheduled responses, in order, on
// a Backend. `mu` guards the queue, the in-flight names and the failure state.
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
#include "control_channel.h"
#include "coordinator.h"
#include "liveness.h"
#include "process_sets.h"
#include "response_cache.h"
#include "runtime.h"
#include "stall_inspector.h"
#include "tcp_store.h"
#include "timeline.h"

namespace tfring {

struct Runtime::State {
  using Clock = std::chrono::steady_clock;

  // --- fixed after Init ---
  Config config;
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  double timeout_s = 30, cycle_s = 0.001;
  int spin_us = 0;
  std::unique_ptr<TcpStoreServer> store_server;  // rank 0 with TFRING_STORE_SERVE=1
  std::unique_ptr<TcpStoreClient> store;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<PeerLiveness> liveness;  // started by Init, stopped by Fail/Stop
  int wake_fd = -1;

  // --- shared, guarded by mu ---
  std::mutex mu;
  std::deque<Submission> queue;
  // Wake-ups without a syscall: while the background thread spins (`spinning`) it looks at
  // `queued` (the queue's size, written under mu) itself, and Submit() skips the eventfd.
  // Both sides store then load with seq_cst, so a submission never meets a thread that has
  // just stopped looking without one of them seeing the other.
  std::atomic<size_t> queued{0};
  std::atomic<bool> spinning{false};
  std::set<std::string> in_flight;
  bool broken = false;  // a fatal error happened; every later op fails with `fatal`
  Status fatal;
  int failure_origin = -1;  // with `broken` by a failure: the rank it started on
  Status peer_lost;  // set by the liveness thread; the background thread fails with it
  std::atomic<bool> stop_requested{false};
  std::string stop_reason;  // why this rank leaves (empty: orderly end of the script)
  std::atomic<bool> stopped{false};
  std::condition_variable stopped_cv;

  // --- thread-safe on their own ---
  Timeline timeline;  // rank 0 only
  ProcessSetTable process_sets;  // ids other than 0 (process_sets.h); read by the coordinator
  StatsRecorder stats;

  // --- background thread only ---
  struct Entry {  // a submission between Submit and its completion
    Submission submission;
    Clock::time_point enqueued;
  };
  struct Scheduled {  // a negotiated response waiting for execution
    Response response;
    Clock::time_point at;  // when this rank got it (rank 0: when it decided it)
  };
  std::map<std::string, Entry> entries;
  std::deque<Scheduled> scheduled;
  std::unique_ptr<ControlChannel> control;
  std::unique_ptr<Coordinator> coordinator;        // rank 0
  std::unique_ptr<StallInspector> stall_inspector;  // rank 0
  RequestCache request_cache;  // this rank's requests under rank 0's cache ids
  // A peer's orderly shutdown (an abort with kPrecondition) read while responses that came
  // before it were still scheduled here: those run first (the peer did its part of them
  // before leaving; if it did not, its closed link fails them with this cause), then the
  // loop fails the job with it. Set by HandleControl, consumed by Loop.
  Status departure;
  int departure_origin = -1;
  bool joined = false;  // this rank's join is pending: it adds zeros to the others' allreduces
  Clock::time_point first_ready_at{};  // rank 0: when the oldest unsent ready tensor appeared
  std::unique_ptr<Backend> cpu_backend;
  std::unique_ptr<Backend> gpu_backend;  // created at the first GPU response (device >= 0)
  std::thread thread;

  ~State();

  // user threads (runtime.cc)
  Status Submit(std::vector<Submission> group);
  void RequestStop();
  void Wake();

  // liveness thread (runtime.cc)
  void OnPeerLost(const Status& status);

  // background thread: lifecycle and negotiation (runtime_loop.cc)
  void Loop();
  bool IsBroken();
  void DrainQueue();
  void Negotiate();
  Status HandleControl(int from_rank, ControlMessage& message);
  void MaybeRespond();
  // Accepts a negotiated response for execution: fills names sent as cache ids, checks
  // that this rank submitted every tensor it names, learns new cache ids.
  Status Schedule(Response response, Clock::time_point at);
  // What a joined rank contributes to names[i] of `r`, which it never submitted: zeros of
  // the tensor's size (an allreduce), or nothing (a barrier).
  Entry JoinedContribution(const Response& r, size_t i);
  void WaitForWork();
  // Fatal and idempotent (the first failure wins): tells the peers (an abort carrying
  // `origin`, the rank the failure started on; -1 = this one), fails everything pending,
  // and leaves the job broken.
  void Fail(const Status& status, int origin = -1);
  // Fail() for a failed send or transfer, with the root cause a peer reports, if any.
  void FailTransfer(const Status& status);
  Status RefineCause(const Status& status, int* origin);
  void Stop();  // orderly end of the loop
  void FailAllPending(const Status& status);

  // background thread: execution (runtime_execute.cc)
  void ExecuteScheduled();
  Status Execute(const Response& response, Clock::time_point scheduled_at);
  Status BackendFor(const Response& response, Backend** backend);
  BackendContext MakeBackendContext();
  void Complete(const std::string& name, const Status& status);
  void RecordStats(const Response& r, const std::vector<Entry*>& group, Clock::time_point scheduled_at,
                   Clock::time_point start, const ExecutionTimings& timings);
};

// Local checks done at enqueue time (runtime_validate.cc).
// A request on a process set other than the global one is checked against `sets` (member,
// root in the set, splits per member) and its shape rules use the set's size.
Status ValidateSubmission(Submission& s, int rank, int size, const ProcessSetTable& sets);

}  // namespace tfring
