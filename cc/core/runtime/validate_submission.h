// Local checks of a submission at enqueue time (validate_submission.cc): fail fast on this
// rank, before any negotiation, with a message that names the tensor and the fix.
#pragma once

#include "control/process_sets.h"
#include "base/status.h"
#include "control/submission.h"

namespace tfring {

// A request on a process set other than the global one is checked against `sets` (member,
// root in the set, splits per member) and its shape rules use the set's size. May fill
// defaults in `s` (e.g. the splits of an even alltoall). Any thread.
Status ValidateSubmission(Submission& s, int rank, int size, const ProcessSetTable& sets);

}  // namespace tfring
