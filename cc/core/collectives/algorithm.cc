// The algorithm selection table (algorithm.h). Thresholds and why (measured on emulated
// hosts and one host, docs/algorithms.md; the runs: lab/records/scaling.md):
//  * recursive doubling up to TFRING_RECURSIVE_DOUBLING_BYTES (64 KiB): where it stopped
//    winning against the ring at 2-8 ranks on one host (docs/core.md's crossover table);
//  * hierarchical allreduce, allgather, reduce-scatter (and broadcast above the same
//    threshold), on several hosts of equal rank counts: each host's link carries (H-1)/H
//    of the bytes (2(H-1)/H for allreduce) instead of the flat ring's (N-1)/N (measured
//    at 2x2, 2x4 and 4x2 emulated hosts);
//  * Rabenseifner above that up to TFRING_RABENSEIFNER_BYTES (1 MiB) on 8+ ranks (a power
//    of two) where no two ranks of the job share memory (TCP only: one rank per host, or
//    TFRING_SHM=0) and no hierarchical row applies: it beat the ring and recursive doubling
//    at 256 KiB and 1 MiB at 8 ranks over TCP, and lost to the ring over shared memory at
//    4 and 8 ranks (lab/records/scaling.md "Rabenseifner");
//  * the flat ring / chain everywhere else (one host, unequal hosts; a process set by its
//    own members' hosts).
// Pin only (no size where it won in the lab): hierarchical doubling (small allreduces
// across hosts: tied with flat recursive doubling at 2x4 and 4x2).
// Only Rabenseifner's row depends on the transport: the hierarchical algorithms won with TCP
// inside the hosts as well as with shared memory, and the recursive-doubling crossover was
// the same over TCP and shared memory at 8 ranks.
#include "collectives/algorithm.h"

#include <sstream>

namespace tfring {
namespace {

// kPinOnly: the row never applies; it lets TFRING_ALGORITHM pin the algorithm for the
// operation and says where it can run (an algorithm the table never chooses, or chooses
// more narrowly than it can run: Runs() reads the first row of an algorithm).
enum class Bytes { kAny, kUpToRecursiveDoubling, kAboveRecursiveDoubling, kUpToRabenseifner, kPinOnly };
enum class Transport { kAny, kShmInsideHosts, kTcpInsideHosts };

struct Row {
  OpType op;
  Algorithm algorithm;
  Bytes bytes;
  int min_ranks;
  bool across_hosts;                        // needs Topology::across_hosts
  Transport transport;
  bool Settings::*enabled;         // the setting that turns the row off; null: always on
  bool power_of_two = false;                // needs a power-of-two number of ranks
};

const Row kSelectionTable[] = {
    {OpType::kAllreduce, Algorithm::kHierarchicalDoubling, Bytes::kPinOnly, 4, true, Transport::kAny, nullptr},
    {OpType::kAllreduce, Algorithm::kRabenseifner, Bytes::kPinOnly, 2, false, Transport::kAny, nullptr},
    {OpType::kAllreduce, Algorithm::kRecursiveDoubling, Bytes::kUpToRecursiveDoubling, 2, false, Transport::kAny,
     nullptr},
    {OpType::kAllreduce, Algorithm::kHierarchical, Bytes::kAny, 4, true, Transport::kAny,
     &Settings::hierarchical_allreduce},
    {OpType::kAllreduce, Algorithm::kRabenseifner, Bytes::kUpToRabenseifner, 8, false, Transport::kTcpInsideHosts,
     nullptr, true},
    {OpType::kAllreduce, Algorithm::kRing, Bytes::kAny, 1, false, Transport::kAny, nullptr},
    {OpType::kAllgather, Algorithm::kHierarchical, Bytes::kAny, 4, true, Transport::kAny,
     &Settings::hierarchical_allgather},
    {OpType::kAllgather, Algorithm::kRing, Bytes::kAny, 1, false, Transport::kAny, nullptr},
    {OpType::kBroadcast, Algorithm::kHierarchical, Bytes::kAboveRecursiveDoubling, 4, true, Transport::kAny,
     &Settings::hierarchical_broadcast},
    {OpType::kBroadcast, Algorithm::kChain, Bytes::kAny, 1, false, Transport::kAny, nullptr},
    {OpType::kAlltoall, Algorithm::kPairwise, Bytes::kAny, 1, false, Transport::kAny, nullptr},
    {OpType::kReducescatter, Algorithm::kHierarchical, Bytes::kAny, 4, true, Transport::kAny,
     &Settings::hierarchical_reducescatter},
    {OpType::kReducescatter, Algorithm::kRing, Bytes::kAny, 1, false, Transport::kAny, nullptr},
};

bool Applies(const Row& row, OpType op, size_t bytes, const Topology& t, const AlgorithmSettings& s) {
  if (row.op != op || t.ranks < row.min_ranks) return false;
  if (row.across_hosts && !t.across_hosts) return false;
  if (row.transport == Transport::kShmInsideHosts && !t.shm_inside_hosts) return false;
  if (row.transport == Transport::kTcpInsideHosts && t.shm_inside_hosts) return false;
  const size_t doubling_bytes = static_cast<size_t>(s.recursive_doubling_bytes);  // >= 0: the table's bounds
  if (row.bytes == Bytes::kUpToRecursiveDoubling && bytes > doubling_bytes) return false;
  if (row.bytes == Bytes::kAboveRecursiveDoubling && bytes <= doubling_bytes) return false;
  if (row.bytes == Bytes::kUpToRabenseifner &&
      (bytes <= doubling_bytes || bytes > static_cast<size_t>(s.rabenseifner_bytes))) {
    return false;
  }
  if (row.power_of_two && (t.ranks & (t.ranks - 1)) != 0) return false;
  if (row.bytes == Bytes::kPinOnly) return false;
  return row.enabled == nullptr || s.*row.enabled;
}

// Whether `algorithm` can run `op` on this topology at all (a pin that cannot is ignored).
bool Runs(Algorithm algorithm, OpType op, const Topology& t) {
  for (const Row& row : kSelectionTable) {
    if (row.op == op && row.algorithm == algorithm) return t.ranks >= row.min_ranks && (!row.across_hosts || t.across_hosts);
  }
  return false;
}

struct Named {
  const char* name;
  Algorithm algorithm;
};
const Named kNames[] = {{"auto", Algorithm::kAuto},
                        {"ring", Algorithm::kRing},
                        {"chain", Algorithm::kChain},
                        {"pairwise", Algorithm::kPairwise},
                        {"recursive_doubling", Algorithm::kRecursiveDoubling},
                        {"hierarchical", Algorithm::kHierarchical},
                        {"hierarchical_doubling", Algorithm::kHierarchicalDoubling},
                        {"rabenseifner", Algorithm::kRabenseifner},
                        {"adasum", Algorithm::kAdasum}};
const std::pair<const char*, OpType> kPinnableOps[] = {{"allreduce", OpType::kAllreduce},
                                                       {"allgather", OpType::kAllgather},
                                                       {"broadcast", OpType::kBroadcast},
                                                       {"reducescatter", OpType::kReducescatter}};

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

const char* AlgorithmName(Algorithm algorithm) {
  for (const Named& n : kNames) {
    if (n.algorithm == algorithm) return n.name;
  }
  return "?";
}

Algorithm ChooseAlgorithm(OpType op, size_t bytes, const Topology& topology, const AlgorithmSettings& settings) {
  auto pin = settings.pinned.find(op);
  if (pin != settings.pinned.end() && pin->second != Algorithm::kAuto && Runs(pin->second, op, topology)) {
    return pin->second;
  }
  for (const Row& row : kSelectionTable) {
    if (Applies(row, op, bytes, topology, settings)) return row.algorithm;
  }
  return Algorithm::kRing;  // not reached: every op has an unconditional last row
}

bool ParseAlgorithmPins(const std::string& text, std::map<OpType, Algorithm>* pins, std::string* error) {
  pins->clear();
  if (Trim(text).empty() || Trim(text) == "auto") return true;
  std::stringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    entry = Trim(entry);
    const size_t eq = entry.find('=');
    const std::string op_name = Trim(entry.substr(0, eq));
    const OpType* op = nullptr;
    for (const auto& p : kPinnableOps) {
      if (op_name == p.first) op = &p.second;
    }
    if (eq == std::string::npos || op == nullptr) {
      *error = "'" + entry + "' is not OP=ALGORITHM with OP one of allreduce, allgather, broadcast, reducescatter";
      return false;
    }
    const std::string name = Trim(entry.substr(eq + 1));
    std::string accepted = "auto";
    const Algorithm* found = nullptr;
    for (const Named& n : kNames) {
      bool has = false;
      for (const Row& row : kSelectionTable) has = has || (row.op == *op && row.algorithm == n.algorithm);
      if (!has) continue;
      accepted += std::string(", ") + n.name;
      if (name == n.name) found = &n.algorithm;
    }
    if (name == "auto") found = &kNames[0].algorithm;
    if (found == nullptr) {
      *error = op_name + " has no algorithm '" + name + "' (accepted: " + accepted + ")";
      return false;
    }
    (*pins)[*op] = *found;
  }
  return true;
}

AlgorithmSettings AlgorithmSettings::FromSettings(const Settings& settings) {
  AlgorithmSettings out;
  static_cast<Settings&>(out) = settings;
  std::string error;  // Config::Load refused a bad value (CheckAlgorithmPins below)
  ParseAlgorithmPins(settings.algorithm, &out.pinned, &error);
  return out;
}

namespace {

// TFRING_ALGORITHM's syntax is this file's vocabulary: Config (base) checks it through the
// registration, and so refuses a bad value at init, naming the variable.
bool CheckAlgorithmPins(const std::string& text, std::string* error) {
  std::map<OpType, Algorithm> pins;
  return ParseAlgorithmPins(text, &pins, error);
}

const bool kAlgorithmPinsCheckRegistered = RegisterParamCheck("TFRING_ALGORITHM", CheckAlgorithmPins);

}  // namespace

}  // namespace tfring
