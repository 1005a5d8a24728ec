// LinkWatch: names a host whose links move data far slower than the job's other links (a
// straggler host: a throttled or faulty NIC, a congested switch port). A ring moves at its
// slowest link's pace, so every rank slows alike and no tensor stalls; what differs is the
// rate each link delivers while data moves on it (Link::recv_flow_ns(): first to last byte of
// each transfer, not the wait for the peer to start).
//
// Every kPeriodS each rank publishes what it received from each peer on another host that
// sent it anything (bytes, flow time) in the job's store (`tfring_links/<rank>`, one small
// value: the peers its algorithms use, O(log n) with lazy connections, never one entry per
// rank of the job). Rank 0 reads them all, takes the differences since its previous reading,
// and applies FindSlowHost to the links between different hosts. A host named in two
// readings in a row is reported: one warning (until the verdict changes) and rank 0's stats
// (slow_link_*; docs/monitoring.md). A job on one host has no such links: no watch runs
// (Executor), and the store serves nothing in steady state.
//
// Cost: one store write per rank and period; rank 0 also reads `size` keys per period (the
// one part that grows with the job at rank 0: ~60 bytes per rank every 5 s).
// Threads: the runtime's background thread only (Tick); the store is thread-safe.
// Limitation: the store calls block that thread. A store that stops answering while the
// ranks still reach each other (the launcher's host cut off) holds each rank for up to
// TFRING_TIMEOUT_S once (then the watch is off); a failed job (communicator aborted) makes
// no store call. Moving them to a thread of their own needs a per-call timeout on Set.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/runtime_stats.h"
#include "rendezvous/store.h"

namespace tfring {

class Communicator;

// Bytes and flow seconds one rank (`to`) received from another (`from`) over an interval.
struct LinkSample {
  int from = 0;
  int to = 0;
  double bytes = 0;
  double seconds = 0;
};

struct SlowHost {
  std::string host_id;     // empty: no host is slow
  std::vector<int> ranks;  // the ranks on it
  double rate = 0;         // bytes/s: the median of its links to and from other hosts
  double others_rate = 0;  // bytes/s: the median of the links that do not touch it
};

// The rule: links between different hosts (host_of[rank]) that moved at least `min_bytes`
// are judged, each at bytes / seconds. A host is slow when the median rate of its judged
// links is below 1/`factor` of the median rate of the judged links not touching it (so at
// least one such link must exist: with two hosts every link touches both, and nothing is
// named). Of several, the one furthest below is named. Pure function.
SlowHost FindSlowHost(const std::vector<LinkSample>& samples, const std::vector<std::string>& host_of,
                      double factor, double min_bytes);

class LinkWatch {
 public:
  static constexpr double kPeriodS = 5.0;
  static constexpr double kSlowFactor = 4.0;          // named below 1/4 of the others' rate
  static constexpr double kMinBytes = 1024.0 * 1024;  // a link must move 1 MiB in a period

  // `store`, `comm` and `stats` outlive the watch.
  LinkWatch(int rank, int size, Store* store, Communicator* comm, StatsRecorder* stats);

  // Publishes (and on rank 0 judges) once per period; cheap otherwise. Never fails the job:
  // a store error turns the watch off (one log line).
  void Tick(std::chrono::steady_clock::time_point now);

 private:
  bool Publish();
  bool Judge();
  void Report(const SlowHost& slow);

  const int rank_, size_;
  Store* store_;
  Communicator* comm_;
  StatsRecorder* stats_;
  bool off_ = false;
  std::chrono::steady_clock::time_point next_{};
  const int64_t instance_;  // this watch among others that used the same key (pid, time)
  int64_t published_ = 0;
  // Rank 0: each rank's last reading.
  struct Reading {
    double instance = -1, count = 0;
    std::map<int, std::pair<double, double>> links;  // by peer: bytes received, flow ns
  };
  std::vector<Reading> last_;
  std::string suspect_;   // named by the latest reading
  std::string reported_;  // the host last warned about
};

}  // namespace tfring
