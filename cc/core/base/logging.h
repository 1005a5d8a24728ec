// Logging: one line per message on stderr, prefixed with level, host, rank and pid, then
// the subsystem:
//   [tfring WARNING host:rank 1:pid 4242] transport: ...
// Subsystems: runtime, transport, store, stall, gpu, nccl (kLogSubsystems).
// TFRING_LOG_LEVEL = LEVEL[,SUBSYSTEM=LEVEL...] with levels trace, debug, info, warning,
// error (default warning), e.g. "warning,transport=debug" or "error,stall=warning"; set
// once at init. Thread-safe: the levels are atomics, each line is one write().
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tfring {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4 };

inline constexpr const char* kLogSubsystems[] = {"runtime", "transport", "store", "stall", "cpu", "gpu", "nccl"};

struct LogSpec {
  LogLevel level = LogLevel::kWarning;                         // every subsystem not listed
  std::vector<std::pair<std::string, LogLevel>> subsystems;   // overrides
};

void SetLogLevel(LogLevel level);  // the default level; keeps the subsystem overrides
LogLevel GetLogLevel();
bool ParseLogLevel(const std::string& text, LogLevel* level);
// Parses "LEVEL[,SUBSYSTEM=LEVEL...]"; on failure `error` says what is wrong.
bool ParseLogSpec(const std::string& text, LogSpec* spec, std::string* error);
void SetLogSpec(const LogSpec& spec);  // replaces the default level and every override
bool LogEnabled(LogLevel level, const char* subsystem);
void SetLogRank(int rank);
void LogLine(LogLevel level, const char* subsystem, const std::string& message);

#define TFRING_LOG(level, subsystem, expr)                  \
  do {                                                      \
    if (::tfring::LogEnabled(level, subsystem)) {           \
      std::ostringstream _tfring_os;                        \
      _tfring_os << expr;                                   \
      ::tfring::LogLine(level, subsystem, _tfring_os.str()); \
    }                                                       \
  } while (0)

}  // namespace tfring
