#include "transport/cma.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace tfring {

int CmaRead(pid_t pid, uint64_t remote_addr, void* local, size_t n) {
  char* dst = static_cast<char*>(local);
  size_t done = 0;
  while (done < n) {
    iovec l{dst + done, n - done};
    iovec r{reinterpret_cast<void*>(remote_addr + done), n - done};
    ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;  // the rest of the range is not readable
    done += static_cast<size_t>(got);
  }
  return 0;
}

void AllowCmaReaders() {
#if defined(PR_SET_PTRACER) && defined(PR_SET_PTRACER_ANY)
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // EINVAL without Yama: nothing to do
#endif
}

void AdviseHugePages(void* buf, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < (4u << 20)) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(buf) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(buf) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint
}

std::string CmaErrorText(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

}  // namespace tfring
