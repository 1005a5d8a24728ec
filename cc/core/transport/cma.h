// Cross Memory Attach (CMA): copying bytes straight out of another process's address
// space with process_vm_readv(2), the single-copy path between ranks on one host.
//
// Used by Transfer (link.cc) when a shared-memory ring carries a post (shm_ring.h: the
// writer publishes the address and length of its own buffer; the reader copies from it).
// Permission: the kernel allows it when the reader may ptrace the writer (same uid and,
// under Yama ptrace_scope=1, the writer called AllowCmaReaders()). Containers without
// CAP_SYS_PTRACE, ptrace_scope>=2, or seccomp make it fail with EPERM/ENOSYS; the
// connection-time probe (communicator.cc) then keeps the pair on the rings.
// Thread-safety: stateless; any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfring {

// Copies `n` bytes at `remote_addr` in process `pid` to `local`. Returns 0, or the errno
// of the failure (ESRCH: the process is gone; EFAULT: the range is not mapped there; EPERM:
// not allowed). A short copy (part of the range unmapped) reads as EFAULT.
int CmaRead(pid_t pid, uint64_t remote_addr, void* local, size_t n);

// Lets any process of this user read this process's memory under Yama ptrace_scope=1
// (prctl PR_SET_PTRACER_ANY, as Open MPI's vader does). Harmless where Yama is absent.
// Process-wide and permanent; call only when single-copy reads are enabled.
void AllowCmaReaders();

// Pinning the writer's pages dominates a single-copy read of 4 KiB pages (measured here:
// slower than the ring's two copies); on 2 MiB pages it is ~2x faster. Asks for
// transparent huge pages on the 2 MiB-aligned interior of a buffer of at least 4 MiB (as
// NumPy does for its arrays): effective for pages not yet touched, a hint otherwise.
void AdviseHugePages(void* buf, size_t bytes);

// "Operation not permitted (errno 1)" style text for logs and errors.
std::string CmaErrorText(int err);

}  // namespace tfring
