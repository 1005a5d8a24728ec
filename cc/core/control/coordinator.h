// Coordinator: rank 0's table of submitted requests, and the decisions made from it.
//
// Rank 0 feeds it every request from every rank (Add). A tensor becomes ready when every
// rank has submitted it; it is then validated (all ranks must agree on op, dtype, shape,
// reduce op, root, scale factors and device) and turned into a Response: a collective, or
// an error naming the tensor, the disagreeing ranks and both values. TakeReady() returns
// the ready responses in readiness order with compatible allreduces fused up to the fusion
// threshold. Each response carries, per rank, how long that rank's request waited at rank 0
// for the last rank's (Response::ready_wait_s; summed over fused tensors): the
// wait-for-the-slowest-rank counter of every rank. With a cache capacity, successful
// responses carry cache ids (response_cache.h) and AddCached() takes a request by id.
// Join (hvd.join): a rank that submits a kJoin request has no more data. From then on a
// tensor is complete once every rank that has not joined submitted it; only allreduce (the
// joined ranks add zeros) and barrier may run so, anything else is an error response. The
// join itself completes when every rank joined, with Response::root = the last rank to join.
// Process sets (process_sets.h): a tensor is identified by its name and set (disjoint sets
// may use the same names at once); a request with process_set_id != 0 is complete when every
// member of that set submitted it; only the members are compared, the response carries the
// set's id and members, fusion stays within one set, and no cache ids are assigned. Join
// is supported on the global set only: a set's tensor that a joined member did not submit
// becomes an error response (kPrecondition) instead of waiting forever.
// Pure logic, no I/O: unit-tested directly.
// Thread-safety: not thread-safe; owned by the runtime's background thread on rank 0.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "control/messages.h"
#include "control/process_sets.h"
#include "control/response_cache.h"

namespace tfring {

struct StalledTensor {
  std::string name;
  double waited_s = 0;
  std::vector<int> submitted_ranks;
  std::vector<int> missing_ranks;
};

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;

  // `sets` (may be null: the global set only) is read when a tensor of another set first
  // arrives; it must outlive the coordinator.
  Coordinator(int world_size, int64_t fusion_threshold_bytes, size_t cache_capacity = 0,
              const ProcessSetTable* sets = nullptr)
      : size_(world_size), fusion_threshold_(fusion_threshold_bytes), cache_(cache_capacity), sets_(sets) {}

  // Records `request` from `rank`. A second request with the same name from the same rank
  // while the first is pending becomes an error response for that name.
  void Add(int rank, const Request& request, Clock::time_point now = Clock::now());

  // Records the request `rank` sent as cache id `id`: the one it sent under that id before.
  // kInternal for an id never assigned (the ranks disagree about the cache: a bug).
  Status AddCached(int rank, int32_t id, Clock::time_point now = Clock::now());

  bool HasReady() const { return !ready_.empty(); }
  // The autotuner's fusion threshold for the next TakeReady (autotuner.h).
  void set_fusion_threshold(int64_t bytes) { fusion_threshold_ = bytes; }
  // True while some tensor has been submitted by some, but not all, ranks.
  bool HasPartial() const { return !pending_.empty(); }

  // Ready responses, oldest first, fused. Clears the ready list.
  std::vector<Response> TakeReady();

  // Pending tensors older than `min_wait_s`, for the stall inspector.
  std::vector<StalledTensor> Stalled(double min_wait_s, Clock::time_point now = Clock::now()) const;

 private:
  struct Pending {
    std::vector<Request> by_rank;   // indexed by rank
    std::vector<bool> submitted;
    std::vector<Clock::time_point> arrived;  // indexed by rank
    int count = 0;
    Clock::time_point first_seen;
    std::string duplicate_error;
    std::string name;                // the tensor (pending_ keys a set's names apart)
    int32_t set_id = 0;              // the process set
    std::vector<int32_t> members;    // its sorted global ranks; empty: every rank
    std::string set_error;           // unknown set, or a submitter outside it
  };
  // Every rank submitted it, or joined (a join itself needs every rank).
  bool Complete(const Pending& p) const;
  // Validates a complete tensor into ready_ and forgets it; does nothing otherwise.
  void MaybeReady(std::map<std::string, Pending>::iterator it, Clock::time_point now);
  Response Validate(const std::string& name, const Pending& p) const;
  // Validate()'s steps (coordinator.cc).
  std::string JoinedSetMembers(const std::string& name, const Pending& p) const;
  static std::string FirstDisagreement(const std::string& name, const std::vector<Request>& reqs,
                                       const std::vector<bool>& present);
  std::string JoinConflict(const std::string& name, const Pending& p, const Request& first, ErrorCode* code) const;
  static void FillSizes(const Pending& p, const Request& first, Response* resp);

  int size_;
  int64_t fusion_threshold_;
  CacheAssigner cache_;
  std::map<std::string, Pending> pending_;
  std::vector<bool> joined_ = std::vector<bool>(static_cast<size_t>(size_), false);  // until every rank joined
  int joined_count_ = 0;
  int last_joined_ = -1;
  std::vector<Response> ready_;
  const ProcessSetTable* sets_;
};

// "'name' waited 61 s: submitted by rank(s) 0, 2, missing from rank(s) 1"
std::string DescribeStall(const StalledTensor& stalled);

}  // namespace tfring
