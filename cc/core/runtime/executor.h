// Executor: this rank's tensors between submission and completion, and the collectives
// that complete them.
//
// The job's loop hands it every drained submission (Add), the negotiator hands it every
// negotiated response (EntryFor while checking one, then Schedule), and the loop runs what
// was scheduled (RunScheduled), in order, on a Backend: CpuBackend for host memory, the
// GPU backend (created at the first response with device >= 0) for device memory. The
// same responses run in the same order on every rank.
//
// Threads: background thread only (the job's loop), every method and field. The executor
// is the one writer of its entries, its schedule, `joined` and its backends; it reports
// completions (Released) and transfer failures to the job through JobEvents.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "runtime/job_events.h"
#include "runtime/link_watch.h"
#include "control/messages.h"
#include "base/runtime_stats.h"
#include "control/submission.h"

namespace tfring {

class Communicator;
class Timeline;

class Executor {
 public:
  using Clock = std::chrono::steady_clock;

  // Everything is owned by the job and outlives the executor. `store` is null when the job
  // has one rank.
  struct Wiring {
    int rank = 0;
    int size = 1;
    const Config* config = nullptr;
    Store* store = nullptr;
    Communicator* comm = nullptr;
    Timeline* timeline = nullptr;
    StatsRecorder* stats = nullptr;
    JobEvents* events = nullptr;
  };
  explicit Executor(const Wiring& wiring);
  ~Executor();

  // Takes a submission this rank drained from its queue; it completes when a response
  // naming it runs (or when FailAll does). A join makes this rank contribute zeros to the
  // others' allreduces until the join's own response runs.
  void Add(Submission submission, Clock::time_point enqueued);
  // The request this rank holds for `response.tensors[i]`; for a rank whose join is pending,
  // a zero contribution (allreduce) or an empty one (barrier) added now. Null when this
  // rank never submitted the tensor.
  const Request* EntryFor(const Response& response, size_t i);
  // Queues a checked response for RunScheduled. `at`: when this rank got it (rank 0: when
  // it decided it).
  void Schedule(Response response, Clock::time_point at);
  // Queues the autotuner's values (control/tunables.h) behind what is scheduled: the
  // backends switch to them once the responses before run. `after_responses`: how many
  // responses this rank had received from rank 0 by then, the same on every rank (the info
  // log "autotune: applied after response N: ..." names it).
  void ScheduleTuning(std::vector<double> values, int64_t after_responses);
  bool HasScheduled() const { return !scheduled_.empty(); }
  // Runs every scheduled response, in order, until none is left or the job is broken. A
  // failed transfer stops it and is returned (the job fails with it).
  Status RunScheduled();

  // Tensors this rank holds (drained, not yet completed).
  bool idle() const { return entries_.empty(); }
  // For the job's failure log: "[nothing pending on this rank]" or "[N pending on this
  // rank: a, b, ...]" (names cut after ~200 characters).
  std::string PendingSummary() const;
  // Fails every held tensor and `unsent` (submissions never drained) with `status`, and
  // drops the schedule. Used once the job is broken.
  void FailAll(std::deque<Submission> unsent, const Status& status);
  // The job is ending (Backend::Close): `clean` when it ends by shutdown() without a
  // failure. Called once, before the job's transports close.
  void CloseBackends(bool clean);

 private:
  struct Entry {
    Submission submission;
    Clock::time_point enqueued;
  };
  struct Scheduled {
    Response response;
    Clock::time_point at;
    std::vector<double> tuning;  // non-empty: no response, the autotuner's values (ScheduleTuning)
    int64_t after_responses = 0;
  };
  Status Execute(const Response& response, Clock::time_point scheduled_at);
  Status BackendFor(const Response& response, Backend** backend);
  BackendContext MakeBackendContext() const;
  void Complete(const std::string& name, const Status& status);
  Entry JoinedContribution(const Response& response, size_t i) const;
  void TraceSpans(const Response& response, const std::vector<Entry*>& group, Clock::time_point scheduled_at,
                  Clock::time_point start, uint64_t sent_before);
  void CopyLinkStats(std::vector<LinkStats>* links) const;
  void RecordStats(const Response& response, const std::vector<Entry*>& group, Clock::time_point scheduled_at,
                   Clock::time_point start, const ExecutionTimings& timings);

  const Wiring w_;
  std::map<std::string, Entry> entries_;
  std::deque<Scheduled> scheduled_;
  bool joined_ = false;  // this rank's join is pending: it adds zeros to the others' allreduces
  std::unique_ptr<Backend> cpu_backend_;
  std::unique_ptr<Backend> gpu_backend_;   // created at the first GPU response (device >= 0)
  std::unique_ptr<LinkWatch> link_watch_;  // null for one rank (no store)
};

}  // namespace tfring
