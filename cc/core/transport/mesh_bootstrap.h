// MeshBootstrap: Communicator::Create's TCP mesh. Publishes this rank's card and roster
// entry and learns the job's layout (rendezvous/roster.h: O(n) store requests and bytes in
// all), then connects to every lower rank (data; none with lazy data connections), to its
// control-tree parent and to its lower heartbeat neighbours, reading each one's card from
// the store as it dials it (peer_directory.h), while a thread accepts the rest; every
// connection opens with the handshake (peer_handshake.h), and strangers and other init
// sessions are refused and logged.
//
// Blocking, bounded by the deadline given to Run (TFRING_START_TIMEOUT_S); a timeout names
// the ranks whose connections never came. Used once, by the thread that runs Create. What
// it returns (the connected sockets, the facts and the peer directory) becomes the caller's: the
// Communicator owns the sockets from then on. It keeps references to the options and the
// control tree, which must outlive it.
#pragma once

#include <memory>
#include <vector>

#include "base/deadline.h"
#include "base/socket.h"
#include "rendezvous/roster.h"
#include "rendezvous/store.h"
#include "transport/communicator_options.h"
#include "transport/control_tree.h"
#include "transport/peer_directory.h"
#include "transport/peer_handshake.h"
#include "transport/roster_facts.h"

namespace tfring {

class MeshBootstrap {
 public:
  struct Result {
    RosterFacts facts;
    // Peers' cards, read from the store on demand (the shared-memory setup reads its host's
    // ranks' tokens there, lazy connections their addresses).
    std::shared_ptr<PeerDirectory> directory;
    // By peer, connected and authenticated (invalid where no connection belongs): data
    // (every peer, none with lazy data), control (control-tree neighbours), heartbeat
    // (the ring neighbours of HeartbeatPeers).
    std::vector<Socket> data, control, heartbeat;
  };

  // `lazy_data`: data connections are made on first use (lazy_connections.h), not here.
  MeshBootstrap(const CommunicatorOptions& options, const ControlTree& tree, bool lazy_data);

  // The roster exchange, then the mesh over `listener` (which stays the caller's). `store`
  // is the init session's; the directory returned keeps it for later reads.
  Status Run(Listener& listener, std::shared_ptr<Store> store, Deadline deadline, Result* out);

  // The ranks a rank exchanges heartbeats with: its two neighbours on the ring of ranks
  // (one at 2 ranks, none alone), in increasing order (liveness.h).
  static std::vector<int> HeartbeatPeers(int rank, int size);

 private:
  Status ExchangeRoster(int port, std::shared_ptr<Store> store, Deadline deadline, Result* out);
  Status ConnectMesh(const PeerHandshake& handshake, Listener& listener, Deadline deadline, Result* out);
  Status AcceptPeers(const PeerHandshake& handshake, Listener& listener, Deadline deadline, Result* out);

  const CommunicatorOptions& opt_;
  const ControlTree& tree_;
  const bool lazy_data_;
};

}  // namespace tfring
