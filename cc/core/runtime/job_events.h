// JobEvents: what the negotiator and the executor tell the job they work for.
//
// The Job (job.h) owns the failure state and the in-flight names; its two workers report to
// it through this interface instead of writing either. Background thread only: every call
// comes from the job's loop thread, which is the thread the workers run on.
#pragma once

#include <string>

#include "base/status.h"

namespace tfring {

class JobEvents {
 public:
  virtual ~JobEvents() = default;
  // True once the job failed or stopped; workers check it between steps of a turn.
  virtual bool broken() = 0;
  // Fatal and idempotent (the first failure wins). `origin`: the rank the failure started
  // on (-1 = this one).
  virtual void Fail(const Status& status, int origin = -1) = 0;
  // Fail() for a failed send or transfer, with the root cause a peer reports, if any.
  virtual void FailTransfer(const Status& status) = 0;
  // A tensor completed (its `done` ran or is about to): its name may be submitted again.
  virtual void Released(const std::string& name) = 0;
};

}  // namespace tfring
