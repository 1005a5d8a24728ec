// Roster: what ranks must learn about each other before they connect, exchanged through the
// job's store in O(n) requests and O(n) bytes in all.
//
// Each rank publishes two values: its card ("peer/<rank>": what a peer needs to reach it,
// its address and shared-memory token) and then its roster entry ("roster/<rank>": what the
// job as a whole needs, its host, hostname, CPUs and the settings every rank must share).
// Rank 0 reads every entry, checks the shared settings once, and publishes the job's layout
// ("layout", job_layout.h: hosts and which rank is on which, a size that grows with the
// hosts, not the ranks), which every other rank reads once. A rank reads a peer's card only
// when it first needs it (its control-tree parent and ring neighbours at init, its host's
// ranks for shared memory, any other peer at its first data connection): the store serves
// each rank a few hundred bytes, not the ~500 bytes per rank of the whole roster.
//
// Failures reach every rank alike: a rank that never publishes makes rank 0 publish a
// verdict naming it; settings that differ make rank 0 publish one naming the rank and both
// values. The others fail with rank 0's verdict as soon as it is out.
#pragma once

#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "rendezvous/job_layout.h"
#include "rendezvous/store.h"

namespace tfring {

// What the job needs of every rank: read by rank 0 only.
struct RosterEntry {
  std::string host_id;     // ranks with equal ids share memory (CommunicatorOptions::host_id)
  std::string hostname;    // for messages that name a lost rank
  std::string must_match;  // CommunicatorOptions::must_match
  std::vector<int> cpus;   // the rank's CPU affinity mask

  std::string Encode() const;
  static bool Decode(const std::string& bytes, RosterEntry* out);
};

// What a peer needs to reach a rank: read by the ranks that talk to it, when they first do.
struct PeerCard {
  std::string address;     // host:port of the rank's data listener
  std::string shm_token;   // names the shared-memory rings this rank creates (empty without
                           // TFRING_SHM): a peer on its host opens them without asking the store
  bool shm_cma = false;    // takes part in single-copy reads (TFRING_SHM_CMA auto or 1): only
                           // such peers exchange readability through the store
  bool shm_cma_required = false;  // TFRING_SHM_CMA=1 (auto declines where ranks outnumber CPUs)

  std::string Encode() const;
  static bool Decode(const std::string& bytes, PeerCard* out);
};

// Publishes `card` and `entry` and returns the job's layout (blocking, bounded by
// `deadline`; the others wait 2 s more for rank 0's verdict). kTimeout names the ranks that
// never published (rank 0 tells the others); kInvalidArgument when a rank's must_match
// settings differ from rank 0's, naming the rank and both values (every rank fails alike).
Status ExchangeRoster(int rank, int size, const RosterEntry& entry, const PeerCard& card, Store& store,
                      Deadline deadline, JobLayout* layout);

// `peer`'s card, which it published before its roster entry: once the layout is out, every
// card is in the store and this returns after one request (blocking up to `timeout_s`).
Status FetchPeerCard(Store& store, int peer, double timeout_s, PeerCard* out);

}  // namespace tfring
