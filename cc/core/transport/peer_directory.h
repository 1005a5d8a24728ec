// PeerDirectory: the cards of this job's peers (rendezvous/roster.h: address, shared-memory
// token), each read from the job's store the first time this rank needs it and kept.
//
// A rank reads only the cards of the peers it talks to: its control-tree parent, ring
// neighbours and lower ranks it dials at init (the whole mesh up to 8 ranks), its host's
// ranks for shared memory, and any other peer at its first data connection (lazy
// connections): O(log n) cards per rank for an allreduce, not n.
//
// Thread-safe (one mutex; a store read happens outside it). Card() blocks for at most one
// store request, bounded by the deadline given. Owned by the Communicator, which keeps the
// store it reads from alive with it (shared ownership).
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "base/deadline.h"
#include "base/status.h"
#include "rendezvous/roster.h"
#include "rendezvous/store.h"

namespace tfring {

class PeerDirectory {
 public:
  // `store`: the init session's store, where every rank published its card; `mine`: this
  // rank's own, never read back.
  PeerDirectory(int rank, std::shared_ptr<Store> store, PeerCard mine);

  // `peer`'s card: from memory, or read from the store once (its first caller pays it).
  Status Card(int peer, Deadline deadline, PeerCard* out);
  // How many cards were read from the store so far (tests, counters).
  int cards_read() const;

 private:
  const int rank_;
  const std::shared_ptr<Store> store_;
  mutable std::mutex mu_;
  std::map<int, PeerCard> cards_;  // guarded by mu_
  int cards_read_ = 0;             // guarded by mu_
};

}  // namespace tfring
