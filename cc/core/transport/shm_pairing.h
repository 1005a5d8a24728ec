// ShmPairing: the shared-memory rings (and single-copy reads, cma.h) of one pair of ranks on
// a host, made over the pair's lazy data connection when a collective first uses it
// (CommunicatorOptions::lazy_data), not for every local pair at init: a rank of a host with
// k ranks holds rings only with the peers its algorithms talk to (ring neighbours,
// recursive-doubling partners, its host's group), not k - 1.
//
// Right after the handshake, the dialling rank D creates both rings ("D to A" and "A to D",
// named after its own card's token), publishes its pid in the one it writes when it takes
// part in single-copy reads, and offers them (its token and whether it takes part); the
// accepting rank A, on its ConnectionPark's thread, opens both, unlinks the names (nothing
// stays in /dev/shm) and answers (opened or not; for a single-copy pair, whether A can read
// D's memory); D then probes A's pid and says whether it can read A's. A pair that cannot
// make its rings keeps to TCP, both ends alike. With TFRING_SHM_CMA=1 on either end, a pair
// that cannot read each other's memory fails the connection naming both ranks and the
// setting, and the transfer on it fails with that message (connection_park.h, link.h).
//
// No store requests. Each step is bounded by mesh::kHelloTimeoutS. Const after
// construction: the background thread (Offer) and the park's thread (Answer) may use it at
// once; the options, facts and directory must outlive it.
#pragma once

#include <memory>
#include <string>

#include "base/socket.h"
#include "transport/communicator_options.h"
#include "transport/connection_park.h"
#include "rendezvous/roster.h"
#include "transport/roster_facts.h"

namespace tfring {

class ShmPairing {
 public:
  // `mine`: this rank's own card (its token and single-copy flags).
  ShmPairing(const CommunicatorOptions& options, const RosterFacts& facts, const PeerCard& mine);

  // Whether a data connection with `peer` carries rings: shared memory on and the same host.
  // The same answer on both ends of a pair (the facts are the job's layout).
  bool Applies(int peer) const;
  // The dialling end, on `out->socket` just dialled: rings and single-copy facts into *out
  // (none where they could not be made; then both ends use TCP). An error ends the connection.
  Status Offer(int peer, ParkedConnection* out) const;
  // The accepting end, on `c->socket` just admitted (its hello read).
  Status Answer(int peer, ParkedConnection* c) const;

 private:
  std::string RingName(const std::string& token, int from, int to) const;
  // With TFRING_SHM_CMA=1 on either end, why `peer` (whose card flags these are) and this
  // rank cannot be a single-copy pair; "" where they can, or neither requires it.
  std::string RequiredButRefused(int peer, bool peer_cma, bool peer_requires) const;

  const CommunicatorOptions opt_;  // a copy: the caller's may not outlive the communicator
  const RosterFacts& facts_;
  const PeerCard mine_;
  const bool takes_part_;  // this rank reads and posts single-copy (TakesPartInSingleCopy)
};

}  // namespace tfring
