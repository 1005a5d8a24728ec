// RosterFacts: what the job's layout (rendezvous/job_layout.h, from the init roster) told
// this rank about every rank of the job — hostnames, host ids and how many CPUs this host's
// and this machine's ranks share — and the descriptions of peers made from them. (A peer's
// address is not here: peer_directory.h reads it when this rank first dials the peer.)
//
// Filled once by MeshBootstrap (mesh_bootstrap.h) during Communicator::Create and owned by
// the Communicator; const from then on, so any thread may read it. A job of one rank has
// no roster: its facts are this rank's own (Alone).
#pragma once

#include <string>
#include <vector>

#include "base/socket.h"
#include "rendezvous/job_layout.h"
#include "transport/communicator_options.h"

namespace tfring {

struct RosterFacts {
  int rank = 0;
  int size = 1;
  std::vector<std::string> hostnames;  // by rank ("" where unknown)
  std::vector<std::string> host_ids;   // by rank (CommunicatorOptions::host_id)
  int hosts = 1;          // distinct host ids
  int host_cpus = 0;      // the union of this host's ranks' CPU masks
  int machine_ranks = 1;  // ranks on this kernel (emulated hosts share one)
  int machine_cpus = 0;   // the union of their CPU masks

  // The CPUs this machine's ranks may run on (machine_cpus; this host's where the machine's
  // is unknown); 0 when neither is known.
  int usable_cpus() const { return machine_cpus > 0 ? machine_cpus : host_cpus; }
  // `ranks` ranks would outnumber those CPUs (unknown CPUs count as enough): the one rule
  // that turns waits' spinning off (Job::TuneSpinning) and keeps TFRING_SHM_CMA=auto on
  // the rings (shm_setup.cc).
  bool Outnumbered(int ranks) const { return usable_cpus() > 0 && ranks > usable_cpus(); }

  // Before the roster: every rank on this rank's host, nothing else known.
  static RosterFacts Alone(const CommunicatorOptions& options);
  // From the layout rank 0 published (this rank's host and machine: `options.rank`'s).
  static RosterFacts FromLayout(const CommunicatorOptions& options, const JobLayout& layout);

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
