// Roster: what every rank must know about every other before they connect (its address,
// host id, CPU mask, hostname and the settings every rank must share), exchanged through
// the job's store in O(n) requests.
//
// Each rank publishes its entry once ("roster/<rank>"); rank 0 reads them all and
// publishes the whole roster as one value ("roster"), which every other rank reads once:
// 3n - 2 store requests per init instead of the n^2 of every rank reading every record
// (the scale lab counted 1.5 n(n-1) + 4n before). A rank that never publishes makes rank 0
// publish an error naming it instead, so every rank fails at once with the same cause.
#pragma once

#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "rendezvous/store.h"

namespace tfring {

struct RosterEntry {
  std::string address;     // host:port of the rank's data listener
  std::string host_id;     // ranks with equal ids share memory (CommunicatorOptions::host_id)
  std::string hostname;    // for messages that name a lost rank
  std::string must_match;  // CommunicatorOptions::must_match
  std::vector<int> cpus;   // the rank's CPU affinity mask
  std::string shm_token;   // names the shared-memory rings this rank creates (empty without
                           // TFRING_SHM): a peer on its host opens them without asking the store
  bool shm_cma = false;    // takes part in single-copy reads (TFRING_SHM_CMA auto or 1): only
                           // such peers exchange readability through the store
  bool shm_cma_required = false;  // TFRING_SHM_CMA=1 (auto declines where ranks outnumber CPUs)

  std::string Encode() const;
  static bool Decode(const std::string& bytes, RosterEntry* out);
};

// Publishes `mine` and returns every rank's entry, by rank (blocking, bounded by
// `deadline`; the others wait 2 s more for rank 0's verdict). kTimeout names the ranks that never published (rank 0 tells the others);
// kInvalidArgument when a rank's must_match settings differ from rank 0's, naming the rank
// and both values (every rank fails alike).
Status ExchangeRoster(int rank, int size, const RosterEntry& mine, Store& store, Deadline deadline,
                      std::vector<RosterEntry>* all);

}  // namespace tfring
