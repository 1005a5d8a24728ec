// StallInspector: rank 0's watch over tensors that some ranks submitted and others have not
// (ranks running different code, or one stuck). Past TFRING_STALL_WARNING_S it logs one
// warning per tensor; past TFRING_STALL_SHUTDOWN_S it turns them into the job's error.
//
// Threads: rank 0's background thread only.
#pragma once

#include <chrono>
#include <set>
#include <string>

#include "control/coordinator.h"
#include "base/runtime_stats.h"
#include "base/status.h"

namespace tfring {

class StallInspector {
 public:
  // A limit <= 0 is off. `stats` (stall_warnings) must outlive the inspector.
  StallInspector(double warning_s, double shutdown_s, StatsRecorder* stats);

  // Looks at the coordinator's pending tensors at most once a second (cheap otherwise).
  // Returns kTimeout naming every tensor stalled past the shutdown limit, else OK.
  Status Inspect(const Coordinator& coordinator);

 private:
  const double warning_s_;
  const double shutdown_s_;
  StatsRecorder* stats_;
  std::chrono::steady_clock::time_point last_check_{};
  std::set<std::string> warned_;  // tensors warned about that are still stalled
};

}  // namespace tfring
