// The CUDA side of tfring's XLA custom calls (cc/tf/xla/call_attrs.h), free of TF and XLA
// so that a test can drive it with tests/fake_gpu's libraries: xla_cuda_handlers.cc
// decodes XLA's FFI call into Submissions and calls Start / Done here.
//
// Ordering, all on the device (no host waits on GPU work):
//   Start: record a "ready" event on XLA's stream (after the kernels producing the inputs),
//          hand it with a "done" event per tensor to the core (Submission::ready_event /
//          done_event) and submit the group (InflightTable::Start). Returns at once.
//   core:  the NCCL backend makes its stream wait on the ready event, runs the collective,
//          records the done events, announces them (on_enqueued), then confirms completion
//          on its own thread (errors, timeouts, peer loss as for every GPU collective).
//   Done:  waits on the host until the core has put every member's work on its stream (or
//          failed it: then the error is returned), then makes XLA's stream wait on the done
//          events (cudaStreamWaitEvent) and returns.
// Errors: one found before the work reached the NCCL stream (negotiation, a lost or frozen
// peer, a mismatch, an unsupported reduction) is returned by Done. One found after Done
// returned (the collective timed out or NCCL reported a peer's death while it ran: the core
// aborts the communicator, so XLA's stream does not hang on the event) is returned by the
// next Start or Done of this process, once.
//
// Events come from a per-device pool (cudaEventDisableTiming) and go back to it once the
// core finished the group. Thread-safety: every function, any thread.
#pragma once

#include <string>
#include <vector>

#include "../tf/xla/inflight.h"
#include "base/status.h"
#include "control/submission.h"

namespace tfring {
namespace tf_gpu {
namespace xla_cuda {

// How long Done waits for the core to put a group's work on its stream (the core's own
// bounds end a broken job's collectives much sooner).
constexpr double kEnqueueWaitS = 600;

// `stream`: XLA's cudaStream_t; `device`: its CUDA ordinal (every member's request must
// name it). `finish` as InflightTable::Start (empty, or one per member).
Status Start(const std::string& key, void* stream, int device, std::vector<Submission> group,
             std::vector<tf_ops::InflightTable::Finish> finish);

// Orders `stream` after the group started under `key` (see above).
Status Done(const std::string& key, void* stream, double timeout_s = kEnqueueWaitS);

}  // namespace xla_cuda
}  // namespace tf_gpu
}  // namespace tfring
