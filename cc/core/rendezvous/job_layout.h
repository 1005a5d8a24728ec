// JobLayout: what every rank must know about every other rank at init, and no more: which
// host each rank runs on and its hostname, each host's id, and the CPU counts of each host
// and machine. Rank 0 builds it from the roster entries it gathers (roster.h) and publishes it
// as one value that every rank reads.
//
// Its size grows with the number of hosts, not of ranks: a host index and a hostname index
// per rank, encoded as runs of consecutive ranks with the same one (a launcher places a
// host's ranks together: one run per host), so a job of 64 ranks on one host encodes in
// ~150 bytes. What only some ranks
// need of a peer (its address, its shared-memory token) is not here: a rank reads that peer's
// card from the store when it first needs it (roster.h, FetchPeerCard).
//
// A plain value; any thread may read a const one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfring {

struct RosterEntry;

struct JobLayout {
  struct Host {
    std::string id;   // CommunicatorOptions::host_id of its ranks
    int cpus = 0;     // the union of its ranks' CPU affinity masks
    int machine = 0;  // index into `machines`
  };
  // A kernel (hostname and boot id): emulated hosts (TFRING_CROSS_RANK on one machine) share it.
  struct Machine {
    int ranks = 0;  // ranks on it, whatever their host
    int cpus = 0;   // the union of their CPU masks
  };

  std::vector<Host> hosts;        // in order of each host's first rank
  std::vector<Machine> machines;  // in order of each machine's first host
  std::vector<int> host_of;       // by rank: index into `hosts`
  std::vector<std::string> hostnames;  // distinct, in order of first rank (for messages)
  std::vector<int> hostname_of;        // by rank: index into `hostnames`

  // From every rank's entry, by rank (rank 0, after gathering them).
  static JobLayout FromEntries(const std::vector<RosterEntry>& entries);

  // Bytes: machines, hosts and hostnames, then the ranks' host and hostname indices as
  // (index, run length) runs.
  std::string Encode() const;
  // False on malformed bytes (a different tfring version) or a rank count other than `size`.
  static bool Decode(const std::string& bytes, int size, JobLayout* out);
};

}  // namespace tfring
