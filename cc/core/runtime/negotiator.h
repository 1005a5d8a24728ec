// Negotiator: how this rank agrees with the others on what runs next.
//
// Every rank tells rank 0 which tensors it has ready (requests, or the cache ids of
// requests rank 0 has seen before), up the control tree (control_tree.h): a rank passes on
// its subtree's requests with its own, cache ids combined into one bit per subtree
// (request_relay.h). Rank 0's Coordinator decides when a tensor is ready on every rank,
// fuses and validates, and answers with the same ordered responses, which every rank
// passes on to its children; each rank checks a response against what it submitted and
// hands it to the Executor.
// Rank 0 also runs the stall inspector (tensors some ranks never submit) and waits up to
// TFRING_CYCLE_TIME_MS to fuse more while other tensors are still arriving.
// With TFRING_AUTOTUNE, rank 0's autotuner (control/autotuner.h) sees every message of
// responses before it goes down; a new setting it returns travels in that message
// (ControlMessage::tuning). Every rank applies it at the same response boundary, after that
// message's responses: rank 0 to its coordinator's fusion threshold and its cycle time at
// once (they shape only later decisions), ranks other than 0 to their control hold on
// receipt, and every rank to its executor in the schedule's order (Executor::ScheduleTuning),
// so responses received before it still run with the settings they were decided under.
//
// Threads: background thread only (the job's loop), every method and field. The negotiator
// is the one writer of the coordinator, the stall inspector, the request cache and the
// pending departure; it reports failures to the job through JobEvents and never touches
// the job's queue or failure state. The relay (ranks other than 0) is its own as well.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "control/autotuner.h"
#include "control/control_channel.h"
#include "control/coordinator.h"
#include "runtime/executor.h"
#include "runtime/job_events.h"
#include "control/parent_pacer.h"
#include "control/request_relay.h"
#include "control/response_cache.h"
#include "base/runtime_stats.h"
#include "control/stall_inspector.h"
#include "control/submission.h"

namespace tfring {

class Timeline;

class Negotiator {
 public:
  using Clock = std::chrono::steady_clock;

  // Everything is owned by the job and outlives the negotiator. `coordinator` and
  // `stall_inspector` are given on rank 0 only (null elsewhere).
  struct Wiring {
    int rank = 0;
    double cycle_s = 0.001;  // TFRING_CYCLE_TIME_MS
    // How long a relay combines a cache id that part of its subtree has submitted before it
    // reports it rank by rank (RequestRelay).
    double relay_detail_after_s = 1.0;
    // Ranks other than 0: how long new requests are held back while this rank's last
    // message to its parent is unanswered, first and at most (parent_pacer.h; 0: never).
    double control_hold_s = 0;
    double control_hold_max_s = 0;
    const Config* config = nullptr;     // the job's (explicit per-rank settings are not tuned)
    const ControlTree* tree = nullptr;  // the communicator's
    ControlChannel* control = nullptr;
    Executor* executor = nullptr;
    Timeline* timeline = nullptr;
    StatsRecorder* stats = nullptr;
    JobEvents* events = nullptr;
  };
  // `autotuner`: rank 0 with TFRING_AUTOTUNE only (null otherwise).
  Negotiator(const Wiring& wiring, std::unique_ptr<Coordinator> coordinator,
             std::unique_ptr<StallInspector> stall_inspector, std::unique_ptr<Autotuner> autotuner = nullptr);

  // Announces newly drained submissions (rank 0: to its coordinator; others: to the relay,
  // which sends what it can to the parent) and gives them to the executor.
  void Announce(std::deque<Submission> batch);
  // Reads every waiting control message (responses: passed on to the children first) and,
  // on rank 0, answers what is ready and inspects stalls; elsewhere sends the parent what
  // the relay has. Failures go to the job (JobEvents); an orderly departure read while
  // responses were still scheduled is kept for TakeDeparture.
  void Negotiate();
  // A peer's orderly shutdown (an abort with kPrecondition) read while responses that came
  // before it were still scheduled here: those run first (the peer did its part of them
  // before leaving; if it did not, its closed link fails them with this cause), then the
  // loop fails the job with it. OK when there is none.
  const Status& departure() const { return departure_; }
  int departure_origin() const { return departure_origin_; }
  // Microseconds until the negotiator must run without new input: rank 0's fusion cycle
  // ends with ready tensors unanswered, a hold of requests for the parent ends, or the
  // relay reports an incomplete cache id rank by rank. -1 when no such deadline runs (the
  // loop may sleep until new input).
  int64_t MicrosUntilDue() const;

 private:
  Status HandleControl(int from_rank, ControlMessage& message);
  // Rank 0: a child's requests (its own, those it passes on, its subtree's cache ids) into
  // the coordinator.
  Status AddRequests(int child, const ControlMessage& message);
  // Ranks other than 0: responses from the parent, passed on, then scheduled.
  Status TakeResponses(ControlMessage& message);
  // Ranks other than 0: what the relay has, to the parent, unless the pacer holds it back.
  void FlushRelay();
  void MaybeRespond();
  // Accepts a negotiated response for execution: fills names sent as cache ids, checks
  // that this rank submitted every tensor it names, learns new cache ids.
  Status Schedule(Response response, Clock::time_point at);
  // Applies the autotuner's values that arrived after `responses_seen_` responses (see the
  // header comment).
  void ApplyTuning(const std::vector<double>& values);

  const Wiring w_;
  std::unique_ptr<Coordinator> coordinator_;        // rank 0
  std::unique_ptr<StallInspector> stall_inspector_;  // rank 0
  std::unique_ptr<Autotuner> autotuner_;             // rank 0 with TFRING_AUTOTUNE
  RequestCache request_cache_;  // this rank's requests under rank 0's cache ids
  std::unique_ptr<RequestRelay> relay_;  // ranks other than 0
  ParentPacer pacer_;                    // ranks other than 0
  std::map<int, std::vector<int>> subtree_of_child_;  // rank 0
  Status departure_;
  int departure_origin_ = -1;
  Clock::time_point first_ready_at_{};
  double cycle_s_;              // rank 0: TFRING_CYCLE_TIME_MS, or the autotuner's
  Settings tuned_;              // the job's settings with the autotuner's values applied
  int64_t responses_seen_ = 0;  // responses received from rank 0 (rank 0: decided) so far  // rank 0: when the oldest unanswered ready tensor appeared
};

}  // namespace tfring
