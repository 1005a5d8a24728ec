// Timeline: a Chrome-trace / Perfetto JSON file of every collective, written by rank 0
// (which alone sees when each rank became ready). One row per tensor name:
//   NEGOTIATE span (enqueue -> response decided) with a RANK_READY instant per rank,
//   QUEUE (response decided -> execution start, behind earlier collectives),
//   the op span (ALLREDUCE, ...) with nested FUSION_COPY_IN / TRANSFER / FUSION_COPY_OUT,
//   and args: bytes, bytes_sent (rank 0's payload bytes on the wire), dtype, fused count.
// Open it at https://ui.perfetto.dev or chrome://tracing.
//
// Thread-safety: Start/Stop from any thread; the Record* calls from the background thread.
// All calls are cheap no-ops while inactive (one relaxed atomic load).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "base/status.h"

namespace tfring {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  ~Timeline();
  Status Start(const std::string& path);
  void Stop();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // A complete span on the tensor's row.
  void Span(const std::string& tensor, const char* what, Clock::time_point begin, Clock::time_point end,
            const std::string& args_json = "");
  // An instant mark on the tensor's row.
  void Mark(const std::string& tensor, const std::string& what, Clock::time_point when);

 private:
  int RowLocked(const std::string& tensor);
  double Micros(Clock::time_point t) const;
  void WriteLocked(const std::string& event);

  std::atomic<bool> active_{false};
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  Clock::time_point origin_;
  std::map<std::string, int> rows_;
};

}  // namespace tfring
