#include "base/malloc_policy.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tfring {
namespace {

// The name of an environment variable that already sets malloc's thresholds, or nullptr.
const char* UserMallocSetting() {
  static const char* const kAliases[] = {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                                         "MALLOC_MMAP_MAX_"};
  for (const char* name : kAliases) {
    if (std::getenv(name) != nullptr) return name;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && (std::strstr(tunables, "glibc.malloc.trim_threshold") != nullptr ||
                              std::strstr(tunables, "glibc.malloc.mmap_threshold") != nullptr ||
                              std::strstr(tunables, "glibc.malloc.top_pad") != nullptr)) {
    return "GLIBC_TUNABLES";
  }
  return nullptr;
}

}  // namespace

MallocPolicyResult KeepFreedMemory(long trim_bytes, long mmap_bytes) {
  MallocPolicyResult result;
#if defined(__GLIBC__)
  if (const char* name = UserMallocSetting()) {
    result.reason = std::string("left as set by ") + name;
    return result;
  }
  // mallopt returns 1 on success; M_MMAP_THRESHOLD above HEAP_MAX_SIZE / 2 is refused.
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(trim_bytes)) == 1;
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_bytes)) == 1;
  result.applied = trim_ok && mmap_ok;
  result.reason = result.applied ? "trim threshold " + std::to_string(trim_bytes >> 20) + " MiB, mmap threshold " +
                                       std::to_string(mmap_bytes >> 20) + " MiB"
                                 : std::string("mallopt refused the thresholds");
#else
  (void)trim_bytes;
  (void)mmap_bytes;
  result.reason = "not glibc";
#endif
  return result;
}

}  // namespace tfring
