// RequestRelay: what a rank other than 0 sends up the control tree (control_tree.h).
//
// Each such rank gathers its own submissions and what its children pass on, and sends its
// parent one kRequests message at a time (TakeMessage). Requests in full (new or changed
// tensors) go up as they are, with the rank they came from: rank 0 validates them exactly
// as it did before the tree, with the same errors. Cache ids are combined: an id goes up
// as one bit (ControlMessage::subtree_cached) once every rank of this subtree has
// submitted it, so a cached training step costs each rank one message to its parent,
// however many ranks lie below it. An id is reported rank by rank instead wherever rank 0
// must know exactly who submitted it:
//   * an id still incomplete here after `detail_after_s` (a late or stuck rank: rank 0's
//     stall inspector names the ranks that are missing), and every later report of it;
//   * while a rank of this subtree has joined (hvd.join: tensors then complete without the
//     joined ranks, which only rank 0 knows), until the join's response passes down;
//   * an id whose tensor a rank of this subtree submitted in full instead (its request
//     changed: rank 0 must see who sent which to name the mismatch), until a response for
//     that name passes down;
//   * a rank reporting an id again while its first report is pending (rank 0 turns that
//     into the duplicate-name error, as for a request in full).
// A relayed tensor reaches rank 0 once its whole subtree is ready, so rank 0's
// wait-for-slowest counters (Response::ready_wait_s) tell subtrees apart, not the ranks
// inside one; the stall inspector still names single ranks.
// Thread-safety: not thread-safe; owned by the negotiator on the background thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/control_tree.h"
#include "control/messages.h"
#include "base/status.h"

namespace tfring {

// kInternal unless every rank that `message` (from control child `child`) passes on lies in
// the child's subtree (`subtree`: sorted, as ControlTree::SubtreeOf) other than the child
// itself: a protocol bug. Used by the relays and by rank 0.
Status CheckRelayedRanks(int child, const ControlMessage& message, const std::vector<int>& subtree);

class RequestRelay {
 public:
  using Clock = std::chrono::steady_clock;

  // `name_of`: the tensor name of a cache id this rank knows (RequestCache::NameOf), null
  // for another.
  using NameOf = std::function<const std::string*(int32_t id)>;
  RequestRelay(const ControlTree& tree, double detail_after_s, NameOf name_of);

  // This rank's own submissions.
  void AddOwn(const Request& request) { AddRequest(rank_, request); }
  void AddOwnCached(int32_t id, Clock::time_point now);
  // A kRequests message from child `child`. kInternal when it names a rank outside that
  // child's subtree (a protocol bug).
  Status AddFromChild(int child, const ControlMessage& message, Clock::time_point now);
  // Ids incomplete for longer than detail_after_s are reported rank by rank from now on.
  void Age(Clock::time_point now);
  // The join's response passed down: every rank left the joined state; ids combine again.
  void JoinEnded() { joined_ = false; }
  // A response for tensor `name` passed down. If a request in full for it went up, that
  // round is over: what this relay still holds of its ids is dropped (rank 0 heard it
  // rank by rank already).
  void Answered(const std::string& name);

  bool HasMessage() const { return has_message_; }
  // The message for the parent, and a fresh one started.
  ControlMessage TakeMessage();
  // Milliseconds until Age() has something to do, -1 when nothing is incomplete.
  int MillisUntilAging(Clock::time_point now) const;
  // Ids some but not all ranks of this subtree have submitted (tests).
  size_t incomplete() const { return partial_.size(); }

 private:
  struct Partial {
    std::vector<uint8_t> has;  // by index in subtree_
    int count = 0;
    Clock::time_point first;
    bool detail = false;  // reported rank by rank
  };
  void AddRequest(int origin, const Request& request);
  void AddCached(int origin, int32_t id, Clock::time_point now);
  void ReportRank(int origin, int32_t id);
  void ToDetail(int32_t id, Partial& p);
  bool SentInFull(int32_t id) const;
  RankRequests& RelayedFor(int origin);

  const int rank_;
  const double detail_after_s_;
  const NameOf name_of_;
  std::set<std::string> sent_in_full_;  // names of requests passed on in full, not yet answered
  std::vector<int> subtree_;              // this rank and every rank below it, increasing
  std::unordered_map<int, int> index_;    // rank -> index in subtree_
  std::map<int, std::vector<int>> below_;  // child -> its subtree
  std::unordered_map<int32_t, Partial> partial_;
  bool joined_ = false;
  ControlMessage out_;
  bool has_message_ = false;
  std::map<int, size_t> relayed_at_;  // origin -> index in out_.relayed
};

}  // namespace tfring
