// The one place that runs a host-memory collective by its algorithm id (RunCollective): a
// table from (operation, algorithm) to the entry point that implements it (collectives.h,
// adasum.h), with what that algorithm requires of its CollectiveArgs (collective_args.h),
// checked here before it runs. The selection table (algorithm.h) says which id runs; the
// CPU backend fills the arguments and calls RunCollective, whatever the operation.
//
// Contract: that of collectives.h (background thread, every rank of the group in the same
// order, blocking with each transfer bounded by the group's deadline and its abort flag).
// The arguments only point at the caller's buffers and counts, which must outlive the call.
#pragma once

#include "base/status.h"
#include "collectives/algorithm.h"
#include "collectives/collective_args.h"

namespace tfring {

// Runs `op` by `algorithm` (a row of the selection table for `op`, or allreduce's kAdasum).
// kInternal for a pair the table never chooses, or a group without the host layout a
// hierarchical algorithm needs; kInvalidArgument, naming the algorithm, for arguments it
// cannot run on (a root outside the group, a per-rank vector missing or not of the group's
// size, Adasum's tensor counts missing or not summing to `count`, or out of place).
Status RunCollective(OpType op, Algorithm algorithm, const CollectiveArgs& args);

}  // namespace tfring
