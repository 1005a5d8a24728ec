// ControlChannel: the negotiation star over the Communicator's control sockets. Rank 0
// talks to every other rank; every other rank talks to rank 0 only. Messages are
// ControlMessages (messages.h), encoded here and decoded here, so callers never see bytes.
//
// Threads: the runtime's background thread only. Counters go to the StatsRecorder.
// Every wait is bounded: sends and receives by `timeout_s` (and the communicator's abort
// flag), Tell() by a short fixed deadline.
#pragma once

#include <poll.h>

#include <functional>
#include <vector>

#include "communicator.h"
#include "messages.h"
#include "runtime_stats.h"

namespace tfring {

class ControlChannel {
 public:
  // `comm` and `stats` must outlive the channel. With size 1 there are no peers and every
  // call is a no-op.
  ControlChannel(int rank, int size, Communicator* comm, double timeout_s, StatsRecorder* stats);

  // The ranks this rank exchanges control messages with: 1..n-1 on rank 0, {0} elsewhere.
  const std::vector<int>& peers() const { return peers_; }

  // Rank != 0: one message to rank 0. Rank 0: the same message to every other rank.
  // Blocking, bounded by timeout_s; a lost peer or an abort returns its error.
  Status Send(const ControlMessage& message);

  // Best effort within a second, even after the communicator was aborted: how a failing or
  // leaving rank tells its peers why. Errors are ignored (a peer may already be gone).
  void Tell(const ControlMessage& message);

  // Init's last step, before the background thread starts. Every other rank sends one
  // kHello once it is connected and done with the store; rank 0 returns once it has each
  // (so a rank 0 that serves the store and exits right after init never cuts off a rank
  // still waiting for a store reply). Blocking, bounded by `timeout_s` (kTimeout names the
  // ranks that never said hello). Not counted in the stats.
  Status Greet(double timeout_s);

  // One pollfd (POLLIN) per peer, in peers() order, appended to `fds`.
  void AppendPollFds(std::vector<pollfd>* fds) const;

  // Waits up to `wait_ms` (0: just looks) for messages, then receives and decodes every
  // message that has arrived, calling `handle(from, message)` for each in arrival order per
  // peer. Stops at the first error, its own or the handler's. A closed connection is
  // kPeerLost naming the rank.
  Status Receive(int wait_ms, const std::function<Status(int from, ControlMessage& message)>& handle);

  // After a failed transfer: listens for up to `window_s` for the abort a failing peer sends
  // (rank 0 relays them). True with `*abort` filled when one came; otherwise false, with
  // `*closed_peer` the first peer whose connection closed meanwhile (-1 for none).
  bool AwaitAbort(double window_s, ControlMessage* abort, int* closed_peer);

 private:
  Socket& SocketOf(int peer);
  Status ReceiveFrom(int peer, Deadline deadline, const std::atomic<bool>* abort, ControlMessage* message);

  const int rank_;
  const int size_;
  Communicator* comm_;
  const double timeout_s_;
  StatsRecorder* stats_;
  std::vector<int> peers_;
};

}  // namespace tfring
