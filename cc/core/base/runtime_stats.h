// RuntimeStats: the counters behind tfring.stats(), and StatsRecorder, their one writer.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tfring {

// This rank's data link with one peer (link.h), for telling a slow link from the others:
// the link's delivered rate is bytes / flow seconds (first to last byte of each transfer's
// side, summed: the time data was moving, not the time waiting for the peer to start).
struct LinkStats {
  std::string host;          // the peer's hostname (as it reported it at init)
  bool shared_memory = false;  // the link runs over shared-memory rings (same host)
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t single_copy_bytes_received = 0;  // of bytes_received, read from the peer's memory (CMA)
  double send_seconds = 0;  // flow time of the bytes sent
  double recv_seconds = 0;  // flow time of the bytes received
};

// Counters since init (cheap, always on): see docs/monitoring.md for each one's exact
// definition. Reset by Shutdown()/Init().
struct RuntimeStats {
  int64_t collectives = 0;       // collectives executed successfully (a fused group counts once)
  int64_t tensors = 0;           // tensors completed (successfully or not)
  int64_t fused_tensors = 0;     // tensors that travelled in a fused group of > 1
  int64_t bytes_reduced = 0;     // allreduce payload bytes (this rank's tensors)
  int64_t bytes_sent = 0;        // payload bytes this rank sent on its data links (TCP + shm)
  int64_t bytes_received = 0;    // payload bytes this rank received on its data links
  int64_t stall_warnings = 0;    // stall warnings logged (rank 0; 0 elsewhere)
  int64_t cached_tensors = 0;    // tensors executed whose response named them by cache id
  int64_t control_bytes_sent = 0;  // bytes this rank sent on the control channel (negotiation)
  int64_t control_messages_sent = 0;  // messages those bytes travelled in (one envelope each)
  int64_t fusion_copied_bytes = 0;  // allreduce bytes packed into the fusion buffer (and back)
  // Per tensor, summed over tensors of executed collectives:
  double negotiation_seconds = 0;       // enqueue on this rank -> this rank holds the response
  double wait_for_slowest_seconds = 0;  // its request at rank 0 -> the last rank's request there
  double queue_seconds = 0;             // response held -> its collective starts
  // Per collective, summed:
  double transfer_seconds = 0;            // transport phase (the collective's algorithm)
  double allreduce_transfer_seconds = 0;  // the same, allreduces only (for bus bandwidth)
  double execute_seconds = 0;             // whole execution incl. fusion copies and scaling
  // By peer rank (size entries once a collective ran; this rank's own entry stays 0).
  std::vector<LinkStats> links;
  // Rank 0 (link_watch.h): the host on a slow link, named in two readings in a row; empty
  // when none (cleared by a reading that names none).
  std::string slow_link_host;
  std::vector<int> slow_link_ranks;
  double slow_link_ratio = 0;      // the other links' rate / the slow host's
  int64_t slow_link_warnings = 0;  // warnings logged (one per newly named host)
};

// Owns one runtime's counters. Thread-safe: the background thread updates them (one
// uncontended lock per completed collective or control message); any thread takes a
// snapshot, which is consistent (copied under the same lock).
class StatsRecorder {
 public:
  // Runs `update(stats)` under the lock; keep it to a few additions.
  template <typename Fn>
  void Update(Fn update) {
    std::lock_guard<std::mutex> lock(mu_);
    update(stats_);
  }
  RuntimeStats Snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  mutable std::mutex mu_;
  RuntimeStats stats_;
};

}  // namespace tfring
