// InitPhase: one debug line per phase of init with its wall-clock time, so that a job's
// init can be laid out rank by rank (the scale lab's --phases: lab/scale/store_traffic.py):
//   [tfring DEBUG host:rank 3:pid 42] runtime: init phase mesh at 1764912345.123456
// Enabled with TFRING_LOG_LEVEL=warning,runtime=debug; costs one level check otherwise.
// Thread-safe (one write() per line, like every log line).
#pragma once

#include <sys/time.h>

#include <cstdio>

#include "base/logging.h"

namespace tfring {

inline void LogInitPhase(const char* phase) {
  if (!LogEnabled(LogLevel::kDebug, "runtime")) return;
  timeval tv{};
  gettimeofday(&tv, nullptr);
  char when[32];
  std::snprintf(when, sizeof when, "%ld.%06ld", static_cast<long>(tv.tv_sec), static_cast<long>(tv.tv_usec));
  TFRING_LOG(LogLevel::kDebug, "runtime", "init phase " << phase << " at " << when);
}

}  // namespace tfring
