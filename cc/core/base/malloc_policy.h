// Keeping freed memory in the process: glibc's malloc thresholds set at init so that a
// training loop's large, short-lived buffers are reused instead of handed back to the
// kernel and faulted in again on the next step.
//
// Why (docs/benchmarks.md, "Fresh memory on every call"): TensorFlow allocates an op's
// output with malloc on every call. With glibc's defaults, a freed 16 MiB output at the top
// of an arena is trimmed (returned to the kernel) once the free space there passes 2x the
// mmap threshold, and the next call faults the pages in again; on a VM whose host takes
// freed guest pages back (free page reporting), those faults cost the host's too, and a
// call then stalls for 40-150 ms. Setting M_TRIM_THRESHOLD and M_MMAP_THRESHOLD keeps the
// freed pages in the process for the next call, as tcmalloc and jemalloc do by default.
//
// Cost: a process's resident memory no longer shrinks below its high-water mark of
// buffers up to M_MMAP_THRESHOLD (larger ones are still mapped and unmapped per use).
//
// Thread-safety: any thread (mallopt takes malloc's own lock); changes a process-wide
// setting. A no-op on C libraries other than glibc.
#pragma once

#include <string>

namespace tfring {

// TFRING_KEEP_FREED_MEMORY's thresholds: free space at an arena's top is kept up to 256 MiB;
// buffers up to 32 MiB (glibc's largest mmap threshold on 64-bit) come from the arenas.
constexpr long kKeepFreedTrimBytes = 256L << 20;
constexpr long kKeepFreedMmapBytes = 32L << 20;

// What KeepFreedMemory did, for the init log.
struct MallocPolicyResult {
  bool applied = false;
  std::string reason;  // why not applied, or what was set
};

// Sets glibc's trim threshold to `trim_bytes` and its mmap threshold to `mmap_bytes` (at
// most 32 MiB on 64-bit glibc), unless the process's environment already chose them
// (GLIBC_TUNABLES naming glibc.malloc.*, or a MALLOC_*_ variable): an explicit choice of
// the user's is never overridden.
MallocPolicyResult KeepFreedMemory(long trim_bytes, long mmap_bytes);

}  // namespace tfring
