// InflightTable: the collectives an XLA start call submitted, until their done call has
// been told how they ended. The bridge between the two custom calls of one lowering
// (call_attrs.h): start hands a group of Submissions to the core under a key (its first
// tensor's name); done asks to be told when that group has completed.
//
// Blocking: none, except WaitUntilIdle() (error paths only). Start() enqueues and returns;
// Await() registers a callback and returns.
// Callbacks never run on the core's background thread (which must keep communicating) nor
// under the table's lock: a dedicated notifier thread runs them, in completion order.
//
// Buffers: the core writes into XLA's buffers until the group completes. When an XLA
// execution fails (a done call returns an error), XLA frees its buffers and never calls
// the other done calls of that execution. So an error is delivered only once no XLA
// collective of this process is running any more: the core ends every pending collective
// within its bounds once the job is broken (a lost or frozen peer), so that wait is bounded
// too, and no collective can write into memory XLA has freed.
//
// Thread-safety: every method, any thread. The table lives for the whole process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "control/submission.h"

namespace tfring {
namespace tf_ops {

class InflightTable {
 public:
  using Callback = std::function<void(const Status&)>;
  // A member's own last word once the core finished it: gets the core's status, returns
  // the one to report (e.g. an output shape XLA could not know at compile time).
  using Finish = std::function<Status(const Status&)>;

  static InflightTable& Global();

  // Submits `group` (Runtime::EnqueueGroup, all or nothing) under `key`, replacing each
  // Submission's `done`; `finish` (empty, or one per member, each may be empty) runs on
  // the core's thread as each member completes. kInvalidArgument when `key` is still
  // running (the same compiled step executing twice at once); the core's errors as they are.
  Status Start(const std::string& key, std::vector<Submission> group, std::vector<Finish> finish = {});

  // Calls `callback` with the group's first error (or OK) once every member completed
  // (see above for errors). kInvalidArgument through the callback for an unknown key.
  void Await(const std::string& key, Callback callback);

  // Blocks until no group is running (at most `timeout_s`; false if some still runs). For
  // a start call that fails after earlier start calls of the same execution succeeded:
  // XLA frees their buffers once the failure returns, so it must wait for them first
  // (bounded by the core's own bounds on a broken job).
  bool WaitUntilIdle(double timeout_s);

  // Groups started and not yet completed (for tests and diagnostics).
  int running() const;

  struct Impl;

 private:
  InflightTable();
  Impl* impl_;  // never freed: the table and its notifier thread outlive every caller
};

}  // namespace tf_ops
}  // namespace tfring
