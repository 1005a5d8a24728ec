#include "base/logging.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstring>

namespace tfring {
namespace {
constexpr int kNumSubsystems = sizeof(kLogSubsystems) / sizeof(kLogSubsystems[0]);
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
static_assert(kNumSubsystems == 7, "initialize a level (-1) for every subsystem below");
std::atomic<int> g_subsystem_level[kNumSubsystems] = {-1, -1, -1, -1, -1, -1, -1};  // -1: default
std::atomic<int> g_min_level{static_cast<int>(LogLevel::kWarning)};  // fast path of LogEnabled
std::atomic<int> g_rank{-1};

int SubsystemIndex(const char* name) {
  for (int i = 0; i < kNumSubsystems; ++i) {
    if (std::strcmp(kLogSubsystems[i], name) == 0) return i;
  }
  return -1;
}

void UpdateMinLevel() {
  int min = g_level.load();
  for (const auto& l : g_subsystem_level) {
    int v = l.load();
    if (v >= 0 && v < min) min = v;
  }
  g_min_level.store(min);
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) {
  g_level.store(static_cast<int>(level));
  UpdateMinLevel();
}

void SetLogSpec(const LogSpec& spec) {
  for (auto& l : g_subsystem_level) l.store(-1);
  for (const auto& kv : spec.subsystems) {
    int i = SubsystemIndex(kv.first.c_str());
    if (i >= 0) g_subsystem_level[i].store(static_cast<int>(kv.second));
  }
  SetLogLevel(spec.level);
}

bool LogEnabled(LogLevel level, const char* subsystem) {
  const int l = static_cast<int>(level);
  if (l < g_min_level.load(std::memory_order_relaxed)) return false;
  int i = SubsystemIndex(subsystem);
  int threshold = i >= 0 ? g_subsystem_level[i].load(std::memory_order_relaxed) : -1;
  return l >= (threshold >= 0 ? threshold : g_level.load(std::memory_order_relaxed));
}

bool ParseLogSpec(const std::string& text, LogSpec* spec, std::string* error) {
  LogSpec out;
  std::string names;
  for (int i = 0; i < kNumSubsystems; ++i) names += std::string(i ? ", " : "") + kLogSubsystems[i];
  size_t start = 0;
  bool first = true;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.find('=');
    LogLevel level;
    if (eq == std::string::npos) {
      if (!first || !ParseLogLevel(item, &level)) {
        *error = "expected LEVEL[,SUBSYSTEM=LEVEL...] with levels trace, debug, info, warning or error "
                 "(e.g. warning,transport=debug)";
        return false;
      }
      out.level = level;
    } else {
      std::string name = item.substr(0, eq);
      if (SubsystemIndex(name.c_str()) < 0) {
        *error = "unknown log subsystem '" + name + "' (known: " + names + ")";
        return false;
      }
      if (!ParseLogLevel(item.substr(eq + 1), &level)) {
        *error = "bad level for subsystem '" + name + "': expected trace, debug, info, warning or error";
        return false;
      }
      out.subsystems.emplace_back(name, level);
    }
    first = false;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  *spec = out;
  return true;
}
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }
void SetLogRank(int rank) { g_rank.store(rank); }

// Case-insensitive; "fatal" (Horovod's highest level) reads as error, the highest here.
bool ParseLogLevel(const std::string& text, LogLevel* level) {
  static const struct { const char* name; LogLevel level; } kLevels[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warning", LogLevel::kWarning}, {"error", LogLevel::kError}, {"fatal", LogLevel::kError}};
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& l : kLevels) {
    if (lower == l.name) {
      *level = l.level;
      return true;
    }
  }
  return false;
}

void LogLine(LogLevel level, const char* subsystem, const std::string& message) {
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  int rank = g_rank.load();
  std::string line = std::string("[tfring ") + LevelName(level) + " " + host + ":rank " +
                     (rank < 0 ? std::string("?") : std::to_string(rank)) + ":pid " +
                     std::to_string(getpid()) + "] " + subsystem + ": " + message + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace tfring
