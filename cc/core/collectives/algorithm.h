// Which algorithm a host-memory collective runs: one table (algorithm.cc, kSelectionTable)
// by operation, bytes, ranks, hosts and transport, read top to bottom, the first row that
// applies wins; TFRING_ALGORITHM pins an operation's algorithm for a whole job (to compare
// algorithms). docs/algorithms.md lists the table with where each threshold came from.
//
// Every input is the same on every rank of a collective (its bytes are negotiated, the
// topology is derived from host ids exchanged at init, the settings must match: init
// refuses a rank whose Settings::MustMatchText differs, rendezvous/roster.h), so every rank
// chooses alike. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "base/config.h"
#include "base/data_type.h"
#include "transport/host_layout.h"

namespace tfring {

enum class Algorithm {
  kAuto,               // the table's choice (TFRING_ALGORITHM only)
  kRing,               // allreduce, allgather, reducescatter: one ring over the group
  kChain,              // broadcast: a pipelined chain along the ring
  kPairwise,           // alltoall
  kRecursiveDoubling,  // allreduce: log2 n exchanges of the whole buffer
  kHierarchical,       // allreduce, allgather, broadcast, reducescatter: inside and across hosts
  kHierarchicalDoubling,  // allreduce, small: reduce to a leader per host, recursive doubling among leaders
  kRabenseifner,          // allreduce: recursive halving reduce-scatter + recursive doubling allgather
  kAdasum,  // allreduce with ReduceOp::kAdasum (adasum.h): the reduce op fixes it; never the table's choice
};
const char* AlgorithmName(Algorithm algorithm);

// What the table reads: the job's typed settings (base/config.h; every rank's equal where the
// table reads them: TFRING_RECURSIVE_DOUBLING_BYTES, TFRING_RABENSEIFNER_BYTES,
// TFRING_HIERARCHICAL_{ALLREDUCE,ALLGATHER,BROADCAST,REDUCESCATTER} are must_match) and
// TFRING_ALGORITHM parsed. Tests set the fields directly; a job takes FromSettings.
struct AlgorithmSettings : Settings {
  std::map<OpType, Algorithm> pinned;  // TFRING_ALGORITHM (kAuto: absent)

  // A loaded config's settings with their pins parsed (Config::Load already checked them).
  static AlgorithmSettings FromSettings(const Settings& settings);
};

// The algorithm for one collective of `bytes` bytes (allreduce: the buffer, a fused group's
// whole; allgather: the whole output; broadcast: the buffer; reducescatter: the input). A pinned algorithm wins where
// it can run on this topology (hierarchical and hierarchical doubling need across_hosts,
// recursive doubling 2+ ranks), else the table decides.
// `topology`: the group's (transport/host_layout.h: Group::topology()).
Algorithm ChooseAlgorithm(OpType op, size_t bytes, const Topology& topology, const AlgorithmSettings& settings);

// Parses TFRING_ALGORITHM: "" or "auto" (the table), or comma-separated OP=ALGORITHM with
// OP one of allreduce, allgather, broadcast, reducescatter and ALGORITHM auto or one that OP
// has (allreduce: ring, recursive_doubling, rabenseifner, hierarchical, hierarchical_doubling; allgather and reducescatter: ring,
// hierarchical; broadcast: chain, hierarchical). False with `error` naming the bad entry and what is accepted.
bool ParseAlgorithmPins(const std::string& text, std::map<OpType, Algorithm>* pins, std::string* error);

}  // namespace tfring
