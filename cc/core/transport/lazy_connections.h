// LazyConnections: a communicator's data connections made when a collective first needs
// them (TFRING_DATA_CONNECTIONS=lazy; CommunicatorOptions::lazy_data). Whichever rank of a
// pair needs the connection first dials it (the handshake: peer_handshake.h); the peer's
// ConnectionPark (connection_park.h) admits it on its own thread, so a rank never waits
// for its peer's background thread. Between ranks of one host the same exchange makes the
// pair's shared-memory rings (shm_pairing.h): rings too are made on first use.
//
// Threads: Connect() on the runtime's background thread only; Stop() from any thread
// (Communicator::Abort); the park's thread runs the admission, which reads only what the
// constructor fixed. Connect() blocks up to CommunicatorOptions::timeout_s, or until the
// abort flag is set. Ownership: owned by the Communicator; a connection made is moved into
// the caller's Link; the roster facts and the abort flag must outlive this object.
#pragma once

#include <atomic>
#include <vector>

#include "base/socket.h"
#include "transport/communicator_options.h"
#include "transport/connection_park.h"
#include "transport/link.h"
#include "transport/peer_handshake.h"
#include "transport/roster_facts.h"
#include "transport/shm_pairing.h"

namespace tfring {

class LazyConnections {
 public:
  // `mine`: this rank's card (its shared-memory token).
  LazyConnections(const CommunicatorOptions& options, PeerHandshake handshake, const RosterFacts& facts,
                  const PeerCard& mine, const std::atomic<bool>* aborted);

  // Takes the mesh's listener and admits the peers' dials from now on.
  void Start(Listener listener);
  // Makes `peer`'s TCP connection into `link` (once per peer: later calls do nothing): this
  // rank dials it, or takes the one the peer dialled from the park; with a peer on this
  // host, the pair's rings and single-copy facts too. A connection that cannot be made
  // leaves the link without a socket, labelled with why, and the transfer on it fails
  // naming the peer. New sockets spin `spin_us` before they sleep.
  void Connect(int peer, Link& link, int spin_us);
  // Stops admitting (ConnectionPark::Stop). Any thread; idempotent.
  void Stop() { park_.Stop(); }

 private:
  // A peer's dial, on the park's thread: its rank, or -1 to refuse it.
  int Admit(ParkedConnection* c) const;

  const int rank_;
  const int size_;
  const double timeout_s_;
  const double peer_timeout_s_;
  const PeerHandshake handshake_;
  const ShmPairing pairing_;
  const RosterFacts& facts_;
  const std::atomic<bool>* aborted_;
  std::vector<bool> tried_;  // by peer: Connect ran (background thread)
  ConnectionPark park_;  // last: its thread calls Admit, which reads the fields above
};

}  // namespace tfring
