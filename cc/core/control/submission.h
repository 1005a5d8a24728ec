// Submission: one tensor handed to the runtime, with the memory it reads and writes and the
// callbacks that finish it. Built by the TF kernels and the pybind module, owned by the
// runtime from Enqueue until `done` runs, read by the backends that move its bytes.
//
// Ownership: `input`, `output` and memory returned by `allocate_output` belong to the
// caller and must stay valid until `done` runs. The callbacks run on the runtime's
// background thread; `done` runs exactly once for an accepted submission.
#pragma once

#include <functional>
#include <vector>

#include "control/messages.h"
#include "base/status.h"

namespace tfring {

struct Submission {
  Request request;
  const void* input = nullptr;
  void* output = nullptr;  // allreduce, broadcast, reducescatter: preallocated by the caller
  // allgather, alltoall: called once the output shape is known (every rank's rows agreed).
  std::function<Status(const std::vector<int64_t>& shape, void** data)> allocate_output;
  // alltoall: rows received from each rank.
  std::function<void(const std::vector<int64_t>& received_splits)> on_received_splits;
  std::function<void(const Status&)> done;

  // GPU tensors only, for callers that order the core's device work against a stream of
  // their own with events instead of host waits (the XLA CUDA handler, cc/tf_gpu/xla/).
  // Opaque cudaEvent_t handles, owned by the caller, valid until `done` runs:
  //   ready_event: recorded on the caller's stream once the inputs are ready; the NCCL
  //                backend makes its stream wait on it (cudaStreamWaitEvent) before the
  //                collective reads them. Null: the inputs are ready when enqueued.
  //   done_event:  the NCCL backend records it on its stream after the collective, then
  //                calls `on_enqueued` (background thread) before it waits for completion:
  //                the caller may make its stream wait on done_event from then on. `done`
  //                still runs once the collective finished (with its final status); on an
  //                error before the work was enqueued, `on_enqueued` is never called.
  void* ready_event = nullptr;
  void* done_event = nullptr;
  std::function<void()> on_enqueued;
};

}  // namespace tfring
