// Runtime: the one process-wide handle of tfring (Runtime::Global()), shared by the pybind
// module and the TF op library because both link this one libtfring_core.so. A facade over
// the current Job (job.h), which it creates at Init() and ends at Shutdown().
//
// Life cycle: Init() -> Enqueue()... -> Shutdown(); Init() again after Shutdown() is allowed.
// Tests may create several Runtime objects in one process (ranks as threads).
//
// Enqueue contract:
//   * Thread-safe; never blocks on the network. It validates the submission locally and
//     returns an error at once (kInvalidArgument, kUnimplemented, kPrecondition, or the
//     job's fatal error) without calling `done`; otherwise it returns OK and `done` will be
//     called exactly once, later, from the background thread.
//   * `input` and `output` (and memory returned by `allocate_output`) are owned by the
//     caller and must stay valid until `done` runs.
//   * Names are the negotiation keys: equal on every rank, unique while in flight.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/config.h"
#include "control/messages.h"
#include "base/runtime_stats.h"
#include "control/submission.h"

namespace tfring {

class Job;  // job.h: what an initialized runtime runs

class Runtime {
 public:
  Runtime();
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  static Runtime& Global();

  // Blocking (rendezvous, bounded by TFRING_START_TIMEOUT_S). kPrecondition if already
  // initialized; kInvalidArgument naming the variable for a bad setting.
  Status Init(const std::map<std::string, std::string>& overrides, bool read_env = true);
  // Blocking (bounded by TFRING_SHUTDOWN_TIMEOUT_S). Fails every pending op with
  // kPrecondition. Idempotent. A non-empty `reason` (e.g. "uncaught RuntimeError: ...")
  // tells the other ranks why this one leaves: their pending and later ops fail with it.
  Status Shutdown(const std::string& reason = "");

  bool initialized() const;
  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  int cross_rank() const;
  int cross_size() const;
  // How long a thread waiting for a collective may spin (yielding) before it sleeps:
  // TFRING_SPIN_US, or 0 where this host's ranks outnumber their CPUs. 0 before Init.
  int spin_us() const;
  // 1 when every host runs the same number of ranks, 0 when not, -1 before Init. Hosts are
  // told apart as shared memory does (hostname, boot id and TFRING_CROSS_RANK).
  int homogeneous() const;
  // The effective configuration (empty before Init).
  std::map<std::string, ParamValue> config_values() const;
  RuntimeStats stats() const;
  // OK while collectives can still succeed; once the job is broken (a peer lost or frozen,
  // an abort, a shutdown) the error every later collective fails with. kPrecondition before
  // Init. Never blocks; any thread. For waits outside the core (e.g. a rank waiting in the
  // store for rank 0's checkpoint) that must end when the job does.
  Status Health() const;

  // Rank 0 writes a Chrome-trace JSON of every collective to `path` until StopTimeline();
  // other ranks accept the call and do nothing (rank 0 alone sees every rank's readiness).
  Status StartTimeline(const std::string& path);
  Status StopTimeline();
  // Whether this rank writes that timeline now (rank 0, started and not stopped): for a
  // caller that reads clocks only for it (cc/tf/xla/inflight.cc asks once per group). Any
  // thread.
  bool TimelineActive() const;
  // Spans on `tensor`'s row of that timeline (e.g. the XLA custom calls' XLA_START,
  // XLA_IN_FLIGHT and XLA_DONE), with one look-up of the job and its timeline for them all;
  // a no-op unless this is rank 0 writing one. Any thread.
  struct TimelineSpanTimes {
    const char* what;
    std::chrono::steady_clock::time_point begin, end;
  };
  void TimelineSpans(const std::string& tensor, std::initializer_list<TimelineSpanTimes> spans);

  // Process sets (process_sets.h). Every rank registers the same sets under the same ids,
  // in the same order, and meets the others at a barrier before using a new id (the Python
  // layer, tfring/_basics/process_sets.py, does both). Never block; any thread. kPrecondition
  // before Init; kInvalidArgument for a bad id or list (message names them). Removing a set
  // with collectives in flight on it is the caller's error (they may fail or hang until
  // TFRING_TIMEOUT_S). Shutdown() forgets every set.
  Status AddProcessSet(int32_t id, const std::vector<int32_t>& ranks);
  Status RemoveProcessSet(int32_t id);
  // Sorted global ranks of `id` (0: every rank); kInvalidArgument for an unknown id.
  Status ProcessSetMembers(int32_t id, std::vector<int32_t>* ranks) const;
  // This rank's index in set `id` (-1 when it is not a member) and the set's size (the job's
  // rank and size for id 0), e.g. for the rows a reducescatter keeps. kPrecondition before
  // Init; kInvalidArgument for an unknown id.
  Status ProcessSetPosition(int32_t id, int* rank, int* size) const;

  Status Enqueue(Submission submission);
  // Submits several tensors at once: they reach the coordinator together and are fused.
  Status EnqueueGroup(std::vector<Submission> group);

 private:
  // The current job, or null before Init / after Shutdown. Any thread; the copy keeps the
  // job alive while the caller uses it.
  std::shared_ptr<Job> CurrentJob() const;

  mutable std::mutex mu_;  // guards the job_ pointer (not the job's own fields)
  std::shared_ptr<Job> job_;
};

}  // namespace tfring
