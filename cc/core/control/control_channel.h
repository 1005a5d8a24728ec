// ControlChannel: the negotiation tree over the Communicator's control connections
// (control_tree.h): each rank talks to its parent and its children. Messages are
// ControlMessages (messages.h), encoded here and decoded here, so callers never see bytes.
//
// Two paths per peer, one ordered stream. Between tree neighbours on one host a message
// goes through a shared-memory ring (Communicator::control_shm_tx/rx) when it fits there,
// and through the TCP connection otherwise. Each message carries a per-direction sequence
// number, so the receiver hands them out in send order whichever path each took. The
// ring's reader announces when it is about to sleep in poll() (PollAsleep); a writer
// that sees this sends a one-frame doorbell on TCP, which wakes it. The TCP connection
// alone says that a peer died. Tell() (aborts, shutdown) and Greet() always use TCP and
// are unordered: handled as soon as they arrive.
//
// Threads: the runtime's background thread only. Counters go to the StatsRecorder.
// Every wait is bounded: sends and receives by `timeout_s` (and the communicator's abort
// flag), Tell() by a short fixed deadline. Writing a ring never blocks.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "transport/communicator.h"
#include "control/messages.h"
#include "base/runtime_stats.h"

namespace tfring {

// poll() on `fds` for up to `timeout_us` microseconds (ppoll; < 0: no limit).
int PollMicros(std::vector<pollfd>* fds, int64_t timeout_us);

class ControlChannel {
 public:
  // `comm` and `stats` must outlive the channel. With size 1 there are no peers and every
  // call is a no-op.
  ControlChannel(int rank, int size, Communicator* comm, double timeout_s, StatsRecorder* stats);

  // The ranks this rank exchanges control messages with: its tree neighbours, parent first.
  const std::vector<int>& peers() const { return peers_; }
  int parent() const { return parent_; }  // -1 on rank 0
  const std::vector<int>& children() const { return children_; }

  // One message to the parent (not on rank 0). Blocking, bounded by timeout_s; a lost peer
  // or an abort returns its error.
  Status SendToParent(const ControlMessage& message);
  // The same message to every child (none: a no-op). Blocking, bounded as SendToParent.
  Status SendToChildren(const ControlMessage& message);

  // Best effort within a second, even after the communicator was aborted: how a failing or
  // leaving rank tells its tree neighbours why (each passes it on: Job::Fail). Errors are
  // ignored (a peer may already be gone).
  void Tell(const ControlMessage& message);

  // Init's last step, before the background thread starts. Every rank waits for one kHello
  // from each child, then sends its own to its parent: a hello says that its whole subtree
  // is connected and done with the store, and rank 0 returns once every rank is (so a rank
  // 0 that serves the store and exits right after init never cuts off a rank still waiting
  // for a store reply). Blocking, bounded by `timeout_s` (kTimeout names the children that
  // never said hello, for themselves or a rank below them). Not counted in the stats.
  Status Greet(double timeout_s);

  // One pollfd (POLLIN) per peer, in peers() order, appended to `fds`.
  void AppendPollFds(std::vector<pollfd>* fds) const;

  // Waits up to `wait_ms` (0: just looks) for messages, then receives and decodes every
  // message that has arrived, calling `handle(from, message)` for each in send order per
  // peer. Stops at the first error, its own or the handler's. A closed connection is
  // kPeerLost naming the rank.
  Status Receive(int wait_ms, const std::function<Status(int from, ControlMessage& message)>& handle);

  // For a caller that waits in its own poll() (on AppendPollFds and more): true when a
  // shared-memory ring holds a message (poll() cannot see those). Cheap: memory reads only.
  bool ShmPending() const;
  // That caller's blocking poll() on `fds` (AppendPollFds' and any others), for up to
  // `timeout_us` microseconds (ppoll: a negotiation hold is shorter than a millisecond): announced as sleeping in the rings, so that writers ring the doorbell on
  // TCP, which poll() sees. Returns 0 at once when a ring already holds a message (one may
  // have come just before), else poll()'s result.
  int PollAsleep(std::vector<pollfd>* fds, int64_t timeout_us);

  // Messages that went through shared memory, and received messages that had to wait for
  // an earlier one (tests and benchmarks).
  uint64_t shm_messages_sent() const { return shm_messages_sent_; }
  uint64_t reordered() const { return reordered_; }

  // After a failed transfer: listens for up to `window_s` for the abort a failing peer sends
  // (tree neighbours pass them on; a neighbour's shutdown notice counts as its
  // DepartureMessage). True
  // with `*abort` filled when one came; otherwise false, with
  // `*closed_peer` the first peer whose connection closed meanwhile (-1 for none).
  bool AwaitAbort(double window_s, ControlMessage* abort, int* closed_peer);

 private:
  struct Incoming {
    uint64_t seq = 0;    // 0: unordered (Tell, Greet)
    bool doorbell = false;
    ControlMessage message;
  };
  struct PeerOrder {
    uint64_t next_send = 1;     // sequence number of this rank's next ordered message
    uint64_t next_deliver = 1;  // the peer's next message to hand out
    std::map<uint64_t, ControlMessage> early;  // arrived before an earlier one
  };
  Socket& SocketOf(int peer);
  Status SendOne(int peer, const std::string& body, Deadline deadline);
  // One TCP frame: 8-byte sequence number, then the encoded message (empty: a doorbell).
  Status ReceiveFrom(int peer, Deadline deadline, const std::atomic<bool>* abort, Incoming* in);
  Status DrainShm(int peer, const std::function<Status(int, ControlMessage&)>& handle);
  void MarkSleeping(bool sleeping);
  Status Deliver(int peer, Incoming& in, const std::function<Status(int, ControlMessage&)>& handle);

  const int rank_;
  const int size_;
  Communicator* comm_;
  const double timeout_s_;
  StatsRecorder* stats_;
  std::vector<int> peers_;
  int parent_ = -1;
  std::vector<int> children_;
  std::vector<PeerOrder> order_;  // by peer
  uint64_t shm_messages_sent_ = 0;
  uint64_t reordered_ = 0;
  std::string frame_;  // scratch for ring frames
};

}  // namespace tfring
