#include "base/fd_limit.h"

#include <dirent.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/logging.h"

namespace tfring {
namespace {
// Descriptors the rest of the process may open meanwhile (files, TF's pools, pipes).
constexpr long kMargin = 256;
}  // namespace

long OpenDescriptorCount() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  long count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the directory stream's own descriptor
}

Status EnsureDescriptorLimit(long more, const char* why, long* raised_to) {
  if (raised_to != nullptr) *raised_to = 0;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return Status::OK();  // unknown: try anyway
  const long open_now = OpenDescriptorCount();
  const long needed = (open_now < 0 ? 64 : open_now) + more + kMargin;
  if (limit.rlim_cur == RLIM_INFINITY || static_cast<long>(limit.rlim_cur) >= needed) return Status::OK();
  if (limit.rlim_max != RLIM_INFINITY && static_cast<long>(limit.rlim_max) < needed) {
    return Status::Unimplemented(
        std::string(why) + " needs about " + std::to_string(needed) + " open files (" + std::to_string(more) +
        " connections), but this process may open at most " + std::to_string(limit.rlim_max) +
        " (hard limit; soft " + std::to_string(limit.rlim_cur) + "): raise it with `ulimit -Hn " +
        std::to_string(needed) + "` (or LimitNOFILE / limits.conf) where the job starts");
  }
  const rlim_t old_soft = limit.rlim_cur;
  limit.rlim_cur = static_cast<rlim_t>(needed);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Status::Unimplemented(std::string(why) + " needs about " + std::to_string(needed) +
                                 " open files and raising the soft limit from " + std::to_string(old_soft) +
                                 " failed (" + std::strerror(errno) + "): raise `ulimit -n` where the job starts");
  }
  TFRING_LOG(LogLevel::kInfo, "transport", why << " needs about " << needed << " open files: raised the soft "
                                               << "limit (ulimit -n) from " << old_soft << " to " << needed);
  if (raised_to != nullptr) *raised_to = needed;
  return Status::OK();
}

}  // namespace tfring
