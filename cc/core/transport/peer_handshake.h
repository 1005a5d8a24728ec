// PeerHandshake: how a mesh connection opens, from either end — the dialling side connects
// to a peer's listener, proves the job secret (rendezvous/auth.h) and sends the hello
// (mesh_hello.h); the accepting side checks both and learns the channel and rank.
//
// Built from the options and the directory of peers' cards (peer_directory.h: a peer's
// address is read from the store the first time this rank dials it); const from then on
// and holds no sockets, so any thread may use it (MeshBootstrap's dialler and acceptor at
// Create, the background thread and the ConnectionPark's thread for lazy connections; the
// directory is thread-safe). Blocking, each step bounded by the deadline given or
// mesh::kHelloTimeoutS.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/deadline.h"
#include "base/socket.h"
#include "transport/communicator_options.h"
#include "transport/peer_directory.h"

namespace tfring {

class PeerHandshake {
 public:
  PeerHandshake(const CommunicatorOptions& options, std::shared_ptr<PeerDirectory> directory);

  // A connection to `peer`'s listener on `channel` (mesh::Channel), authenticated and
  // introduced, labelled "rank P (address...)"; blocks until `deadline` (reading the peer's
  // card from the store first, the first time).
  Status Dial(int peer, uint8_t channel, Deadline deadline, Socket* out) const;
  // An accepted connection's authentication and hello: false when refused (logged: not the
  // job's secret, another init session); otherwise its channel, and its rank, -1 for a
  // malformed hello or an impossible rank (the caller refuses it).
  bool ReadHello(Socket& s, uint8_t* channel, int* peer) const;

 private:
  int rank_;
  int size_;
  std::string secret_, session_, hostname_;
  std::shared_ptr<PeerDirectory> directory_;
};

}  // namespace tfring
