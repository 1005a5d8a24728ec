// RosterFacts: what the init roster (rendezvous/roster.h) told this rank about every rank
// of the job — hostnames, host ids, addresses and how many CPUs this host's and this
// machine's ranks share — and the descriptions of peers made from them.
//
// Filled once by MeshBootstrap (mesh_bootstrap.h) during Communicator::Create and owned by
// the Communicator; const from then on, so any thread may read it. A job of one rank has
// no roster: its facts are this rank's own (Alone).
#pragma once

#include <string>
#include <vector>

#include "base/socket.h"
#include "transport/communicator_options.h"

namespace tfring {

struct RosterFacts {
  int rank = 0;
  int size = 1;
  std::vector<std::string> hostnames;  // by rank ("" where unknown)
  std::vector<std::string> host_ids;   // by rank (CommunicatorOptions::host_id)
  std::vector<std::string> addresses;  // by rank: "host:port" of its listener
  int host_cpus = 0;      // the union of this host's ranks' CPU masks
  int machine_ranks = 1;  // ranks on this kernel (emulated hosts share one)
  int machine_cpus = 0;   // the union of their CPU masks

  // Before the roster: every rank on this rank's host, nothing else known.
  static RosterFacts Alone(const CommunicatorOptions& options);

  // "rank P", and for a peer on another host than this rank's " (host H, with ranks A, B)"
  // naming its host and the other ranks there (a lost host takes them all; at most 8 named).
  std::string DescribePeer(int peer) const;
  // Every host has the same number of ranks.
  bool homogeneous() const;
  // Some host has two ranks or more.
  bool shares_a_host() const;
  // Errors on a data connection to another host name that host and its other ranks:
  // relabels `s` "rank 5 (host h2, with rank 4; 10.0.0.4:41234)".
  void LabelData(int peer, Socket& s) const;
};

}  // namespace tfring
