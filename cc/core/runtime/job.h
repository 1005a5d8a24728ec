// Job: one initialized tfring instance of this process: its lifecycle, its submission
// queue, its failure state and the background thread that runs it.
//
// Lifecycle: Start() (blocking rendezvous) -> Submit()... -> StopAndJoin(). The background
// thread runs Loop(); each turn is three steps, each with one owner:
//   drain the queue (Job) -> negotiate (Negotiator, negotiator.h) -> execute (Executor,
//   executor.h),
// then sleeps until new work, a control message or a timer wakes it. The negotiator and
// the executor report failures and completions back through JobEvents; the job alone
// decides that the job is broken, tells the peers why and fails everything pending.
//
// Who writes what (every field below says so too):
//   * fixed after Start(): identity, config, store, communicator, control channel;
//   * `mu`: the queue, the in-flight names and the failure state. Writers: user threads
//     (Submit, RequestStop), the liveness thread (OnPeerLost), the background thread
//     (drain, Fail, Released, the loop's end);
//   * background thread only: the negotiator and the executor (and what they own);
//   * thread-safe on their own: the timeline, the process-set table, the stats.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "transport/communicator.h"
#include "base/config.h"
#include "control/control_channel.h"
#include "runtime/executor.h"
#include "runtime/job_events.h"
#include "transport/liveness.h"
#include "runtime/negotiator.h"
#include "control/process_sets.h"
#include "base/runtime_stats.h"
#include "control/submission.h"
#include "rendezvous/tcp_store.h"
#include "base/timeline.h"
#include "base/unique_fd.h"

namespace tfring {

class Job : public JobEvents {
 public:
  // This rank's place in the job (TFRING_RANK, ... as loaded).
  struct Identity {
    int rank = 0, size = 1;
    int local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  };

  ~Job() override;

  // Blocking rendezvous (bounded by TFRING_START_TIMEOUT_S): connects to the job's store,
  // builds the communicator, greets rank 0, then starts the liveness watch and the
  // background thread. On error nothing is left running.
  static Status Start(Config config, std::shared_ptr<Job>* out);

  // User threads. Validates locally and queues `group` (they reach the coordinator
  // together); an error returns at once and no `done` runs. Never blocks on the network.
  Status Submit(std::vector<Submission> group);
  // Asks the background thread to end the job and waits up to TFRING_SHUTDOWN_TIMEOUT_S
  // (then aborts the transfers and waits 2 s more). A non-empty `reason` tells the other
  // ranks why this one leaves. True when the thread ended and was joined; false when it is
  // stuck and was detached: the caller must then keep this Job alive forever.
  bool StopAndJoin(const std::string& reason);
  // OK while collectives can still succeed, else the error every later one fails with.
  // Any thread; never blocks.
  Status Health();

  const Identity& identity() const { return id_; }
  const Config& config() const { return config_; }
  // How long a thread waiting for a collective may spin: TFRING_SPIN_US, or 0 where this
  // host's ranks outnumber their CPUs. Fixed after Start().
  int spin_us() const { return spin_us_; }
  bool homogeneous() const { return comm_->homogeneous(); }
  Timeline& timeline() { return timeline_; }
  ProcessSetTable& process_sets() { return process_sets_; }
  const StatsRecorder& stats() const { return stats_; }

  // JobEvents (background thread).
  bool broken() override;
  void Fail(const Status& status, int origin = -1) override;
  void FailTransfer(const Status& status) override;
  void Released(const std::string& name) override;

 private:
  Job() = default;
  // Start()'s steps, in order.
  void ReadIdentity();
  // TFRING_KEEP_FREED_MEMORY: glibc's malloc keeps freed buffers (base/malloc_policy.h).
  void ApplyMallocPolicy();
  Status ConnectCommunicator();
  void TuneSpinning();
  Status BuildWorkers();
  void StartLivenessWatch();

  // Background thread.
  void Loop();
  void DrainQueue();
  void WaitForWork();
  Status RefineCause(const Status& status, int* origin);
  void FailAllPending(const Status& status);
  void Stop();  // orderly end of the loop
  // Any thread.
  void Wake();
  void RequestStop(const std::string& reason);
  void OnPeerLost(const Status& status);  // the liveness thread

  // --- fixed after Start() ---
  Config config_;
  Identity id_;
  double cycle_s_ = 0.001;
  int spin_us_ = 0;
  std::unique_ptr<TcpStoreServer> store_server_;  // rank 0 with TFRING_STORE_SERVE=1
  std::unique_ptr<TcpStoreClient> store_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<ControlChannel> control_;
  std::unique_ptr<PeerLiveness> liveness_;  // started by Start, stopped by Fail/Stop
  UniqueFd wake_fd_;  // eventfd: Submit() and the liveness thread wake the loop
  std::thread thread_;

  // --- shared, guarded by mu_ ---
  std::mutex mu_;
  std::deque<Submission> queue_;
  // Wake-ups without a syscall: while the background thread spins (`spinning_`) it looks
  // at `queued_` (the queue's size, written under mu_) itself, and Submit() skips the
  // eventfd. Both sides store then load with seq_cst, so a submission never meets a thread
  // that has just stopped looking without one of them seeing the other.
  std::atomic<size_t> queued_{0};
  std::atomic<bool> spinning_{false};
  std::set<std::string> in_flight_;
  bool broken_ = false;  // a fatal error happened; every later op fails with `fatal_`
  Status fatal_;
  int failure_origin_ = -1;  // with `broken_` by a failure: the rank it started on
  Status peer_lost_;         // set by the liveness thread; the background thread fails with it
  std::atomic<bool> stop_requested_{false};
  std::string stop_reason_;  // why this rank leaves (empty: orderly end of the script)
  std::atomic<bool> stopped_{false};
  std::condition_variable stopped_cv_;

  // --- thread-safe on their own ---
  Timeline timeline_;            // rank 0 only
  ProcessSetTable process_sets_;  // ids other than 0 (process_sets.h); read by the coordinator
  StatsRecorder stats_;

  // --- background thread only ---
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Negotiator> negotiator_;
};

}  // namespace tfring
