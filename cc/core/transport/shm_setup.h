// SharedMemorySetup: Communicator::Create's last step — shared-memory data rings between
// the ranks of one host, control rings between control-tree neighbours there, and whether
// each pair may use single-copy reads (cma.h, TFRING_SHM_CMA). With lazy data connections
// (CommunicatorOptions::lazy_data) only the control rings: a pair's data rings and
// single-copy facts are made with its data connection, on first use (shm_pairing.h).
//
// Every rank creates one incoming ring per ring peer, opens its peers' rings for its
// outgoing side and unlinks the names once all are open (nothing stays in /dev/shm, even
// after a crash): 4 store requests per rank with ring peers (their keys: one per ring
// peer), 2 more per local peer with single-copy reads, and one read of each ring peer's
// card (its ring token) unless this rank read it already (peer_directory.h). Blocking, bounded by the deadline given to Run; a peer that never gets
// there is named by the wait's timeout. Used once, by the thread that runs Create; the
// rings and facts it returns become the caller's (the Communicator's links own them). It
// keeps references to what it is built from, which must outlive it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "base/deadline.h"
#include "rendezvous/roster.h"
#include "rendezvous/store.h"
#include "transport/communicator_options.h"
#include "transport/control_tree.h"
#include "transport/peer_directory.h"
#include "transport/roster_facts.h"
#include "transport/shm_ring.h"

namespace tfring {

// One shared-memory ring pair with a local peer: `tx` to it, `rx` from it (null: none).
struct ShmRingPair {
  std::unique_ptr<ShmRing> tx, rx;
};

// Whether a rank whose card is `e` reads single-copy: TFRING_SHM_CMA=1 always (if the
// kernel lets it), auto only where every rank on the machine has a CPU of its own
// (shm_setup.cc says why). Every rank computes it alike from the card and the layout.
bool TakesPartInSingleCopy(const PeerCard& e, const RosterFacts& facts);

class SharedMemorySetup {
 public:
  struct Result {
    std::vector<ShmRingPair> data;     // by peer: every local peer
    std::vector<ShmRingPair> control;  // by peer: local control-tree neighbours (shm_control)
    // By peer, for Link::ReadPostsOf / PostSendsFrom: the pid to read the peer's posts
    // from (0: never), the smallest send posted to it (SIZE_MAX: never).
    std::vector<pid_t> read_posts_of;
    std::vector<size_t> post_sends_from;
  };

  SharedMemorySetup(const CommunicatorOptions& options, const ControlTree& tree, const RosterFacts& facts,
                    PeerDirectory& directory);

  // With CmaMode::kOn, fails naming both ranks and the setting when a local pair cannot
  // read each other's memory.
  Status Run(Store& store, Deadline deadline, Result* out);

 private:
  Status ExchangeCmaReadability(const std::vector<int>& local, Store& store, Deadline deadline, Result* out);

  const CommunicatorOptions& opt_;
  const ControlTree& tree_;
  const RosterFacts& facts_;
  PeerDirectory& directory_;
  std::map<int, PeerCard> local_cards_;  // this host's other ranks' cards, read by Run
};

}  // namespace tfring
