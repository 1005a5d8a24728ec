// The open-file limit a job of n ranks needs, met at init instead of at the connection
// that would exceed it.
//
// A rank holds a TCP socket per peer it exchanges data with (connected lazily, on first
// use: transport/communicator.h), a few for the control tree (its parent and children,
// transport/control_tree.h), its liveness peers and the store: up to ~n descriptors on a
// rank whose algorithms reach every peer (lab/records/scaling.md counts them). A default
// soft limit (`ulimit -n`, 1024 on many systems) ends a job of a few hundred ranks with
// EMFILE in the middle of its connections. EnsureDescriptorLimit raises the soft limit up to the hard one where that is
// enough (as Go's runtime and many servers do; only as far as needed), and otherwise fails
// naming both counts and the fix.
// Thread-safety: any thread; changes a process-wide limit.
#pragma once

#include "base/status.h"

namespace tfring {

// Makes room for `more` descriptors beyond those open now (plus a margin for the rest of
// the process). OK when the soft limit already allows it or was raised; kUnimplemented
// naming `ulimit -n` when even the hard limit is too low. *raised_to: the new soft limit
// when it was raised, else 0.
Status EnsureDescriptorLimit(long more, const char* why, long* raised_to = nullptr);

// Descriptors open in this process now (/proc/self/fd), or -1 where that cannot be read.
long OpenDescriptorCount();

}  // namespace tfring
